// Support checks and acyclic partitioning (the GetCapability contract).
#include "partitioner/partitioner.h"

#include "kernels/kernels.h"
#include "ops/node_attrs.h"
#include "ops/typed_attrs.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <span>

namespace ctxkit::partitioner {

namespace {

bool isAllowedType(const Target& target, const OpSupport* op, ir::ElemType type) {
  const auto& types = op && !op->types.empty() ? op->types : target.defaultTypes;
  return types.empty() || std::find(types.begin(), types.end(), type) != types.end();
}

// A target constraint on one of the node's typed fields (target.cpp made sure the op's family has it): every
// integer, flag or element of it allowed, or for an enum field the value one of the allowed names decodes to. The
// node's fields, not its ONNX attributes, so an absent attribute is checked as its default.
std::string checkAttrConstraint(const ir::Node& node, const ops::OpAttrs& typed, const AttrConstraint& c) {
  const ops::FieldInts field = ops::fieldInts(typed, c.name);
  if (!field.found || !field.integral) return {};
  const std::string onnxName = c.name.substr(c.name.rfind('.') + 1);  // window.auto_pad: auto_pad
  for (int64_t v : field.values) {
    if (std::find(c.allowedInts.begin(), c.allowedInts.end(), v) != c.allowedInts.end()) continue;
    bool named = false;
    if (field.isEnum)
      for (const std::string& spelling : c.allowedStrings) {
        auto allowed = ops::decodeWith(node, ir::Attribute::makeString(onnxName, spelling));
        const ops::FieldInts value = allowed ? ops::fieldInts(*allowed, c.name) : ops::FieldInts();
        named = named || (value.values.size() == 1 && value.values[0] == v);
      }
    if (named) continue;
    // An enum from a string (auto_pad) is named by the node's spelling, or as its default.
    const ir::Attribute* a = field.isEnum ? node.attrs.find(onnxName) : nullptr;
    if (!field.isEnum || (a && a->type != ir::AttrType::String))
      return fmt::format("attribute {}={} is not supported by the target", c.name, v);
    if (a) return fmt::format("attribute {}=\"{}\" is not supported by the target", c.name, a->s);
    return fmt::format("attribute {} is absent (its default) and the target does not allow the default", c.name);
  }
  return {};
}

// Disjoint clusters over nodes, merged along edges while the contracted graph stays acyclic.
class Clusters {
public:
  explicit Clusters(size_t n) : parent_(n), succ_(n) { std::iota(parent_.begin(), parent_.end(), 0); }

