// Node-by-node execution with subgraphs: If branches, Loop bodies and Scan bodies see outer-scope values.
#include "runtime/interpreter.h"

#include <algorithm>
#include <cstring>

namespace ctxkit::runtime {

namespace {

std::string nodeLabel(const ir::Node& n, size_t index) {
  return n.name.empty() ? fmt::format("node #{} ({})", index, n.opType)
                        : fmt::format("node '{}' ({})", n.name, n.opType);
}

const ir::Graph* graphAttr(const ir::Node& n, const char* name) {
  const ir::Attribute* a = n.attrs.find(name);
  return a && a->type == ir::AttrType::Graph ? a->g.get() : nullptr;
}

bool truthy(const ir::Tensor& t) {
  if (t.elementCount() != 1 || t.type() == ir::ElemType::String) return false;
  for (std::byte b : t.bytes())
    if (b != std::byte{0}) return true;
  return false;
}

ir::Tensor int64Scalar(int64_t v) { return ir::Tensor::fromVector(ir::ElemType::Int64, {}, std::vector<int64_t>{v}); }

constexpr int kMaxDepth = 64;

}  // namespace

ScopedGraph::ScopedGraph(const ir::Graph& graph, const ir::ValueTable& table) : graph(graph), table(table) {
  prepare();
}

ScopedGraph::ScopedGraph(const ir::Graph& graph, const ScopedGraph& parent)
    : graph(graph), parent(&parent), table(own_.emplace(graph)) {
  prepare();
}

void ScopedGraph::prepare() {
  for (const auto& init : graph.initializers) initializers.push_back(table.find(init.name));
  for (const auto& in : graph.inputs) inputs.push_back(table.find(in.name));
  for (const auto& out : graph.outputs) outputs.push_back(table.find(out.name));
  for (const ir::ValueInfo* in : graph.feedInputs()) feeds.push_back(table.find(in->name));
  // A subgraph names the outer values it reads (ONNX scoping): each name is resolved here, once, to the nearest
  // enclosing graph that defines it. A graph that only passes it on to a subgraph of its own does not number it.
  outer.resize(table.size());
  for (ir::ValueId v = 0; v < table.size(); ++v) {
    if (!table[v].isOuter()) continue;
    uint32_t up = 1;
    for (const ScopedGraph* s = parent; s; s = s->parent, ++up) {
      const ir::ValueId id = s->table.find(table.name(v));
      if (id == ir::kNoValue) continue;
      if (!s->table[id].isOuter()) outer[v] = {up, id};
      else if (s->outer[id].up != 0) outer[v] = {up + s->outer[id].up, s->outer[id].id};
      break;
    }
  }
  nodes_.resize(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& n = graph.nodes[i];
    ControlFlow& c = nodes_[i];
    auto prepared = [&](const char* attr) -> std::unique_ptr<ScopedGraph> {
      const ir::Graph* g = graphAttr(n, attr);
      return g ? std::make_unique<ScopedGraph>(*g, *this) : nullptr;
    };
    if (n.kind == ir::OpKind::If) {
      c.thenBranch = prepared("then_branch");
      c.elseBranch = prepared("else_branch");
    } else if (n.kind == ir::OpKind::Loop || n.kind == ir::OpKind::Scan) {
      c.body = prepared("body");
    }
    if (n.kind != ir::OpKind::Scan || !c.body) continue;
    c.numScanInputs = n.attrs.getInt("num_scan_inputs", 0);
    // The defaults are sized only for a count that fits the node (a run refuses any other before reading them).
    if (c.numScanInputs <= 0 || c.numScanInputs > static_cast<int64_t>(n.inputs.size())) continue;
    const auto scanInputs = static_cast<size_t>(c.numScanInputs);
    const size_t states = n.inputs.size() - scanInputs;
    const size_t bodyOutputs = c.body->graph.outputs.size();
    const size_t scanOutputs = bodyOutputs - std::min(states, bodyOutputs);
    c.inAxes = n.attrs.getInts("scan_input_axes", std::vector<int64_t>(scanInputs, 0));
    c.inDirs = n.attrs.getInts("scan_input_directions", std::vector<int64_t>(scanInputs, 0));
    c.outAxes = n.attrs.getInts("scan_output_axes", std::vector<int64_t>(scanOutputs, 0));
    c.outDirs = n.attrs.getInts("scan_output_directions", std::vector<int64_t>(scanOutputs, 0));
  }
}

const ir::Tensor* Scope::find(ir::ValueId id) const {
  if (slots_[id]) return &*slots_[id];
  if (outer_ && (*outer_)[id].up != 0) {
    const Scope* s = this;
    for (uint32_t k = 0; k < (*outer_)[id].up && s; ++k) s = s->parent_;
    return s ? s->find((*outer_)[id].id) : nullptr;
  }
  // An enclosing scope numbering the same graph (the session's initializers) answers by id too.
  return parent_ && parent_->table_ == table_ ? parent_->find(id) : nullptr;
}

Status checkExecutable(const ir::Graph& graph, const std::string& where) {
  struct Walker {
    static Status walk(const ir::Graph& g, const std::string& where, int depth) {
      if (depth > kMaxDepth)
        return makeError(ErrorCode::InvalidGraph, "{}: subgraphs nest more than {} deep", where, kMaxDepth);
      for (size_t i = 0; i < g.nodes.size(); ++i) {
        const ir::Node& n = g.nodes[i];
        if (n.kind == ir::OpKind::EPContext) continue;  // the session claims these
        if (!ir::isControlFlow(n.kind) && (n.kind == ir::OpKind::Unknown || !kernels::hasKernel(n.kind)))
          return makeError(ErrorCode::Unsupported, "{}: {}: op {} (domain '{}') has no ctxkit kernel", where,
                           nodeLabel(n, i), n.opType, n.domain);
        for (const auto& a : n.attrs.all())
          if (a.g)
            CTX_RETURN_IF_ERROR(
                walk(*a.g, fmt::format("{}: {} attribute '{}'", where, nodeLabel(n, i), a.name), depth + 1));
      }
      return Status::ok();
    }
  };
  return Walker::walk(graph, where, 0);
}

Status Interpreter::runGraph(const ScopedGraph& prepared, Scope& scope, const GraphRunOptions& options) const {
  const ir::Graph& graph = prepared.graph;
  const ir::ValueTable& ids = prepared.table;
  std::vector<const ir::Tensor*> ins;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& n = graph.nodes[i];
    ins.clear();
    for (const ir::ValueId in : ids.inputsOf(i)) {
      if (in == ir::kNoValue) {
        ins.push_back(nullptr);
        continue;
      }
      const ir::Tensor* t = scope.find(in);
      if (!t)
        return makeError(ErrorCode::InvalidGraph, "{}: value '{}' is not available", nodeLabel(n, i), ids.name(in));
      ins.push_back(t);
    }
    std::optional<Expected<std::vector<ir::Tensor>>> result;
    if (options.override) result = (*options.override)(i, ins);
    if (!result) {
      switch (n.kind) {
        case ir::OpKind::If: result = runIf(prepared, i, ins, scope); break;
        case ir::OpKind::Loop: result = runLoop(prepared, i, ins, scope); break;
        case ir::OpKind::Scan: result = runScan(prepared, i, ins, scope); break;
        default: {
          if (cache_) result = cache_->run(graph, n, ins, pool_);
          if (!result) {
            kernels::OpContext ctx = kernels::nodeContext(n, pool_);
            result = kernels::evaluate(ctx, ins, n.outputs.size());
          }
        }
      }
    }
    if (!*result) {
      // Kernel errors already start with the node's label (kernels::nodeError): it is not repeated.
      Error e = result->takeError();
      const std::string label = nodeLabel(n, i);
      if (!e.message().starts_with(label + ": ")) e.addContext(label);
      return e;
    }
    auto& values = result->value();
    const std::span<const ir::ValueId> outs = ids.outputsOf(i);
    for (size_t o = 0; o < outs.size() && o < values.size(); ++o)
      if (outs[o] != ir::kNoValue) scope.set(outs[o], std::move(values[o]));
    if (!options.lastUse.empty())
      for (const ir::ValueId in : ids.inputsOf(i))
        if (in != ir::kNoValue && !ids[in].isGraphOutput && options.lastUse[in] == i) scope.erase(in);
  }
  return Status::ok();
}

