// Comparisons (Equal, Greater, Less, GreaterOrEqual, LessOrEqual) and logic (Not, And, Or): broadcasting
// elementwise ops with a bool result.
#include "kernels/broadcast_apply.h"

namespace ctxkit::kernels::detail {

InferResult inferCompare(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  TypeSet allowed = kNumericTypes;
  if (ctx.kind == ir::OpKind::Equal) allowed |= typeBit(ElemType::Bool);
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, allowed));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  return broadcastPair(ctx, inputs, ElemType::Bool);
}

Status runCompare(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& a = *inputs[0];
  const ir::Tensor& b = *inputs[1];
  ir::Tensor& y = *outputs[0];
  return visitType<kNativeNumeric | typeBit(ElemType::Bool)>(a.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    switch (ctx.kind) {
      case ir::OpKind::Equal: binaryApply<bool, T>(ctx, a, b, y, [](T p, T q) { return p == q; }); break;
      case ir::OpKind::Greater: binaryApply<bool, T>(ctx, a, b, y, [](T p, T q) { return p > q; }); break;
      case ir::OpKind::Less: binaryApply<bool, T>(ctx, a, b, y, [](T p, T q) { return p < q; }); break;
      case ir::OpKind::GreaterOrEqual: binaryApply<bool, T>(ctx, a, b, y, [](T p, T q) { return p >= q; }); break;
      default: binaryApply<bool, T>(ctx, a, b, y, [](T p, T q) { return p <= q; }); break;
    }
    return Status::ok();
  });
}

InferResult inferLogic(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  bool unary = ctx.kind == ir::OpKind::Not;
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, unary ? 1 : 2, unary ? 1 : 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Bool)));
  if (unary) return single(ElemType::Bool, inputs[0].shape);
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  return broadcastPair(ctx, inputs, ElemType::Bool);
}

Status runLogic(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  if (ctx.kind == ir::OpKind::Not) {
    const bool* x = inputs[0]->dataAs<bool>();
    bool* out = y.mutableDataAs<bool>();
    for (uint64_t i = 0; i < y.elementCount(); ++i) out[i] = !x[i];
  } else if (ctx.kind == ir::OpKind::And) {
    binaryApply<bool, bool>(ctx, *inputs[0], *inputs[1], y, [](bool p, bool q) { return p && q; });
  } else {
    binaryApply<bool, bool>(ctx, *inputs[0], *inputs[1], y, [](bool p, bool q) { return p || q; });
  }
  return Status::ok();
}
}  // namespace ctxkit::kernels::detail
