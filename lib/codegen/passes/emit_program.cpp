// emit-program: the partition's ops become a program: typed ops with their epilogues, weights interned (in the layout
// choose-layouts gave them; float16 weights read as float32 as float16-widened), boundary values as inputs and outputs,
// reshape-like ops as views of their input.
#include "codegen/passes/passes.h"
#include "ir/op_info.h"
#include "kernels/kernels.h"

#include <algorithm>
#include <set>

namespace ctxkit::codegen {

namespace {

using program::TensorDesc;
using program::TensorKind;

int32_t addTensor(LoweringState& state, TensorDesc desc) {
  state.result.program.tensors.push_back(std::move(desc));
  return static_cast<int32_t>(state.result.program.tensors.size() - 1);
}

// A value's static shape (`mask` 0), or else its bound with `mask` set for each dimension where the lower bound
// differs (at most 8 dimensions: a program's mask is a byte).
Expected<ir::Shape> shapeOrBound(const ValueRecord& r, uint8_t& mask) {
  mask = 0;
  if (r.shape) return *r.shape;
  if (!r.bound || !r.low || r.bound->size() > 8 || r.low->size() != r.bound->size())
    return makeError(ErrorCode::Internal, "value '{}' has neither a static shape nor a bound of rank 8 or less",
                     r.name);
  for (size_t d = 0; d < r.bound->size(); ++d)
    if ((*r.low)[d] != (*r.bound)[d]) mask = static_cast<uint8_t>(mask | (1u << d));
  return *r.bound;
}

Expected<int32_t> tensorFor(LoweringState& state, ValueId v) {
  ValueRecord& r = state.record(v);
  const std::string& name = r.name;
  if (r.tensor >= 0) return r.tensor;
  if (r.float16Storage) {
    // Read as float32, stored as the float16 tensor it widens exactly (widened when loaded).
    const ir::Tensor& h = *r.float16Storage;
    const cpu::WeightLayout layout{cpu::WeightLayoutKind::Float16Widened, 0, 0};
    CTX_ASSIGN_OR_RETURN(uint32_t index, state.intern(h, {}).addContext(fmt::format("weight '{}'", name)));
    const uint64_t size = h.elementCount() * ir::elemSize(ir::ElemType::Float);
    int32_t t = addTensor(state, TensorDesc{TensorKind::Weight, ir::ElemType::Float, program::toDims(h.shape()), index,
                                            0, size, program::Name(name), layout});
    r.tensor = t;
    return t;
  }
  if (const ir::Tensor* c = state.constantOf(v)) {
    cpu::WeightLayout layout;
    uint64_t size = c->byteSize();  // of the form the kernels read
    if (r.layout) {
      layout = *r.layout;
      auto elements = cpu::layoutElements(layout, c->shape());
      if (!elements)
        return makeError(ErrorCode::Internal, "weight '{}': layout {} does not apply", name, cpu::layoutName(layout));
      size = *elements * ir::elemSize(c->type());
    }
    // Stored packed (by the weight table, a few panels at a time: no packed copy here), or plain and packed at load.
    const cpu::WeightLayout stored = state.options.plainWeights ? cpu::WeightLayout{} : layout;
    CTX_ASSIGN_OR_RETURN(uint32_t index, state.intern(*c, stored).addContext(fmt::format("weight '{}'", name)));
    int32_t t = addTensor(state, TensorDesc{TensorKind::Weight, c->type(), program::toDims(c->shape()), index, 0, size,
                                            program::Name(name), layout});
    r.tensor = t;
    return t;
  }
  // A boundary value: as analysis knows it (the lowering retypes and reshapes only values it computes). A bounded one
  // (a value-dependent shape made outside the partition: by a fallback node, another partition) is an input planned at
  // its bound, each run handing it in at its extent (docs/format/program.md#bounded-tensors).
  uint8_t mask = 0;
  CTX_ASSIGN_OR_RETURN(const ir::Shape shape, shapeOrBound(r, mask));
  auto bytes = ir::storageBytes(r.type, ir::elementCount(shape).value_or(0));
  if (!bytes)
    return makeError(ErrorCode::Unsupported, "value '{}' of type {} cannot be compiled", name,
                     ir::elemTypeName(r.type));
  auto position = static_cast<uint32_t>(state.result.inputs.size());
  int32_t t = addTensor(
      state,
      TensorDesc{
          TensorKind::Input, r.type, program::toDims(shape), position, 0, *bytes, program::Name(name), {}, mask});
  state.result.program.inputs.push_back(t);
  state.result.inputs.push_back(name);
  r.tensor = t;
  return t;
}

// An output of an op touching a bounded value, as the analysis knows it: a static shape, or the bound with `mask`
// set for each dimension where the lower bound differs (shapeOrBound).
Expected<kernels::OutputDesc> boundedOutput(const LoweringState& state, ValueId v, uint8_t& mask) {
  mask = 0;
  if (v == kNoValue) return kernels::OutputDesc{};  // (an absent output in the middle: no tensor is made for it)
  const ValueRecord& r = state.record(v);
  if (r.shape) return kernels::OutputDesc{state.typeOf(v), *r.shape};
  CTX_ASSIGN_OR_RETURN(ir::Shape bound, shapeOrBound(r, mask));
  return kernels::OutputDesc{r.type, std::move(bound)};
}

Status emit(LoweringState& state, const LOp& op) {
  program::Indices inputs;
  std::vector<kernels::ValueDesc> descs;
  // A view needs only its data input; shape/axes inputs were used up by static shape inference.
  // An op computed at load (fold-constants' loadTime) writes load-time tensors, never views.
  const bool atLoad = std::any_of(op.outputs.begin(), op.outputs.end(), [&](ValueId o) { return state.isLoadTime(o); });
  // An op reading or writing a bounded value runs at the extents each run computes: never a view (a view's base is
  // exact, docs/format/program.md#bounded-tensors), its outputs as the analysis bounds them (the shape rule of a root
  // cannot run at compile time).
  const bool bounded = state.touchesBounded(op);
  bool asView = ir::isView(op.kind) && op.outputs.size() == 1 && !state.leaves(op.outputs[0]) && !op.inputs.empty() &&
                op.inputs[0] != kNoValue && !state.constantOf(op.inputs[0]) && !atLoad && !bounded;
  for (ValueId in : op.inputs) {
    if (asView && !inputs.empty()) break;
    if (in == kNoValue) {
      inputs.push_back(-1);
      kernels::ValueDesc d;
      d.present = false;
      descs.push_back(d);
      continue;
    }
    CTX_ASSIGN_OR_RETURN(int32_t t, tensorFor(state, in));
    inputs.push_back(t);
    const TensorDesc& td = state.result.program.tensors[t];
    descs.push_back(kernels::ValueDesc{td.type, program::toShape(td.shape), state.constantOf(in), true});
  }

  // Reshape-like ops alias their input's bytes unless the result must leave the partition.
  if (asView) {
    auto shape = state.shapeOf(op.outputs[0]);
    const std::string& viewName = state.nameOf(op.outputs[0]);
    if (!shape) return makeError(ErrorCode::Internal, "view '{}' has no static shape", viewName);
    const TensorDesc& base = state.result.program.tensors[inputs[0]];
    uint32_t baseIndex = base.kind == TensorKind::View ? base.index : static_cast<uint32_t>(inputs[0]);
    state.record(op.outputs[0]).tensor = addTensor(state, TensorDesc{TensorKind::View,
                                                                     base.type,
                                                                     program::toDims(*shape),
                                                                     baseIndex,
                                                                     0,
                                                                     base.size,
                                                                     program::Name(viewName),
                                                                     {}});
    return Status::ok();
  }

  // Reshape-like ops whose result leaves the partition run as real ops: the kernel copies into the output.
  ir::OpKind kind = op.kind;
  kernels::OpContext ctx{kind, op.opset, op.onnx, op.name, nullptr, &op.typed};
  size_t outputCount = op.outputs.size();
  while (outputCount > 0 && op.outputs[outputCount - 1] == kNoValue) --outputCount;
  std::vector<kernels::OutputDesc> outs;
  std::vector<uint8_t> masks(outputCount, 0);
  if (bounded) {
    for (size_t o = 0; o < outputCount; ++o) {
      CTX_ASSIGN_OR_RETURN(outs.emplace_back(), boundedOutput(state, op.outputs[o], masks[o]));
    }
  } else {
    CTX_ASSIGN_OR_RETURN(outs, kernels::inferOutputs(ctx, descs, outputCount));
  }
  program::Indices outputs;
  for (size_t o = 0; o < outputCount; ++o) {
    const ValueId v = op.outputs[o];
    const std::string& name = state.nameOf(v);
    auto bytes = ir::storageBytes(outs[o].type, ir::elementCount(outs[o].shape).value_or(0));
    if (!bytes)
      return makeError(ErrorCode::Unsupported, "output '{}' of type {} cannot be compiled", name,
                       ir::elemTypeName(outs[o].type));
    int32_t t;
    if (v != kNoValue && state.leaves(v)) {
      auto position = static_cast<uint32_t>(state.result.outputs.size());
      t = addTensor(state, TensorDesc{TensorKind::Output,
                                      outs[o].type,
                                      program::toDims(outs[o].shape),
                                      position,
                                      0,
                                      *bytes,
                                      program::Name(name),
                                      {},
                                      masks[o]});
      state.result.program.outputs.push_back(t);
      state.result.outputs.push_back(name);
    } else if (atLoad) {
      // Held for every run, in the layout choose-layouts gave it (packed at load, once computed).
      cpu::WeightLayout layout;
      uint64_t size = *bytes;
      if (const auto& chosen = state.record(v).layout) {
        layout = *chosen;
        auto elements = cpu::layoutElements(layout, outs[o].shape);
        if (!elements)
          return makeError(ErrorCode::Internal, "value '{}': layout {} does not apply", name, cpu::layoutName(layout));
        size = *elements * ir::elemSize(outs[o].type);
      }
      t = addTensor(state, TensorDesc{TensorKind::LoadTime, outs[o].type, program::toDims(outs[o].shape), 0, 0, size,
                                      program::Name(name), layout});
    } else {
      t = addTensor(state, TensorDesc{TensorKind::Arena,
                                      outs[o].type,
                                      program::toDims(outs[o].shape),
                                      0,
                                      0,
                                      *bytes,
                                      program::Name(name),
                                      {},
                                      masks[o]});
    }
    if (v != kNoValue) state.record(v).tensor = t;
    outputs.push_back(t);
  }
  // A program keeps decoded attributes only, never ONNX names (kinds without typed attributes keep none).
  ops::OpAttrs typed = op.typed;
  if (op.epilogue)
    std::visit(
        [&](auto& a) {
          if constexpr (requires { a.epilogue; }) a.epilogue = *op.epilogue;
        },
        typed);
  state.result.program.ops.push_back(
      program::Op{kind, op.opset, program::Name(op.name), std::move(inputs), std::move(outputs), std::move(typed)});
  // choose-kernels' choices are written by a tuned compile only: an untuned program keeps the bytes it always had,
  // and its runtime makes the same (heuristic) choice.
  if (state.options.tuner) state.result.program.ops.back().kernel = op.kernel;
  return Status::ok();
}

// A weightless context's constants computed by exact ops (LoweringState::exactRecipeValues) that the program still
// reads as the analysis folded them (no pass rescaled, widened or replaced them): the ops computing them are emitted
// first, at load, so the context binary stores their small inputs instead. Returns how many ops.
Expected<size_t> emitExactRecipes(LoweringState& state) {
  std::vector<char> read(state.valueCount(), 0);
  for (const LOp& op : state.ops)
    for (ValueId in : op.inputs)
      if (in != kNoValue) read[in] = 1;
  std::set<ValueId> needed;
  for (ValueId v : state.exactRecipeValues) {
    const ValueRecord& r = state.record(v);
    if (read[v] && r.sourceConstant && !r.made && !r.float16Storage && !r.loadTime && r.tensor < 0) needed.insert(v);
  }
  if (needed.empty()) return size_t{0};
  // The ops computing them, walking back from the last.
  std::vector<char> runs(state.exactRecipeOps.size(), 0);
  for (size_t k = state.exactRecipeOps.size(); k-- > 0;) {
    const LOp& op = state.exactRecipeOps[k];
    if (std::none_of(op.outputs.begin(), op.outputs.end(), [&](ValueId o) { return needed.count(o) > 0; })) continue;
    runs[k] = 1;
    needed.insert(op.inputs.begin(), op.inputs.end());
  }
  size_t emitted = 0;
  for (size_t k = 0; k < state.exactRecipeOps.size(); ++k) {
    if (!runs[k]) continue;
    const LOp& op = state.exactRecipeOps[k];
    for (ValueId o : op.outputs)
      if (o != kNoValue) state.record(o).loadTime = true;  // (still the analysis' constant for the passes' readers)
    CTX_RETURN_IF_ERROR(emit(state, op).addContext(fmt::format("lowering node '{}' (at load)", op.name)));
    ++emitted;
  }
  return emitted;
}

}  // namespace

Expected<ir::PassChange> EmitProgram::run(LoweringState& state) const {
  CTX_ASSIGN_OR_RETURN(const size_t exactOps, emitExactRecipes(state));
  for (const LOp& op : state.ops)
    CTX_RETURN_IF_ERROR(emit(state, op).addContext(fmt::format("lowering node '{}'", op.name)));
  state.emitted = true;
  ir::PassChange change;
  change.changed = true;  // the program is made
  return change.count("program_ops", state.result.program.ops.size())
      .count("exact_recipe_ops", exactOps)
      .count("tensors", state.result.program.tensors.size());
}

}  // namespace ctxkit::codegen