Expected<std::vector<ir::Tensor>> Interpreter::runSubgraph(const ScopedGraph* body, const Scope& outer,
                                                           const std::vector<ir::Tensor>& inputs) const {
  if (!body) return makeError(ErrorCode::Internal, "a subgraph was not prepared");
  const ir::Graph& g = body->graph;
  if (inputs.size() != body->inputs.size())
    return makeError(ErrorCode::InvalidGraph, "subgraph '{}' takes {} inputs but gets {}", g.name, body->inputs.size(),
                     inputs.size());
  Scope scope(&outer, *body);
  for (size_t k = 0; k < body->initializers.size(); ++k)
    if (body->initializers[k] != ir::kNoValue) scope.set(body->initializers[k], g.initializers[k].tensor);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (body->inputs[i] != ir::kNoValue) scope.set(body->inputs[i], inputs[i]);
  CTX_RETURN_IF_ERROR(runGraph(*body, scope).addContext(fmt::format("subgraph '{}'", g.name)));
  std::vector<ir::Tensor> outputs;
  for (size_t k = 0; k < body->outputs.size(); ++k) {
    const ir::Tensor* t = body->outputs[k] == ir::kNoValue ? nullptr : scope.find(body->outputs[k]);
    if (!t)
      return makeError(ErrorCode::InvalidGraph, "subgraph '{}' never produces its output '{}'", g.name,
                       g.outputs[k].name);
    outputs.push_back(*t);
  }
  return outputs;
}

