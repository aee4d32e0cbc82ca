// The CPU interpreter for nodes that are not compiled: kernels for ordinary ops, subgraphs for If, Loop and Scan.
#pragma once

#include "ir/graph.h"
#include "ir/value_table.h"
#include "kernels/kernels.h"
#include "runtime/prepared_cache.h"
#include "support/status.h"

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ctxkit::runtime {

// A graph prepared once (at session load) for the Scope interpreter: its values numbered, the ids of its
// initializers, feeds and outputs, every read of an enclosing graph's value resolved to where that value lives, and
// the same for the subgraphs (If branches, Loop and Scan bodies) of its nodes. A run then reaches every value by id:
// no name is hashed or compared on the run path.
class ScopedGraph {
  std::optional<ir::ValueTable> own_;  // a subgraph's numbering (declared first: `table` refers to it)

public:
  // A value the graph reads but does not define: `up` scopes out (1: the scope running the node that holds this
  // graph), by id of that scope's graph. up == 0: no enclosing graph defines it.
  struct OuterRef {
    uint32_t up = 0;
    ir::ValueId id = ir::kNoValue;
  };
  // The top-level graph, numbered by `table` (kept by the caller); a subgraph, numbered here.
  ScopedGraph(const ir::Graph& graph, const ir::ValueTable& table);
  ScopedGraph(const ir::Graph& graph, const ScopedGraph& parent);
  ScopedGraph(const ScopedGraph&) = delete;
  ScopedGraph& operator=(const ScopedGraph&) = delete;

  // What an If, Loop or Scan node runs, read from its ONNX attributes here rather than on every run: its subgraphs
  // prepared (null when the node lacks the attribute) and a Scan's attributes.
  struct ControlFlow {
    std::unique_ptr<ScopedGraph> thenBranch, elseBranch, body;
    int64_t numScanInputs = 0;
    std::vector<int64_t> inAxes, inDirs, outAxes, outDirs;  // as written, or the defaults (sized when they fit)
  };
  const ControlFlow& controlFlow(size_t node) const { return nodes_[node]; }

  const ir::Graph& graph;
  const ScopedGraph* parent = nullptr;
  const ir::ValueTable& table;
  // (kNoValue for a value named "", which nothing can read)
  std::vector<ir::ValueId> initializers, inputs, outputs;
  std::vector<ir::ValueId> feeds;  // graph.feedInputs(), in order
  std::vector<OuterRef> outer;     // by id; set for the values table[id].isOuter()

private:
  void prepare();
  std::vector<ControlFlow> nodes_;  // per node (empty for other ops)
};

// Values visible to a graph, in a vector by id of its table: its own, then (through OuterRef) those of the scopes
// enclosing it. A parent numbering the same graph (the session's initializers) answers for ids this scope lacks.
class Scope {
public:
  Scope() = default;
  // A scope holding values of `table`'s graph, read by id (the session's initializers, shared by every run).
  Scope(const Scope* parent, const ir::ValueTable& table) : parent_(parent), table_(&table), slots_(table.size()) {}
  // A scope running `graph`: its reads of enclosing values go to `parent` and the scopes around it.
  Scope(const Scope* parent, const ScopedGraph& graph)
      : parent_(parent), table_(&graph.table), outer_(&graph.outer), slots_(graph.table.size()) {}
  // A value of the table's graph: this scope's, an enclosing scope's that it reads, or the same-table parent's.
  const ir::Tensor* find(ir::ValueId id) const;
  void set(ir::ValueId id, ir::Tensor value) { slots_[id] = std::move(value); }
  void erase(ir::ValueId id) { slots_[id].reset(); }

private:
  const Scope* parent_ = nullptr;
  const ir::ValueTable* table_ = nullptr;
  const std::vector<ScopedGraph::OuterRef>* outer_ = nullptr;
  std::vector<std::optional<ir::Tensor>> slots_;  // by id of table_
};

// Runs a node some other way (a compiled program) when it returns a value; nullopt means "interpret it".
using NodeOverride = std::function<std::optional<Expected<std::vector<ir::Tensor>>>(
    size_t node, std::span<const ir::Tensor* const> inputs)>;

struct GraphRunOptions {
  const NodeOverride* override = nullptr;
  // Frees a value (not a graph output) after the last node that reads it, lastUse[id].
  std::span<const size_t> lastUse;
};

class Interpreter {
public:
  // With a cache, nodes run through ops prepared once per input shapes; without, each is evaluated one-shot.
  explicit Interpreter(kernels::ThreadPool* pool, PreparedNodeCache* cache = nullptr) : pool_(pool), cache_(cache) {}

  // Runs the graph's nodes in order, reading and writing `scope` (made for `graph`).
  Status runGraph(const ScopedGraph& graph, Scope& scope, const GraphRunOptions& options = {}) const;

private:
  Expected<std::vector<ir::Tensor>> runSubgraph(const ScopedGraph* body, const Scope& outer,
                                                const std::vector<ir::Tensor>& inputs) const;
  Expected<std::vector<ir::Tensor>> runIf(const ScopedGraph& graph, size_t node, std::span<const ir::Tensor* const> ins,
                                          const Scope& outer) const;
  Expected<std::vector<ir::Tensor>> runLoop(const ScopedGraph& graph, size_t node,
                                            std::span<const ir::Tensor* const> ins, const Scope& outer) const;
  Expected<std::vector<ir::Tensor>> runScan(const ScopedGraph& graph, size_t node,
                                            std::span<const ir::Tensor* const> ins, const Scope& outer) const;
  Expected<ir::Tensor> stack(const std::vector<ir::Tensor>& slices, int64_t axis, const std::string& what) const;
  Expected<ir::Tensor> slice(const ir::Tensor& x, int64_t axis, int64_t index) const;

  kernels::ThreadPool* pool_;
  PreparedNodeCache* cache_;
};

// Every node of `graph` (subgraphs included) has a kernel or is control flow; errors name the node.
Status checkExecutable(const ir::Graph& graph, const std::string& where);

}  // namespace ctxkit::runtime
