// Graph structure: duplicate definitions, writes over inputs, undefined reads and cycles.
#include "ir/graph_check.h"

#include <set>
#include <unordered_map>

namespace ctxkit::ir {

std::string nodeLabel(const Node& node, size_t index) {
  return node.name.empty() ? fmt::format("node #{} ({})", index, node.opType)
                           : fmt::format("node '{}' ({})", node.name, node.opType);
}

// Kahn's algorithm, taking the lowest file index first so the result is deterministic and keeps file order
// for graphs that are already sorted.
Expected<std::vector<size_t>> checkedTopologicalOrder(const Graph& graph) {
  std::set<std::string> available;
  for (const auto& init : graph.initializers)
    if (!available.insert(init.name).second)
      return makeError(ErrorCode::InvalidGraph, "initializer '{}' is defined twice", init.name);
  std::set<std::string> inputNames;
  for (const auto& in : graph.inputs) {
    if (!inputNames.insert(in.name).second)
      return makeError(ErrorCode::InvalidGraph, "graph input '{}' is listed twice", in.name);
    available.insert(in.name);
  }
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (const auto& out : graph.nodes[i].outputs) {
      if (out.empty()) continue;
      if (available.count(out))
        return makeError(ErrorCode::InvalidGraph, "{} writes '{}', which is already a graph input or initializer",
                         nodeLabel(graph.nodes[i], i), out);
      if (!producer.emplace(out, i).second)
        return makeError(ErrorCode::InvalidGraph, "value '{}' is produced twice: by {} and by {}", out,
                         nodeLabel(graph.nodes[producer[out]], producer[out]), nodeLabel(graph.nodes[i], i));
    }
  std::vector<size_t> pending(graph.nodes.size(), 0);
  std::vector<std::vector<size_t>> consumers(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    std::set<size_t> deps;
    for (const auto& in : graph.nodes[i].inputs) {
      if (in.empty() || available.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return makeError(ErrorCode::InvalidGraph, "{} reads '{}', which no node, graph input or initializer defines",
                         nodeLabel(graph.nodes[i], i), in);
      deps.insert(it->second);
    }
    pending[i] = deps.size();
    for (size_t d : deps) consumers[d].push_back(i);
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (pending[i] == 0) ready.insert(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t n = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(n);
    for (size_t c : consumers[n])
      if (--pending[c] == 0) ready.insert(c);
  }
  if (order.size() != graph.nodes.size()) {
    for (size_t i = 0; i < graph.nodes.size(); ++i)
      if (pending[i] != 0)
        return makeError(ErrorCode::InvalidGraph, "the graph has a cycle through {}", nodeLabel(graph.nodes[i], i));
  }
  return order;
}

}  // namespace ctxkit::ir
