// Gather (any axis, negative int32/int64 indices) and Slice (attributes before opset 10, inputs from 10).
#include "kernels/ops.h"

#include <cstring>
#include <limits>

namespace ctxkit::kernels::detail {

// ---- Gather ------------------------------------------------------------------------------------------

namespace {

Status checkIndices(const OpContext& ctx, const IntView& indices, int64_t dim, ErrorCode code) {
  for (size_t k = 0; k < indices.size(); ++k)
    if (const int64_t i = indices[k]; i < -dim || i >= dim)
      return nodeError(ctx, code, "index {} is out of range for a gathered dimension of size {}", i, dim);
  return Status::ok();
}

}  // namespace

InferResult inferGather(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, kIndexTypes));
  const auto& data = inputs[0].shape;
  int64_t rank = static_cast<int64_t>(data.size());
  if (rank == 0) return invalid(ctx, "input 0 is a scalar but Gather needs rank 1 or more");
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrsOf<ops::AxisAttrs>(ctx).axis, rank, "attribute axis"));
  // Known indices are checked here already, so constant folding reports a bad graph rather than bad data.
  if (inputs[1].value && inputs[1].value->shape() == inputs[1].shape)
    CTX_RETURN_IF_ERROR(
        checkIndices(ctx, IntView(*inputs[1].value), data[static_cast<size_t>(axis)], ErrorCode::InvalidGraph));
  ir::Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), inputs[1].shape.begin(), inputs[1].shape.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  return single(inputs[0].type, std::move(out));
}

Status runGather(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& data = *inputs[0];
  int64_t rank = static_cast<int64_t>(data.rank());
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrsOf<ops::AxisAttrs>(ctx).axis, rank, "attribute axis"));
  auto a = static_cast<size_t>(axis);
  const IntView indices(*inputs[1]);
  const int64_t dim = data.shape()[a];
  CTX_RETURN_IF_ERROR(checkIndices(ctx, indices, dim, ErrorCode::InvalidArgument));
  const size_t elem = ir::elemSize(data.type());
  const int64_t outer = dimProduct(data.shape(), 0, a);
  const size_t block = static_cast<size_t>(dimProduct(data.shape(), a + 1, data.rank())) * elem;
  const std::byte* src = data.data();
  std::byte* dst = outputs[0]->mutableData();
  const size_t count = indices.size();
  if (block == 0 || count == 0) return Status::ok();
  parallelFor(ctx, static_cast<size_t>(outer) * count, std::max<size_t>(1, 65536 / block), [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) {
      size_t o = k / count, j = k % count;
      int64_t idx = indices[j] < 0 ? indices[j] + dim : indices[j];
      std::memcpy(dst + k * block, src + (o * static_cast<size_t>(dim) + static_cast<size_t>(idx)) * block, block);
    }
  });
  return Status::ok();
}

// ---- Slice -------------------------------------------------------------------------------------------

namespace {

struct SliceDim {
  int64_t start = 0, step = 1, length = 0;
  int64_t stride = 1;  // of the input's dimension, in elements
};

Expected<std::vector<SliceDim>> planSlice(const OpContext& ctx, InDescs inputs) {
  const auto& in = inputs[0].shape;
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  bool haveAxes = false, haveSteps = false;
  if (ctx.opset < 10) {
    CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
    const auto& a = attrsOf<ops::SliceAttrs>(ctx);
    if (!a.starts || !a.ends) return invalid(ctx, "required attributes starts and ends are missing");
    starts.assign(a.starts->begin(), a.starts->end());
    ends.assign(a.ends->begin(), a.ends->end());
    haveAxes = a.axes.has_value();
    if (haveAxes) axes.assign(a.axes->begin(), a.axes->end());
  } else {
    CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 5));
    CTX_ASSIGN_OR_RETURN(starts, knownInts(ctx, inputs, 1, "starts"));
    CTX_ASSIGN_OR_RETURN(ends, knownInts(ctx, inputs, 2, "ends"));
    if (optionalInput(inputs, 3)) {
      haveAxes = true;
      CTX_ASSIGN_OR_RETURN(axes, knownInts(ctx, inputs, 3, "axes"));
    }
    if (optionalInput(inputs, 4)) {
      haveSteps = true;
      CTX_ASSIGN_OR_RETURN(steps, knownInts(ctx, inputs, 4, "steps"));
    }
  }
  if (starts.size() != ends.size())
    return invalid(ctx, "starts has {} values but ends has {}", starts.size(), ends.size());
  if (!haveAxes) {
    axes.resize(starts.size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  }
  if (!haveSteps) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size())
    return invalid(ctx, "axes has {} values but starts has {}", axes.size(), starts.size());
  if (steps.size() != starts.size())
    return invalid(ctx, "steps has {} values but starts has {}", steps.size(), starts.size());
  CTX_ASSIGN_OR_RETURN(axes, normalizeAxes(ctx, std::move(axes), rank, "axes"));
  std::vector<SliceDim> dims(in.size());
  for (size_t d = 0; d < in.size(); ++d) dims[d].length = in[d];
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t dim = in[static_cast<size_t>(axes[i])];
    int64_t start = starts[i], end = ends[i], step = steps[i];
    if (step == 0) return invalid(ctx, "steps has a 0 for axis {}", axes[i]);
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t length;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      length = end > start ? (end - start - 1) / step + 1 : 0;  // no overflow for huge steps
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      // step may be INT64_MIN, which cannot be negated: one element then.
      int64_t back = step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
      length = start > end ? (start - end - 1) / back + 1 : 0;
    }
    dims[static_cast<size_t>(axes[i])] = SliceDim{start, step, length};
  }
  for (size_t d = in.size(); d-- > 1;) dims[d - 1].stride = dims[d].stride * in[d];
  return dims;
}

