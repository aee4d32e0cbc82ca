// Graphviz picture of the partitioning: compiled partitions (EPContext) vs fallback nodes.
#include "inspect/inspect.h"

#include "epcontext/contract.h"
#include "onnx_io/onnx_io.h"

#include <map>

namespace ctxkit::inspect {

namespace fs = std::filesystem;

namespace {

std::string dotEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

Expected<std::string> partitionDot(const std::vector<fs::path>& models) {
  std::string out = "digraph ctxkit {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  for (size_t m = 0; m < models.size(); ++m) {
    onnx_io::LoadOptions load;
    load.resolveExternalData = false;
    CTX_ASSIGN_OR_RETURN(auto model, onnx_io::loadModel(models[m], load));
    const ir::Graph& g = model.graph;
    out += fmt::format("  subgraph cluster_{} {{\n    label=\"{}\";\n", m, dotEscape(models[m].filename().string()));
    std::map<std::string, std::string> producer;
    auto id = [&](size_t i) { return fmt::format("m{}n{}", m, i); };
    for (const auto& in : g.inputs) {
      if (g.isInitializer(in.name)) continue;
      std::string nid = fmt::format("m{}in_{}", m, producer.size());
      producer[in.name] = nid;
      out += fmt::format("    {} [shape=plaintext, label=\"{}\"];\n", nid, dotEscape(in.name));
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      bool ep = n.opType == epcontext::kOpType;
      std::string label = ep ? fmt::format("{}\\nEPContext ({})", dotEscape(n.name),
                                           dotEscape(n.attrs.getString(epcontext::attr::kSource)))
                             : dotEscape(n.opType);
      out += fmt::format("    {} [shape={}, style=filled, fillcolor=\"{}\", label=\"{}\"];\n", id(i),
                         ep ? "box" : "ellipse", ep ? "#9fd39f" : "#f2c59b", label);
      for (const auto& in : n.inputs)
        if (auto it = producer.find(in); it != producer.end()) out += fmt::format("    {} -> {};\n", it->second, id(i));
      for (const auto& o : n.outputs) producer[o] = id(i);
    }
    out += "  }\n";
  }
  out += "}\n";
  return out;
}

}  // namespace ctxkit::inspect
