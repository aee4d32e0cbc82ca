// The structure checks every tool applies to a graph before it uses one, compiler and runtime alike.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

#include <cstddef>
#include <string>
#include <vector>

namespace ctxkit::ir {

// "node 'name' (Op)", or "node #index (Op)" for a node without a name: how messages point at a node.
std::string nodeLabel(const Node& node, size_t index);

// The structure every tool checks before it uses a graph, compiler and runtime alike
// (docs/bad-input.md#graph-structure): no initializer and no graph input listed twice, no node writing a graph input or
// an initializer, no value produced by two nodes, every value a node reads defined by a node, a graph input or an
// initializer, and no cycle. Returns the nodes in a topological order (file order where the file already has one).
// Subgraph bodies, which read outer values, are not checked here.
Expected<std::vector<size_t>> checkedTopologicalOrder(const Graph& graph);

}  // namespace ctxkit::ir
