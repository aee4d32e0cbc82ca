// Ops that rearrange or generate elements without arithmetic: Tile, DepthToSpace, SpaceToDepth, EyeLike,
// ReverseSequence, and Dropout in inference (the output is the input; the mask is all true).
#include "cpu/convert.h"
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

// ---- Tile ------------------------------------------------------------------------------------------------

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
  std::vector<int64_t> inStrides(rank, 1);
  for (size_t d = rank; d-- > 1;) inStrides[d - 1] = inStrides[d] * x.shape()[d];
  std::vector<int64_t> pos(rank, 0);
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

// ---- DepthToSpace, SpaceToDepth -------------------------------------------------------------------------

InferResult inferDepthSpace(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 0, 4));
  const int64_t b = attrsOf<ops::DepthSpaceAttrs>(ctx).blocksize;  // 1 .. kMaxWindowValue (the decoder's rule)
  const auto& x = inputs[0].shape;
  const int64_t square = b * b;
  if (ctx.kind == ir::OpKind::DepthToSpace) {
    if (x[1] % square != 0) return invalid(ctx, "channels {} are not a multiple of blocksize^2 = {}", x[1], square);
    const CheckedInt h = CheckedInt(x[2]) * b, w = CheckedInt(x[3]) * b;
    if (!h.ok() || !w.ok()) return invalid(ctx, "height {} and width {} times blocksize {} overflow", x[2], x[3], b);
    return single(inputs[0].type, ir::Shape{x[0], x[1] / square, h.value(), w.value()});
  }
  if (x[2] % b != 0 || x[3] % b != 0)
    return invalid(ctx, "height {} and width {} must be multiples of blocksize {}", x[2], x[3], b);
  const CheckedInt channels = CheckedInt(x[1]) * square;
  if (!channels.ok()) return invalid(ctx, "channels {} times blocksize^2 = {} overflow", x[1], square);
  return single(inputs[0].type, ir::Shape{x[0], channels.value(), x[2] / b, x[3] / b});
}

Status runDepthSpace(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  const ops::DepthSpaceAttrs& a = attrsOf<ops::DepthSpaceAttrs>(ctx);
  const int64_t b = a.blocksize;
  const bool toSpace = ctx.kind == ir::OpKind::DepthToSpace;
  // The space-side tensor [N, C, H * b, W * b] and the depth-side [N, C * b * b, H, W].
  const ir::Shape& space = toSpace ? y.shape() : x.shape();
  const int64_t n = space[0], c = space[1], h = space[2] / b, w = space[3] / b;
  const size_t es = ir::elemSize(x.type());
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t hi = 0; hi < h; ++hi)
        for (int64_t i = 0; i < b; ++i)
          for (int64_t wi = 0; wi < w; ++wi)
            for (int64_t j = 0; j < b; ++j) {
              int64_t depthC = a.crd ? (ci * b + i) * b + j : (i * b + j) * c + ci;
              int64_t depthOff = ((ni * c * b * b + depthC) * h + hi) * w + wi;
              int64_t spaceOff = ((ni * c + ci) * h * b + hi * b + i) * w * b + wi * b + j;
              int64_t from = toSpace ? depthOff : spaceOff, to = toSpace ? spaceOff : depthOff;
              std::memcpy(y.mutableData() + static_cast<size_t>(to) * es, x.data() + static_cast<size_t>(from) * es,
                          es);
            }
  return Status::ok();
}

// ---- EyeLike ---------------------------------------------------------------------------------------------

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

// ---- Dropout ---------------------------------------------------------------------------------------------

InferResult inferDropout(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 2));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  std::vector<OutputDesc> outs{{inputs[0].type, inputs[0].shape}};
  if (outputCount > 1) outs.push_back({ElemType::Bool, inputs[0].shape});
  return outs;
}

Status runDropout(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  bool training = inputs.size() > 2 && inputs[2] && inputs[2]->elementCount() == 1 && inputs[2]->dataAs<bool>()[0];
  if (training) {
    double ratio = 0.5;
    if (inputs.size() > 1 && inputs[1])
      CTX_RETURN_IF_ERROR(cpu::convertElements(inputs[1]->type(), inputs[1]->data(), ElemType::Double, &ratio, 1));
    if (ratio != 0)
      return unsupported(ctx, "training-mode Dropout with ratio {} is random and not supported (inference only)",
                         ratio);
  }
  if (x.byteSize()) std::memcpy(outputs[0]->mutableData(), x.data(), x.byteSize());
  if (outputs.size() > 1 && outputs[1]) {
    bool* m = outputs[1]->mutableDataAs<bool>();
    for (uint64_t i = 0; i < outputs[1]->elementCount(); ++i) m[i] = true;
  }
  return Status::ok();
}

// ---- ReverseSequence ---------------------------------------------------------------------------------------

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
