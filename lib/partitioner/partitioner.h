// Groups the nodes a target supports into maximal connected partitions whose fusion keeps the graph acyclic.
#pragma once

#include "analysis/analysis.h"
#include "ir/graph.h"
#include "partitioner/target.h"

#include <string>
#include <vector>

namespace ctxkit::partitioner {

enum class NodePlacement { Compiled, Fallback, Folded };

struct NodeDecision {
  NodePlacement placement = NodePlacement::Fallback;
  int partition = -1;  // index into PartitionPlan::partitions when compiled
  std::string reason;  // why it stays on the fallback path
};

struct Partition {
  std::vector<size_t> nodes;  // node indices in topological order
};

struct PartitionPlan {
  std::vector<Partition> partitions;  // ordered by their first node in topological order
  std::vector<NodeDecision> nodes;    // one per graph node
};

// Why node `index` of the graph `facts` describes cannot be compiled for `target`, or an empty string when it can.
std::string unsupportedReason(const ir::Node& node, size_t index, const analysis::GraphFacts& facts,
                              const Target& target);

// Why the ctxkit runtime cannot execute `node` on the fallback path (no kernel, an element type or attribute
// value its kernel refuses, the same inside subgraphs), naming op, opset, node and type; empty when it can.
std::string fallbackBlocker(const ir::Node& node, const analysis::GraphFacts& facts);

// Deterministic for the same graph, facts and target.
PartitionPlan partitionGraph(const ir::Graph& graph, const analysis::GraphFacts& facts, const Target& target);

}  // namespace ctxkit::partitioner
