// Clip: elementwise bounds, from attributes (opset < 11) or scalar inputs.
#include "kernels/broadcast_apply.h"

#include <limits>

namespace ctxkit::kernels::detail {

InferResult inferClip(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, ctx.opset < 11 ? 1 : 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, ctx.opset < 11 ? kFloatTypes : kNumericTypes));
  for (size_t i = 1; i < inputs.size(); ++i) {
    const ValueDesc* bound = optionalInput(inputs, i);
    if (!bound) continue;
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
    if (dimProduct(bound->shape) != 1 || bound->shape.size() > 1)
      return invalid(ctx, "input {} ({}) has shape {} but expected a scalar", i, i == 1 ? "min" : "max",
                     shapeStr(bound->shape));
  }
  return single(inputs[0].type, inputs[0].shape);
}

Status runClip(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  return visitType<kNativeNumeric>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if constexpr (std::is_floating_point_v<T>) {
      lo = -std::numeric_limits<T>::infinity();
      hi = std::numeric_limits<T>::infinity();
    }
    if (ctx.opset < 11) {
      lo = static_cast<T>(attrsOf<ops::ClipAttrs>(ctx).min);
      hi = static_cast<T>(attrsOf<ops::ClipAttrs>(ctx).max);
    } else {
      if (inputs.size() > 1 && inputs[1]) lo = *inputs[1]->dataAs<T>();
      if (inputs.size() > 2 && inputs[2]) hi = *inputs[2]->dataAs<T>();
    }
    const T* in = x.dataAs<T>();
    T* out = y.mutableDataAs<T>();
    // min > max gives max everywhere (the spec applies min first, then max).
    parallelFor(ctx, static_cast<size_t>(x.elementCount()), kBroadcastMinChunk, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        T v = in[i];
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        out[i] = v;
      }
    });
    return Status::ok();
  });
}
}  // namespace ctxkit::kernels::detail
