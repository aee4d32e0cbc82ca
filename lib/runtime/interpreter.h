// The CPU interpreter for nodes that are not compiled: kernels for ordinary ops, subgraphs for If, Loop and Scan.
#pragma once

#include "ir/graph.h"
#include "ir/value_table.h"
#include "kernels/kernels.h"
#include "runtime/prepared_cache.h"
#include "support/status.h"

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace ctxkit::runtime {

// Values visible to a graph: its own, then those of the graphs enclosing it. With a value table (the graph's), its
// own values live in a vector by id and the interpreter reaches them without hashing names (the top-level graph and
// its initializers, subgraph bodies alike); only a read of an enclosing graph's value goes by name.
class Scope {
public:
  explicit Scope(const Scope* parent = nullptr) : parent_(parent) {}
  Scope(const Scope* parent, const ir::ValueTable& table) : parent_(parent), table_(&table), slots_(table.size()) {}
  const ir::ValueTable* table() const { return table_; }
  const ir::Tensor* find(const std::string& name) const;
  // A value of the table's graph: this scope's, else the enclosing scopes' of that name (an initializer).
  const ir::Tensor* find(ir::ValueId id) const;
  void set(const std::string& name, ir::Tensor value);
  void set(ir::ValueId id, ir::Tensor value) { slots_[id] = std::move(value); }
  void erase(ir::ValueId id) { slots_[id].reset(); }

private:
  std::unordered_map<std::string, ir::Tensor> values_;  // names the table does not number
  const Scope* parent_;
  const ir::ValueTable* table_ = nullptr;
  std::vector<std::optional<ir::Tensor>> slots_;  // by id of table_
};

// Runs a node some other way (a compiled program) when it returns a value; nullopt means "interpret it".
using NodeOverride = std::function<std::optional<Expected<std::vector<ir::Tensor>>>(
    size_t node, std::span<const ir::Tensor* const> inputs)>;

struct GraphRunOptions {
  const NodeOverride* override = nullptr;
  // With a scope numbering the graph's values: frees a value (not a graph output) after the last node that reads it,
  // lastUse[id].
  std::span<const size_t> lastUse;
};

class Interpreter {
public:
  // With a cache, nodes run through ops prepared once per input shapes; without, each is evaluated one-shot.
  explicit Interpreter(kernels::ThreadPool* pool, PreparedNodeCache* cache = nullptr) : pool_(pool), cache_(cache) {}

  // Runs the graph's nodes in order, reading and writing `scope`.
  Status runGraph(const ir::Graph& graph, Scope& scope, const GraphRunOptions& options = {}) const;

private:
  // A subgraph body with its values numbered once per node run (not per Loop or Scan iteration), and the ids of its
  // initializers, inputs and outputs.
  struct Body {
    explicit Body(const ir::Graph& graph);
    const ir::Graph& graph;
    ir::ValueTable table;
    std::vector<ir::ValueId> initializers, inputs, outputs;
  };
  Expected<std::vector<ir::Tensor>> runSubgraph(const Body& body, const Scope& outer,
                                                const std::vector<ir::Tensor>& inputs) const;
  Expected<std::vector<ir::Tensor>> runIf(const ir::Node& node, std::span<const ir::Tensor* const> ins,
                                          const Scope& outer) const;
  Expected<std::vector<ir::Tensor>> runLoop(const ir::Node& node, std::span<const ir::Tensor* const> ins,
                                            const Scope& outer) const;
  Expected<std::vector<ir::Tensor>> runScan(const ir::Node& node, std::span<const ir::Tensor* const> ins,
                                            const Scope& outer) const;
  Expected<ir::Tensor> stack(const std::vector<ir::Tensor>& slices, int64_t axis, const std::string& what) const;
  Expected<ir::Tensor> slice(const ir::Tensor& x, int64_t axis, int64_t index) const;

  kernels::ThreadPool* pool_;
  PreparedNodeCache* cache_;
};

// Every node of `graph` (subgraphs included) has a kernel or is control flow; errors name the node.
Status checkExecutable(const ir::Graph& graph, const std::string& where);

}  // namespace ctxkit::runtime
