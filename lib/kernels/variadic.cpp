// Variadic broadcasting elementwise ops: Max, Min, Sum, Mean.
#include "kernels/broadcast_apply.h"

#include <limits>

namespace ctxkit::kernels::detail {

InferResult inferMinMax(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  if (inputs.empty()) return invalid(ctx, "has no inputs but expected at least 1");
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, inputs.size()));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kNumericTypes));
  ir::Shape shape = inputs[0].shape;
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (!inputs[i].present) return invalid(ctx, "input {} is missing", i);
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
    auto s = broadcastShapes(shape, inputs[i].shape);
    if (!s)
      return invalid(ctx, "input {} of shape {} does not broadcast to {}", i, shapeStr(inputs[i].shape),
                     shapeStr(shape));
    shape = std::move(*s);
  }
  return single(inputs[0].type, std::move(shape));
}

Status runMinMax(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  const ir::OpKind kind = ctx.kind;
  bool isMax = kind == ir::OpKind::Max;
  return visitType<kNativeNumeric>(y.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    T* out = y.mutableDataAs<T>();
    // out = broadcast(input 0), then folded with each further input in place.
    {
      std::array<std::span<const int64_t>, 1> shapes{inputs[0]->shape()};
      const T* p = inputs[0]->dataAs<T>();
      walkBroadcast(ctx, y.shape(), shapes, [&](const auto& off, int64_t n, const auto& st) {
        for (int64_t i = 0; i < n; ++i) out[off[0] + i] = p[off[1] + i * st[1]];
      });
    }
    for (size_t k = 1; k < inputs.size(); ++k) {
      std::array<std::span<const int64_t>, 1> shapes{inputs[k]->shape()};
      const T* p = inputs[k]->dataAs<T>();
      walkBroadcast(ctx, y.shape(), shapes, [&](const auto& off, int64_t n, const auto& st) {
        for (int64_t i = 0; i < n; ++i) {
          T& o = out[off[0] + i];
          T v = p[off[1] + i * st[1]];
          if (kind == ir::OpKind::Sum || kind == ir::OpKind::Mean) {
            o = static_cast<T>(o + v);
            continue;
          }
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(v) || std::isnan(o)) {
              o = std::numeric_limits<T>::quiet_NaN();
              continue;
            }
          }
          o = isMax ? (v > o ? v : o) : (v < o ? v : o);
        }
      });
    }
    if (kind == ir::OpKind::Mean) {
      const auto count = static_cast<T>(inputs.size());
      for (uint64_t i = 0; i < y.elementCount(); ++i) out[i] = static_cast<T>(out[i] / count);
    }
    return Status::ok();
  });
}
}  // namespace ctxkit::kernels::detail
