// Sampling grids: GridSample (opset 16+, N-d from opset 20) samples X [N, C, D1..Dr] at the normalized
// coordinates of grid [N, O1..Or, r] (grid's last axis lists x, y, z..., i.e. the spatial axes innermost first),
// with nearest, linear or cubic interpolation and zeros, border or reflection padding, as ONNX defines it per
// output element; AffineGrid makes such a grid from affine matrices theta.
#include "kernels/ops.h"
#include "kernels/thread_scratch.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

using Mode = ops::GridMode;
using Padding = ops::GridPadding;
using GridSpec = ops::GridSampleAttrs;

constexpr double kFarOut = 1 << 20;  // normalized grid values are clamped to +-kFarOut

// Reflects x into [lo, hi] (repeatedly, as a mirror at each end). Works on the remainder modulo two ranges, so a
// coordinate far outside (a grid value of 1e30) needs no integer conversion.
double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double m = std::fmod(lo - x, 2 * range);
    return m < range ? lo + m : hi - (m - range);
  }
  if (x > hi) {
    const double m = std::fmod(x - hi, 2 * range);
    return m < range ? hi - m : lo + (m - range);
  }
  return x;
}

// One spatial axis: its size and the coordinate range the padding reflects within.
struct Axis {
  int64_t size;
  double lo, hi;
};

// The source index of tap `i` on an axis after padding, or -1 when it reads a zero.
int64_t padIndex(const GridSpec& s, const Axis& a, int64_t i) {
  if (i >= 0 && i < a.size) return i;
  switch (s.padding) {
    case Padding::Zeros: return -1;
    case Padding::Border: return std::clamp<int64_t>(i, 0, a.size - 1);
    case Padding::Reflection:
      return std::clamp<int64_t>(static_cast<int64_t>(reflect(static_cast<double>(i), a.lo, a.hi)), 0, a.size - 1);
  }
  return -1;
}

// Keys cubic convolution weights (A = -0.75) of the taps at floor(x) - 1 .. floor(x) + 2, t = x - floor(x).
void cubicWeights(double t, double* w) {
  constexpr double A = -0.75;
  auto far = [](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // 1 < d < 2
  auto near = [](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };       // d <= 1
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// The taps of one axis for a denormalized coordinate x: source indices (-1 reads zero) and weights.
struct Taps {
  int64_t index[4];
  double weight[4];
  int count;
};

Taps tapsFor(const GridSpec& s, const Axis& a, double x) {
  // Nearest and linear: coordinates outside the padding range move inside first (border: clamped, reflection:
  // mirrored), which is the same as padding each tap. Cubic pads each of its four taps alone (ONNX Runtime's CPU
  // kernel, and PyTorch's): a coordinate clamped first would weight the edge pixels differently.
  if (s.mode != Mode::Cubic && (x < a.lo || x > a.hi)) {
    if (s.padding == Padding::Border) x = std::clamp(x, 0.0, static_cast<double>(a.size - 1));
    else if (s.padding == Padding::Reflection) x = reflect(x, a.lo, a.hi);
  }
  Taps t{};
  if (s.mode == Mode::Nearest) {
    t.count = 1;
    t.index[0] = padIndex(s, a, static_cast<int64_t>(x));
    t.weight[0] = 1;
    return t;
  }
  const double base = std::floor(x), frac = x - base;
  const auto i0 = static_cast<int64_t>(base);
  if (s.mode == Mode::Linear) {
    t.count = 2;
    t.index[0] = padIndex(s, a, i0);
    t.index[1] = padIndex(s, a, i0 + 1);
    t.weight[0] = 1 - frac;
    t.weight[1] = frac;
    return t;
  }
  t.count = 4;
  cubicWeights(frac, t.weight);
  for (int k = 0; k < 4; ++k) t.index[k] = padIndex(s, a, i0 - 1 + k);
  return t;
}

// Sum over the taps of every axis from `axis` on: a separable interpolation of one channel plane.
double interpolate(const float* plane, const SmallVec<Taps, kInlineRank>& taps, const Dims& strides, size_t axis,
                   int64_t offset) {
  if (axis == taps.size()) return plane[offset];
  double sum = 0;
  const Taps& t = taps[axis];
  for (int k = 0; k < t.count; ++k)
    if (t.index[k] >= 0 && t.weight[k] != 0)
      sum += t.weight[k] * interpolate(plane, taps, strides, axis + 1, offset + t.index[k] * strides[axis]);
  return sum;
}

// The 2-D nearest and linear forms gather each output from a table of K = 1 or 4 (offset, weight) pairs per point,
// made once per image (a point's taps serve every channel), with a zero weight where a tap reads padding; each channel
// plane then gathers them in float (ONNX Runtime's CPU kernel computes in float too).
// One point's K = 1 or 4 (offset, weight) pairs from its row and column taps.
template <int K> void tapPairs(const Taps& ty, const Taps& tx, int64_t width, int64_t* offsets, float* weights) {
  for (int k = 0; k < K; ++k) {
    const int i = K == 1 ? 0 : k / 2, j = K == 1 ? 0 : k % 2;
    const bool inside = ty.index[i] >= 0 && tx.index[j] >= 0;
    offsets[k] = inside ? ty.index[i] * width + tx.index[j] : 0;
    weights[k] = inside ? static_cast<float>(ty.weight[i] * tx.weight[j]) : 0.0f;
  }
}

template <int K>
void gather2d(const int64_t* offsets, const float* weights, int64_t points, const float* in, int64_t plane, int64_t c0,
              int64_t c1, float* y) {
  for (int64_t c = c0; c < c1; ++c) {
    const float* src = in + c * plane;
    float* dst = y + c * points;
    for (int64_t p = 0; p < points; ++p) {
      float sum = 0;
      for (int k = 0; k < K; ++k) sum += weights[p * K + k] * src[offsets[p * K + k]];
      dst[p] = sum;
    }
  }
}

}  // namespace

InferResult inferGridSample(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, typeBit(ElemType::Float) | kHalfTypes));
  const ir::Shape &x = inputs[0].shape, &grid = inputs[1].shape;
  const size_t r = x.size() < 3 ? 0 : x.size() - 2;
  if (r == 0 || grid.size() != r + 2 || grid[0] != x[0] || grid.back() != static_cast<int64_t>(r))
    return invalid(ctx, "X has shape {} and grid {} but expected [N, C, D1..Dr] and [N, O1..Or, r]", shapeStr(x),
                   shapeStr(grid));
  ir::Shape out{x[0], x[1]};
  out.insert(out.end(), grid.begin() + 1, grid.end() - 1);
  return single(inputs[0].type, std::move(out));
}

