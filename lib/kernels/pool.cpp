// MaxPool (with optional Indices), AveragePool (count_include_pad) and GlobalAveragePool over 1-3 spatial dims.
#include "cpu/simd.h"
#include "cpu/vec_math.h"
#include "kernels/ops.h"
#include "kernels/spatial.h"
#include "kernels/thread_scratch.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <immintrin.h>

namespace ctxkit::kernels::detail {

namespace {

struct PoolPlan {
  Window window;
  int64_t planes = 0;  // N * C
};

Expected<PoolPlan> planPool(const OpContext& ctx, std::span<const int64_t> x) {
  if (x.size() < 3)
    return invalid(ctx, "input 0 has shape {} but expected rank 3 or more (N x C x spatial)", shapeStr(x));
  if (x.size() > 5) return unsupported(ctx, "input 0 has shape {}: more than 3 spatial dimensions", shapeStr(x));
  const ops::PoolAttrs& attrs = attrsOf<ops::PoolAttrs>(ctx);
  const ops::IntList& ks = *attrs.window.kernelShape;  // the decoder requires it
  if (ks.size() != x.size() - 2)
    return invalid(ctx, "attribute kernel_shape has {} values but input 0 has shape {} with {} spatial dimensions",
                   ks.size(), shapeStr(x), x.size() - 2);
  PoolPlan p;
  p.planes = x[0] * x[1];
  CTX_ASSIGN_OR_RETURN(p.window, computeWindow(ctx, attrs.window, x.subspan(2), ks, attrs.ceilMode));
  return p;
}

// AveragePool divides by the taps inside the input, or with count_include_pad inside the padded extent; the
// count factors into a part per output row (od, oh) and one per output column.
int64_t tapsInside(int64_t o, int64_t dim, const Window3& w, bool countPad) {
  int64_t lo, hi;
  if (countPad)
    tapsForOutput(o, w.stride[dim], 0, w.dilation[dim], w.kernel[dim], w.in[dim] + w.padBegin[dim] + w.padEnd[dim], lo,
                  hi);
  else tapsForOutput(o, w.stride[dim], w.padBegin[dim], w.dilation[dim], w.kernel[dim], w.in[dim], lo, hi);
  return hi - lo;
}

int64_t outerDivisor(const Window3& w, int64_t od, int64_t oh, bool countPad) {
  return tapsInside(od, 0, w, countPad) * tapsInside(oh, 1, w, countPad);
}

void columnDivisors(const Window3& w, bool countPad, std::vector<int64_t>& counts) {
  counts.resize(static_cast<size_t>(w.out[2]));
  for (int64_t ow = 0; ow < w.out[2]; ++ow) counts[static_cast<size_t>(ow)] = tapsInside(ow, 2, w, countPad);
}

// Max or average over one plane of doubles or 8-bit integers, a whole output row at a time: each tap folds one
// shifted input row into the output row.
template <typename T, bool IsMax>
void poolPlane(const T* xp, T* yp, const Window3& w, bool countPad, std::span<const int64_t> counts) {
  T init = IsMax ? std::numeric_limits<T>::lowest() : T(0);
  if constexpr (IsMax && std::numeric_limits<T>::has_infinity) init = -std::numeric_limits<T>::infinity();
  const int64_t s2 = w.stride[2];
  for (int64_t od = 0; od < w.out[0]; ++od) {
    int64_t d0, d1;
    tapsForOutput(od, w.stride[0], w.padBegin[0], w.dilation[0], w.kernel[0], w.in[0], d0, d1);
    for (int64_t oh = 0; oh < w.out[1]; ++oh) {
      int64_t h0, h1;
      tapsForOutput(oh, w.stride[1], w.padBegin[1], w.dilation[1], w.kernel[1], w.in[1], h0, h1);
      T* orow = yp + (od * w.out[1] + oh) * w.out[2];
      std::fill(orow, orow + w.out[2], init);
      for (int64_t kd = d0; kd < d1; ++kd) {
        int64_t id = od * w.stride[0] - w.padBegin[0] + kd * w.dilation[0];
        for (int64_t kh = h0; kh < h1; ++kh) {
          int64_t ih = oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1];
          const T* src = xp + (id * w.in[1] + ih) * w.in[2];
          for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
            int64_t off = kw * w.dilation[2] - w.padBegin[2];
            int64_t lo, hi;
            outputsForTap(off, s2, w.in[2], w.out[2], lo, hi);
            for (int64_t ow = lo; ow < hi; ++ow) {
              const T v = src[ow * s2 + off];
              if constexpr (IsMax) orow[ow] = std::max(orow[ow], v);
              else orow[ow] += v;
            }
          }
        }
      }
      if constexpr (!IsMax) {
        const int64_t outer = outerDivisor(w, od, oh, countPad);
        for (int64_t ow = 0; ow < w.out[2]; ++ow) {
          int64_t count = outer * counts[static_cast<size_t>(ow)];
          orow[ow] = count > 0 ? orow[ow] / static_cast<T>(count) : T(0);
        }
      }
    }
  }
}

