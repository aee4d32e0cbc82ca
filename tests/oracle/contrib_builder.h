// Pieces the oracle's com.microsoft model writers share (make_*_contrib.cpp, make_gqa_llm.cpp): contrib nodes, typed
// values and rotary caches.
#pragma once

#include "../common/graph_builder.h"

#include <cmath>

namespace ctxkit::testing {

inline constexpr const char* kMsDomain = "com.microsoft";

// A com.microsoft node (opset 1).
inline ir::Node msNode(const std::string& opType, std::vector<std::string> inputs, std::vector<std::string> outputs) {
  ir::Node n = node(opType, std::move(inputs), std::move(outputs), 1);
  n.domain = kMsDomain;
  n.kind = ir::opKindFromName(kMsDomain, opType);
  return n;
}

// A graph input or output of element type `type`.
inline ir::ValueInfo typedValue(const std::string& name, ir::ElemType type, std::vector<ir::Dim> d) {
  ir::ValueInfo v;
  v.name = name;
  v.type = type;
  v.shape = std::move(d);
  return v;
}

// The rotary caches `cosName` and `sinName` of `positions` rows and `half` angles: angle(p, i) = p x 10000^(-i / half).
inline void addRotaryCaches(ir::Graph& g, const std::string& cosName, const std::string& sinName, int64_t positions,
                            int64_t half) {
  std::vector<float> c, s;
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(p) * std::pow(10000.0, -static_cast<double>(i) / static_cast<double>(half));
      c.push_back(static_cast<float>(std::cos(angle)));
      s.push_back(static_cast<float>(std::sin(angle)));
    }
  g.initializers.push_back(
      ir::Initializer{cosName, ir::Tensor::fromVector(ir::ElemType::Float, {positions, half}, c), std::nullopt});
  g.initializers.push_back(
      ir::Initializer{sinName, ir::Tensor::fromVector(ir::ElemType::Float, {positions, half}, s), std::nullopt});
}

}  // namespace ctxkit::testing
