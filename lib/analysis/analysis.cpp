// Topological order, shape propagation and constant folding over an IR graph.
#include "analysis/analysis.h"

#include "analysis/bounds.h"
#include "analysis/passes/graph_rename.h"

#include "ir/graph_check.h"
#include "kernels/kernels.h"
#include "ops/node_attrs.h"

#include <algorithm>
#include <deque>

namespace ctxkit::analysis {

namespace {

using ir::nodeLabel;

bool isNondeterministic(const ir::Node& node) {
  return node.opType.rfind("Random", 0) == 0 || node.opType == "Multinomial" || node.opType == "Bernoulli";
}

// A DequantizeLinear of a quantized constant (a QDQ model's weight or bias) is left to the compiler: its fuse-qdq
// pass keeps the weight quantized for an integer op, and folds it itself when no integer op takes it.
bool isQuantizedWeight(const ir::Node& node, std::span<const kernels::ValueDesc> inputs) {
  if (node.kind != ir::OpKind::DequantizeLinear || inputs.empty() || !inputs[0].present) return false;
  const ir::ElemType t = inputs[0].type;
  return t == ir::ElemType::Int8 || t == ir::ElemType::Uint8 || t == ir::ElemType::Int32 || t == ir::ElemType::Int4 ||
         t == ir::ElemType::Uint4 || t == ir::ElemType::Int16 || t == ir::ElemType::Uint16;
}

// Declared shapes of the values nodes produce (graph outputs, then value_info; the first declaration wins, as in
// ir::Graph::findValueInfo), by value id so that a large graph is not searched per value.
std::vector<const ir::ValueInfo*> declarations(const ir::Graph& graph, const ir::ValueTable& table) {
  std::vector<const ir::ValueInfo*> out(table.size(), nullptr);
  for (const auto* list : {&graph.outputs, &graph.valueInfo})
    for (const auto& v : *list)
      if (const ir::ValueId id = table.find(v.name); id != ir::kNoValue && !out[id]) out[id] = &v;
  return out;
}

// A declared shape must agree with the one ctxkit's rule gives: the same rank, and every dimension the file states
// as a number equal (a symbolic dimension agrees with any size).
Status checkDeclared(const ir::ValueInfo* declared, const ir::Shape& inferred, const ir::Node& node, size_t index) {
  if (!declared || !declared->shape) return Status::ok();
  const auto& dims = *declared->shape;
  bool agrees = dims.size() == inferred.size();
  for (size_t d = 0; agrees && d < dims.size(); ++d) agrees = !dims[d].isKnown() || dims[d].value == inferred[d];
  if (agrees) return Status::ok();
  return makeError(ErrorCode::InvalidGraph, "{}: value '{}' is declared {} in the model, but its inputs give {}",
                   nodeLabel(node, index), declared->name, ir::dimsToString(declared->shape),
                   ir::shapeToString(inferred));
}

void setInitializerFacts(ValueFacts& v, const ir::Initializer& init) {
  v.type = init.tensor.type();
  v.shape = init.tensor.shape();
  v.constant = init.tensor;
  v.isInitializer = true;
}

// Dimension d of a value's lower bound: its static shape's, its `low`'s, or 0.
int64_t lowOf(const ValueFacts& v, size_t d) {
  if (v.shape) return (*v.shape)[d];
  return v.low && d < v.low->size() ? (*v.low)[d] : 0;
}

// The range of an integer value not known at compile time whose element count is (a static shape, or bounds that
// agree).
void setRange(const ir::Node& node, const BoundInputs& inputs, ValueFacts& v) {
  if (v.constant || (v.type != ir::ElemType::Int64 && v.type != ir::ElemType::Int32 && v.type != ir::ElemType::Bool))
    return;
  const ir::Shape* exact = v.shape ? &*v.shape : v.bound && v.low && *v.bound == *v.low ? &*v.bound : nullptr;
  const auto count = exact ? ir::elementCount(*exact) : std::nullopt;
  if (count) v.range = outputRange(node, inputs, *count);
  if (!v.range || !std::all_of(v.range->begin(), v.range->end(), [](const ValueRange& r) { return r.lo == r.hi; }))
    return;
  // Every element's range is one value (the rank row of a NonZero's shape, and what is computed from it alone): the
  // value is known at compile time, and what reads it folds as from any constant.
  std::vector<int64_t> values;
  for (const ValueRange& r : *v.range) values.push_back(r.lo);
  const ir::Shape shape = *exact;
  v.constant =
      v.type == ir::ElemType::Int64 ? ir::Tensor::fromVector(ir::ElemType::Int64, shape, values)
      : v.type == ir::ElemType::Int32
          ? ir::Tensor::fromVector(ir::ElemType::Int32, shape, std::vector<int32_t>(values.begin(), values.end()))
          : ir::Tensor::fromVector(ir::ElemType::Bool, shape, std::vector<uint8_t>(values.begin(), values.end()));
  v.shape = shape;
  v.bound.reset();
  v.low.reset();
  v.range.reset();
}

// An If's outputs are at most the larger of what its branches give, when both branches give a bound (a static shape is
// its own bound) at the same rank; the branches are analysed with the facts of the graph around them.
void boundIfOutputs(const ir::Node& node, std::span<const ir::ValueId> outputIds, GraphFacts& facts) {
  if (std::all_of(outputIds.begin(), outputIds.end(),
                  [&](ir::ValueId id) { return id == ir::kNoValue || facts.values[id].shape; }))
    return;
  const ir::Attribute* branches[2] = {node.attrs.find("then_branch"), node.attrs.find("else_branch")};
  std::optional<GraphFacts> branchFacts[2];
  AnalyzeOptions options;
  options.outerScope = &facts;
  for (size_t k = 0; k < 2; ++k) {
    if (!branches[k] || !branches[k]->g || branches[k]->g->outputs.size() != outputIds.size()) return;
    auto f = analyzeGraph(subgraphAlone(*branches[k]->g, facts), {}, options);
    if (!f) return;  // a branch that cannot run with these shapes: no bound
    branchFacts[k] = std::move(f).value();
  }
  for (size_t o = 0; o < outputIds.size(); ++o) {
    if (outputIds[o] == ir::kNoValue || facts.values[outputIds[o]].shape) continue;
    const ValueFacts* out[2] = {branchFacts[0]->find(branches[0]->g->outputs[o].name),
                                branchFacts[1]->find(branches[1]->g->outputs[o].name)};
    const ir::Shape* bound[2] = {};
    for (size_t k = 0; k < 2; ++k)
      if (out[k]) bound[k] = out[k]->shape ? &*out[k]->shape : out[k]->bound ? &*out[k]->bound : nullptr;
    if (!bound[0] || !bound[1] || bound[0]->size() != bound[1]->size()) continue;
    ir::Shape larger(bound[0]->size()), smaller(bound[0]->size());
    for (size_t d = 0; d < larger.size(); ++d) {
      larger[d] = std::max((*bound[0])[d], (*bound[1])[d]);
      smaller[d] = std::min(lowOf(*out[0], d), lowOf(*out[1], d));
    }
    ValueFacts& v = facts.values[outputIds[o]];
    if (v.type == ir::ElemType::Undefined) v.type = out[0]->type;
    v.bound = std::move(larger);
    v.low = std::move(smaller);
  }
}

}  // namespace

ir::Graph subgraphAlone(const ir::Graph& body, const GraphFacts& scope) {
  // The body's values by id: those it reads but neither defines nor takes as inputs come from the scope (in the order
  // its nodes first read them).
  const ir::ValueTable own(body);
  ir::Graph alone = body;
  std::vector<bool> given(scope.values.size(), false);  // scope values given to `alone`, by id in the scope
  auto give = [&](const std::string& name, bool known) {
    const ir::ValueId outer = scope.table.find(name);
    const ValueFacts* f = outer == ir::kNoValue ? nullptr : &scope[outer];
    if (outer != ir::kNoValue) {
      if (given[outer]) return;
      given[outer] = true;
    } else if (known) {
      return;
    }
    if (f && f->constant) {
      alone.initializers.push_back(ir::Initializer{name, *f->constant, std::nullopt});
      return;
    }
    ir::ValueInfo info{name, f ? f->type : ir::ElemType::Undefined, std::nullopt, ""};
    if (f && f->shape) info.shape = std::vector<ir::Dim>(f->shape->size());
    for (size_t d = 0; f && f->shape && d < f->shape->size(); ++d) (*info.shape)[d] = ir::Dim::known((*f->shape)[d]);
    alone.inputs.push_back(std::move(info));
  };
  for (ir::ValueId v = 0; v < own.size(); ++v) {
    const ir::ValueEntry& e = own[v];
    const bool readByInput =
        std::any_of(e.uses.begin(), e.uses.end(), [](const ir::ValueUse& u) { return u.slot != u.kSubgraphSlot; });
    if (e.isOuter() && readByInput) give(e.name, false);
  }
  // Outer values that only the nodes' own subgraphs read, when the scope knows them: the nested bodies see them too
  // (with their facts, through AnalyzeOptions::outerScope).
  for (const auto& n : body.nodes)
    forEachRead(n, [&](const std::string& name) {
      const ir::ValueId v = own.find(name);
      if (v == ir::kNoValue || own[v].isOuter()) give(name, true);
    });
  return alone;
}

std::optional<ir::Shape> bindShape(const ir::ValueInfo& info, const Bindings& bindings, std::string* blocker) {
  if (auto it = bindings.shapes.find(info.name); it != bindings.shapes.end()) return it->second;
  if (!info.shape) {
    *blocker = fmt::format("input '{}' has no declared shape (use --shape {}=...)", info.name, info.name);
    return std::nullopt;
  }
  ir::Shape shape;
  for (size_t i = 0; i < info.shape->size(); ++i) {
    const ir::Dim& d = (*info.shape)[i];
    if (d.isKnown()) {
      shape.push_back(d.value);
    } else if (auto b = bindings.dims.find(d.symbol); !d.symbol.empty() && b != bindings.dims.end()) {
      shape.push_back(b->second);
    } else {
      *blocker =
          d.symbol.empty()
              ? fmt::format("dimension {} of '{}' is unnamed and dynamic (use --shape {}=...)", i, info.name, info.name)
              : fmt::format("dimension '{}' of '{}' is not bound (use --dim {}=N)", d.symbol, info.name, d.symbol);
      return std::nullopt;
    }
  }
  return shape;
}

Expected<GraphFacts> analyzeGraph(const ir::Graph& graph, const Bindings& bindings, const AnalyzeOptions& options) {
  GraphFacts facts;
  CTX_ASSIGN_OR_RETURN(facts.order, ir::checkedTopologicalOrder(graph));
  facts.table = ir::ValueTable(graph);
  facts.values.assign(facts.table.size(), ValueFacts{});
  auto factsOf = [&](const std::string& name) -> ValueFacts& { return facts.values[facts.table.id(name)]; };
  for (const auto& init : graph.initializers) setInitializerFacts(factsOf(init.name), init);
  for (const auto& in : graph.inputs) {
    ValueFacts& v = factsOf(in.name);
    if (v.isInitializer) continue;  // an initializer default for an input: the compiler treats it as constant
    if (const ValueFacts* outer = options.outerScope ? options.outerScope->find(in.name) : nullptr;
        outer && (!outer->shape || outer->range)) {
      v = *outer;               // a value of the scope around a subgraph, with its bound or range
      v.blockerNode = kNoNode;  // (a node of that scope)
      continue;
    }
    v.type = in.type;
    v.shape = bindShape(in, bindings, &v.blocker);
  }
  const std::vector<const ir::ValueInfo*> declared = declarations(graph, facts.table);
  // Every value a shape rule (or folding) gives is checked against the file's declaration of it.
  auto record = [&](const ir::Node& node, size_t index, ir::ValueId id) -> Status {
    const ValueFacts& v = facts.values[id];
    return v.shape ? checkDeclared(declared[id], *v.shape, node, index) : Status::ok();
  };

  std::vector<kernels::ValueDesc> descs, boundDescs, lowDescs;  // a dynamic input's bound, or lower bound, as its shape
  std::vector<uint8_t> dynamicInputs;                           // 1 where the input's shape is not static
  std::vector<const ValueRanges*> inputRanges;
  std::vector<const ir::Tensor*> constInputs;
  for (size_t index : facts.order) {
    const ir::Node& node = graph.nodes[index];
    const std::span<const ir::ValueId> inputIds = facts.table.inputsOf(index);
    const std::span<const ir::ValueId> outputIds = facts.table.outputsOf(index);
    kernels::OpContext ctx = kernels::nodeContext(node);
    descs.clear();
    constInputs.clear();
    bool allStatic = true, allConstant = true, allBounded = true;
    std::string blocker;
    size_t blockerNode = kNoNode;
    boundDescs.clear();
    lowDescs.clear();
    dynamicInputs.clear();
    inputRanges.clear();
    for (const ir::ValueId in : inputIds) {
      kernels::ValueDesc d;
      if (in == ir::kNoValue) {
        d.present = false;
        descs.push_back(d);
        boundDescs.push_back(d);
        lowDescs.push_back(d);
        dynamicInputs.push_back(0);
        inputRanges.push_back(nullptr);
        constInputs.push_back(nullptr);
        continue;
      }
      const ValueFacts& f = facts.values[in];
      d.type = f.type;
      kernels::ValueDesc bounded = d;
      if (f.shape) d.shape = bounded.shape = *f.shape;
      else {
        allStatic = false;
        allBounded &= f.bound.has_value();
        if (f.bound) bounded.shape = *f.bound;
        if (blocker.empty()) {
          blocker = f.blocker;
          blockerNode = f.blockerNode;
        }
      }
      dynamicInputs.push_back(f.shape ? 0 : 1);
      inputRanges.push_back(f.range ? &*f.range : nullptr);
      bounded.value = f.constant ? &*f.constant : nullptr;
      boundDescs.push_back(bounded);
      kernels::ValueDesc low = bounded;
      if (!f.shape && f.bound)
        low.shape = f.low && f.low->size() == f.bound->size() ? *f.low : ir::Shape(f.bound->size());
      lowDescs.push_back(std::move(low));
      d.value = f.constant ? &*f.constant : nullptr;
      if (!f.constant) allConstant = false;
      descs.push_back(d);
      constInputs.push_back(d.value);
    }
    bool known =
        node.kind != ir::OpKind::Unknown && node.kind != ir::OpKind::EPContext && kernels::hasKernel(node.kind);
    bool hasGraphAttr = false;
    for (const auto& a : node.attrs.all())
      hasGraphAttr |= a.type == ir::AttrType::Graph || a.type == ir::AttrType::Graphs;

    std::vector<kernels::OutputDesc> outs;
    bool inferred = false;
    if (known && !hasGraphAttr && allStatic) {
      auto r = kernels::inferOutputs(ctx, descs, node.outputs.size());
      if (r) {
        outs = std::move(r).value();
        inferred = true;
      } else if (r.error().code() == ErrorCode::InvalidGraph) {
        // A compile error names op, opset, node and type (docs/ctxgen.md#errors); the kernel's message names the node
        // already.
        std::string message = r.error().message();
        const std::string kernelPrefix = fmt::format("node '{}' ({}): ", node.name, ir::opKindName(node.kind));
        if (!node.name.empty() && message.rfind(kernelPrefix, 0) == 0) message.erase(0, kernelPrefix.size());
        const std::string type = descs.empty() ? "none" : std::string(ir::elemTypeName(descs[0].type));
        return makeError(ErrorCode::InvalidGraph, "{} (opset {}, input type {}): {}", nodeLabel(node, index),
                         node.opset, type, message);
      } else {
        blocker = r.error().message();
        blockerNode = index;
        facts.ruleFailures[index] = blocker;
      }
    } else if (!known) {
      blocker = fmt::format("{} has no shape rule in ctxkit", nodeLabel(node, index));
      blockerNode = index;
    }
    if (!inferred && known && blockerNode != index && isValueDependent(node, boundDescs)) {
      // Its shape would depend on values even with static inputs: the dynamic shapes after it start here.
      blocker = fmt::format("{}: its output shape depends on values computed at run time", nodeLabel(node, index));
      blockerNode = index;
    }

    // Shape of a static value is known even though the value is not.
    if (node.kind == ir::OpKind::Shape && inferred && !descs.empty() && descs[0].present && allStatic &&
        outputIds.size() == 1 && outputIds[0] != ir::kNoValue && options.foldConstants) {
      const ir::Shape& in = descs[0].shape;
      auto rank = static_cast<int64_t>(in.size());
      auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t{0}, rank); };
      const auto decoded = ops::attrsOf(node);  // (inferred: they decoded)
      const auto& shapeAttrs = std::get<ops::ShapeAttrs>(decoded->attrs.value());
      int64_t start = clampAxis(shapeAttrs.start);
      int64_t end = clampAxis(shapeAttrs.end.value_or(rank));
      std::vector<int64_t> dims(in.begin() + start, in.begin() + std::max(start, end));
      ValueFacts& v = facts.values[outputIds[0]];
      v.type = ir::ElemType::Int64;
      v.shape = ir::Shape{static_cast<int64_t>(dims.size())};
      v.constant = ir::Tensor::fromVector(ir::ElemType::Int64, *v.shape, dims);
      CTX_RETURN_IF_ERROR(record(node, index, outputIds[0]));
      continue;
    }
    // Fold: every input known and the result small enough.
    if (inferred && options.foldConstants && allConstant && !isNondeterministic(node) &&
        !isQuantizedWeight(node, descs)) {
      uint64_t bytes = 0, inputBytes = 0;
      for (const auto& o : outs) bytes += ir::storageBytes(o.type, ir::elementCount(o.shape).value_or(0)).value_or(0);
      for (const ir::Tensor* in : constInputs) inputBytes += in ? in->byteSize() : 0;
      if (bytes <= options.maxFoldBytes && worthFolding(node.kind, inputBytes, bytes)) {
        auto values = kernels::evaluate(ctx, constInputs, node.outputs.size());
        if (!values) return values.takeError().addContext(fmt::format("folding {}", nodeLabel(node, index)));
        for (size_t o = 0; o < outputIds.size(); ++o) {
          if (outputIds[o] == ir::kNoValue) continue;
          ValueFacts& v = facts.values[outputIds[o]];
          v.type = (*values)[o].type();
          v.shape = (*values)[o].shape();
          v.constant = std::move((*values)[o]);
          CTX_RETURN_IF_ERROR(record(node, index, outputIds[o]));
        }
        continue;
      }
    }
    for (size_t o = 0; o < outputIds.size(); ++o) {
      if (outputIds[o] == ir::kNoValue) continue;
      ValueFacts& v = facts.values[outputIds[o]];
      if (inferred) {
        v.type = outs[o].type;
        v.shape = outs[o].shape;
        CTX_RETURN_IF_ERROR(record(node, index, outputIds[o]));
        continue;
      }
      // No shape rule in ctxkit (an op it does not know, or If/Loop/Scan, whose outputs come from a subgraph): trust
      // the file's declaration when it is static once the bindings apply, so that what follows still compiles.
      // (With a rule that could not run, the declaration is not evidence: the inputs are dynamic, or the shape
      // depends on values.)
      if (const ir::ValueInfo* info = known && !hasGraphAttr ? nullptr : declared[outputIds[o]]) {
        v.type = info->type;
        std::string unbound;
        if (info->shape) {
          if (auto s = bindShape(*info, bindings, &unbound)) {
            v.shape = *s;
            continue;
          }
        }
      }
      v.blocker = blocker.empty() ? fmt::format("the shape of '{}' is unknown", node.outputs[o]) : blocker;
      v.blockerNode = blocker.empty() ? index : blockerNode;
    }
    const BoundInputs boundInputs{boundDescs, lowDescs, dynamicInputs, inputRanges};
    if (!inferred && known && !hasGraphAttr && allBounded) {
      std::vector<std::optional<BoundedOutput>> bounds = outputBounds(node, ctx, boundInputs, outputIds.size());
      for (size_t o = 0; o < outputIds.size(); ++o) {
        if (outputIds[o] == ir::kNoValue || !bounds[o]) continue;
        ValueFacts& v = facts.values[outputIds[o]];
        if (v.shape) continue;
        if (v.type == ir::ElemType::Undefined) v.type = bounds[o]->type;
        v.bound = std::move(bounds[o]->bound);
        v.low = std::move(bounds[o]->low);
      }
    }
    if (node.kind == ir::OpKind::If && hasGraphAttr) boundIfOutputs(node, outputIds, facts);
    if (known && !hasGraphAttr && outputIds.size() == 1 && outputIds[0] != ir::kNoValue)
      setRange(node, boundInputs, facts.values[outputIds[0]]);
  }
  return facts;
}

void renumberValues(GraphFacts& facts, const ir::Graph& graph) {
  ir::ValueTable table(graph);
  std::vector<ValueFacts> values(table.size());
  for (ir::ValueId v = 0; v < table.size(); ++v)
    if (const ir::ValueId old = facts.table.find(table.name(v)); old != ir::kNoValue)
      values[v] = std::move(facts.values[old]);
  for (const auto& init : graph.initializers)
    if (ValueFacts& v = values[table.id(init.name)]; !v.isInitializer) setInitializerFacts(v, init);
  facts.table = std::move(table);
  facts.values = std::move(values);
}

}  // namespace ctxkit::analysis