// Float planes of 3-D windows: the padded, phase-split copy (filled with -inf for max, 0 for average) lets every
// output row reduce contiguous tap rows in registers (cpu::vecTapsMax, cpu::vecTapsDot with unit weights), whatever
// the stride. `counts` holds, per output column, the divisor's column factor (see columnDivisors); `ones`, one unit
// weight per tap.
template <bool IsMax>
void poolPlaneF32(const float* xp, float* yp, const Window3& w, bool countPad, std::span<const float> counts,
                  std::span<const float> ones) {
  ThreadScratch& scratch = threadScratch();
  PaddedPlane& plane = scratch.poolPlane;
  std::vector<const float*>& taps = scratch.poolTaps;
  std::vector<float>& divisors = scratch.poolDivisors;
  plane.load(xp, w, IsMax ? -std::numeric_limits<float>::infinity() : 0.0f);
  taps.resize(plane.tapCount());
  const size_t width = static_cast<size_t>(w.out[2]);
  divisors.resize(width);
  int64_t divisorsFor = -1;  // the row factor `divisors` was built for
  const bool emptyColumns = std::find(counts.begin(), counts.end(), 0.0f) != counts.end();
  for (int64_t od = 0; od < w.out[0]; ++od) {
    for (int64_t oh = 0; oh < w.out[1]; ++oh) {
      float* orow = yp + (od * w.out[1] + oh) * w.out[2];
      plane.rowTaps(od, oh, taps.data());
      if constexpr (IsMax) {
        cpu::vecTapsMax(taps.data(), taps.size(), orow, width);
      } else {
        const int64_t outer = outerDivisor(w, od, oh, countPad);
        if (outer == 0) {  // windows with no input (and no counted padding) give 0
          std::fill(orow, orow + width, 0.0f);
          continue;
        }
        cpu::vecTapsDot(taps.data(), ones.data(), taps.size(), 0.0f, orow, width);
        if (outer != divisorsFor) {  // exact: counts are small integers
          for (size_t ow = 0; ow < width; ++ow) divisors[ow] = static_cast<float>(outer) * counts[ow];
          divisorsFor = outer;
        }
        cpu::vecBinary(cpu::BinaryOp::Div, orow, 1, divisors.data(), 1, orow, width);
        if (emptyColumns)
          for (size_t ow = 0; ow < width; ++ow)
            if (counts[ow] == 0.0f) orow[ow] = 0.0f;
      }
    }
  }
}

// 2-D (and 1-D) float pooling over a block of planes at once, as long vector runs whatever the map size.
//
// The block's planes are copied one after another into a padded layout P: each plane hp rows of wp columns, its
// padding (and, in ceil mode, the columns and rows past the input that the last windows reach) filled with -inf
// for max and 0 for average, hp and wp rounded up to multiples of the strides. In that layout a window never needs a
// bounds check, and the planes' rows form one tall image: the vertical pass V[g] = reduce over the kernel's rows of
// P[sh * g + kh * dh] (g over every plane's output rows, q = hp / sh of them per plane) is, at row stride 1, a
// single run over the whole block; the horizontal pass H[i] = reduce over the kernel's columns of V[sw * i + kw * dw]
// is one run over every row of V (wq = wp / sw outputs per row). The rows and columns computed past a plane's
// outputs are discarded. A max pool whose q and wq are its output's sizes writes H into the output; otherwise the
// outputs are picked out of H (and an average divided by its divisor). So a 3x3 pool over a 6x6 map costs a few
// vector steps per plane rather than a call per row: per-row calls cost Inception's and GoogLeNet's small-map pools
// ten times ONNX Runtime's time. Padding only adds taps that never win a max and add 0 to a sum.
struct FlatPoolPlan {
  int64_t hp = 0, wp = 0, q = 0, wq = 0;  // padded plane; V rows per plane; H columns per row
  int64_t block = 1;                      // planes per block
  bool copyFree = false;                  // P is the input itself (no padding, sizes already multiples)
  bool wide = false;                      // rows wide enough to go one at a time (widePoolPlane), without P
  std::vector<ptrdiff_t> rowTaps, colTaps;
  std::vector<float> divisors;  // an average's, per output of a plane (0: the output is 0)
};

constexpr int64_t kFlatPoolBlockFloats = 16384;          // a block's padded planes: about 64 KiB
constexpr int64_t kFlatPoolMaxPlane = int64_t{1} << 22;  // larger planes take the row-at-a-time path
constexpr int64_t kFlatPoolSlack = 32;
constexpr int64_t kFlatPoolWideRow = 32;  // rows of P at least this wide go one at a time              // floats past V
                                          // that a stride-2 vector read may load

bool takesFlatPool(const Window3& w) {
  if (w.kernel[0] != 1 || w.in[0] != 1 || w.out[0] != 1) return false;
  const int64_t hp =
      ((w.out[1] - 1) * w.stride[1] + (w.kernel[1] - 1) * w.dilation[1] + w.stride[1]) / w.stride[1] * w.stride[1];
  const int64_t wp =
      ((w.out[2] - 1) * w.stride[2] + (w.kernel[2] - 1) * w.dilation[2] + w.stride[2]) / w.stride[2] * w.stride[2];
  return hp <= kFlatPoolMaxPlane / std::max<int64_t>(1, wp);
}

