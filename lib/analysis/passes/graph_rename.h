// Renaming values in a graph and the subgraphs its nodes hold, by value id, shared by the graph passes: inline-if
// gives an inlined branch's values new names, remove-noops points readers past removed nodes, fold-subgraphs points a
// branch's reads of a hoisted initializer at the graph's copy. A pass says, per id of the graph's value table, the
// name readers read instead; the readers are the table's uses (input slots, and the subgraph reads of each node).
// Names are written because the graph is ONNX-shaped: nodes, and subgraph bodies reading outer values, name them.
#pragma once

#include "ir/graph.h"
#include "ir/value_table.h"

#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace ctxkit::analysis {

// By value id of a graph's table: the name its readers read instead, null for a value left as it is.
using ValueRenames = std::vector<const std::string*>;

// Node `index` of the graph `table` numbers: its inputs, and its subgraphs' reads of the values it reads from this
// graph (table.subgraphReadsOf), renamed by `to`. A subgraph read is renamed in a copy of the subgraph (variants of a
// model share subgraphs); ONNX forbids a subgraph to define an outer name again, so each match there is such a read.
void renameNodeReads(ir::Node& node, const ir::ValueTable& table, size_t index, const ValueRenames& to);

// Every node of `g` (numbered by `table`) as renameNodeReads, and the graph outputs.
void renameReads(ir::Graph& g, const ir::ValueTable& table, const ValueRenames& to);

// Every name defined in the subgraphs of `g`'s nodes (not in `g` itself: its table has those).
void collectSubgraphNames(const ir::Graph& g, std::unordered_set<std::string>& names);

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
