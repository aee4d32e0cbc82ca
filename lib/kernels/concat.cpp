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
  int64_t inner = dimProduct(y.shape(), a + 1, y.rank());
  size_t outRow = static_cast<size_t>(y.shape()[a] * inner) * elem;
  std::byte* dst = y.mutableData();
  const size_t total = y.byteSize();
  if (total == 0 || outRow == 0) return Status::ok();
  // Copies output bytes [begin, end): each output row is the inputs' rows side by side. The output is split by
  // bytes, not by input, so that threads get equal shares however unequal the inputs (a DenseNet block's concat of
  // a wide running tensor and a narrow new one).
  auto copyRange = [&](size_t begin, size_t end) {
    for (size_t p = begin, advanced = 1; p < end && advanced > 0;) {  // (inference made the rows add up to outRow)
      const size_t o = p / outRow, r = p % outRow;
      size_t offset = 0;
      advanced = 0;
      for (const ir::Tensor* in : inputs) {
        const size_t row = static_cast<size_t>(in->shape()[a] * inner) * elem;
        if (r < offset + row) {
          const size_t n = std::min(end - p, offset + row - r);
          std::memcpy(dst + p, in->data() + o * row + (r - offset), n);
          p += n;
          advanced = n;
          break;
        }
        offset += row;
      }
    }
  };
  constexpr size_t kBlock = 4096;  // bytes a chunk item copies; about kBlock / 4 units of work
  parallelForWork(ctx, (total + kBlock - 1) / kBlock, kBlock / 4,
                  [&](size_t b0, size_t b1) { copyRange(b0 * kBlock, std::min(total, b1 * kBlock)); });
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
