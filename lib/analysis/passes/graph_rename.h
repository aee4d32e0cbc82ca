// Renaming values in a graph and the subgraphs its nodes hold, shared by the graph passes: inline-if renames an
// inlined branch's values, remove-noops points readers past removed nodes, fold-subgraphs renames hoisted initializers.
#pragma once

#include "ir/graph.h"

#include <memory>
#include <string>
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

}  // namespace ctxkit::analysis
