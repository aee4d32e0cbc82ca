// Ops that scatter windows back into an image: Col2Im (the sum of sliding blocks [N, C*prod(block), L] into
// [N, C, image...], the inverse layout of im2col) and MaxUnpool (each value written at the flat position its
// MaxPool index names, zeros elsewhere).
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

struct Col2ImPlan {
  std::vector<int64_t> image, block, strides, dilations, pads;  // pads: begins then ends
  std::vector<int64_t> blocks;                                  // sliding positions per spatial axis
  int64_t channels = 0;
};

Expected<Col2ImPlan> planCol2Im(const OpContext& ctx, InDescs inputs) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 3));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 0, 3));
  Col2ImPlan p;
  CTX_ASSIGN_OR_RETURN(p.image, knownInts(ctx, inputs, 1, "image_shape"));
  CTX_ASSIGN_OR_RETURN(p.block, knownInts(ctx, inputs, 2, "block_shape"));
  const size_t r = p.image.size();
  if (r == 0 || p.block.size() != r)
    return invalid(ctx, "image_shape has {} values and block_shape {} but expected the same positive count", r,
                   p.block.size());
  const ops::WindowAttrs& window = attrsOf<ops::FoldAttrs>(ctx).window;
  CTX_ASSIGN_OR_RETURN(p.strides, listOrDefault<std::vector<int64_t>>(ctx, window.strides, "strides", r, 1));
  CTX_ASSIGN_OR_RETURN(p.dilations, listOrDefault<std::vector<int64_t>>(ctx, window.dilations, "dilations", r, 1));
  CTX_ASSIGN_OR_RETURN(p.pads, listOrDefault<std::vector<int64_t>>(ctx, window.pads, "pads", 2 * r, 0));
  const int64_t blockSize = dimProduct(p.block);
  const ir::Shape& x = inputs[0].shape;
  if (blockSize < 1 || x[1] % blockSize != 0)
    return invalid(ctx, "input 0 has shape {}: dimension 1 is not a multiple of the block size {}", shapeStr(x),
                   blockSize);
  p.channels = x[1] / blockSize;
  int64_t positions = 1;
  for (size_t d = 0; d < r; ++d) {
    if (p.strides[d] < 1 || p.dilations[d] < 1 || p.block[d] < 1)
      return invalid(ctx, "strides, dilations and block_shape must be positive");
    const int64_t span = p.dilations[d] * (p.block[d] - 1) + 1;
    const int64_t n = (p.image[d] + p.pads[d] + p.pads[d + r] - span) / p.strides[d] + 1;
    p.blocks.push_back(std::max<int64_t>(n, 0));
    positions *= p.blocks.back();
  }
  if (positions != x[2])
    return invalid(ctx, "input 0 has {} blocks but the image, block, strides and pads give {}", x[2], positions);
  return p;
}

// Calls f(offsets) for each combination of indices below `limits`, row-major.
template <typename F> void forEachIndex(std::span<const int64_t> limits, F&& f) {
  if (dimProduct(limits) == 0) return;
  std::vector<int64_t> index(limits.size(), 0);
  for (;;) {
    f(std::span<const int64_t>(index));
    size_t d = limits.size();
    while (d > 0 && ++index[d - 1] == limits[d - 1]) index[--d] = 0;
    if (d == 0) return;
  }
}

}  // namespace

InferResult inferCol2Im(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float) | typeBit(ElemType::Double)));
  CTX_ASSIGN_OR_RETURN(Col2ImPlan p, planCol2Im(ctx, inputs));
  ir::Shape out{inputs[0].shape[0], p.channels};
  out.insert(out.end(), p.image.begin(), p.image.end());
  return single(inputs[0].type, std::move(out));
}