Status runGridSample(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const GridSpec& s = attrsOf<GridSpec>(ctx);  // modes checked by the decoder
  const ir::Tensor &x = *inputs[0], &grid = *inputs[1];
  const size_t r = x.rank() - 2;
  SmallVec<Axis, kInlineRank> axes(r);  // inline for every rank ONNX gives GridSample: no allocation per run
  Dims strides(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t size = x.shape()[d + 2];
    // The padding range: pixel centres with align_corners, else the outer pixel edges.
    axes[d] = s.alignCorners ? Axis{size, 0.0, static_cast<double>(size - 1)}
                             : Axis{size, -0.5, static_cast<double>(size) - 0.5};
    strides[d] = dimProduct(x.shape(), d + 3, x.rank());
  }
  const int64_t batches = x.shape()[0], channels = x.shape()[1];
  const int64_t plane = dimProduct(x.shape(), 2, x.rank());
  const int64_t points = dimProduct(grid.shape(), 1, grid.rank() - 1);
  const float* g = grid.dataAs<float>();
  const float* in = x.dataAs<float>();
  float* y = outputs[0]->mutableDataAs<float>();
  // Denormalized coordinate of axis d of a grid point (the grid lists the innermost axis first).
  auto position = [&](const float* coord, size_t d) {
    double v = coord[r - 1 - d];
    // A NaN or infinite grid value reads as -1, as ONNX Runtime's CPU kernel reads it (RAFT divides by a 1-pixel
    // pyramid level's W - 1 = 0). Values beyond +-2^20 are clamped there: every tap stays as far outside for zeros
    // and border padding, and every index conversion stays defined.
    v = std::isfinite(v) ? std::clamp(v, -kFarOut, kFarOut) : -1.0;
    const auto size = static_cast<double>(axes[d].size);
    double pos = s.alignCorners ? (v + 1) / 2 * (size - 1) : ((v + 1) * size - 1) / 2;
    if (s.mode == Mode::Nearest) pos = std::nearbyint(pos);  // halves to even
    return pos;
  };
  // Work items are (image, range of channels): RAFT samples 256 images of one channel each (its correlation
  // lookup), a segmentation head one image of many channels; each item makes its image's taps itself.
  const int64_t threads = ctx.pool ? ctx.pool->threads() : 1;
  const int64_t ranges = std::clamp<int64_t>((2 * threads + batches - 1) / std::max<int64_t>(batches, 1), 1,
                                             std::max<int64_t>(channels, 1));
  const int64_t perRange = (channels + ranges - 1) / ranges;
  if (r == 2 && s.mode != Mode::Cubic) {
    const int K = s.mode == Mode::Nearest ? 1 : 4;
    const int64_t width = axes[1].size;
    parallelForWork(ctx, static_cast<size_t>(batches * ranges), static_cast<size_t>(points * (K * perRange + 8)),
                    [&](size_t i0, size_t i1) {
                      // A thread keeps its image's table while its next item is the same image.
                      ThreadScratch& t = threadScratch();
                      int64_t* offsets = scratchAtLeast(t.gridOffsets, static_cast<size_t>(points * K));
                      float* weights = scratchAtLeast(t.gridWeights, static_cast<size_t>(points * K));
                      int64_t made = -1;  // the image whose taps the table holds
                      for (auto i = static_cast<int64_t>(i0); i < static_cast<int64_t>(i1); ++i) {
                        const int64_t n = i / ranges, c0 = i % ranges * perRange,
                                      c1 = std::min(channels, c0 + perRange);
                        if (c0 >= c1) continue;
                        if (n != made) {
                          for (int64_t p = 0; p < points; ++p) {
                            const float* coord = g + (n * points + p) * 2;
                            const Taps ty = tapsFor(s, axes[0], position(coord, 0)),
                                       tx = tapsFor(s, axes[1], position(coord, 1));
                            if (K == 1) tapPairs<1>(ty, tx, width, offsets + p, weights + p);
                            else tapPairs<4>(ty, tx, width, offsets + 4 * p, weights + 4 * p);
                          }
                          made = n;
                        }
                        const float* src = in + n * channels * plane;
                        float* dst = y + n * channels * points;
                        if (K == 1) gather2d<1>(offsets, weights, points, src, plane, c0, c1, dst);
                        else gather2d<4>(offsets, weights, points, src, plane, c0, c1, dst);
                      }
                    });
    return Status::ok();
  }
  // The other forms: work items are (image, point), each point's taps made once for every channel.
  parallelForWork(ctx, static_cast<size_t>(batches * points),
                  static_cast<size_t>(channels) << (2 * std::min<size_t>(r, 3)), [&](size_t i0, size_t i1) {
                    SmallVec<Taps, kInlineRank> taps(r);  // inline for every rank ONNX gives GridSample
                    for (auto i = static_cast<int64_t>(i0); i < static_cast<int64_t>(i1); ++i) {
                      const int64_t n = i / points, p = i % points;
                      const float* coord = g + i * static_cast<int64_t>(r);
                      for (size_t d = 0; d < r; ++d) taps[d] = tapsFor(s, axes[d], position(coord, d));
                      for (int64_t c = 0; c < channels; ++c)
                        y[(n * channels + c) * points + p] =
                            static_cast<float>(interpolate(in + (n * channels + c) * plane, taps, strides, 0, 0));
                    }
                  });
  return Status::ok();
}

