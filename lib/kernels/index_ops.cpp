// Ops that select elements by position: Trilu.
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

// ---- Trilu ---------------------------------------------------------------------------------------------

InferResult inferTrilu(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  if (inputs[0].shape.size() < 2)
    return invalid(ctx, "input 0 has shape {} but expected rank 2 or more", shapeStr(inputs[0].shape));
  if (optionalInput(inputs, 1)) CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, typeBit(ElemType::Int64)));
  return single(inputs[0].type, inputs[0].shape);
}

Status runTrilu(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  int64_t k = 0;
  if (inputs.size() > 1 && inputs[1]) {
    if (inputs[1]->elementCount() != 1)
      return invalid(ctx, "input 1 (k) has shape {} but expected one value", shapeStr(inputs[1]->shape()));
    k = inputs[1]->dataAs<int64_t>()[0];
  }
  const bool upper = attrsOf<ops::TriluAttrs>(ctx).upper;
  const size_t r = x.rank();
  const int64_t rows = x.shape()[r - 2], cols = x.shape()[r - 1];
  const int64_t mats = dimProduct(x.shape(), 0, r - 2);
  const size_t es = ir::elemSize(x.type());
  const std::byte* src = x.data();
  std::byte* dst = y.mutableData();
  if (y.byteSize()) std::memset(dst, 0, y.byteSize());
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i) {
      // Kept columns: j - i >= k (upper) or j - i <= k (lower).
      int64_t begin = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
      int64_t end = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
      if (begin >= end) continue;
      size_t off = static_cast<size_t>((m * rows + i) * cols + begin) * es;
      std::memcpy(dst + off, src + off, static_cast<size_t>(end - begin) * es);
    }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
