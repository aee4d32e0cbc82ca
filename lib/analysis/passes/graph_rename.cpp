// Renaming values across a graph and its subgraphs (graph_rename.h).
#include "analysis/passes/graph_rename.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace ctxkit::analysis {

namespace {

// The outer values a node's subgraphs read under an old name, with the new one: the few its table says are renamed.
using OuterRenames = std::vector<std::pair<const std::string*, const std::string*>>;

const std::string* outerRename(const OuterRenames& r, const std::string& name) {
  for (const auto& [from, to] : r)
    if (*from == name) return to;
  return nullptr;
}

std::shared_ptr<ir::Graph> renamedSubgraph(const ir::Graph& g, const OuterRenames& r);

void renameSubgraphs(ir::Node& node, const OuterRenames& r) {
  for (auto& a : node.attrs.all()) {
    if (a.g) a.g = renamedSubgraph(*a.g, r);
    for (auto& g : a.graphs) g = renamedSubgraph(*g, r);
  }
}

std::shared_ptr<ir::Graph> renamedSubgraph(const ir::Graph& g, const OuterRenames& r) {
  auto copy = std::make_shared<ir::Graph>(g);
  for (auto& n : copy->nodes) {
    for (auto& in : n.inputs)
      if (const std::string* to = outerRename(r, in)) in = *to;
    renameSubgraphs(n, r);
  }
  for (auto& o : copy->outputs)
    if (const std::string* to = outerRename(r, o.name)) o.name = *to;
  return copy;
}

}  // namespace

void renameNodeReads(ir::Node& node, const ir::ValueTable& table, size_t index, const ValueRenames& to) {
  const std::span<const ir::ValueId> inputs = table.inputsOf(index);
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k] != ir::kNoValue && to[inputs[k]]) node.inputs[k] = *to[inputs[k]];
  OuterRenames outer;
  for (const ir::ValueId v : table.subgraphReadsOf(index))
    if (to[v]) outer.emplace_back(&table.name(v), to[v]);
  if (!outer.empty()) renameSubgraphs(node, outer);
}

void renameReads(ir::Graph& g, const ir::ValueTable& table, const ValueRenames& to) {
  for (size_t i = 0; i < g.nodes.size(); ++i) renameNodeReads(g.nodes[i], table, i, to);
  for (auto& o : g.outputs)
    if (const ir::ValueId v = table.find(o.name); v != ir::kNoValue && to[v]) o.name = *to[v];
}

namespace {
void collectNames(const ir::Graph& g, std::unordered_set<std::string>& names) {
  for (const auto& in : g.inputs) names.insert(in.name);
  for (const auto& init : g.initializers) names.insert(init.name);
  for (const auto& n : g.nodes) names.insert(n.outputs.begin(), n.outputs.end());
  collectSubgraphNames(g, names);
}
}  // namespace

void collectSubgraphNames(const ir::Graph& g, std::unordered_set<std::string>& names) {
  for (const auto& n : g.nodes)
    for (const auto& a : n.attrs.all()) {
      if (a.g) collectNames(*a.g, names);
      for (const auto& sub : a.graphs) collectNames(*sub, names);
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
