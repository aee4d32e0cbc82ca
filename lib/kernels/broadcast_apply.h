// Broadcasting walks shared by the elementwise kernel files: visit an output with its broadcast operands in
// contiguous runs, or apply a binary function to two broadcast tensors.
#pragma once

#include "kernels/ops.h"

namespace ctxkit::kernels::detail {

inline constexpr size_t kBroadcastMinChunk = 16384;

// Calls f(off, n, walk) over the broadcast of `ins` into `outShape`; off[0] is the output offset.
template <typename F>
void walkBroadcast(const OpContext& ctx, std::span<const int64_t> outShape,
                   std::span<const std::span<const int64_t>> ins, F f) {
  BroadcastWalk walk = BroadcastWalk::make(outShape, ins);
  parallelFor(ctx, static_cast<size_t>(walk.total), kBroadcastMinChunk, [&](size_t begin, size_t end) {
    walk.visit(static_cast<int64_t>(begin), static_cast<int64_t>(end),
               [&](const auto& off, int64_t n) { f(off, n, walk.innerStride); });
  });
}

// out[i] = op(a, b) for broadcast a and b; R, T are the output and input element types.
template <typename R, typename T, typename Op>
void binaryApply(const OpContext& ctx, const ir::Tensor& a, const ir::Tensor& b, ir::Tensor& y, Op op) {
  std::array<std::span<const int64_t>, 2> shapes{a.shape(), b.shape()};
  const T* pa = a.dataAs<T>();
  const T* pb = b.dataAs<T>();
  R* out = y.mutableDataAs<R>();
  walkBroadcast(ctx, y.shape(), shapes, [&](const auto& off, int64_t n, const auto& st) {
    const T* x = pa + off[1];
    const T* z = pb + off[2];
    R* o = out + off[0];
    for (int64_t i = 0; i < n; ++i) o[i] = op(x[i * st[1]], z[i * st[2]]);
  });
}

inline InferResult broadcastPair(const OpContext& ctx, InDescs inputs, ElemType outType) {
  auto shape = broadcastShapes(inputs[0].shape, inputs[1].shape);
  if (!shape)
    return invalid(ctx, "input shapes {} and {} do not broadcast", shapeStr(inputs[0].shape),
                   shapeStr(inputs[1].shape));
  return single(outType, std::move(*shape));
}

}  // namespace ctxkit::kernels::detail