Expected<std::vector<ir::Tensor>> Interpreter::runIf(const ScopedGraph& graph, size_t node,
                                                     std::span<const ir::Tensor* const> ins, const Scope& outer) const {
  if (ins.empty() || !ins[0]) return makeError(ErrorCode::InvalidGraph, "If needs its condition input");
  const ScopedGraph::ControlFlow& c = graph.controlFlow(node);
  const ScopedGraph* branch = truthy(*ins[0]) ? c.thenBranch.get() : c.elseBranch.get();
  if (!branch) return makeError(ErrorCode::InvalidGraph, "If has no then_branch/else_branch graph attribute");
  return runSubgraph(branch, outer, {});
}

Expected<ir::Tensor> Interpreter::stack(const std::vector<ir::Tensor>& slices, int64_t axis,
                                        const std::string& what) const {
  std::vector<ir::Tensor> expanded;
  std::vector<const ir::Tensor*> ptrs;
  for (const auto& s : slices) {
    ir::Shape shape = s.shape();
    int64_t a = axis < 0 ? axis + static_cast<int64_t>(shape.size()) + 1 : axis;
    if (a < 0 || a > static_cast<int64_t>(shape.size()))
      return makeError(ErrorCode::InvalidGraph, "{}: axis {} is out of range for rank {}", what, axis, shape.size());
    shape.insert(shape.begin() + a, 1);
    CTX_ASSIGN_OR_RETURN(auto e, s.reshaped(shape));
    expanded.push_back(std::move(e));
  }
  for (const auto& e : expanded) ptrs.push_back(&e);
  // Typed attributes made here, not ONNX ones decoded per call.
  const ops::OpAttrs typed = ops::AxisAttrs{axis < 0 ? axis + static_cast<int64_t>(slices[0].rank()) + 1 : axis};
  static const ir::Attributes kNoAttrs;
  kernels::OpContext ctx{ir::OpKind::Concat, 13, kNoAttrs, what, pool_, &typed};
  CTX_ASSIGN_OR_RETURN(auto out, kernels::evaluate(ctx, ptrs, 1));
  return std::move(out[0]);
}

