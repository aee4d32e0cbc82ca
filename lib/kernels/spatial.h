// Sliding-window geometry shared by Conv and the pooling ops: kernel, strides, dilations, pads, auto_pad.
#pragma once

#include "cpu/vec_math.h"
#include "kernels/kernel_util.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace ctxkit::kernels::detail {

// Inline storage (Dims): kernels compute their window on every run, which then allocates nothing.
struct Window {
  Dims in;      // input spatial dims
  Dims kernel;  // kernel spatial dims
  Dims strides, dilations;
  Dims padBegin, padEnd;
  Dims out;  // output spatial dims
  int64_t rank() const { return static_cast<int64_t>(in.size()); }
};

// Applies the typed strides/dilations/pads/auto_pad to a window of `kernel` over `in` and computes the output
// dims. `ceilMode` rounds output dims up (pools); windows that would start inside the end padding are dropped,
// as ONNX specifies.
Expected<Window> computeWindow(const OpContext& ctx, const ops::WindowAttrs& attrs, std::span<const int64_t> in,
                               std::span<const int64_t> kernel, bool ceilMode);

// Windows of up to 3 spatial dims padded to exactly 3 (leading unit dims), so kernels need one loop nest.
struct Window3 {
  int64_t in[3], kernel[3], stride[3], dilation[3], padBegin[3], padEnd[3], out[3];
  bool operator==(const Window3&) const = default;
};
Window3 toWindow3(const Window& w);

// dst[i * dstLd + r] = src[r * srcLd + i] for r < rows, i < n, in 8 x 8 blocks (conv.cpp): between channel-major
// planes and position-major tiles.
void transposeRows(const float* src, int64_t srcLd, int64_t rows, int64_t n, float* dst, int64_t dstLd);

// One float plane (up to 3 spatial dims) copied with its padding materialized as `fill`, and every row's
// columns split by stride phase (padded column c lands in phase c % stride at index c / stride). Each tap of
// a window op then reads a contiguous run of inputs for a whole row of outputs, with no bounds checks, which
// the vectorized depthwise Conv and float pooling kernels need. The buffer is kept between loads.
// One stride phase of a padded row: element j holds input column j * stride + first for j in [lo, hi), the fill
// elsewhere (PaddedPlane).
struct PhaseColumns {
  int64_t first = 0, lo = 0, hi = 0;
};

class PaddedPlane {
public:
  // Copies `channels` consecutive planes from `x` (each w.in[0] x w.in[1] x w.in[2] floats) for window `w`;
  // requires w.out[i] >= 1.
  void load(const float* x, const Window3& w, float fill, int64_t channels = 1);
  // Floats after the plane, set to the fill, that a vector reader may load past its last column
  // (cpu::vecTapsDotRows with a column stride of 2).
  static constexpr int64_t kReadSlack = 16;
  // Number of taps: channels * kernel[0] * kernel[1] * kernel[2].
  size_t tapCount() const { return static_cast<size_t>(channels_ * w_.kernel[0] * w_.kernel[1] * w_.kernel[2]); }
  // taps[t], t over (c, kd, kh, kw) in order (a Conv weight's layout): tap t's inputs for outputs
  // ow = 0 .. out[2]-1 of output row (od, oh).
  void rowTaps(int64_t od, int64_t oh, const float** taps) const;
  // How far apart two consecutive output rows' taps are (rowTaps(od, oh + 1) = rowTaps(od, oh) + rowStep()).
  int64_t rowStep() const { return ohStep_; }
  // Capacities (floats, taps) and reserving them, for scratch kept per thread (kernels/thread_scratch.h).
  size_t dataCapacity() const { return data_.capacity(); }
  size_t tapCapacity() const { return tapOffsets_.capacity(); }
  // Memory newly reserved is written once, so that a run's first load does not fault its pages in.
  void reserve(size_t floats, size_t taps) {
    if (data_.capacity() < floats) {
      data_.reserve(floats);
      data_.resize(data_.capacity());
      data_.clear();
    }
    tapOffsets_.reserve(taps);
  }

private:
  void planTaps();

