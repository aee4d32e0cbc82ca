// Broadcasting binary ops on numbers beyond the arithmetic of elementwise.cpp: Mod (fmod = 0: the sign of the
// divisor, integers only; fmod = 1: the sign of the dividend, as C's fmod) and PRelu, the activation whose slope is a
// tensor broadcast to the input.
#include "kernels/broadcast_apply.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

// The remainder with the divisor's sign (Python's %); x % 0 is 0.
template <typename T> T floorMod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
    if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
    return r;
  } else {
    if (b == T(0)) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);  // avoids overflow of lowest() % -1
      T r = static_cast<T>(a % b);
      if (r != T(0) && ((r < T(0)) != (b < T(0)))) r = static_cast<T>(r + b);
      return r;
    } else {
      return static_cast<T>(a % b);
    }
  }
}

// The remainder with the dividend's sign (C's fmod and %); x % 0 is 0 for integers.
template <typename T> T truncMod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    if (b == T(0)) return T(0);
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1)) return T(0);
    return static_cast<T>(a % b);
  }
}

}  // namespace

InferResult inferMod(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kNumericTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  if (!attrsOf<ops::ModAttrs>(ctx).fmod && inSet(kFloatTypes, inputs[0].type))
    return invalid(ctx, "fmod = 0 is not defined for floating-point inputs ({})", ir::elemTypeName(inputs[0].type));
  return broadcastPair(ctx, inputs, inputs[0].type);
}

Status runMod(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const bool fmod = attrsOf<ops::ModAttrs>(ctx).fmod;
  return visitType<kNativeNumeric>(inputs[0]->type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    if (fmod) binaryApply<T, T>(ctx, *inputs[0], *inputs[1], *outputs[0], [](T a, T b) { return truncMod(a, b); });
    else binaryApply<T, T>(ctx, *inputs[0], *inputs[1], *outputs[0], [](T a, T b) { return floorMod(a, b); });
    return Status::ok();
  });
}

// ---- PRelu ---------------------------------------------------------------------------------------------

InferResult inferPRelu(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes | kSignedIntTypes | kUnsignedIntTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  if (!broadcastsTo(inputs[1].shape, inputs[0].shape))
    return invalid(ctx, "slope of shape {} does not broadcast to the input's shape {}", shapeStr(inputs[1].shape),
                   shapeStr(inputs[0].shape));
  return single(inputs[0].type, inputs[0].shape);
}

Status runPRelu(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  return visitType<kNativeNumeric>(inputs[0]->type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    binaryApply<T, T>(ctx, *inputs[0], *inputs[1], *outputs[0],
                      [](T x, T slope) { return x < T(0) ? static_cast<T>(x * slope) : x; });
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