// AffineGrid (theta [N, r, r+1], size [N, C, D1..Dr] for r = 2 or 3) with align_corners.
namespace {

Expected<std::vector<int64_t>> affineSize(const OpContext& ctx, InDescs inputs) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 0, 3));
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> size, knownInts(ctx, inputs, 1, "size"));
  const ir::Shape& theta = inputs[0].shape;
  const auto r = static_cast<int64_t>(size.size()) - 2;
  if ((r != 2 && r != 3) || theta[0] != size[0] || theta[1] != r || theta[2] != r + 1)
    return invalid(ctx, "theta has shape {} and size {} values but expected [N, 2, 3] with 4 or [N, 3, 4] with 5",
                   shapeStr(theta), size.size());
  for (int64_t d : size)
    if (d < 0) return invalid(ctx, "input 1 (size) has a negative dimension {}", d);
  return size;
}

}  // namespace

InferResult inferAffineGrid(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> size, affineSize(ctx, inputs));
  ir::Shape out{size[0]};
  out.insert(out.end(), size.begin() + 2, size.end());
  out.push_back(static_cast<int64_t>(size.size()) - 2);
  return single(inputs[0].type, std::move(out));
}

Status runAffineGrid(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, true);
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> size, affineSize(ctx, descs));
  const bool alignCorners = attrsOf<ops::GridSampleAttrs>(ctx).alignCorners;
  const size_t r = size.size() - 2;
  const std::vector<int64_t> spatial(size.begin() + 2, size.end());
  // Normalized positions along each axis: pixel centres, or the corner pixels at -1 and 1 with align_corners.
  std::vector<std::vector<double>> base(r);
  for (size_t d = 0; d < r; ++d)
    for (int64_t i = 0; i < spatial[d]; ++i) {
      const auto n = static_cast<double>(spatial[d]), x = static_cast<double>(i);
      base[d].push_back(alignCorners ? (n > 1 ? -1 + 2 * x / (n - 1) : -1.0) : -1 + (2 * x + 1) / n);
    }
  const int64_t points = dimProduct(spatial);
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(inputs[0]->type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* theta = inputs[0]->dataAs<T>();
    T* y = outputs[0]->mutableDataAs<T>();
    std::vector<double> coord(r + 1, 1.0);  // x, y[, z], 1: the innermost axis first
    std::vector<int64_t> index(r, 0);
    for (int64_t n = 0; n < size[0]; ++n) {
      const T* m = theta + n * static_cast<int64_t>(r * (r + 1));
      std::fill(index.begin(), index.end(), 0);
      for (int64_t p = 0; p < points; ++p) {
        for (size_t d = 0; d < r; ++d) coord[r - 1 - d] = base[d][static_cast<size_t>(index[d])];
        for (size_t i = 0; i < r; ++i) {
          double v = 0;
          for (size_t j = 0; j <= r; ++j) v += static_cast<double>(m[i * (r + 1) + j]) * coord[j];
          *y++ = static_cast<T>(v);
        }
        for (size_t d = r; d-- > 0;) {
          if (++index[d] < spatial[d]) break;
          index[d] = 0;
        }
      }
    }
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
