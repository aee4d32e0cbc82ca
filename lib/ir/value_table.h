// Dense ids for a graph's values, each with its producer and its uses: what passes and the fallback interpreter index
// by instead of names, so that "who reads this value" is a list lookup rather than a scan of every node.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ctxkit::ir {

using ValueId = uint32_t;
inline constexpr ValueId kNoValue = std::numeric_limits<ValueId>::max();

// A node's input slot reading a value; kSubgraphSlot when one of the node's subgraphs reads it from the outer scope.
struct ValueUse {
  static constexpr uint32_t kSubgraphSlot = std::numeric_limits<uint32_t>::max();
  uint32_t node = 0;
  uint32_t slot = 0;
  friend bool operator==(const ValueUse&, const ValueUse&) = default;
};

struct ValueEntry {
  static constexpr uint32_t kNoProducer = std::numeric_limits<uint32_t>::max();
  std::string name;
  uint32_t producer = kNoProducer;  // the node writing the value (the first, if the graph has two), output slot below
  uint32_t producerSlot = 0;
  std::vector<ValueUse> uses;  // in node order, then slot order
  bool isGraphInput = false;
  bool isGraphOutput = false;
  bool isInitializer = false;

  bool hasProducer() const { return producer != kNoProducer; }
  // Neither produced here nor an input or initializer: an outer-scope value a subgraph body reads (or, in a broken
  // graph, an undefined one; ir::checkedTopologicalOrder reports those).
  bool isOuter() const { return !hasProducer() && !isGraphInput && !isInitializer; }
};

// The values of one graph (not of its subgraphs), numbered 0..size()-1: graph inputs in order, initializers not
// already numbered, then per node in file order the names it reads that are not numbered yet and its outputs. "" (an
// omitted optional input or output) has no id. Subgraph reads of this graph's values count as uses (kSubgraphSlot),
// once per node and value.
class ValueTable {
public:
  ValueTable() = default;
  explicit ValueTable(const Graph& graph);

  size_t size() const { return entries_.size(); }
  ValueId find(std::string_view name) const;  // kNoValue when the graph has no such value
  ValueId id(std::string_view name) const;    // a name the graph has (asserted)
  const std::string& name(ValueId id) const { return entries_[id].name; }
  const ValueEntry& operator[](ValueId id) const { return entries_[id]; }

  // A node's inputs and outputs as ids, kNoValue for "".
  std::span<const ValueId> inputsOf(size_t node) const { return slice(inputs_, node); }
  std::span<const ValueId> outputsOf(size_t node) const { return slice(outputs_, node); }
  // The values of this graph a node's subgraphs read (outer-scope reads), ascending.
  std::span<const ValueId> subgraphReadsOf(size_t node) const { return slice(subgraphReads_, node); }

private:
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Slices {
    std::vector<ValueId> ids;
    std::vector<size_t> begin;  // per node, then one past the last
  };
  static std::span<const ValueId> slice(const Slices& s, size_t node) {
    return {s.ids.data() + s.begin[node], s.begin[node + 1] - s.begin[node]};
  }
  ValueId intern(const std::string& name);
  // Appends the ids of one node's `names` (kNoValue for ""), numbering new names.
  void appendIds(const std::vector<std::string>& names, Slices& slices);

  std::vector<ValueEntry> entries_;
  std::unordered_map<std::string, ValueId, NameHash, std::equal_to<>> ids_;
  Slices inputs_, outputs_, subgraphReads_;
};

}  // namespace ctxkit::ir
