// Renaming values across a graph and its subgraphs (graph_rename.h).
#include "analysis/passes/graph_rename.h"

#include <algorithm>

namespace ctxkit::analysis {

const std::string& renamed(const Renames& r, const std::string& name) {
  auto it = r.find(name);
  return it == r.end() ? name : it->second;
}

std::shared_ptr<ir::Graph> renamedSubgraph(const ir::Graph& g, const Renames& r) {
  auto copy = std::make_shared<ir::Graph>(g);
  for (auto& n : copy->nodes) renameNodeReads(n, r);
  for (auto& o : copy->outputs) o.name = renamed(r, o.name);
  return copy;
}

void renameNodeReads(ir::Node& node, const Renames& r) {
  for (auto& in : node.inputs) in = renamed(r, in);
  bool subgraphReads = false;
  for (const auto& a : node.attrs.all()) subgraphReads |= a.g != nullptr || !a.graphs.empty();
  if (!subgraphReads) return;
  bool renames = false;
  forEachRead(node, [&](const std::string& n) { renames |= r.count(n) != 0; });
  if (!renames) return;
  for (auto& a : node.attrs.all()) {
    if (a.g) a.g = renamedSubgraph(*a.g, r);
    for (auto& g : a.graphs) g = renamedSubgraph(*g, r);
  }
}

void collectNames(const ir::Graph& g, std::unordered_set<std::string>& names) {
  for (const auto& in : g.inputs) names.insert(in.name);
  for (const auto& init : g.initializers) names.insert(init.name);
  for (const auto& n : g.nodes) {
    for (const auto& o : n.outputs) names.insert(o);
    for (const auto& a : n.attrs.all()) {
      if (a.g) collectNames(*a.g, names);
      for (const auto& sub : a.graphs) collectNames(*sub, names);
    }
  }
}

bool subgraphsDefine(const ir::Node& node, std::string_view name) {
  for (const auto& a : node.attrs.all()) {
    if (a.g && graphDefines(*a.g, name)) return true;
    for (const auto& sub : a.graphs)
      if (graphDefines(*sub, name)) return true;
  }
  return false;
}

bool graphDefines(const ir::Graph& g, std::string_view name) {
  for (const auto& in : g.inputs)
    if (in.name == name) return true;
  for (const auto& init : g.initializers)
    if (init.name == name) return true;
  for (const auto& n : g.nodes) {
    if (std::find(n.outputs.begin(), n.outputs.end(), name) != n.outputs.end() || subgraphsDefine(n, name)) return true;
  }
  return false;
}

}  // namespace ctxkit::analysis