template <typename E>
void sliceCopy(const OpContext& ctx, const E* x, E* y, std::span<const int64_t> inShape,
               const std::vector<SliceDim>& dims) {
  size_t rank = inShape.size();
  int64_t total = 1;
  for (const auto& d : dims) total *= d.length;
  if (total == 0) return;
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  int64_t inner = dims[rank - 1].length;
  int64_t innerStep = dims[rank - 1].step;
  int64_t rows = total / inner;
  parallelFor(ctx, static_cast<size_t>(rows), std::max<size_t>(1, 32768 / static_cast<size_t>(inner)),
              [&](size_t r0, size_t r1) {
                for (size_t r = r0; r < r1; ++r) {
                  int64_t rem = static_cast<int64_t>(r), src = dims[rank - 1].start;
                  for (size_t d = rank - 1; d-- > 0;) {
                    int64_t i = rem % dims[d].length;
                    rem /= dims[d].length;
                    src += (dims[d].start + i * dims[d].step) * dims[d].stride;
                  }
                  E* dst = y + static_cast<int64_t>(r) * inner;
                  const E* s = x + src;
                  if (innerStep == 1) std::memcpy(dst, s, static_cast<size_t>(inner) * sizeof(E));
                  else
                    for (int64_t i = 0; i < inner; ++i) dst[i] = s[i * innerStep];
                }
              });
}

struct Bytes16 {
  uint64_t lo, hi;
};

}  // namespace

InferResult inferSlice(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  if (inputs.empty()) return invalid(ctx, "expected at least 1 input but got 0");
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  CTX_ASSIGN_OR_RETURN(std::vector<SliceDim> dims, planSlice(ctx, inputs));
  ir::Shape out;
  for (const auto& d : dims) out.push_back(d.length);
  return single(inputs[0].type, std::move(out));
}

Expected<std::shared_ptr<const void>> planSliceOnce(const OpContext& ctx, InDescs inputs) {
  CTX_ASSIGN_OR_RETURN(std::vector<SliceDim> dims, planSlice(ctx, inputs));
  return std::shared_ptr<const void>(std::make_shared<const std::vector<SliceDim>>(std::move(dims)));
}

Status runSlice(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<SliceDim> planned;
  if (!ctx.plan) {
    std::vector<ValueDesc> descs = describeInputs(inputs, true);
    CTX_ASSIGN_OR_RETURN(planned, planSlice(ctx, descs));
  }
  const std::vector<SliceDim>& dims = ctx.plan ? *static_cast<const std::vector<SliceDim>*>(ctx.plan) : planned;
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  switch (ir::elemSize(x.type())) {
    case 1: sliceCopy(ctx, x.dataAs<uint8_t>(), y.mutableDataAs<uint8_t>(), x.shape(), dims); break;
    case 2: sliceCopy(ctx, x.dataAs<uint16_t>(), y.mutableDataAs<uint16_t>(), x.shape(), dims); break;
    case 4: sliceCopy(ctx, x.dataAs<uint32_t>(), y.mutableDataAs<uint32_t>(), x.shape(), dims); break;
    case 8: sliceCopy(ctx, x.dataAs<uint64_t>(), y.mutableDataAs<uint64_t>(), x.shape(), dims); break;
    case 16: sliceCopy(ctx, x.dataAs<Bytes16>(), y.mutableDataAs<Bytes16>(), x.shape(), dims); break;
    default: return unsupported(ctx, "element type {} is not supported", ir::elemTypeName(x.type()));
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
