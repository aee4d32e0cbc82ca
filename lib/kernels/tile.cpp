// Tile: the input repeated along each axis by the counts of its second input.
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

InferResult inferTile(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, knownInts(ctx, inputs, 1, "repeats"));
  const auto& x = inputs[0].shape;
  if (repeats.size() != x.size())
    return invalid(ctx, "repeats has {} values but the input has rank {}", repeats.size(), x.size());
  ir::Shape out(x.size());
  for (size_t d = 0; d < x.size(); ++d) {
    if (repeats[d] < 0) return invalid(ctx, "repeats value {} is negative", repeats[d]);
    const CheckedInt extent = CheckedInt(x[d]) * repeats[d];
    if (!extent.ok()) return invalid(ctx, "repeats value {} overflows dimension {} of extent {}", repeats[d], d, x[d]);
    out[d] = extent.value();
  }
  return single(inputs[0].type, std::move(out));
}

Status runTile(const OpContext&, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  const size_t es = ir::elemSize(x.type());
  const size_t rank = x.rank();
  Dims inStrides(rank, 1);
  for (size_t d = rank; d-- > 1;) inStrides[d - 1] = inStrides[d] * x.shape()[d];
  Dims pos(rank, 0);
  const uint64_t n = y.elementCount();
  for (uint64_t k = 0; k < n; ++k) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src += (pos[d] % x.shape()[d]) * inStrides[d];
    std::memcpy(y.mutableData() + k * es, x.data() + static_cast<size_t>(src) * es, es);
    for (size_t d = rank; d-- > 0;) {
      if (++pos[d] < y.shape()[d]) break;
      pos[d] = 0;
    }
  }
  return Status::ok();
}
}  // namespace ctxkit::kernels::detail