  Window3 w_{};
  int64_t ext_[3] = {};   // padded extents: the input, its pads, and any ceil_mode overhang
  int64_t phaseLen_ = 0;  // columns per phase: ceil(ext_[2] / stride)
  int64_t channels_ = 1;
  float fill_ = 0;       // the padding's value at the last load
  size_t dataSize_ = 0;  // data_'s size after the last load (the planes and the read slack)
  std::vector<float> data_;
  // Each tap's offset in data_ for output row (0, 0); row (od, oh) adds od * odStep_ + oh * ohStep_. Made by
  // load, so that rowTaps only adds (it runs once per output row, and planes can be a few columns wide).
  std::vector<int64_t> tapOffsets_;
  int64_t odStep_ = 0, ohStep_ = 0;
  // For strides 1 and 2, each phase's columns of a padded row inside the input (made with the taps; wider strides
  // work theirs out per row): a fixed array, so that no stride makes a load allocate.
  PhaseColumns phases_[2];
  bool planned_ = false;
};

// For a kernel tap at input offset `off` (tap * dilation - padBegin) along one dim: the output positions o
// in [lo, hi) whose input position o * stride + off falls inside [0, in).
inline void outputsForTap(int64_t off, int64_t stride, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  hi = in - off <= 0 ? 0 : std::min(out, (in - off + stride - 1) / stride);
  lo = std::min(lo, hi);
}

// For output position o along one dim: the taps t in [lo, hi) whose input position lands inside [0, in).
inline void tapsForOutput(int64_t o, int64_t stride, int64_t pad, int64_t dil, int64_t k, int64_t in, int64_t& lo,
                          int64_t& hi) {
  int64_t start = o * stride - pad;
  lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
  hi = in - start <= 0 ? 0 : std::min(k, (in - start + dil - 1) / dil);
  lo = std::min(lo, hi);
}

// Walks one plane's window outputs in row-major order: f(o, taps) for output o, where taps(g) calls g(pos) with
// the flat input position of every tap inside the input (padding taps are skipped).
template <typename F> void forEachWindow(const Window3& w, F&& f) {
  int64_t o = 0;
  for (int64_t od = 0; od < w.out[0]; ++od) {
    int64_t d0, d1;
    tapsForOutput(od, w.stride[0], w.padBegin[0], w.dilation[0], w.kernel[0], w.in[0], d0, d1);
    for (int64_t oh = 0; oh < w.out[1]; ++oh) {
      int64_t h0, h1;
      tapsForOutput(oh, w.stride[1], w.padBegin[1], w.dilation[1], w.kernel[1], w.in[1], h0, h1);
      for (int64_t ow = 0; ow < w.out[2]; ++ow, ++o) {
        int64_t w0, w1;
        tapsForOutput(ow, w.stride[2], w.padBegin[2], w.dilation[2], w.kernel[2], w.in[2], w0, w1);
        auto taps = [&](auto&& g) {
          for (int64_t kd = d0; kd < d1; ++kd) {
            const int64_t id = od * w.stride[0] - w.padBegin[0] + kd * w.dilation[0];
            for (int64_t kh = h0; kh < h1; ++kh) {
              const int64_t ih = oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1];
              for (int64_t kw = w0; kw < w1; ++kw)
                g((id * w.in[1] + ih) * w.in[2] + ow * w.stride[2] - w.padBegin[2] + kw * w.dilation[2]);
            }
          }
        };
        f(o, taps);
      }
    }
  }
}

// d[o] = src[o * s] for o in [a, b); stride 2 (the downsampling convs of every CNN) in vectors for float.
template <typename T> void copyStrided(const T* src, int64_t s, T* d, int64_t a, int64_t b) {
  if constexpr (std::is_same_v<T, float>) {
    if (s == 2) {
      cpu::vecGatherEven(src + 2 * a, d + a, static_cast<size_t>(std::max<int64_t>(0, b - a)));
      return;
    }
  }
  for (int64_t o = a; o < b; ++o) d[o] = src[o * s];
}