  size_t find(size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void addEdge(size_t from, size_t to) { succ_[from].insert(to); }

  // Merging a and b (edge a -> b) is safe unless some path a -> X -> ... -> b leaves the pair.
  bool canMerge(size_t a, size_t b) {
    std::vector<size_t> stack;
    std::set<size_t> seen;
    for (size_t s : succ_[a]) {
      size_t c = find(s);
      if (c != b && c != a && seen.insert(c).second) stack.push_back(c);
    }
    while (!stack.empty()) {
      size_t c = stack.back();
      stack.pop_back();
      if (c == b) return false;
      for (size_t s : succ_[c]) {
        size_t d = find(s);
        if (d != c && seen.insert(d).second) stack.push_back(d);
      }
    }
    return true;
  }

  void merge(size_t a, size_t b) {
    parent_[b] = a;
    for (size_t s : succ_[b]) succ_[a].insert(s);
    succ_[b].clear();
    // Edges are stored between representatives lazily; find() resolves them.
    std::set<size_t> resolved;
    for (size_t s : succ_[a]) {
      size_t r = find(s);
      if (r != a) resolved.insert(r);
    }
    succ_[a] = std::move(resolved);
  }

private:
  std::vector<size_t> parent_;
  std::vector<std::set<size_t>> succ_;
};

// A program tensor's bounded dimensions are a byte's bits (program::TensorDesc::bounded).
constexpr size_t kMaxBoundedInputRank = 8;

// A bounded value is planned at its bound. An interval bound can be far looser than any run (a Reshape to (n, -1)
// whose n comes from another value than its input's rows gets -1 at most rows x columns / 1): above this many bytes the
// value is not worth planning for, and the nodes reading or writing it stay on the fallback path, where memory follows
// the actual extents.
constexpr uint64_t kMaxBoundedBytes = uint64_t{64} << 20;

// Whether `v` has a bounded shape: not static, with an upper bound the analysis gives (analysis/bounds.h).
bool isBoundedValue(const analysis::GraphFacts& facts, ir::ValueId v) {
  return v != ir::kNoValue && !facts[v].shape && facts[v].bound.has_value();
}

// For a node reading a bounded value whose shape rule runs on the bounds: why its rule refuses the extents a run may
// give (each bounded dimension at 1, or 0 where the bound is 0), or empty. A Conv or MatMul whose channel or
// contraction count is only bounded passes at the bound but fails here against its fixed weight, so the region is
// refused before lowering; a node whose rule needs values it is not given at compile time (a root, a Reshape to a
// computed shape) is evaluated at run time and takes its outputs' bounds from the analysis.
std::string boundedRuleReason(const ir::Node& node, const analysis::GraphFacts& facts,
                              std::span<const ir::ValueId> inputs) {
  if (std::none_of(inputs.begin(), inputs.end(), [&](ir::ValueId v) { return isBoundedValue(facts, v); })) return {};
  std::vector<kernels::ValueDesc> atBound, atRun;
  for (ir::ValueId v : inputs) {
    kernels::ValueDesc d;
    if (v == ir::kNoValue) d.present = false;
    else {
      const analysis::ValueFacts& f = facts[v];
      d.type = f.type;
      d.shape = f.shape ? *f.shape : f.bound ? *f.bound : ir::Shape{};
      d.value = f.constant ? &*f.constant : nullptr;
    }
    atBound.push_back(d);
    if (isBoundedValue(facts, v)) {
      const analysis::ValueFacts& f = facts[v];
      for (size_t k = 0; k < d.shape.size(); ++k)
        if (!f.low || k >= f.low->size() || (*f.low)[k] != d.shape[k]) d.shape[k] = std::min<int64_t>(d.shape[k], 1);
    }
    atRun.push_back(d);
  }
  const kernels::OpContext ctx = kernels::nodeContext(node);
  if (!kernels::inferOutputs(ctx, atBound, node.outputs.size())) return {};
  if (auto r = kernels::inferOutputs(ctx, atRun, node.outputs.size()); !r)
    return "a bounded dimension it reads must be exact: " + r.error().message();
  return {};
}

}  // namespace

std::string unsupportedReason(const ir::Node& node, size_t index, const analysis::GraphFacts& facts,
                              const Target& target) {
  for (const auto& a : node.attrs.all())
    if (a.type == ir::AttrType::Graph || a.type == ir::AttrType::Graphs)
      return "control flow (subgraph attribute) stays on the fallback path";
  const OpSupport* op = nullptr;
  if (target.allKernelOps) {
    if (node.kind == ir::OpKind::Unknown || node.kind == ir::OpKind::EPContext || !kernels::hasKernel(node.kind))
      return fmt::format("op {} is not supported by target '{}'", node.opType, target.name);
  } else {
    op = target.findOp(node.domain, node.opType, node.opset);
    if (!op)
      return fmt::format("op {} (opset {}) is not supported by target '{}'", node.opType, node.opset, target.name);
    if (node.kind == ir::OpKind::Unknown || !kernels::hasKernel(node.kind))
      return fmt::format("op {} has no ctxkit kernel", node.opType);
  }
  int64_t maxRank = op && op->maxRank ? *op->maxRank : target.maxRank;
  auto checkValue = [&](ir::ValueId v, bool checkType) -> std::string {
    const std::string& name = facts.table.name(v);
    const analysis::ValueFacts* f = &facts[v];
    const std::optional<ir::Shape>& shape = f->shape ? f->shape : target.boundedShapes ? f->bound : f->shape;
    if (!shape) {
      if (target.staticShapesOnly) return "dynamic shape: " + f->blocker;
      return {};
    }
    if (!f->shape && f->type == ir::ElemType::Float16 && target.float16Compute == Float16Compute::Float32)
      return fmt::format("'{}' is float16 with a bounded shape: not computed in float32 on this target", name);
    if (!f->shape) {
      const auto count = ir::elementCount(*shape);
      const auto bytes = count ? ir::storageBytes(f->type, *count) : std::nullopt;
      if (!bytes || *bytes > kMaxBoundedBytes)
        return fmt::format("'{}' is bounded at {} {}{}: above the {} MiB a bounded value is planned at", name,
                           ir::elemTypeName(f->type), ir::shapeToString(*shape),
                           bytes ? fmt::format(" ({} MiB)", *bytes >> 20) : std::string(), kMaxBoundedBytes >> 20);
    }
    if (static_cast<int64_t>(shape->size()) > maxRank)
      return fmt::format("'{}' has rank {}, above the target's maximum {}", name, shape->size(), maxRank);
    if (checkType) {
      bool ok = target.allKernelOps ? kernels::supportsType(node.kind, f->type) : isAllowedType(target, op, f->type);
      if (!ok)
        return fmt::format("element type {} of '{}' is not supported for {}", ir::elemTypeName(f->type), name,
                           node.opType);
    }
    return {};
  };
  const std::span<const ir::ValueId> inputs = facts.table.inputsOf(index);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == ir::kNoValue) continue;
    if (auto r = checkValue(inputs[i], i == 0); !r.empty()) return r;
  }
  for (ir::ValueId out : facts.table.outputsOf(index)) {
    if (out == ir::kNoValue) continue;
    if (auto r = checkValue(out, !target.allKernelOps); !r.empty()) return r;
  }
  if (target.boundedShapes) {
    if (auto r = boundedRuleReason(node, facts, inputs); !r.empty()) return r;
    // emit-program takes a bounded op's outputs from the analysis, which knows nothing of an omitted one.
    const std::span<const ir::ValueId> outs = facts.table.outputsOf(index);
    const bool bounded =
        std::any_of(inputs.begin(), inputs.end(), [&](ir::ValueId v) { return isBoundedValue(facts, v); }) ||
        std::any_of(outs.begin(), outs.end(), [&](ir::ValueId v) { return isBoundedValue(facts, v); });
    size_t present = outs.size();  // one past the last output present (trailing omitted ones are not made)
    while (present > 0 && outs[present - 1] == ir::kNoValue) --present;
    for (size_t o = 0; bounded && o < present; ++o)
      if (outs[o] == ir::kNoValue) return fmt::format("output {} is omitted, and the op has a bounded shape", o);
  }
  if (op && !op->attrs.empty()) {
    const auto decoded = ops::attrsOf(node);
    if (!decoded->attrs) return decoded->attrs.error().message();
    for (const auto& c : op->attrs)
      if (auto r = checkAttrConstraint(node, decoded->attrs.value(), c); !r.empty()) return r;
  }
  return {};
}

