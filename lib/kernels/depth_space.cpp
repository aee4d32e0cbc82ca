// DepthToSpace (DCR and CRD modes) and SpaceToDepth: moving blocks between channels and spatial axes.
#include "kernels/ops.h"

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

namespace {

struct Bytes16 {  // complex128
  uint64_t re, im;
};

// Moves the elements of one (batch, channel) of the space side: its rows hi * b + i gather, for every j of the block,
// the depth-side row of channel depthC(i, j) at every b-th element from j (SpaceToDepth scatters the other way).
template <typename T>
void moveBlocks(const T* x, T* y, bool toSpace, bool crd, int64_t b, int64_t c, int64_t h, int64_t w, int64_t nc) {
  const int64_t ni = nc / c, ci = nc % c;
  T* spacePlane = nullptr;
  const T* spaceIn = nullptr;
  const int64_t spaceBase = nc * h * b * w * b;
  if (toSpace) spacePlane = y + spaceBase;
  else spaceIn = x + spaceBase;
  for (int64_t hi = 0; hi < h; ++hi)
    for (int64_t i = 0; i < b; ++i) {
      const int64_t spaceRow = (hi * b + i) * w * b;
      for (int64_t j = 0; j < b; ++j) {
        const int64_t depthC = crd ? (ci * b + i) * b + j : (i * b + j) * c + ci;
        const int64_t depthRow = ((ni * c * b * b + depthC) * h + hi) * w;
        if (toSpace) {
          const T* src = x + depthRow;
          T* dst = spacePlane + spaceRow + j;
          for (int64_t wi = 0; wi < w; ++wi) dst[wi * b] = src[wi];
        } else {
          const T* src = spaceIn + spaceRow + j;
          T* dst = y + depthRow;
          for (int64_t wi = 0; wi < w; ++wi) dst[wi] = src[wi * b];
        }
      }
    }
}

template <typename T>
void moveAllBlocks(const OpContext& ctx, const void* x, void* y, bool toSpace, bool crd, int64_t b, int64_t n,
                   int64_t c, int64_t h, int64_t w) {
  parallelForWork(ctx, static_cast<size_t>(n * c), static_cast<size_t>(h * w * b * b), [&](size_t p0, size_t p1) {
    for (size_t p = p0; p < p1; ++p)
      moveBlocks(static_cast<const T*>(x), static_cast<T*>(y), toSpace, crd, b, c, h, w, static_cast<int64_t>(p));
  });
}

}  // namespace

Status runDepthSpace(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  const ops::DepthSpaceAttrs& a = attrsOf<ops::DepthSpaceAttrs>(ctx);
  const int64_t b = a.blocksize;
  const bool toSpace = ctx.kind == ir::OpKind::DepthToSpace;
  // The space-side tensor [N, C, H * b, W * b] and the depth-side [N, C * b * b, H, W].
  const ir::Shape& space = toSpace ? y.shape() : x.shape();
  const int64_t n = space[0], c = space[1], h = space[2] / b, w = space[3] / b;
  switch (ir::elemSize(x.type())) {
    case 1: moveAllBlocks<uint8_t>(ctx, x.data(), y.mutableData(), toSpace, a.crd, b, n, c, h, w); break;
    case 2: moveAllBlocks<uint16_t>(ctx, x.data(), y.mutableData(), toSpace, a.crd, b, n, c, h, w); break;
    case 4: moveAllBlocks<uint32_t>(ctx, x.data(), y.mutableData(), toSpace, a.crd, b, n, c, h, w); break;
    case 8: moveAllBlocks<uint64_t>(ctx, x.data(), y.mutableData(), toSpace, a.crd, b, n, c, h, w); break;
    case 16: moveAllBlocks<Bytes16>(ctx, x.data(), y.mutableData(), toSpace, a.crd, b, n, c, h, w); break;
    default: return invalid(ctx, "element size {} is not supported", ir::elemSize(x.type()));
  }
  return Status::ok();
}
}  // namespace ctxkit::kernels::detail
