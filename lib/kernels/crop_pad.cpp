// CenterCropPad: each listed axis is cropped or zero-padded to the requested length around its centre (a crop
// starts at (in - out) / 2, a pad puts (out - in) / 2 zeros first, both rounded down); other axes are kept.
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

// The output shape and, per axis, the input index of output index 0 (negative for a leading pad).
struct CropPlan {
  ir::Shape out;
  std::vector<int64_t> start;
};

Expected<CropPlan> planCrop(const OpContext& ctx, InDescs inputs) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, knownInts(ctx, inputs, 1, "shape"));
  const ir::Shape& x = inputs[0].shape;
  const auto rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> axes;
  if (const auto& listed = attrsOf<ops::CenterCropPadAttrs>(ctx).axes) {
    CTX_ASSIGN_OR_RETURN(axes, normalizeAxes(ctx, *listed, rank, "attribute axes"));
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (lengths.size() != axes.size())
    return invalid(ctx, "input 1 (shape) has {} values but {} axes are cropped or padded", lengths.size(), axes.size());
  CropPlan p{x, std::vector<int64_t>(x.size(), 0)};
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<size_t>(axes[i]);
    if (lengths[i] < 0) return invalid(ctx, "input 1 (shape) has a negative length {}", lengths[i]);
    p.out[a] = lengths[i];
    p.start[a] = x[a] >= lengths[i] ? (x[a] - lengths[i]) / 2 : -((lengths[i] - x[a]) / 2);
  }
  return p;
}

}  // namespace

InferResult inferCenterCropPad(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_ASSIGN_OR_RETURN(CropPlan p, planCrop(ctx, inputs));
  return single(inputs[0].type, std::move(p.out));
}

Status runCenterCropPad(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, true);
  CTX_ASSIGN_OR_RETURN(CropPlan p, planCrop(ctx, descs));
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  const size_t element = ir::elemSize(x.type());
  if (element == 0) return unsupported(ctx, "input of type {} is not supported", ir::elemTypeName(x.type()));
  std::memset(y.mutableData(), 0, y.byteSize());
  const size_t rank = x.rank();
  const int64_t count = dimProduct(p.out);
  std::vector<int64_t> inStrides(rank, 1);
  for (size_t d = rank; d-- > 1;) inStrides[d - 1] = inStrides[d] * x.shape()[d];
  std::vector<int64_t> index(rank, 0);  // the output index of element o
  for (int64_t o = 0; o < count; ++o) {
    int64_t src = 0;
    bool inside = true;
    for (size_t d = 0; d < rank && inside; ++d) {
      const int64_t i = index[d] + p.start[d];
      inside = i >= 0 && i < x.shape()[d];
      src += i * inStrides[d];
    }
    if (inside)
      std::memcpy(y.mutableData() + static_cast<size_t>(o) * element, x.data() + static_cast<size_t>(src) * element,
                  element);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < p.out[d]) break;
      index[d] = 0;
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