FlatPoolPlan makeFlatPoolPlan(const Window3& w, bool isMax, bool countPad, std::span<const int64_t> counts) {
  FlatPoolPlan f;
  const int64_t sh = w.stride[1], sw = w.stride[2];
  f.hp = ((w.out[1] - 1) * sh + (w.kernel[1] - 1) * w.dilation[1] + sh) / sh * sh;
  f.wp = ((w.out[2] - 1) * sw + (w.kernel[2] - 1) * w.dilation[2] + sw) / sw * sw;
  f.q = f.hp / sh;
  f.wq = f.wp / sw;
  f.block = std::max<int64_t>(1, kFlatPoolBlockFloats / (f.hp * f.wp));
  f.copyFree = w.padBegin[1] == 0 && w.padBegin[2] == 0 && f.hp == w.in[1] && f.wp == w.in[2];
  f.wide = f.wp >= kFlatPoolWideRow;
  if (f.wide) f.block = std::max<int64_t>(1, kFlatPoolBlockFloats / (w.in[1] * w.in[2] + 1));
  // Row taps: rows of P, or for wide rows, input rows.
  for (int64_t t = 0; t < w.kernel[1]; ++t) f.rowTaps.push_back(t * w.dilation[1] * (f.wide ? w.in[2] : f.wp));
  for (int64_t t = 0; t < w.kernel[2]; ++t) f.colTaps.push_back(t * w.dilation[2]);
  if (!isMax) {
    for (int64_t oh = 0; oh < w.out[1]; ++oh) {
      const int64_t outer = outerDivisor(w, 0, oh, countPad);
      for (int64_t ow = 0; ow < w.out[2]; ++ow)
        f.divisors.push_back(static_cast<float>(outer * counts[static_cast<size_t>(ow)]));
    }
    f.divisors.resize(f.divisors.size() + 16, 1.0f);  // read (and discarded) by poolCopyRun's vectors past a row
  }
  return f;
}

// The helpers taking and returning PoolLanes are always inlined: -Wpsabi (64-byte vectors passed without AVX-512)
// concerns no real call.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float PoolLanes __attribute__((vector_size(64)));
#define CTX_POOL_INLINE __attribute__((always_inline)) inline

// Sixteen consecutive floats at p, or (Stride 2) the sixteen at even offsets of p's 32 (one float past the last even
// one is loaded).
template <int Stride> CTX_POOL_INLINE PoolLanes poolLoad(const float* p) {
  PoolLanes a;
  __builtin_memcpy(&a, p, sizeof a);
  if constexpr (Stride == 1) {
    return a;
  } else {
    PoolLanes b;
    __builtin_memcpy(&b, p + 16, sizeof b);
    return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  }
}

template <bool IsMax> CTX_POOL_INLINE PoolLanes poolCombine(PoolLanes acc, PoolLanes x) {
  if constexpr (IsMax) return acc < x ? x : acc;  // as vecTapsMax: a NaN never replaces a number
  else return acc + x;
}

// out[i] = reduce over t of src[taps[t] + i * stride], from -inf (max) or 0 (sum), for i < n, one at a time.
template <bool IsMax>
CTX_POOL_INLINE void poolRunScalar(const float* src, const ptrdiff_t* taps, size_t tapCount, float* out, size_t n,
                                   int64_t stride) {
  for (size_t i = 0; i < n; ++i) {
    float acc = IsMax ? -std::numeric_limits<float>::infinity() : 0.0f;
    for (size_t t = 0; t < tapCount; ++t) {
      const float v = src[taps[t] + static_cast<ptrdiff_t>(i) * stride];
      if constexpr (IsMax) acc = acc < v ? v : acc;  // as vecTapsMax: a NaN never replaces a number
      else acc += v;
    }
    out[i] = acc;
  }
}

// poolRunScalar in vectors at a fixed stride of 1 or 2. Full vectors of 16
// outputs; the last one overlaps the one before it (out does not alias src) and shorter runs go one at a time.
// poolRun for a fixed number of taps (2 and 3: most pools' kernel rows and columns), their addresses held in
// registers: the tap loop's overhead was most of a small map's time.
template <bool IsMax, int Stride, int Taps>
CTX_POOL_INLINE void poolRunFixed(const float* src, const ptrdiff_t* taps, float* out, size_t n) {
  constexpr float kNone = IsMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  constexpr size_t kLanes = 16;
  const float* tap[Taps];
#pragma GCC unroll 4
  for (int t = 0; t < Taps; ++t) tap[t] = src + taps[t];
  for (size_t i = 0;; i += kLanes) {
    if (i + kLanes > n) i = n - kLanes;
    PoolLanes acc;
    for (size_t j = 0; j < kLanes; ++j) acc[j] = kNone;
    const auto at = static_cast<ptrdiff_t>(i) * Stride;
#pragma GCC unroll 4
    for (int t = 0; t < Taps; ++t) acc = poolCombine<IsMax>(acc, poolLoad<Stride>(tap[t] + at));
    __builtin_memcpy(out + i, &acc, sizeof acc);
    if (i + kLanes == n) return;
  }
}

template <bool IsMax, int Stride>
CTX_POOL_INLINE void poolRun(const float* src, const ptrdiff_t* taps, size_t tapCount, float* out, size_t n) {
  constexpr float kNone = IsMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  constexpr size_t kLanes = 16;
  if (n >= kLanes && tapCount == 3) return poolRunFixed<IsMax, Stride, 3>(src, taps, out, n);
  if (n >= kLanes && tapCount == 2) return poolRunFixed<IsMax, Stride, 2>(src, taps, out, n);
  if (n >= kLanes) {
    for (size_t i = 0;; i += kLanes) {
      if (i + kLanes > n) i = n - kLanes;
      PoolLanes acc;
      for (size_t j = 0; j < kLanes; ++j) acc[j] = kNone;
      const float* base = src + static_cast<ptrdiff_t>(i) * Stride;
      for (size_t t = 0; t < tapCount; ++t) acc = poolCombine<IsMax>(acc, poolLoad<Stride>(base + taps[t]));
      __builtin_memcpy(out + i, &acc, sizeof acc);
      if (i + kLanes == n) return;
    }
  }
  poolRunScalar<IsMax>(src, taps, tapCount, out, n, Stride);
}