Status runCol2Im(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, true);
  CTX_ASSIGN_OR_RETURN(Col2ImPlan p, planCol2Im(ctx, descs));
  const ir::Tensor& x = *inputs[0];
  const size_t r = p.image.size();
  const int64_t batches = x.shape()[0], blockSize = dimProduct(p.block), positions = x.shape()[2];
  const int64_t plane = dimProduct(p.image);
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* in = x.dataAs<T>();
    T* y = outputs[0]->mutableDataAs<T>();
    std::fill(y, y + batches * p.channels * plane, T(0));
    for (int64_t nc = 0; nc < batches * p.channels; ++nc) {
      T* yp = y + nc * plane;
      int64_t k = 0;  // the row inside this channel's block: one kernel offset
      forEachIndex(p.block, [&](std::span<const int64_t> tap) {
        const T* row = in + (nc * blockSize + k++) * positions;
        int64_t l = 0;
        forEachIndex(p.blocks, [&](std::span<const int64_t> pos) {
          int64_t offset = 0;
          bool inside = true;
          for (size_t d = 0; d < r && inside; ++d) {
            const int64_t i = pos[d] * p.strides[d] - p.pads[d] + tap[d] * p.dilations[d];
            inside = i >= 0 && i < p.image[d];
            offset = offset * p.image[d] + i;
          }
          if (inside) yp[offset] += row[l];
          ++l;
        });
      });
    }
    return Status::ok();
  });
}

// MaxUnpool (X, I, optional output_shape) with kernel_shape, pads and strides.
namespace {

Expected<ir::Shape> unpoolShape(const OpContext& ctx, InDescs inputs) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 3));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, typeBit(ElemType::Int64)));
  const ir::Shape& x = inputs[0].shape;
  if (x.size() < 3) return invalid(ctx, "input 0 has shape {} but expected N x C x spatial", shapeStr(x));
  if (inputs[1].shape != x)
    return invalid(ctx, "input 1 (I) has shape {} but expected X's shape {}", shapeStr(inputs[1].shape), shapeStr(x));
  if (optionalInput(inputs, 2)) {
    CTX_ASSIGN_OR_RETURN(std::vector<int64_t> shape, knownInts(ctx, inputs, 2, "output_shape"));
    if (shape.size() != x.size())
      return invalid(ctx, "input 2 (output_shape) has {} values but expected {}", shape.size(), x.size());
    return ir::Shape(shape.begin(), shape.end());
  }
  const size_t r = x.size() - 2;
  const ops::WindowAttrs& window = attrsOf<ops::FoldAttrs>(ctx).window;
  if (!window.kernelShape || window.kernelShape->size() != r)
    return invalid(ctx, "attribute kernel_shape must list {} sizes", r);
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                       listOrDefault<std::vector<int64_t>>(ctx, window.strides, "strides", r, 1));
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                       listOrDefault<std::vector<int64_t>>(ctx, window.pads, "pads", 2 * r, 0));
  const ops::IntList& kernel = *window.kernelShape;
  ir::Shape out{x[0], x[1]};
  for (size_t d = 0; d < r; ++d) out.push_back((x[d + 2] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + r]);
  return out;
}

}  // namespace

InferResult inferMaxUnpool(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_ASSIGN_OR_RETURN(ir::Shape out, unpoolShape(ctx, inputs));
  return single(inputs[0].type, std::move(out));
}

Status runMaxUnpool(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor &x = *inputs[0], &indices = *inputs[1];
  ir::Tensor& y = *outputs[0];
  const size_t element = ir::elemSize(x.type());
  std::memset(y.mutableData(), 0, y.byteSize());
  const auto total = static_cast<int64_t>(y.elementCount());
  const int64_t* idx = indices.dataAs<int64_t>();
  for (size_t i = 0; i < x.elementCount(); ++i) {
    if (idx[i] < 0 || idx[i] >= total)
      return invalid(ctx, "input 1 (I) holds index {} outside the output's {} elements", idx[i], total);
    std::memcpy(y.mutableData() + static_cast<size_t>(idx[i]) * element, x.data() + i * element, element);
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
