// Numbering a graph's values and recording who writes and who reads each.
#include "ir/value_table.h"

#include <algorithm>
#include <cassert>
#include <set>

namespace ctxkit::ir {

namespace {

// What a node's subgraphs read, outer-scope names among them (and names the bodies define themselves, which the
// caller drops by looking up only this graph's values).
std::set<std::string> subgraphReads(const Node& node) {
  std::set<std::string> names;
  for (const auto& a : node.attrs.all()) {
    if (a.g)
      for (const auto& sub : a.g->nodes) collectNodeReads(sub, names);
    for (const auto& g : a.graphs)
      for (const auto& sub : g->nodes) collectNodeReads(sub, names);
  }
  return names;
}

}  // namespace

ValueId ValueTable::intern(const std::string& name) {
  auto [it, added] = ids_.try_emplace(name, static_cast<ValueId>(entries_.size()));
  if (added) {
    entries_.emplace_back();
    entries_.back().name = name;
  }
  return it->second;
}

void ValueTable::appendIds(const std::vector<std::string>& names, Slices& slices) {
  for (const auto& name : names) slices.ids.push_back(name.empty() ? kNoValue : intern(name));
  slices.begin.push_back(slices.ids.size());
}

ValueTable::ValueTable(const Graph& graph) {
  for (const auto& in : graph.inputs) entries_[intern(in.name)].isGraphInput = true;
  for (const auto& init : graph.initializers) entries_[intern(init.name)].isInitializer = true;

  // Subgraph reads of names no node has defined yet (a file out of topological order): resolved at the end.
  std::vector<std::pair<uint32_t, std::string>> pending;
  inputs_.begin.push_back(0);
  outputs_.begin.push_back(0);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    const auto index = static_cast<uint32_t>(n);
    appendIds(node.inputs, inputs_);
    const std::span<const ValueId> ins = inputsOf(n);
    for (size_t s = 0; s < ins.size(); ++s)
      if (ins[s] != kNoValue) entries_[ins[s]].uses.push_back({index, static_cast<uint32_t>(s)});
    for (const auto& name : subgraphReads(node)) {
      if (const ValueId v = find(name); v != kNoValue) entries_[v].uses.push_back({index, ValueUse::kSubgraphSlot});
      else pending.emplace_back(index, name);
    }
    appendIds(node.outputs, outputs_);
    const std::span<const ValueId> outs = outputsOf(n);
    for (size_t s = 0; s < outs.size(); ++s) {
      if (outs[s] == kNoValue || entries_[outs[s]].hasProducer()) continue;
      entries_[outs[s]].producer = index;
      entries_[outs[s]].producerSlot = static_cast<uint32_t>(s);
    }
  }
  for (const auto& [node, name] : pending) {
    const ValueId v = find(name);
    if (v == kNoValue) continue;  // defined by the subgraph itself
    auto& uses = entries_[v].uses;
    uses.push_back({node, ValueUse::kSubgraphSlot});
    std::sort(uses.begin(), uses.end(), [](const ValueUse& a, const ValueUse& b) {
      return a.node != b.node ? a.node < b.node : a.slot < b.slot;
    });
  }
  // Per node, the values its subgraphs read: the uses by kSubgraphSlot, gathered by node.
  subgraphReads_.begin.assign(graph.nodes.size() + 1, 0);
  for (const ValueEntry& e : entries_)
    for (const ValueUse& u : e.uses)
      if (u.slot == ValueUse::kSubgraphSlot) ++subgraphReads_.begin[u.node + 1];
  for (size_t n = 0; n < graph.nodes.size(); ++n) subgraphReads_.begin[n + 1] += subgraphReads_.begin[n];
  subgraphReads_.ids.resize(subgraphReads_.begin.back());
  std::vector<size_t> next(subgraphReads_.begin.begin(), subgraphReads_.begin.end() - 1);
  for (ValueId v = 0; v < entries_.size(); ++v)
    for (const ValueUse& u : entries_[v].uses)
      if (u.slot == ValueUse::kSubgraphSlot) subgraphReads_.ids[next[u.node]++] = v;
  // A graph output no node writes and no input or initializer names still gets an id (the graph is broken; the
  // structure checks say so): callers look outputs up without a special case.
  for (const auto& out : graph.outputs) entries_[intern(out.name)].isGraphOutput = true;
}

ValueId ValueTable::find(std::string_view name) const {
  auto it = ids_.find(name);
  return it == ids_.end() ? kNoValue : it->second;
}

ValueId ValueTable::id(std::string_view name) const {
  const ValueId v = find(name);
  assert(v != kNoValue && "not a value of this graph");
  return v;
}

}  // namespace ctxkit::ir