std::string fallbackBlocker(const ir::Node& node, const analysis::GraphFacts& facts) {
  std::string type = "unknown";
  if (!node.inputs.empty() && !node.inputs[0].empty())
    if (const analysis::ValueFacts* f = facts.find(node.inputs[0]); f && f->type != ir::ElemType::Undefined)
      type = std::string(ir::elemTypeName(f->type));
  const std::string label = fmt::format("node '{}' ({}, opset {}, input type {})",
                                        node.name.empty() ? "(unnamed)" : node.name, node.opType, node.opset, type);
  for (const auto& a : node.attrs.all()) {
    std::vector<const ir::Graph*> graphs;
    if (a.type == ir::AttrType::Graph && a.g) graphs.push_back(a.g.get());
    if (a.type == ir::AttrType::Graphs)
      for (const auto& sub : a.graphs) graphs.push_back(sub.get());
    for (const ir::Graph* sub : graphs)
      for (const ir::Node& inner : sub->nodes)
        if (auto r = fallbackBlocker(inner, facts); !r.empty())
          return fmt::format("{}: subgraph {}: {}", label, a.name, r);
  }
  // The interpreter runs control flow; the session claims EPContext nodes.
  if (ir::isControlFlow(node.kind) || node.kind == ir::OpKind::EPContext) return {};
  if (node.kind == ir::OpKind::Unknown || !kernels::hasKernel(node.kind))
    return fmt::format("{}: the ctxkit runtime has no kernel for this op", label);
  if (!node.inputs.empty() && !node.inputs[0].empty())
    if (const analysis::ValueFacts* f = facts.find(node.inputs[0]))
      if (f->type != ir::ElemType::Undefined && !kernels::supportsType(node.kind, f->type))
        return fmt::format("{}: element type {} of input '{}' is not supported by its kernel", label,
                           ir::elemTypeName(f->type), node.inputs[0]);
  // The decoder's verdict from import: a bad attribute is this node's reason.
  if (const auto decoded = ops::attrsOf(node); !decoded->attrs)
    return fmt::format("{}: {}", label, decoded->attrs.error().message());
  return {};
}

