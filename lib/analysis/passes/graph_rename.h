// Renaming values in a graph and the subgraphs its nodes hold, shared by the graph passes: inline-if renames an
// inlined branch's values, remove-noops points readers past removed nodes, fold-subgraphs renames hoisted initializers.
#pragma once

#include "ir/graph.h"

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace ctxkit::analysis {

using Renames = std::unordered_map<std::string, std::string>;

// `name` as `r` renames it (itself when `r` does not).
const std::string& renamed(const Renames& r, const std::string& name);

// A copy of subgraph `g` whose reads of outer values follow `r`. ONNX forbids a subgraph to reuse an outer name, so
// every match is such a read. Copied, never changed in place: the copies of a model (variants) share subgraphs.
std::shared_ptr<ir::Graph> renamedSubgraph(const ir::Graph& g, const Renames& r);

// The node's inputs, and the outer values its subgraphs read, renamed by `r`.
void renameNodeReads(ir::Node& node, const Renames& r);

// Every name defined in `g` and its subgraphs, so that inlined values get names nothing else has.
void collectNames(const ir::Graph& g, std::unordered_set<std::string>& names);

// Whether `g`, or a subgraph of one of its nodes, defines `name` (an input, an initializer or a node output).
bool graphDefines(const ir::Graph& g, std::string_view name);
// Whether a subgraph of `node` defines `name`.
bool subgraphsDefine(const ir::Node& node, std::string_view name);

// Calls `f` with each name `node` reads: its inputs, then what its subgraphs' nodes read (a name may come twice).
template <typename F> void forEachRead(const ir::Node& node, F&& f) {
  for (const auto& in : node.inputs)
    if (!in.empty()) f(in);
  for (const auto& a : node.attrs.all()) {
    if (a.g)
      for (const auto& sub : a.g->nodes) forEachRead(sub, f);
    for (const auto& g : a.graphs)
      for (const auto& sub : g->nodes) forEachRead(sub, f);
  }
}

}  // namespace ctxkit::analysis
