// Builds small ir models for the onnx_io tests, with nodes already carrying the kind and opset a load resolves.
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace ctxkit::test {

inline ir::Node makeNode(const ir::Model& model, std::string opType, std::vector<std::string> inputs,
                         std::vector<std::string> outputs, std::string domain = "") {
  ir::Node n;
  n.name = opType + "_" + (outputs.empty() ? std::string("0") : outputs[0]);
  n.opType = std::move(opType);
  n.domain = std::move(domain);
  n.kind = ir::opKindFromName(n.domain, n.opType);
  n.opset = model.opsetFor(n.domain);
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

inline ir::ValueInfo makeValue(std::string name, ir::ElemType type, std::vector<ir::Dim> dims) {
  ir::ValueInfo v;
  v.name = std::move(name);
  v.type = type;
  v.shape = std::move(dims);
  return v;
}

inline std::vector<float> iota(size_t n, float start = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// y = x + W: a model the onnx checker accepts (ir 8, opset 13).
inline ir::Model addModel(size_t elements = 6) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 13}};
  m.producerName = "ctxkit-tests";
  m.graph.name = "add";
  auto dim = static_cast<int64_t>(elements);
  m.graph.inputs.push_back(makeValue("x", ir::ElemType::Float, {ir::Dim::known(dim)}));
  m.graph.outputs.push_back(makeValue("y", ir::ElemType::Float, {ir::Dim::known(dim)}));
  m.graph.initializers.push_back({"W", ir::Tensor::fromVector(ir::ElemType::Float, {dim}, iota(elements, 1)), {}});
  m.graph.nodes.push_back(makeNode(m, "Add", {"x", "W"}, {"y"}));
  return m;
}

}  // namespace ctxkit::test