PartitionPlan partitionGraph(const ir::Graph& graph, const analysis::GraphFacts& facts, const Target& target) {
  PartitionPlan plan;
  const size_t n = graph.nodes.size();
  plan.nodes.resize(n);

  std::vector<bool> supported(n, false);
  for (size_t i : facts.order) {
    const ir::Node& node = graph.nodes[i];
    const std::span<const ir::ValueId> outputs = facts.table.outputsOf(i);
    bool folded = !outputs.empty() && std::all_of(outputs.begin(), outputs.end(), [&](ir::ValueId o) {
      return o == ir::kNoValue || facts[o].constant.has_value();
    });
    if (folded) {
      plan.nodes[i].placement = NodePlacement::Folded;
      continue;
    }
    // A node whose rule needs values known only at run time (a root: NonZero, NonMaxSuppression, TopK with a computed
    // k; a Reshape to a computed shape) compiles on a target with bounded shapes when every output has a bound.
    auto failure = facts.ruleFailures.find(i);
    const bool bounded = target.boundedShapes && std::all_of(outputs.begin(), outputs.end(), [&](ir::ValueId o) {
                           return o == ir::kNoValue || facts[o].shape || facts[o].bound;
                         });
    if (failure != facts.ruleFailures.end() && !bounded)
      plan.nodes[i].reason = "shape rule cannot run at compile time: " + failure->second;
    else plan.nodes[i].reason = unsupportedReason(node, i, facts, target);
    supported[i] = plan.nodes[i].reason.empty();
  }

  // Data edges between nodes that run (folded values are constants, not edges): from a value's producer to each node
  // reading it, through an input or a subgraph.
  std::vector<std::set<size_t>> deps(n);
  for (ir::ValueId v = 0; v < facts.table.size(); ++v) {
    const ir::ValueEntry& value = facts.table[v];
    if (!value.hasProducer() || plan.nodes[value.producer].placement == NodePlacement::Folded) continue;
    for (const ir::ValueUse& use : value.uses)
      if (use.node != value.producer) deps[use.node].insert(value.producer);
  }
  std::vector<std::vector<size_t>> preds(n);
  for (size_t i : facts.order) {
    if (plan.nodes[i].placement == NodePlacement::Folded) continue;
    for (size_t d : deps[i]) preds[i].push_back(d);
  }
  std::vector<size_t> rank(n);
  for (size_t k = 0; k < facts.order.size(); ++k) rank[facts.order[k]] = k;

  // The supported nodes grouped into partitions, each in topological order, ordered by their first node.
  auto group = [&]() {
    Clusters clusters(n);
    for (size_t i : facts.order)
      for (size_t d : preds[i]) clusters.addEdge(d, i);
    // Merge along edges in topological order; a node joins the cluster of its earliest supported producer first.
    for (size_t i : facts.order) {
      if (!supported[i]) continue;
      for (size_t p : preds[i]) {
        if (!supported[p]) continue;
        size_t a = clusters.find(p), b = clusters.find(i);
        if (a == b) continue;
        if (clusters.canMerge(a, b)) clusters.merge(a, b);
      }
    }
    std::map<size_t, std::vector<size_t>> members;  // representative -> nodes in topological order
    for (size_t i : facts.order)
      if (supported[i]) members[clusters.find(i)].push_back(i);
    std::vector<std::vector<size_t>> groups;
    for (auto& [rep, nodes] : members) groups.push_back(std::move(nodes));
    std::sort(groups.begin(), groups.end(),
              [&](const auto& x, const auto& y) { return rank[x.front()] < rank[y.front()]; });
    return groups;
  };
  std::vector<std::vector<size_t>> groups = group();
  // A bounded value made outside a partition (by a fallback node such as an If, another partition, one below the
  // minimum size) becomes a bounded program input, planned at its bound (docs/format/program.md#bounded-tensors). Its
  // mask is a byte: a node reading one of a higher rank made outside stays on the fallback path (the cpu target's
  // maximum rank is 8, so none does there), and the nodes are grouped again until none does.
  auto declarable = [&](ir::ValueId v) { return facts[v].bound->size() <= kMaxBoundedInputRank; };
  for (bool again = target.boundedShapes; again;) {
    again = false;
    for (const auto& nodes : groups) {
      if (static_cast<int64_t>(nodes.size()) < target.minPartitionSize) continue;  // on the fallback path below
      const std::set<size_t> inside(nodes.begin(), nodes.end());
      for (size_t i : nodes)
        for (ir::ValueId v : facts.table.inputsOf(i)) {
          if (!isBoundedValue(facts, v) || !supported[i] || declarable(v)) continue;
          const ir::ValueEntry& value = facts.table[v];
          if (value.hasProducer() && inside.count(value.producer)) continue;
          supported[i] = false;
          plan.nodes[i].reason =
              fmt::format("'{}' has a bounded shape of rank {} (a program input's bounded dimensions are at most {}) "
                          "and is computed outside the node's partition",
                          facts.table.name(v), facts[v].bound->size(), kMaxBoundedInputRank);
          again = true;
        }
    }
    if (again) groups = group();
  }
  for (auto& nodes : groups) {
    if (static_cast<int64_t>(nodes.size()) < target.minPartitionSize) {
      for (size_t i : nodes)
        plan.nodes[i].reason = fmt::format("partition of {} nodes is below the target's minimum of {}", nodes.size(),
                                           target.minPartitionSize);
      continue;
    }
    int index = static_cast<int>(plan.partitions.size());
    for (size_t i : nodes) {
      plan.nodes[i].placement = NodePlacement::Compiled;
      plan.nodes[i].partition = index;
    }
    plan.partitions.push_back(Partition{std::move(nodes)});
  }
  return plan;
}

size_t supportedOpCount(const Target& target) {
  if (!target.allKernelOps) return target.ops.size();
  size_t count = 0;
  for (uint32_t i = 0;; ++i) {
    auto kind = ir::opKindFromInt(i);
    if (!kind) break;
    if (*kind != ir::OpKind::Unknown && *kind != ir::OpKind::EPContext && kernels::hasKernel(*kind)) ++count;
  }
  return count;
}

std::string listBuiltinTargets() {
  std::string out;
  for (const auto& name : builtinTargetNames()) {
    auto target = loadTarget(name);
    if (!target) {
      out += fmt::format("{}: {}\n", name, target.error().message());
      continue;
    }
    out +=
        fmt::format("{}  id {} revision {}  {} ops{}\n", target->name, target->hardwareArchitecture, target->revision,
                    supportedOpCount(*target), target->allKernelOps ? " (every op with a kernel)" : "");
  }
  return out;
}

}  // namespace ctxkit::partitioner
