// Split (attribute, input or num_outputs sizes).
#include "kernels/kernel_util.h"
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

// Lengths of the pieces along `axis` of a dimension of `dim`, by the rules of the node's opset.
Expected<std::vector<int64_t>> splitLengths(const OpContext& ctx, InDescs inputs, int64_t dim, size_t outputCount) {
  std::vector<int64_t> lengths;
  if (ctx.opset >= 13) {
    if (optionalInput(inputs, 1)) {
      CTX_ASSIGN_OR_RETURN(lengths, knownInts(ctx, inputs, 1, "split"));
    }
  } else if (const auto& split = attrsOf<ops::SplitAttrs>(ctx).split) {
    lengths.assign(split->begin(), split->end());
  }
  if (lengths.empty()) {
    const int64_t pieces = attrsOf<ops::SplitAttrs>(ctx).numOutputs.value_or(static_cast<int64_t>(outputCount));
    if (pieces <= 0 || static_cast<size_t>(pieces) != outputCount)
      return invalid(ctx, "splits into {} pieces but has {} outputs", pieces, outputCount);
    int64_t chunk = dim == 0 ? 0 : (dim - 1) / pieces + 1;  // ceil(dim / pieces), never overflowing
    if (ctx.opset < 18 && dim % pieces != 0)
      return invalid(ctx, "dimension {} does not split evenly into {} outputs", dim, pieces);
    for (int64_t p = 0, left = dim; p < pieces; ++p) {
      lengths.push_back(std::min(chunk, left));
      left -= lengths.back();
    }
  }
  if (lengths.size() != outputCount)
    return invalid(ctx, "split has {} lengths but the node has {} outputs", lengths.size(), outputCount);
  CheckedInt sum = 0;
  for (int64_t l : lengths) {
    if (l < 0) return invalid(ctx, "split length {} is negative", l);
    sum = sum + l;
  }
  if (!sum.ok() || sum.value() != dim)
    return invalid(ctx, "split lengths {} do not sum to the {} elements of the axis", shapeStr(lengths), dim);
  return lengths;
}

}  // namespace

InferResult inferSplit(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 2));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  if (outputCount == 0) return invalid(ctx, "needs at least one output");
  const ir::Shape& shape = inputs[0].shape;
  CTX_ASSIGN_OR_RETURN(
      int64_t axis, normalizeAxis(ctx, attrsOf<ops::SplitAttrs>(ctx).axis, static_cast<int64_t>(shape.size()), "axis"));
  CTX_ASSIGN_OR_RETURN(auto lengths, splitLengths(ctx, inputs, shape[static_cast<size_t>(axis)], outputCount));
  std::vector<OutputDesc> outs;
  for (int64_t l : lengths) {
    ir::Shape s = shape;
    s[static_cast<size_t>(axis)] = l;
    outs.push_back(OutputDesc{inputs[0].type, std::move(s)});
  }
  return outs;
}

Status runSplit(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const auto rank = static_cast<int64_t>(x.rank());
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrsOf<ops::SplitAttrs>(ctx).axis, rank, "axis"));
  const auto a = static_cast<size_t>(axis);
  const size_t elem = ir::elemSize(x.type());
  const auto outer = static_cast<size_t>(dimProduct(x.shape(), 0, a));
  const auto inner = static_cast<size_t>(dimProduct(x.shape(), a + 1, x.rank())) * elem;
  const auto dim = static_cast<size_t>(x.shape()[a]);
  size_t start = 0;
  for (ir::Tensor* out : outputs) {
    if (!out) continue;
    const auto len = static_cast<size_t>(out->shape()[a]);
    std::byte* dst = out->mutableData();
    for (size_t o = 0; o < outer && len > 0; ++o)
      std::memcpy(dst + o * len * inner, x.data() + (o * dim + start) * inner, len * inner);
    start += len;
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