// im2col's walk over rows [rowBegin, rowEnd) of (c, kd, kh, kw): `rowOut(row)` is where a row's values go (its
// colEnd - colBegin positions from index 0), and `rowDone(row)` is called once they are written.
template <typename T, typename RowOut, typename RowDone>
void unfoldRows(const T* x, const Window3& w, int64_t rowBegin, int64_t rowEnd, int64_t colBegin, int64_t colEnd,
                T fill, RowOut&& rowOut, RowDone&& rowDone) {
  const int64_t kSize = w.kernel[0] * w.kernel[1] * w.kernel[2];
  const int64_t inSize = w.in[0] * w.in[1] * w.in[2];
  // Positions and taps are stepped, not divided out: a division for every run of a few outputs (7x7 maps) and every
  // row took most of this function's time in ResNet-18's late stages.
  const int64_t ow0 = colBegin % w.out[2], oh0 = (colBegin / w.out[2]) % w.out[1];
  const int64_t od0 = colBegin / (w.out[2] * w.out[1]);
  const int64_t k0 = rowBegin % kSize;
  int64_t c = rowBegin / kSize, kd = k0 / (w.kernel[1] * w.kernel[2]), kh = (k0 / w.kernel[2]) % w.kernel[1];
  int64_t kw = k0 % w.kernel[2];
  for (int64_t row = rowBegin; row < rowEnd; ++row) {
    if (row > rowBegin && ++kw == w.kernel[2]) {  // the next tap, (c, kd, kh, kw) in row-major order
      kw = 0;
      if (++kh == w.kernel[1]) {
        kh = 0;
        if (++kd == w.kernel[0]) kd = 0, ++c;
      }
    }
    const T* xc = x + c * inSize;
    T* dst = rowOut(row) - colBegin;  // indexed by output position
    const int64_t off = kw * w.dilation[2] - w.padBegin[2];
    const int64_t s = w.stride[2];
    int64_t lo, hi;  // output columns whose tap lands inside the input row
    outputsForTap(off, s, w.in[2], w.out[2], lo, hi);
    int64_t ow = ow0, oh = oh0, od = od0;
    for (int64_t pos = colBegin; pos < colEnd; ow = 0, oh = oh + 1 == w.out[1] ? 0 : oh + 1, od += oh == 0) {
      int64_t run = std::min(w.out[2] - ow, colEnd - pos);
      T* d = dst + pos - ow;  // d[ow] is this position
      int64_t id = od * w.stride[0] - w.padBegin[0] + kd * w.dilation[0];
      int64_t ih = oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1];
      int64_t end = ow + run;
      if (id < 0 || id >= w.in[0] || ih < 0 || ih >= w.in[1]) {
        std::fill(d + ow, d + end, fill);
      } else {
        const T* src = xc + (id * w.in[1] + ih) * w.in[2] + off;
        int64_t a = std::clamp(lo, ow, end), b = std::clamp(hi, ow, end);
        std::fill(d + ow, d + a, fill);
        if (s == 1) std::memcpy(d + a, src + a, static_cast<size_t>(b - a) * sizeof(T));
        else copyStrided(src, s, d, a, b);
        std::fill(d + b, d + end, fill);
      }
      pos += run;
    }
    rowDone(row);
  }
}

// Unfolds one image (group) into rows [rowBegin, rowEnd) of (c, kd, kh, kw) x output positions [colBegin, colEnd) of
// (od, oh, ow); `col` holds those rows, from rowBegin, of colEnd - colBegin values each; taps in the padding read
// `fill` (a quantized zero point, say).
template <typename T>
void im2col(const T* x, const Window3& w, T* col, int64_t rowBegin, int64_t rowEnd, int64_t colBegin, int64_t colEnd,
            T fill = T(0)) {
  const int64_t width = colEnd - colBegin;
  unfoldRows(
      x, w, rowBegin, rowEnd, colBegin, colEnd, fill, [&](int64_t row) { return col + (row - rowBegin) * width; },
      [](int64_t) {});
}

// One bilinear sample of RoiAlign: four source offsets in the channel plane and their weights (all zero outside the
// image).
struct RoiSample {
  int64_t pos[4] = {0, 0, 0, 0};
  float w[4] = {0, 0, 0, 0};
};

}  // namespace ctxkit::kernels::detail
