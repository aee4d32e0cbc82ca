// DepthToSpace (DCR and CRD modes) and SpaceToDepth: moving blocks between channels and spatial axes.
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

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
}  // namespace ctxkit::kernels::detail
