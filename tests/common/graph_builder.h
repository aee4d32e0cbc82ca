// Small helpers that build IR graphs in tests without files.
#pragma once

#include "ir/graph.h"

#include <map>
#include <string>
#include <vector>

namespace ctxkit::testing {

inline ir::ValueInfo floatValue(const std::string& name, std::vector<ir::Dim> dims) {
  ir::ValueInfo v;
  v.name = name;
  v.type = ir::ElemType::Float;
  v.shape = std::move(dims);
  return v;
}

inline std::vector<ir::Dim> dims(std::initializer_list<int64_t> values) {
  std::vector<ir::Dim> out;
  for (int64_t v : values) out.push_back(ir::Dim::known(v));
  return out;
}

// An empty model (IR version 8) importing ONNX opset 17 and com.microsoft opset 1, its graph named `graphName`.
inline ir::Model contribModel(const std::string& graphName) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}, {"com.microsoft", 1}};
  m.graph.name = graphName;
  return m;
}

inline ir::Node node(const std::string& opType, std::vector<std::string> inputs, std::vector<std::string> outputs,
                     int64_t opset = 17) {
  ir::Node n;
  n.name = outputs.empty() ? opType : opType + "_" + outputs[0];
  n.opType = opType;
  n.kind = ir::opKindFromName("", opType);
  n.opset = opset;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

inline ir::Initializer floatInit(const std::string& name, ir::Shape shape, float start = 0.5f) {
  std::vector<float> values(static_cast<size_t>(ir::elementCount(shape).value_or(0)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = start + 0.25f * static_cast<float>(i % 7);
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), values), std::nullopt};
}

// Runs g's nodes in file order with the kernels (each must have one: no If/Loop/Scan), from `values` (the inputs)
// and g's initializers, and returns every value. Defined in evaluate_nodes.cpp (link ctxkit_kernels).
std::map<std::string, ir::Tensor> evaluateNodes(const ir::Graph& g, std::map<std::string, ir::Tensor> values);

}  // namespace ctxkit::testing