// poolRun at any stride (strides other than 1 and 2 one output at a time).
template <bool IsMax>
CTX_POOL_INLINE void poolRunStrided(const float* src, const ptrdiff_t* taps, size_t tapCount, float* out, size_t n,
                                    int64_t stride) {
  if (stride == 1) return poolRun<IsMax, 1>(src, taps, tapCount, out, n);
  if (stride == 2) return poolRun<IsMax, 2>(src, taps, tapCount, out, n);
  poolRunScalar<IsMax>(src, taps, tapCount, out, n, stride);
}

// dst[i] = src[i] (no divisors) or src[i] / divisors[i] (0 where the divisor is 0: exact, the divisors are small
// integers), for i < n, in vectors of 16; dst may be src. When `room` floats from src can be read and from dst written
// (and divisors has room too), the last vector runs past n instead of going one float at a time: a short row's
// copy is then a vector or two, its extra floats overwritten later by the caller. Otherwise, with dst not src, the
// last vector overlaps the one before it.
CTX_POOL_INLINE void poolCopyRun(const float* src, float* dst, size_t n, const float* divisors, size_t room = 0) {
  constexpr size_t kLanes = 16;
  auto block = [&](size_t i) {
    PoolLanes v;
    __builtin_memcpy(&v, src + i, sizeof v);
    if (divisors) {
      PoolLanes d, zero = {};
      __builtin_memcpy(&d, divisors + i, sizeof d);
      v = d == zero ? zero : v / d;
    }
    __builtin_memcpy(dst + i, &v, sizeof v);
  };
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) block(i);
  if (i == n) return;
  if (src != dst && i + kLanes <= room) return block(i);
  if (src != dst && n >= kLanes) return block(n - kLanes);
  for (; i < n; ++i) dst[i] = !divisors ? src[i] : divisors[i] == 0.0f ? 0.0f : src[i] / divisors[i];
}

// dst[i] = value for i < n, in whole vectors of 16: up to 15 floats past n are written too. For the padded copy's
// margins, whose overrun lands on floats of the scratch written after them (the rest of the row, the next row or
// plane, V): a call per margin, not a memset call (zero-filling loops become one) per row.
CTX_POOL_INLINE void poolFill(float* dst, int64_t n, float value) {
  PoolLanes v;
  for (size_t j = 0; j < 16; ++j) v[j] = value;
  for (int64_t i = 0; i < n; i += 16) __builtin_memcpy(dst + i, &v, sizeof v);
}

// Floats of scratch a block of `planes` planes needs: P (unless copy-free), V and H, with the read slack; wide rows
// need one V row.
int64_t flatPoolScratch(const FlatPoolPlan& f, int64_t planes) {
  if (f.wide) return f.wp + kFlatPoolSlack;
  return (f.copyFree ? 0 : planes * f.hp * f.wp) + 2 * planes * f.hp * f.wp + 2 * kFlatPoolSlack;
}

// Wide rows, one plane at a time: each output row's vertical reduction reads the input rows inside its window into a
// row whose padding columns keep -inf or 0, and the horizontal pass writes the output row.
template <bool IsMax>
CTX_POOL_INLINE void widePoolPlane(const float* x, float* y, const Window3& w, const FlatPoolPlan& f, float* row) {
  const int64_t inW = w.in[2], outW = w.out[2], padL = w.padBegin[2];
  const int64_t cols = std::clamp<int64_t>(f.wp - padL, 0, inW);
  float* inside = row + std::min(padL, f.wp);
  for (int64_t oh = 0; oh < w.out[1]; ++oh) {
    int64_t h0, h1;
    tapsForOutput(oh, w.stride[1], w.padBegin[1], w.dilation[1], w.kernel[1], w.in[1], h0, h1);
    float* orow = y + oh * outW;
    if (h0 >= h1) {  // windows of padding rows only: a max of nothing is -inf, an average 0
      std::fill(orow, orow + outW, IsMax ? -std::numeric_limits<float>::infinity() : 0.0f);
      continue;
    }
    const float* first = x + (oh * w.stride[1] - w.padBegin[1] + h0 * w.dilation[1]) * inW;
    poolRun<IsMax, 1>(first, f.rowTaps.data(), static_cast<size_t>(h1 - h0), inside, static_cast<size_t>(cols));
    poolRunStrided<IsMax>(row, f.colTaps.data(), f.colTaps.size(), orow, static_cast<size_t>(outW), w.stride[2]);
    if constexpr (!IsMax) poolCopyRun(orow, orow, static_cast<size_t>(outW), f.divisors.data() + oh * outW);
  }
}