Expected<ir::Tensor> Interpreter::slice(const ir::Tensor& x, int64_t axis, int64_t index) const {
  const ops::OpAttrs typed = ops::AxisAttrs{axis};
  ir::Tensor idx = int64Scalar(index);
  const ir::Tensor* ins[] = {&x, &idx};
  static const ir::Attributes kNoAttrs;
  kernels::OpContext ctx{ir::OpKind::Gather, 13, kNoAttrs, "scan slice", pool_, &typed};
  CTX_ASSIGN_OR_RETURN(auto out, kernels::evaluate(ctx, ins, 1));
  return std::move(out[0]);
}

Expected<std::vector<ir::Tensor>> Interpreter::runLoop(const ScopedGraph& graph, size_t node,
                                                       std::span<const ir::Tensor* const> ins,
                                                       const Scope& outer) const {
  const ScopedGraph* numbered = graph.controlFlow(node).body.get();
  if (!numbered) return makeError(ErrorCode::InvalidGraph, "Loop has no body graph");
  const ir::Graph* body = &numbered->graph;
  if (ins.size() < 2) return makeError(ErrorCode::InvalidGraph, "Loop needs the M and cond inputs (possibly empty)");
  const size_t carried = ins.size() - 2;
  if (body->outputs.size() < 1 + carried)
    return makeError(ErrorCode::InvalidGraph, "Loop body has {} outputs; expected at least {}", body->outputs.size(),
                     1 + carried);
  const size_t scans = body->outputs.size() - 1 - carried;
  std::optional<int64_t> maxTrips;
  if (ins[0]) {
    if (ins[0]->type() != ir::ElemType::Int64 || ins[0]->elementCount() != 1)
      return makeError(ErrorCode::InvalidGraph, "Loop's M must be one int64");
    maxTrips = ins[0]->dataAs<int64_t>()[0];
  }
  bool cond = ins[1] ? truthy(*ins[1]) : true;
  std::vector<ir::Tensor> state;
  for (size_t k = 0; k < carried; ++k) {
    if (!ins[2 + k]) return makeError(ErrorCode::InvalidGraph, "Loop-carried input {} is missing", k);
    state.push_back(*ins[2 + k]);
  }
  std::vector<std::vector<ir::Tensor>> scanned(scans);
  int64_t trip = 0;
  while ((!maxTrips || trip < *maxTrips) && cond) {
    std::vector<ir::Tensor> bodyIns = {int64Scalar(trip),
                                       ir::Tensor::fromVector(ir::ElemType::Bool, {}, std::vector<uint8_t>{1})};
    bodyIns.insert(bodyIns.end(), state.begin(), state.end());
    CTX_ASSIGN_OR_RETURN(auto outs,
                         runSubgraph(numbered, outer, bodyIns).addContext(fmt::format("iteration {}", trip)));
    cond = truthy(outs[0]);
    for (size_t k = 0; k < carried; ++k) state[k] = std::move(outs[1 + k]);
    for (size_t k = 0; k < scans; ++k) scanned[k].push_back(std::move(outs[1 + carried + k]));
    ++trip;
  }
  std::vector<ir::Tensor> results = std::move(state);
  for (size_t k = 0; k < scans; ++k) {
    if (scanned[k].empty()) {
      ir::ElemType type = body->outputs[1 + carried + k].type;
      CTX_ASSIGN_OR_RETURN(auto empty,
                           ir::Tensor::allocate(type == ir::ElemType::Undefined ? ir::ElemType::Float : type, {0}));
      results.push_back(std::move(empty));
      continue;
    }
    CTX_ASSIGN_OR_RETURN(auto stacked, stack(scanned[k], 0, fmt::format("Loop scan output {}", k)));
    results.push_back(std::move(stacked));
  }
  return results;
}

