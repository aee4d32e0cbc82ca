// Bit and logic ops on integers and bools: Xor, BitwiseAnd/Or/Xor/Not, BitShift.
#include "kernels/broadcast_apply.h"

namespace ctxkit::kernels::detail {

InferResult inferBitwise(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  const bool unary = ctx.kind == ir::OpKind::BitwiseNot;
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, unary ? 1 : 2, unary ? 1 : 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  TypeSet allowed = kIntTypes;
  if (ctx.kind == ir::OpKind::Xor) allowed = typeBit(ElemType::Bool);
  if (ctx.kind == ir::OpKind::BitShift) allowed = kUnsignedIntTypes;
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, allowed));
  if (unary) return single(inputs[0].type, inputs[0].shape);
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  return broadcastPair(ctx, inputs, inputs[0].type);
}

Status runBitwise(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  const ir::OpKind kind = ctx.kind;
  if (kind == ir::OpKind::Xor) {
    binaryApply<bool, bool>(ctx, *inputs[0], *inputs[1], y, [](bool p, bool q) { return p != q; });
    return Status::ok();
  }
  return visitType<kIntTypes>(y.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    switch (kind) {
      case ir::OpKind::BitwiseNot: {
        const T* x = inputs[0]->dataAs<T>();
        T* out = y.mutableDataAs<T>();
        for (uint64_t i = 0; i < y.elementCount(); ++i) out[i] = static_cast<T>(~x[i]);
        break;
      }
      case ir::OpKind::BitwiseAnd:
        binaryApply<T, T>(ctx, *inputs[0], *inputs[1], y, [](T p, T q) { return static_cast<T>(p & q); });
        break;
      case ir::OpKind::BitwiseOr:
        binaryApply<T, T>(ctx, *inputs[0], *inputs[1], y, [](T p, T q) { return static_cast<T>(p | q); });
        break;
      case ir::OpKind::BitwiseXor:
        binaryApply<T, T>(ctx, *inputs[0], *inputs[1], y, [](T p, T q) { return static_cast<T>(p ^ q); });
        break;
      default: {  // BitShift: shifts of the full width or more give 0
        constexpr T kBits = static_cast<T>(sizeof(T) * 8);
        if (attrsOf<ops::BitShiftAttrs>(ctx).left)
          binaryApply<T, T>(ctx, *inputs[0], *inputs[1], y,
                            [](T p, T q) { return q >= kBits ? T(0) : static_cast<T>(p << q); });
        else
          binaryApply<T, T>(ctx, *inputs[0], *inputs[1], y,
                            [](T p, T q) { return q >= kBits ? T(0) : static_cast<T>(p >> q); });
      }
    }
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