// Pools `planes` consecutive planes (at most f.block) from x into y.
template <bool IsMax>
CTX_POOL_INLINE void flatPoolBlock(const float* x, float* y, const Window3& w, const FlatPoolPlan& f, int64_t planes,
                                   float* scratch) {
  constexpr float kNone = IsMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  const int64_t inH = w.in[1], inW = w.in[2], outH = w.out[1], outW = w.out[2];
  const int64_t padT = w.padBegin[1], padL = w.padBegin[2], sh = w.stride[1], sw = w.stride[2];
  const int64_t hp = f.hp, wp = f.wp, wq = f.wq;
  if (f.wide) {
    std::fill(scratch, scratch + wp + kFlatPoolSlack, kNone);
    for (int64_t c = 0; c < planes; ++c) widePoolPlane<IsMax>(x + c * inH * inW, y + c * outH * outW, w, f, scratch);
    return;
  }
  // P: the padded planes.
  const float* p = x;
  float* next = scratch;
  if (!f.copyFree) {
    float* pad = next;
    next += planes * hp * wp;
    const int64_t rows = std::clamp<int64_t>(hp - padT, 0, inH);  // input rows inside P
    const int64_t cols = std::clamp<int64_t>(wp - padL, 0, inW);  // input columns inside P
    const int64_t top = std::min(padT, hp), left = std::min(padL, wp);
    const float* xEnd = x + planes * inH * inW;
    const float* pEnd = pad + planes * hp * wp;
    for (int64_t c = 0; c < planes; ++c) {
      float* dst = pad + c * hp * wp;
      const float* src = x + c * inH * inW;
      poolFill(dst, top * wp, kNone);
      for (int64_t r = 0; r < rows; ++r) {
        float* d = dst + (top + r) * wp;
        poolFill(d, left, kNone);
        const float* from = src + r * inW;
        poolCopyRun(from, d + left, static_cast<size_t>(cols), nullptr,
                    static_cast<size_t>(std::min(xEnd - from, pEnd - (d + left))));
        poolFill(d + left + cols, wp - left - cols, kNone);
      }
      poolFill(dst + (top + rows) * wp, (hp - top - rows) * wp, kNone);
    }
    p = pad;
  }
  // V: the vertical reductions at every row of P up to the last plane's last output row (output row oh of plane c
  // is V's row c * hp + oh * sh; the rows between them are computed and never read).
  const int64_t rowsV = (planes - 1) * hp + (outH - 1) * sh + 1;
  const float* v = p;
  // Skipped for a kernel one row high at stride 1, unless H's stride-2 reads would then run past the input itself.
  if (!(w.kernel[1] == 1 && sh == 1 && !(f.copyFree && sw == 2))) {
    float* vr = next;
    next += rowsV * wp + kFlatPoolSlack;
    poolRun<IsMax, 1>(p, f.rowTaps.data(), f.rowTaps.size(), vr, static_cast<size_t>(rowsV * wp));
    std::fill(vr + rowsV * wp, vr + rowsV * wp + kFlatPoolSlack, kNone);  // the stride-2 reads past the end
    v = vr;
  }
  // H: the horizontal reductions; the max of a pool whose layout is its output's goes straight there.
  const int64_t countH = (rowsV - 1) * wq + outW;
  const bool direct = IsMax && hp == outH && sh == 1 && wq == outW;
  float* h = direct ? y : next;
  if (w.kernel[2] == 1 && sw == 1 && !direct) {
    h = const_cast<float*>(v);  // not written: only read below
  } else {
    poolRunStrided<IsMax>(v, f.colTaps.data(), f.colTaps.size(), h, static_cast<size_t>(countH), sw);
  }
  if (direct) return;
  // Rows in order, each vector store past a row's end overwritten by the next row; never past this block's output
  // (another thread's) nor past H.
  const float* hEnd = h + countH;
  float* yEnd = y + planes * outH * outW;
  for (int64_t c = 0; c < planes; ++c) {
    for (int64_t oh = 0; oh < outH; ++oh) {
      const float* src = h + (c * hp + oh * sh) * wq;
      float* dst = y + (c * outH + oh) * outW;
      poolCopyRun(src, dst, static_cast<size_t>(outW), IsMax ? nullptr : f.divisors.data() + oh * outW,
                  static_cast<size_t>(std::min(hEnd - src, yEnd - dst)));
    }
  }
}

// flatPoolBlock compiled once per x86-64 level (a template cannot take the clones).
CTX_SIMD_CLONES void flatMaxPoolBlock(const float* x, float* y, const Window3& w, const FlatPoolPlan& f, int64_t planes,
                                      float* scratch) {
  flatPoolBlock<true>(x, y, w, f, planes, scratch);
}
CTX_SIMD_CLONES void flatAveragePoolBlock(const float* x, float* y, const Window3& w, const FlatPoolPlan& f,
                                          int64_t planes, float* scratch) {
  flatPoolBlock<false>(x, y, w, f, planes, scratch);
}

// 2-D float MaxPool on AVX-512 with every padded row in registers (registerRowsMaxPool): an output row's window rows
// are loaded as up to four vectors of 16 (masked loads: columns outside the input read -inf and are not touched) and
// reduced into V, and each output vector of 16 is the max over the kernel's columns of V's lanes ow * stride + kw *
// dilation, picked out of V's registers by permutes. No padded copy, no pass through memory between the vertical and
// horizontal reductions: SqueezeNet's 3x3 stride-2 ceil-mode pools onto 23x23, 11x11 and 5x5 (flat path) cost 3-4x
// ONNX Runtime's NCHWc pools.
constexpr int64_t kRegisterRowLanes = 64;  // padded columns held: four vectors
constexpr int64_t kRegisterRowOutputs = 32;
constexpr int64_t kRegisterRowMaxKernel = 8;

