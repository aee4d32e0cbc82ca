// Prepared ops for fallback nodes, made on first use and cached per node and input shapes (thread-safe).
#pragma once

#include "ir/graph.h"
#include "kernels/kernels.h"

#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace ctxkit::runtime {

class PreparedNodeCache {
public:
  // Runs `node` of `graph` through an op prepared for these inputs' types and shapes, preparing it on first use
  // (the graph's initializers are its constants). nullopt when the node cannot be prepared for them — its output
  // shapes depend on values computed at run time — so the caller evaluates it the one-shot way.
  std::optional<Expected<std::vector<ir::Tensor>>> run(const ir::Graph& graph, const ir::Node& node,
                                                       std::span<const ir::Tensor* const> inputs,
                                                       kernels::ThreadPool* pool);

  // An input as a signature sees it.
  struct Slot {
    bool present = false;
    ir::ElemType type = ir::ElemType::Undefined;
    ir::Shape shape;
    bool operator==(const Slot&) const = default;
  };

  // Prepares `node` for inputs of these types and shapes ahead of any run (at load, when the shapes are static).
  // Returns the op's output types and shapes, or nothing when it cannot be prepared for them.
  std::optional<std::vector<kernels::OutputDesc>> prepareAhead(const ir::Graph& graph, const ir::Node& node,
                                                               std::vector<Slot> signature);

  // For a node that cannot be prepared ahead (its input shapes are known only when it runs): packs its constant
  // weight into the panels every signature's op will share (a MatMul or Gemm with a constant float32 B; nothing for
  // other nodes), so that the first run does not pay for it.
  void packAhead(const ir::Graph& graph, const ir::Node& node);

  // The op prepared for these inputs' types and shapes (made and cached on first use), or null when `node` cannot
  // be prepared for them. Sessions keep it per run frame and call it again only when the shapes change.
  std::shared_ptr<const kernels::PreparedOp> preparedFor(const ir::Graph& graph, const ir::Node& node,
                                                         std::span<const ir::Tensor* const> inputs);

  size_t preparedCount() const;  // for tests
  // Constant weights packed into GEMM panels so far: once per node and weight, however many signatures (for tests).
  size_t panelPacks() const;

private:
  // The op prepared for `signature` (made and cached on first use); null when not preparable for it.
  std::shared_ptr<const kernels::PreparedOp> lookupOrPrepare(const ir::Graph& graph, const ir::Node& node,
                                                             std::vector<Slot> signature);

  // The value of `name` when a Constant node of `graph` makes it (made on first use and kept), else null.
  const ir::Tensor* constantValue(const ir::Graph& graph, const std::string& name);

  struct Entry {
    std::vector<Slot> signature;
    std::shared_ptr<const kernels::PreparedOp> op;  // null: not preparable for this signature
  };
  // Shapes that vary without bound (a growing sequence) must not grow the cache without bound: once a node has this
  // many, a new signature replaces the oldest.
  static constexpr size_t kMaxEntriesPerNode = 8;
  struct NodeOps {
    std::vector<Entry> entries;
    size_t next = 0;  // the entry replaced next once all are taken
    // The panels of the node's constant weights, packed once and shared by the ops of all its signatures (a
    // pointer: stable while the map rehashes, and handed to kernels::prepare outside the lock).
    std::unique_ptr<kernels::PanelStore> panels = std::make_unique<kernels::PanelStore>();
  };

  mutable std::shared_mutex mutex_;
  std::unordered_map<const ir::Node*, NodeOps> entries_;
  // Constant nodes' values, made on first use and then handed out as they are (readers never write their inputs).
  std::unordered_map<const ir::Node*, std::vector<ir::Tensor>> constants_;
  // Per graph: the Constant node making each value (a graph's nodes never change once a session uses it).
  std::unordered_map<const ir::Graph*, std::unordered_map<std::string, const ir::Node*>> constantProducers_;
};

}  // namespace ctxkit::runtime
