// The fallback interpreter's prepared-op cache.
#include "runtime/prepared_cache.h"

#include <mutex>

namespace ctxkit::runtime {

std::shared_ptr<const kernels::PreparedOp>
PreparedNodeCache::lookupOrPrepare(const ir::Graph& graph, const ir::Node& node, std::vector<Slot> signature) {
  kernels::PanelStore* panels = nullptr;
  {
    std::shared_lock lock(mutex_);
    if (auto it = entries_.find(&node); it != entries_.end()) {
      for (const Entry& e : it->second.entries)
        if (e.signature == signature) return e.op;
      panels = it->second.panels.get();
    }
  }
  if (!panels) {
    std::unique_lock lock(mutex_);
    panels = entries_[&node].panels.get();
  }
  std::vector<kernels::ValueDesc> descs;
  for (size_t i = 0; i < signature.size(); ++i) {
    kernels::ValueDesc d;
    d.present = signature[i].present;
    d.type = signature[i].type;
    d.shape = signature[i].shape;
    // Initializers and Constant nodes' values never change between runs: ops may depend on their values (Reshape's
    // shape, BatchNormalization's coefficients, ...).
    if (d.present) {
      if (const ir::Initializer* init = graph.findInitializer(node.inputs[i])) d.value = &init->tensor;
      else d.value = constantValue(graph, node.inputs[i]);
    }
    descs.push_back(std::move(d));
  }
  kernels::OpContext ctx = kernels::nodeContext(node);
  ctx.panelStore = panels;  // initializers and Constant values live as long as the graph, and so as this cache
  auto prepared = kernels::prepare(ctx, descs, node.outputs.size());
  std::shared_ptr<const kernels::PreparedOp> op;
  if (prepared) op = std::shared_ptr<const kernels::PreparedOp>(std::move(prepared.value()));
  std::unique_lock lock(mutex_);
  NodeOps& ops = entries_[&node];
  for (const Entry& e : ops.entries)  // another thread got here first
    if (e.signature == signature) return e.op;
  if (ops.entries.size() < kMaxEntriesPerNode) {
    ops.entries.push_back(Entry{std::move(signature), op});
  } else {
    ops.entries[ops.next] = Entry{std::move(signature), op};
    ops.next = (ops.next + 1) % kMaxEntriesPerNode;
  }
  return op;
}

const ir::Tensor* PreparedNodeCache::constantValue(const ir::Graph& graph, const std::string& name) {
  const ir::Node* producer = nullptr;
  {
    std::unique_lock lock(mutex_);
    auto [it, made] = constantProducers_.try_emplace(&graph);
    if (made)
      for (const ir::Node& n : graph.nodes)
        if (n.kind == ir::OpKind::Constant && n.inputs.empty())
          for (const auto& out : n.outputs) it->second.emplace(out, &n);
    auto found = it->second.find(name);
    if (found == it->second.end()) return nullptr;
    producer = found->second;
  }
  size_t index = 0;
  while (producer->outputs[index] != name) ++index;
  auto value = run(graph, *producer, {}, nullptr);
  if (!value || !*value || index >= (*value)->size()) return nullptr;
  std::shared_lock lock(mutex_);
  auto it = constants_.find(producer);
  return it != constants_.end() && index < it->second.size() ? &it->second[index] : nullptr;
}

void PreparedNodeCache::packAhead(const ir::Graph& graph, const ir::Node& node) {
  if ((node.kind != ir::OpKind::MatMul && node.kind != ir::OpKind::Gemm) || node.inputs.size() < 2) return;
  kernels::ValueDesc b;
  if (const ir::Initializer* init = graph.findInitializer(node.inputs[1])) b.value = &init->tensor;
  else b.value = constantValue(graph, node.inputs[1]);
  if (!b.value) return;
  b.type = b.value->type();
  b.shape = b.value->shape();
  kernels::PanelStore* panels = nullptr;
  {
    std::unique_lock lock(mutex_);
    panels = entries_[&node].panels.get();
  }
  kernels::packPanelsAhead(kernels::nodeContext(node), b, *panels);
}

std::optional<std::vector<kernels::OutputDesc>>
PreparedNodeCache::prepareAhead(const ir::Graph& graph, const ir::Node& node, std::vector<Slot> signature) {
  auto op = lookupOrPrepare(graph, node, std::move(signature));
  if (!op) return std::nullopt;
  return op->outputs();
}

std::optional<Expected<std::vector<ir::Tensor>>> PreparedNodeCache::run(const ir::Graph& graph, const ir::Node& node,
                                                                        std::span<const ir::Tensor* const> inputs,
                                                                        kernels::ThreadPool* pool) {
  if (node.kind == ir::OpKind::Constant && inputs.empty()) {
    // A Constant's value never changes: made once (inside If/Loop bodies too), shared by every later run.
    {
      std::shared_lock lock(mutex_);
      if (auto it = constants_.find(&node); it != constants_.end())
        return Expected<std::vector<ir::Tensor>>(it->second);
    }
    kernels::OpContext ctx = kernels::nodeContext(node);
    auto value = kernels::evaluate(ctx, inputs, node.outputs.size());
    if (!value) return value;
    // Read-only views of the value, so that no caller (a graph output's reader) can change what later runs get.
    for (auto& t : *value)
      if (t.type() != ir::ElemType::String)
        if (auto v = ir::Tensor::view(t.type(), t.shape(), t.data(), t.byteSize(), t.owner())) t = std::move(v).value();
    std::unique_lock lock(mutex_);
    return Expected<std::vector<ir::Tensor>>(constants_.emplace(&node, std::move(value).value()).first->second);
  }
  std::shared_ptr<const kernels::PreparedOp> op = preparedFor(graph, node, inputs);
  if (!op) return std::nullopt;
  std::vector<ir::Tensor> outputs;
  std::vector<ir::Tensor*> outs;
  outputs.reserve(op->outputs().size());
  for (const auto& d : op->outputs()) {
    auto t = ir::Tensor::allocate(d.type, d.shape);
    if (!t) return Expected<std::vector<ir::Tensor>>(t.takeError());
    outputs.push_back(std::move(t.value()));
  }
  for (auto& t : outputs) outs.push_back(&t);
  if (auto s = op->run(inputs, outs, pool); !s) return Expected<std::vector<ir::Tensor>>(std::move(s));
  return Expected<std::vector<ir::Tensor>>(std::move(outputs));
}

std::shared_ptr<const kernels::PreparedOp> PreparedNodeCache::preparedFor(const ir::Graph& graph, const ir::Node& node,
                                                                          std::span<const ir::Tensor* const> inputs) {
  std::vector<Slot> signature;
  signature.reserve(inputs.size());
  for (const ir::Tensor* t : inputs) signature.push_back(t ? Slot{true, t->type(), t->shape()} : Slot{});
  return lookupOrPrepare(graph, node, std::move(signature));
}

size_t PreparedNodeCache::preparedCount() const {
  std::shared_lock lock(mutex_);
  size_t n = 0;
  for (const auto& [node, ops] : entries_)
    for (const Entry& e : ops.entries) n += e.op != nullptr;
  return n;
}

size_t PreparedNodeCache::panelPacks() const {
  std::shared_lock lock(mutex_);
  size_t n = 0;
  for (const auto& [node, ops] : entries_) n += ops.panels->packs();
  return n;
}

}  // namespace ctxkit::runtime