bool registerRowsAvx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has;
}

// Whether registerRowsMaxPool takes this window: 2-D, at most 32 outputs and 8 kernel columns per row, and every
// padded column a row's outputs read among the first kRegisterRowLanes.
// Whether every padded column a row's outputs read is among the first `lanes`.
bool registerRowsFit(const Window3& w, int64_t lanes) {
  return w.padBegin[2] < lanes && (w.out[2] - 1) * w.stride[2] + (w.kernel[2] - 1) * w.dilation[2] < lanes;
}

bool takesRegisterRows(const Window3& w) {
  return registerRowsAvx512() && w.kernel[0] == 1 && w.in[0] == 1 && w.out[0] == 1 && w.out[2] <= kRegisterRowOutputs &&
         w.kernel[2] <= kRegisterRowMaxKernel && registerRowsFit(w, kRegisterRowLanes);
}

// The max of a and b as poolCombine's `acc < x ? x : acc` (a NaN never replaces a number; on ties, acc): vmaxps
// returns its second operand when either is NaN or both are zeros.
__attribute__((target("avx512f"))) inline __m512 registerMax(__m512 acc, __m512 x) {
  return _mm512_maskz_max_ps(0xFFFF, x, acc);  // (maskz: GCC 12 warns of _mm512_max_ps's undefined source)
}

// Planes [0, planes) of x (in[1] x in[2] each) into y (out[1] x out[2] each), with `Vectors` vectors of padded
// columns (2: rows of at most 32, every lane picked by one permute; 4: two permutes and a blend).
template <int Vectors>
__attribute__((target("avx512f"))) void registerRowsMaxPool(const float* x, float* y, const Window3& w,
                                                            int64_t planes) {
  const int64_t inH = w.in[1], inW = w.in[2], outH = w.out[1], outW = w.out[2], padL = w.padBegin[2];
  const __m512 none = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  // Padded column q of vector v reads input column 16 v + q - padL: the loads' masks.
  __mmask16 load[4];
  for (int v = 0; v < 4; ++v) {
    uint32_t m = 0;
    for (int q = 0; q < 16; ++q) {
      const int64_t col = 16 * v + q - padL;
      if (col >= 0 && col < inW) m |= 1u << q;
    }
    load[v] = static_cast<__mmask16>(m);
  }
  // Per output vector j and kernel column kw: the padded column each lane reads (0-63), as permute indices.
  __m512i index[2][kRegisterRowMaxKernel];
  const int outVectors = outW > 16 ? 2 : 1;
  for (int j = 0; j < outVectors; ++j)
    for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
      alignas(64) int32_t lanes[16];
      for (int i = 0; i < 16; ++i) {
        const int64_t col = (16 * j + i) * w.stride[2] + kw * w.dilation[2];
        lanes[i] = static_cast<int32_t>(std::min<int64_t>(col, kRegisterRowLanes - 1));  // (lanes past outW: unused)
      }
      index[j][kw] = _mm512_load_si512(lanes);
    }
  const __mmask16 store[2] = {static_cast<__mmask16>(outW >= 16 ? 0xFFFF : (1u << outW) - 1),
                              static_cast<__mmask16>(outW > 16 ? (1u << (outW - 16)) - 1 : 0)};
  for (int64_t c = 0; c < planes; ++c) {
    const float* xc = x + c * inH * inW;
    float* yc = y + c * outH * outW;
    for (int64_t oh = 0; oh < outH; ++oh) {
      int64_t h0, h1;
      tapsForOutput(oh, w.stride[1], w.padBegin[1], w.dilation[1], w.kernel[1], inH, h0, h1);
      __m512 v[Vectors];
      for (__m512& q : v) q = none;
      for (int64_t kh = h0; kh < h1; ++kh) {
        // Padded column 0 of this input row: an address formed as an integer (it may lie before the plane; the
        // masked-off lanes are not read).
        const auto row =
            reinterpret_cast<uintptr_t>(xc + (oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1]) * inW) -
            static_cast<uintptr_t>(padL) * sizeof(float);
#pragma GCC unroll 4
        for (int q = 0; q < Vectors; ++q)  // (a fixed count keeps v in registers; a vector past the row loads nothing)
          v[q] = registerMax(v[q], _mm512_mask_loadu_ps(none, load[q], reinterpret_cast<const float*>(row + 64 * q)));
      }
      for (int j = 0; j < outVectors; ++j) {
        __m512 acc = none;
        for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
          const __m512i idx = index[j][kw];
          // Lanes 0-31 from v[0], v[1]; 32-63 from v[2], v[3] (the index's bit 5 picks).
          const __m512 low = _mm512_permutex2var_ps(v[0], idx, v[1]);
          if constexpr (Vectors == 2) {
            acc = registerMax(acc, low);
          } else {
            const __m512 high = _mm512_permutex2var_ps(v[2], idx, v[3]);
            const __mmask16 upper = _mm512_test_epi32_mask(idx, _mm512_set1_epi32(32));
            acc = registerMax(acc, _mm512_mask_blend_ps(upper, low, high));
          }
        }
        _mm512_mask_storeu_ps(yc + oh * outW + 16 * j, store[j], acc);
      }
    }
  }
}

