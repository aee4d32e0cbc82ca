// fuse-epilogue: Conv/Gemm/MatMul (float32) followed only by an activation run it as their epilogue, x * Sigmoid(x)
// after them as a Swish epilogue; then a following Mul, Add, Sub or Div by a one-value constant joins the epilogue as
// its scale and shift (y = act(x) * scale + shift). Either may come after a view of the result (the Reshape back to
// 3-D after a Gemm that fuse-matmul-add made of a MatMul and Add): the view then shows the fused result.
#include "codegen/passes/pass_helpers.h"
#include "codegen/passes/passes.h"
#include "ir/op_info.h"

#include <algorithm>

namespace ctxkit::codegen {

namespace {

// x * Sigmoid(x) after op i (Swish/SiLU as PyTorch exports it: x read by exactly the Sigmoid and the Mul, the
// Sigmoid's result by the Mul alone) becomes op i's Swish epilogue. The product rounds as the two ops did.
bool fuseSwish(LoweringState& state, size_t i) {
  auto& ops = state.ops;
  LOp& producer = ops[i];
  const ops::Epilogue e = producer.epilogue.value_or(ops::Epilogue{});
  if (producer.outputs.size() != 1 || e.activation != ops::Activation::None || e.scale != 1.0f || e.shift != 0.0f)
    return false;
  const ValueId x = producer.outputs[0];
  if (state.leaves(x) || state.readers(x) != 2) return false;
  std::optional<size_t> sigmoid, mul;
  for (size_t j : state.readersOf(x)) {
    if (j <= i) continue;
    const LOp& op = ops[j];
    if (op.kind == ir::OpKind::Sigmoid && op.inputs.size() == 1 && op.inputs[0] == x && op.outputs.size() == 1)
      sigmoid = j;
    else if (op.kind == ir::OpKind::Mul && op.inputs.size() == 2 && op.outputs.size() == 1 &&
             (op.inputs[0] == x || op.inputs[1] == x))
      mul = j;
  }
  if (!sigmoid || !mul) return false;
  const ValueId s = ops[*sigmoid].outputs[0];
  const LOp& m = ops[*mul];
  if (m.inputs[0] != s && m.inputs[1] != s) return false;
  if (state.leaves(s) || state.readers(s) != 1) return false;
  producer.epilogue = ops::Epilogue{ops::Activation::Swish, 0, 0};
  state.setOutputs(i, m.outputs);
  state.eraseOp(std::max(*sigmoid, *mul));
  state.eraseOp(std::min(*sigmoid, *mul));
  return true;
}

}  // namespace

Expected<ir::PassChange> FuseEpilogue::run(LoweringState& state) const {
  auto& ops = state.ops;
  size_t fused = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    LOp& producer = ops[i];
    bool fusable =
        producer.kind == ir::OpKind::Conv || producer.kind == ir::OpKind::Gemm || producer.kind == ir::OpKind::MatMul;
    // Of float32 results only (of float16 values too when widen-float16 made them float32).
    const ir::ElemType type =
        fusable && producer.outputs.size() == 1 ? state.typeOf(producer.outputs[0]) : ir::ElemType::Undefined;
    const bool floatOrUnknown = type == ir::ElemType::Float || type == ir::ElemType::Undefined;
    if (fusable && floatOrUnknown && fuseSwish(state, i)) {
      fused += 2;
      --i;
      continue;
    }
    auto j = fusable ? state.soleReader(i) : std::nullopt;
    if (!j || !floatOrUnknown) continue;
    // Through a view (the Reshape back to 3-D that fuse-matmul-add puts after a Gemm): an element-wise op after it
    // is the same op before it when it keeps the view's shape.
    std::optional<size_t> view;
    if (ir::isView(ops[*j].kind) && ops[*j].outputs.size() == 1) {
      auto after = state.soleReader(*j);
      const auto viewShape = state.shapeOf(ops[*j].outputs[0]);
      if (!after || !viewShape || ops[*after].outputs.size() != 1 || state.shapeOf(ops[*after].outputs[0]) != viewShape)
        continue;
      view = j;
      j = after;
    }
    const LOp& next = ops[*j];
    ops::Epilogue e = producer.epilogue.value_or(ops::Epilogue{});
    const bool plainSoFar = e.scale == 1.0f && e.shift == 0.0f;
    if (auto act = activationOf(state, next); act && plainSoFar && e.activation == ops::Activation::None) {
      e.activation = act->activation;
      e.alpha = act->alpha;
      e.beta = act->beta;
    } else if (next.inputs.size() == 2 && next.outputs.size() == 1 &&
               (next.kind == ir::OpKind::Mul || next.kind == ir::OpKind::Add || next.kind == ir::OpKind::Sub ||
                next.kind == ir::OpKind::Div)) {
      const bool first = next.inputs[0] == (view ? ops[*view].outputs[0] : producer.outputs[0]);
      auto v = state.scalarOf(next.inputs[first ? 1 : 0]);
      if (!v || (!first && (next.kind == ir::OpKind::Sub || next.kind == ir::OpKind::Div))) continue;
      if (next.kind == ir::OpKind::Mul) e.scale *= *v, e.shift *= *v;
      if (next.kind == ir::OpKind::Div) e.scale /= *v, e.shift /= *v;
      if (next.kind == ir::OpKind::Add) e.shift += *v;
      if (next.kind == ir::OpKind::Sub) e.shift -= *v;
    } else {
      continue;
    }
    producer.epilogue = e;
    state.setOutputs(view ? *view : i, next.outputs);
    state.eraseOp(*j);
    ++fused;
    --i;  // the same op may take the next one
  }
  return ir::PassChange{}.count("ops_fused", fused);
}

}  // namespace ctxkit::codegen
