// Concat: inputs joined along one axis, row by row.
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

// ---- Concat ------------------------------------------------------------------------------------------

InferResult inferConcat(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, SIZE_MAX));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (!inputs[i].present) return invalid(ctx, "input {} is missing", i);
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
  }
  const auto& first = inputs[0].shape;
  int64_t rank = static_cast<int64_t>(first.size());
  if (rank == 0) return invalid(ctx, "input 0 is a scalar but Concat needs rank 1 or more");
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrsOf<ops::AxisAttrs>(ctx).axis, rank, "attribute axis"));
  ir::Shape out = first;
  for (size_t i = 1; i < inputs.size(); ++i) {
    const auto& s = inputs[i].shape;
    bool ok = s.size() == first.size();
    for (size_t d = 0; ok && d < s.size(); ++d)
      if (static_cast<int64_t>(d) != axis && s[d] != first[d]) ok = false;
    if (!ok)
      return invalid(ctx, "input {} has shape {} which does not match input 0 shape {} outside axis {}", i, shapeStr(s),
                     shapeStr(first), axis);
    out[static_cast<size_t>(axis)] += s[static_cast<size_t>(axis)];
  }
  return single(inputs[0].type, std::move(out));
}

Status runConcat(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  int64_t rank = static_cast<int64_t>(y.rank());
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrsOf<ops::AxisAttrs>(ctx).axis, rank, "attribute axis"));
  auto a = static_cast<size_t>(axis);
  size_t elem = ir::elemSize(y.type());
  int64_t outer = dimProduct(y.shape(), 0, a);
  int64_t inner = dimProduct(y.shape(), a + 1, y.rank());
  size_t outRow = static_cast<size_t>(y.shape()[a] * inner) * elem;
  std::byte* dst = y.mutableData();
  size_t offset = 0;
  for (const ir::Tensor* in : inputs) {
    size_t row = static_cast<size_t>(in->shape()[a] * inner) * elem;
    if (row > 0) {
      const std::byte* src = in->data();
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + static_cast<size_t>(o) * outRow + offset, src + static_cast<size_t>(o) * row, row);
    }
    offset += row;
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
