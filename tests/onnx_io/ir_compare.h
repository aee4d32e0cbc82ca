// Structural comparison of ir models for round-trip tests: returns the first difference, or "" when equal.
#pragma once

#include "ir/graph.h"

#include <fmt/format.h>

#include <cstring>
#include <string>

namespace ctxkit::test {

inline std::string diffTensors(const ir::Tensor& a, const ir::Tensor& b) {
  if (a.type() != b.type())
    return fmt::format("type {} vs {}", ir::elemTypeName(a.type()), ir::elemTypeName(b.type()));
  if (a.shape() != b.shape())
    return fmt::format("shape {} vs {}", ir::shapeToString(a.shape()), ir::shapeToString(b.shape()));
  if (a.stringValues() != b.stringValues()) return "string values differ";
  if (a.byteSize() != b.byteSize()) return fmt::format("{} vs {} bytes", a.byteSize(), b.byteSize());
  if (a.byteSize() > 0 && std::memcmp(a.data(), b.data(), a.byteSize()) != 0) return "bytes differ";
  return {};
}

inline std::string diffGraphs(const ir::Graph& a, const ir::Graph& b);

inline std::string diffAttributes(const ir::Attribute& a, const ir::Attribute& b) {
  if (a.name != b.name) return fmt::format("name '{}' vs '{}'", a.name, b.name);
  if (a.type != b.type) return fmt::format("type {} vs {}", ir::attrTypeName(a.type), ir::attrTypeName(b.type));
  switch (a.type) {
    case ir::AttrType::Float:
      return std::memcmp(&a.f, &b.f, sizeof(float)) == 0 ? "" : fmt::format("{} vs {}", a.f, b.f);
    case ir::AttrType::Int: return a.i == b.i ? "" : fmt::format("{} vs {}", a.i, b.i);
    case ir::AttrType::String: return a.s == b.s ? "" : "strings differ";
    case ir::AttrType::Tensor: return diffTensors(a.t, b.t);
    case ir::AttrType::Graph:
      if (!a.g || !b.g) return "missing graph";
      return diffGraphs(*a.g, *b.g);
    case ir::AttrType::Floats:
      return a.floats.size() == b.floats.size() &&
                     (a.floats.empty() ||
                      std::memcmp(a.floats.data(), b.floats.data(), a.floats.size() * sizeof(float)) == 0)
                 ? ""
                 : "floats differ";
    case ir::AttrType::Ints: return a.ints == b.ints ? "" : "ints differ";
    case ir::AttrType::Strings: return a.strings == b.strings ? "" : "strings differ";
    case ir::AttrType::Tensors:
      if (a.tensors.size() != b.tensors.size()) return "tensor counts differ";
      for (size_t i = 0; i < a.tensors.size(); ++i)
        if (auto d = diffTensors(a.tensors[i], b.tensors[i]); !d.empty()) return fmt::format("tensor {}: {}", i, d);
      return {};
    case ir::AttrType::Graphs:
      if (a.graphs.size() != b.graphs.size()) return "graph counts differ";
      for (size_t i = 0; i < a.graphs.size(); ++i)
        if (auto d = diffGraphs(*a.graphs[i], *b.graphs[i]); !d.empty()) return fmt::format("graph {}: {}", i, d);
      return {};
  }
  return "unknown attribute type";
}

inline std::string diffValueInfos(const std::vector<ir::ValueInfo>& a, const std::vector<ir::ValueInfo>& b,
                                  const char* what) {
  if (a.size() != b.size()) return fmt::format("{} count {} vs {}", what, a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].type != b[i].type || a[i].shape != b[i].shape || a[i].docString != b[i].docString)
      return fmt::format("{} {} ('{}'): {} {} vs '{}' {} {}", what, i, a[i].name, ir::elemTypeName(a[i].type),
                         ir::dimsToString(a[i].shape), b[i].name, ir::elemTypeName(b[i].type),
                         ir::dimsToString(b[i].shape));
  }
  return {};
}

inline std::string diffGraphs(const ir::Graph& a, const ir::Graph& b) {
  if (a.name != b.name) return fmt::format("graph name '{}' vs '{}'", a.name, b.name);
  if (a.docString != b.docString) return "graph doc strings differ";
  for (auto [x, y, what] : {std::tuple(&a.inputs, &b.inputs, "input"), std::tuple(&a.outputs, &b.outputs, "output"),
                            std::tuple(&a.valueInfo, &b.valueInfo, "value_info")})
    if (auto d = diffValueInfos(*x, *y, what); !d.empty()) return d;
  if (a.initializers.size() != b.initializers.size()) return "initializer counts differ";
  for (size_t i = 0; i < a.initializers.size(); ++i) {
    if (a.initializers[i].name != b.initializers[i].name) return fmt::format("initializer {} names differ", i);
    if (auto d = diffTensors(a.initializers[i].tensor, b.initializers[i].tensor); !d.empty())
      return fmt::format("initializer '{}': {}", a.initializers[i].name, d);
  }
  if (a.nodes.size() != b.nodes.size()) return fmt::format("node count {} vs {}", a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const ir::Node& x = a.nodes[i];
    const ir::Node& y = b.nodes[i];
    std::string where = fmt::format("node {} ('{}', {})", i, x.name, x.opType);
    if (x.name != y.name || x.opType != y.opType || x.domain != y.domain || x.kind != y.kind || x.opset != y.opset)
      return where + ": identity differs";
    if (x.inputs != y.inputs || x.outputs != y.outputs) return where + ": inputs or outputs differ";
    if (x.docString != y.docString) return where + ": doc strings differ";
    if (x.attrs.size() != y.attrs.size()) return where + ": attribute counts differ";
    for (size_t j = 0; j < x.attrs.size(); ++j)
      if (auto d = diffAttributes(x.attrs.all()[j], y.attrs.all()[j]); !d.empty())
        return fmt::format("{}: attribute '{}': {}", where, x.attrs.all()[j].name, d);
  }
  return {};
}

inline std::string diffModels(const ir::Model& a, const ir::Model& b) {
  if (a.irVersion != b.irVersion) return "ir_version differs";
  if (a.opsets.size() != b.opsets.size()) return "opset counts differ";
  for (size_t i = 0; i < a.opsets.size(); ++i)
    if (a.opsets[i].domain != b.opsets[i].domain || a.opsets[i].version != b.opsets[i].version)
      return fmt::format("opset {} differs", i);
  if (a.producerName != b.producerName || a.producerVersion != b.producerVersion) return "producer differs";
  if (a.domain != b.domain || a.modelVersion != b.modelVersion || a.docString != b.docString)
    return "model fields differ";
  if (a.metadata != b.metadata) return "metadata differs";
  return diffGraphs(a.graph, b.graph);
}

}  // namespace ctxkit::test
