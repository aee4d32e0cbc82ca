// EyeLike: a 2-D tensor with ones on the diagonal k of the input's shape.
#include "cpu/convert.h"
#include "kernels/ops.h"

namespace ctxkit::kernels::detail {

InferResult inferEyeLike(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 0, 2));
  ElemType t = attrsOf<ops::EyeLikeAttrs>(ctx).dtype;
  if (t == ElemType::Undefined) t = inputs[0].type;
  if (!inSet(kNumericTypes | typeBit(ElemType::Bool), t))
    return unsupported(ctx, "output type {} is not supported", ir::elemTypeName(t));
  return single(t, inputs[0].shape);
}

Status runEyeLike(const OpContext& ctx, RunIns, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  const int64_t k = attrsOf<ops::EyeLikeAttrs>(ctx).k;
  const int64_t rows = y.shape()[0], cols = y.shape()[1];
  std::vector<float> v(static_cast<size_t>(rows * cols), 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    if (k >= -i && k < cols - i) v[static_cast<size_t>(i * cols + i + k)] = 1.0f;  // column i + k, never overflowing
  return cpu::convertElements(ElemType::Float, v.data(), y.type(), y.mutableData(), v.size());
}
}  // namespace ctxkit::kernels::detail