Expected<std::vector<ir::Tensor>> Interpreter::runScan(const ScopedGraph& graph, size_t node,
                                                       std::span<const ir::Tensor* const> ins,
                                                       const Scope& outer) const {
  const ir::Node& n = graph.graph.nodes[node];
  if (n.opset < 9) return makeError(ErrorCode::Unsupported, "Scan before opset 9 (with a batch axis) is not supported");
  const ScopedGraph::ControlFlow& c = graph.controlFlow(node);
  const ScopedGraph* numbered = c.body.get();
  if (!numbered) return makeError(ErrorCode::InvalidGraph, "Scan has no body graph");
  const ir::Graph* body = &numbered->graph;
  const int64_t numScanInputs = c.numScanInputs;
  if (numScanInputs <= 0 || numScanInputs > static_cast<int64_t>(ins.size()))
    return makeError(ErrorCode::InvalidGraph, "Scan num_scan_inputs {} does not fit {} inputs", numScanInputs,
                     ins.size());
  const size_t states = ins.size() - static_cast<size_t>(numScanInputs);
  if (body->outputs.size() < states)
    return makeError(ErrorCode::InvalidGraph, "Scan body has {} outputs; expected at least {}", body->outputs.size(),
                     states);
  const size_t scanOutputs = body->outputs.size() - states;
  std::vector<int64_t> inAxes = c.inAxes;  // made absolute below
  const std::vector<int64_t>&inDirs = c.inDirs, &outAxes = c.outAxes, &outDirs = c.outDirs;
  if (inAxes.size() != static_cast<size_t>(numScanInputs) || inDirs.size() != inAxes.size() ||
      outAxes.size() != scanOutputs || outDirs.size() != scanOutputs)
    return makeError(ErrorCode::InvalidGraph, "Scan axis/direction attributes do not match the number of scan values");
  int64_t length = -1;
  for (size_t k = 0; k < inAxes.size(); ++k) {
    const ir::Tensor* x = ins[states + k];
    if (!x) return makeError(ErrorCode::InvalidGraph, "Scan input {} is missing", states + k);
    int64_t axis = inAxes[k] < 0 ? inAxes[k] + static_cast<int64_t>(x->rank()) : inAxes[k];
    if (axis < 0 || axis >= static_cast<int64_t>(x->rank()))
      return makeError(ErrorCode::InvalidGraph, "Scan input axis {} is out of range for rank {}", inAxes[k], x->rank());
    inAxes[k] = axis;
    int64_t len = x->shape()[static_cast<size_t>(axis)];
    if (length >= 0 && len != length)
      return makeError(ErrorCode::InvalidGraph, "Scan inputs have different sequence lengths {} and {}", length, len);
    length = len;
  }
  std::vector<ir::Tensor> state;
  for (size_t k = 0; k < states; ++k) state.push_back(*ins[k]);
  std::vector<std::vector<ir::Tensor>> scanned(scanOutputs);
  for (int64_t t = 0; t < length; ++t) {
    std::vector<ir::Tensor> bodyIns = state;
    for (size_t k = 0; k < inAxes.size(); ++k) {
      CTX_ASSIGN_OR_RETURN(auto s, slice(*ins[states + k], inAxes[k], inDirs[k] == 1 ? length - 1 - t : t));
      bodyIns.push_back(std::move(s));
    }
    CTX_ASSIGN_OR_RETURN(auto outs, runSubgraph(numbered, outer, bodyIns).addContext(fmt::format("iteration {}", t)));
    for (size_t k = 0; k < states; ++k) state[k] = std::move(outs[k]);
    for (size_t k = 0; k < scanOutputs; ++k) scanned[k].push_back(std::move(outs[states + k]));
  }
  std::vector<ir::Tensor> results = std::move(state);
  for (size_t k = 0; k < scanOutputs; ++k) {
    if (scanned[k].empty()) return makeError(ErrorCode::Unsupported, "Scan over an empty sequence is not supported");
    if (outDirs[k] == 1) std::reverse(scanned[k].begin(), scanned[k].end());
    CTX_ASSIGN_OR_RETURN(auto stacked, stack(scanned[k], outAxes[k], fmt::format("Scan output {}", k)));
    results.push_back(std::move(stacked));
  }
  return results;
}

}  // namespace ctxkit::runtime
