// ReverseSequence: each batch entry's first sequence_lens[i] elements along the time axis reversed.
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

InferResult inferReverseSequence(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, typeBit(ElemType::Int64)));
  const ops::ReverseSequenceAttrs& a = attrsOf<ops::ReverseSequenceAttrs>(ctx);
  const auto& x = inputs[0].shape;
  if (x.size() < 2 || (a.batchAxis != 0 && a.batchAxis != 1) || a.timeAxis != 1 - a.batchAxis)
    return invalid(ctx, "batch_axis {} and time_axis {} must be 0 and 1 of an input of rank 2 or more", a.batchAxis,
                   a.timeAxis);
  if (inputs[1].shape != ir::Shape{x[static_cast<size_t>(a.batchAxis)]})
    return invalid(ctx, "sequence_lens has shape {} but expected [{}]", shapeStr(inputs[1].shape),
                   x[static_cast<size_t>(a.batchAxis)]);
  return single(inputs[0].type, x);
}

Status runReverseSequence(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const ops::ReverseSequenceAttrs& a = attrsOf<ops::ReverseSequenceAttrs>(ctx);
  const std::vector<int64_t> lens = tensorInts(*inputs[1]);
  const int64_t d0 = x.shape()[0], d1 = x.shape()[1];
  const size_t row = static_cast<size_t>(dimProduct(x.shape(), 2, x.rank())) * ir::elemSize(x.type());
  const int64_t time = a.timeAxis == 0 ? d0 : d1;
  for (int64_t i = 0; i < d0; ++i)
    for (int64_t j = 0; j < d1; ++j) {
      const int64_t b = a.batchAxis == 0 ? i : j, t = a.timeAxis == 0 ? i : j;
      const int64_t len = lens[static_cast<size_t>(b)];
      if (len < 0 || len > time) return invalid(ctx, "sequence length {} is outside [0, {}]", len, time);
      const int64_t src = t < len ? len - 1 - t : t;
      const int64_t si = a.timeAxis == 0 ? src : i, sj = a.timeAxis == 0 ? j : src;
      std::memcpy(outputs[0]->mutableData() + static_cast<size_t>(i * d1 + j) * row,
                  x.data() + static_cast<size_t>(si * d1 + sj) * row, row);
    }
  return Status::ok();
}
}  // namespace ctxkit::kernels::detail
