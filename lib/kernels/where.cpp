// Where: broadcasting selection between two inputs by a bool condition.
#include "kernels/broadcast_apply.h"

namespace ctxkit::kernels::detail {

InferResult inferWhere(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Bool)));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, kFixedSizeTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 1, 2));
  auto ab = broadcastShapes(inputs[1].shape, inputs[2].shape);
  std::optional<ir::Shape> shape;
  if (ab) shape = broadcastShapes(inputs[0].shape, *ab);
  if (!shape)
    return invalid(ctx, "input shapes {}, {} and {} do not broadcast", shapeStr(inputs[0].shape),
                   shapeStr(inputs[1].shape), shapeStr(inputs[2].shape));
  return single(inputs[1].type, std::move(*shape));
}

Status runWhere(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& c = *inputs[0];
  const ir::Tensor& a = *inputs[1];
  const ir::Tensor& b = *inputs[2];
  ir::Tensor& y = *outputs[0];
  return visitElemSize(ctx, ir::elemSize(y.type()), [&](auto tag) -> Status {
    using T = decltype(tag);
    std::array<std::span<const int64_t>, 3> shapes{c.shape(), a.shape(), b.shape()};
    const bool* pc = c.dataAs<bool>();
    const T* pa = a.dataAs<T>();
    const T* pb = b.dataAs<T>();
    T* out = y.mutableDataAs<T>();
    // Both values are read before the choice: a select, not a branch on a condition that is often random (and the
    // contiguous form vectorizes as a blend).
    walkBroadcast(ctx, y.shape(), shapes, [&](const auto& off, int64_t n, const auto& st) {
      T* o = out + off[0];
      const bool* c = pc + off[1];
      const T* x = pa + off[2];
      const T* z = pb + off[3];
      if (st[1] == 1 && st[2] == 1 && st[3] == 1) {
        for (int64_t i = 0; i < n; ++i) {
          const T u = x[i], v = z[i];
          o[i] = c[i] ? u : v;
        }
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        const T u = x[i * st[2]], v = z[i * st[3]];
        o[i] = c[i * st[1]] ? u : v;
      }
    });
    return Status::ok();
  });
}
}  // namespace ctxkit::kernels::detail