// What a pool's runs need that depends only on its window and input shape: worked out at prepare (planPoolOnce) or,
// for an op run without a plan, per run.
struct PoolRunPlan {
  Window3 w{};
  int64_t planes = 0;
  bool countPad = false;
  std::vector<int64_t> counts;  // an average's divisor factor per output column (columnDivisors)
  std::vector<float> countsF;
  std::vector<float> ones;    // unit weights, one per tap (the 3-D float path)
  bool flat = false;          // float planes take flatPoolBlock
  bool registerRows = false;  // a float MaxPool takes registerRowsMaxPool
  FlatPoolPlan flatPlan;
};

Expected<PoolRunPlan> makePoolRunPlan(const OpContext& ctx, std::span<const int64_t> shape) {
  CTX_ASSIGN_OR_RETURN(PoolPlan p, planPool(ctx, shape));
  PoolRunPlan r;
  r.w = toWindow3(p.window);
  r.planes = p.planes;
  const bool isMax = ctx.kind == ir::OpKind::MaxPool;
  r.countPad = !isMax && attrsOf<ops::PoolAttrs>(ctx).countIncludePad;
  if (!isMax) columnDivisors(r.w, r.countPad, r.counts);
  r.countsF.assign(r.counts.begin(), r.counts.end());
  const int64_t outSize = r.w.out[0] * r.w.out[1] * r.w.out[2];
  if (outSize == 0) return r;
  r.ones.assign(static_cast<size_t>(r.w.kernel[0] * r.w.kernel[1] * r.w.kernel[2]), 1.0f);
  r.registerRows = isMax && takesRegisterRows(r.w);
  r.flat = takesFlatPool(r.w);
  if (r.flat) {
    r.flatPlan = makeFlatPoolPlan(r.w, isMax, r.countPad, r.counts);
    raiseThreadScratchMark(ScratchBuffer::PoolRows,
                           static_cast<size_t>(flatPoolScratch(r.flatPlan, std::min(r.flatPlan.block, r.planes))));
  }
  return r;
}

template <typename T, bool IsMax> void pool(const OpContext& ctx, const T* x, T* y, const PoolRunPlan& plan) {
  const Window3& w = plan.w;
  const int64_t inSize = w.in[0] * w.in[1] * w.in[2];
  const int64_t outSize = w.out[0] * w.out[1] * w.out[2];
  if (outSize == 0) return;
  const auto taps = static_cast<size_t>(w.kernel[0] * w.kernel[1] * w.kernel[2]);
  const size_t work = static_cast<size_t>(outSize) * taps;
  if constexpr (std::is_same_v<T, float>) {
    if (IsMax && plan.registerRows) {
      parallelForWork(ctx, static_cast<size_t>(plan.planes), work, [&](size_t p0, size_t p1) {
        const float* xs = x + static_cast<int64_t>(p0) * inSize;
        float* ys = y + static_cast<int64_t>(p0) * outSize;
        if (registerRowsFit(w, 32)) registerRowsMaxPool<2>(xs, ys, w, static_cast<int64_t>(p1 - p0));
        else registerRowsMaxPool<4>(xs, ys, w, static_cast<int64_t>(p1 - p0));
      });
      return;
    }
    if (plan.flat) {
      const FlatPoolPlan& f = plan.flatPlan;
      parallelForWork(ctx, static_cast<size_t>(plan.planes), work, [&](size_t p0, size_t p1) {
        std::vector<float>& rows = threadScratch().poolRows;
        const auto begin = static_cast<int64_t>(p0), end = static_cast<int64_t>(p1);
        float* scratch = scratchAtLeast(rows, static_cast<size_t>(flatPoolScratch(f, std::min(f.block, end - begin))));
        for (int64_t c = begin; c < end; c += f.block) {
          const int64_t n = std::min(f.block, end - c);
          if constexpr (IsMax) flatMaxPoolBlock(x + c * inSize, y + c * outSize, w, f, n, scratch);
          else flatAveragePoolBlock(x + c * inSize, y + c * outSize, w, f, n, scratch);
        }
      });
      return;
    }
  }
  parallelForWork(ctx, static_cast<size_t>(plan.planes), work, [&](size_t p0, size_t p1) {
    for (size_t plane = p0; plane < p1; ++plane) {
      const T* xp = x + static_cast<int64_t>(plane) * inSize;
      T* yp = y + static_cast<int64_t>(plane) * outSize;
      if constexpr (std::is_same_v<T, float>) poolPlaneF32<IsMax>(xp, yp, w, plan.countPad, plan.countsF, plan.ones);
      else poolPlane<T, IsMax>(xp, yp, w, plan.countPad, plan.counts);
    }
  });
}

// MaxPool with its Indices output: per output element, tracking the flat input position of the maximum.
template <typename T>
void maxPoolWithIndices(const OpContext& ctx, const T* x, T* y, int64_t* indices, const Window3& w, int64_t planes,
                        bool columnMajor) {
  const int64_t inSize = w.in[0] * w.in[1] * w.in[2];
  const int64_t outSize = w.out[0] * w.out[1] * w.out[2];
  parallelFor(ctx, static_cast<size_t>(planes), 1, [&](size_t p0, size_t p1) {
    for (size_t plane = p0; plane < p1; ++plane) {
      const T* xp = x + static_cast<int64_t>(plane) * inSize;
      T* yp = y + static_cast<int64_t>(plane) * outSize;
      forEachWindow(w, [&](int64_t o, auto&& taps) {
        T best = std::numeric_limits<T>::lowest();
        if constexpr (std::numeric_limits<T>::has_infinity) best = -std::numeric_limits<T>::infinity();
        int64_t bestPos = -1;
        taps([&](int64_t pos) {
          if (bestPos < 0 || xp[pos] > best) {
            best = xp[pos];
            bestPos = pos;
          }
        });
        yp[o] = best;
        int64_t pos = bestPos < 0 ? 0 : bestPos;
        if (columnMajor) {
          int64_t iw = pos % w.in[2], ih = (pos / w.in[2]) % w.in[1], id = pos / (w.in[2] * w.in[1]);
          pos = (iw * w.in[1] + ih) * w.in[0] + id;
        }
        indices[static_cast<int64_t>(plane) * outSize + o] = static_cast<int64_t>(plane) * inSize + pos;
      });
    }
  });
}

// The plan prepared for this op, or one worked out now into `local`.
Expected<const PoolRunPlan*> poolRunPlan(const OpContext& ctx, const ir::Tensor& x, PoolRunPlan& local) {
  if (ctx.plan) return static_cast<const PoolRunPlan*>(ctx.plan);
  CTX_ASSIGN_OR_RETURN(local, makePoolRunPlan(ctx, x.shape()));
  return &local;
}

}  // namespace

InferResult inferPool(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  bool isMax = ctx.kind == ir::OpKind::MaxPool;
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, isMax ? 2 : 1));
  CTX_RETURN_IF_ERROR(checkType(
      ctx, inputs, 0, isMax ? kFloatTypes | typeBit(ElemType::Int8) | typeBit(ElemType::Uint8) : kFloatTypes));
  CTX_ASSIGN_OR_RETURN(PoolPlan p, planPool(ctx, inputs[0].shape));
  ir::Shape out{inputs[0].shape[0], inputs[0].shape[1]};
  out.insert(out.end(), p.window.out.begin(), p.window.out.end());
  std::vector<OutputDesc> outs{{inputs[0].type, out}};
  if (outputCount == 2) outs.push_back({ElemType::Int64, out});
  return outs;
}

Expected<std::shared_ptr<const void>> planPoolOnce(const OpContext& ctx, InDescs inputs) {
  if (inputs.empty()) return invalid(ctx, "no input to plan the pool for");
  CTX_ASSIGN_OR_RETURN(PoolRunPlan plan, makePoolRunPlan(ctx, inputs[0].shape));
  return std::shared_ptr<const void>(std::make_shared<const PoolRunPlan>(std::move(plan)));
}

Status runMaxPool(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  PoolRunPlan local;
  CTX_ASSIGN_OR_RETURN(const PoolRunPlan* plan, poolRunPlan(ctx, x, local));
  int64_t* indices = outputs.size() > 1 && outputs[1] ? outputs[1]->mutableDataAs<int64_t>() : nullptr;
  bool columnMajor = attrsOf<ops::PoolAttrs>(ctx).columnMajorIndices;
  constexpr TypeSet types =
      typeBit(ElemType::Float) | typeBit(ElemType::Double) | typeBit(ElemType::Int8) | typeBit(ElemType::Uint8);
  return visitType<types>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    if (indices)
      maxPoolWithIndices<T>(ctx, x.dataAs<T>(), outputs[0]->mutableDataAs<T>(), indices, plan->w, plan->planes,
                            columnMajor);
    else pool<T, true>(ctx, x.dataAs<T>(), outputs[0]->mutableDataAs<T>(), *plan);
    return Status::ok();
  });
}

Status runAveragePool(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  PoolRunPlan local;
  CTX_ASSIGN_OR_RETURN(const PoolRunPlan* plan, poolRunPlan(ctx, x, local));
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    pool<T, false>(ctx, x.dataAs<T>(), outputs[0]->mutableDataAs<T>(), *plan);
    return Status::ok();
  });
}

InferResult inferGlobalPool(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  const auto& x = inputs[0].shape;
  if (x.size() < 2)
    return invalid(ctx, "input 0 has shape {} but expected rank 2 or more (N x C x spatial)", shapeStr(x));
  ir::Shape out(x.size(), 1);
  out[0] = x[0];
  out[1] = x[1];
  return single(inputs[0].type, std::move(out));
}

Status runGlobalAveragePool(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t size = dimProduct(x.shape(), 2, x.rank());
  const bool maxPool = ctx.kind == ir::OpKind::GlobalMaxPool;
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* py = outputs[0]->mutableDataAs<T>();
    parallelForWork(ctx, static_cast<size_t>(planes), static_cast<size_t>(size), [&](size_t p0, size_t p1) {
      for (size_t p = p0; p < p1; ++p) {
        const T* src = px + static_cast<int64_t>(p) * size;
        if (maxPool) {  // GlobalMaxPool shares this kernel
          T m = size > 0 ? src[0] : std::numeric_limits<T>::quiet_NaN();
          for (int64_t i = 1; i < size; ++i) m = std::max(m, src[i]);
          py[p] = m;
          continue;
        }
        double sum = 0;
        if constexpr (std::is_same_v<T, float>) {
          sum = cpu::vecSum(src, static_cast<size_t>(size));
        } else {
          for (int64_t i = 0; i < size; ++i) sum += src[i];
        }
        py[p] = size > 0 ? static_cast<T>(sum / static_cast<double>(size)) : std::numeric_limits<T>::quiet_NaN();
      }
    });
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
