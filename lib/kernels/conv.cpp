// Conv (1D/2D/3D, groups, pads/strides/dilations/auto_pad, optional bias): direct for depthwise and few-channel
// groups, im2col + GEMM otherwise (GEMM alone for 1x1).
#include "cpu/gemm.h"
#include "cpu/simd.h"
#include "cpu/vec_math.h"
#include "kernels/conv_winograd.h"
#include "kernels/ops.h"
#include "kernels/spatial.h"
#include "kernels/thread_scratch.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include <immintrin.h>

namespace ctxkit::kernels::detail {

namespace {

// Floats of unfolded input built at once (4 MB): bounds im2col memory for large images.
constexpr int64_t kColBudget = int64_t{1} << 20;

struct ConvPlan {
  Window window;
  int64_t batch = 0, channels = 0, outChannels = 0, group = 1;
};

Expected<ConvPlan> planConv(const OpContext& ctx, std::span<const int64_t> x, std::span<const int64_t> w,
                            const std::vector<int64_t>* bias) {
  if (x.size() < 3)
    return invalid(ctx, "input 0 has shape {} but expected rank 3 or more (N x C x spatial)", shapeStr(x));
  if (x.size() > 5) return unsupported(ctx, "input 0 has shape {}: more than 3 spatial dimensions", shapeStr(x));
  if (w.size() != x.size())
    return invalid(ctx, "input 1 has shape {} but expected rank {} like input 0", shapeStr(w), x.size());
  ConvPlan p;
  p.batch = x[0];
  p.channels = x[1];
  p.outChannels = w[0];
  const ops::ConvAttrs& attrs = attrsOf<ops::ConvAttrs>(ctx);
  p.group = attrs.group;
  const CheckedInt expectedChannels = CheckedInt(w[1]) * p.group;
  if (!expectedChannels.ok() || p.channels != expectedChannels.value())
    return invalid(ctx, "input 0 has {} channels but weight shape {} with group {} expects {}", p.channels, shapeStr(w),
                   p.group, expectedChannels.ok() ? fmt::to_string(expectedChannels.value()) : "more than int64 holds");
  if (p.outChannels % p.group != 0)
    return invalid(ctx, "weight has {} output channels, not a multiple of group {}", p.outChannels, p.group);
  std::span<const int64_t> kernel = w.subspan(2);
  if (attrs.window.kernelShape) {
    const ops::IntList& ks = *attrs.window.kernelShape;
    if (!std::equal(ks.begin(), ks.end(), kernel.begin(), kernel.end()))
      return invalid(ctx, "attribute kernel_shape {} does not match weight shape {}", shapeStr(ks), shapeStr(w));
  }
  if (bias && (bias->size() != 1 || (*bias)[0] != p.outChannels))
    return invalid(ctx, "input 2 has shape {} but expected {}", shapeStr(*bias), p.outChannels);
  CTX_ASSIGN_OR_RETURN(p.window, computeWindow(ctx, attrs.window, x.subspan(2), kernel, false));
  return p;
}

// When a dense Conv (kernel larger than 1x1) is convolved directly rather than unfolded and multiplied (runsDirect).
// The direct path computes four filters at a time over vector rows and unfolds nothing; the GEMM paths pay im2col per
// output position (input channels x taps copies), which only many output channels amortize. From ctxgen --tune's
// timings of all three paths on the 99 dense Convs of the PyTorch corpus (AVX-512, one thread):
// - groups of at most kDirectMaxChannels input channels, when they make at most kDirectFewInputsMaxOutputs outputs
//   (16-64 channels in, 48-64 out: direct 0.7-0.9x the best other; 32 in, 96-128 out onto 11x11-12x12: 1.6-1.8x);
// - at most kDirectFewOutputs output channels, whatever the input channels, on rows of at least kDirectFewOutputsMinRow
//   outputs (DenseNet's 128 -> 32 3x3: 0.6-0.8x; FCOS's heads of 1, 4, 21 outputs from 256 channels: 0.1-0.5x; on 2x2
//   and 1x1 maps the row overheads lose, 1.5-10x);
// - first layers of at most kDirectFirstLayerChannels channels, any outputs (0.01-0.2x).
constexpr int64_t kDirectMaxChannels = 32;
constexpr int64_t kDirectFewInputsMaxOutputs = 64;
constexpr int64_t kDirectFewOutputs = 32;
constexpr int64_t kDirectFewOutputsMinRow = 4;
constexpr int64_t kDirectFirstLayerChannels = 4;
// ... and only when output rows have at least this many outputs, or the kernel has at most 9 taps (ViT's 16x16
// stride-16 patch embedding onto rows of 4: direct 50x a GEMM).
constexpr int64_t kDirectMinRow = 8;
// The shortest run directConv hands the vector kernels on narrow maps (one AVX2 vector).
constexpr size_t kMinDirectRun = 8;

// Vector blocks cpu::vecTapsDot4 runs for a row of n >= 8 outputs: 16 at a time, the rest of 16 or more as one more
// block of 16 (overlapping), of fewer as one or two of 8. A block of 8 keeps four accumulators, too few to hide the
// adds' latency, and costs about as much as one of 16.
int64_t rowVectorBlocks(int64_t n) { return n >= 16 ? (n + 15) / 16 : (n + 7) / 8; }

// The length of the one run directConv computes a 2-D group's output rows in (the padded plane's row step apart),
// or 0 when it computes them row by row: rows under 8 outputs always; longer rows when the run takes at most 9/10
// of the rows' vector blocks (16x16 3x3 onto 23x23: 36 blocks against 46, onto 14x14: 14 against 28; rows of 56
// stay row by row: 203 against 224). kMinDirectRun at least.
int64_t directRunLength(const Window3& w) {
  if (w.out[0] != 1 || w.out[1] <= 1) return 0;
  const int64_t ext = std::max(w.padBegin[2] + w.in[2] + w.padEnd[2],
                               (w.out[2] - 1) * w.stride[2] + (w.kernel[2] - 1) * w.dilation[2] + 1);
  const int64_t phase = (ext + w.stride[2] - 1) / w.stride[2];
  const int64_t flat = (w.out[1] - 1) * w.stride[1] * w.stride[2] * phase + w.out[2];
  if (w.out[2] >= static_cast<int64_t>(kMinDirectRun) &&
      10 * rowVectorBlocks(flat) > 9 * w.out[1] * rowVectorBlocks(w.out[2]))
    return 0;
  return std::max(flat, static_cast<int64_t>(kMinDirectRun));
}

// Stride-2 depthwise rows of at least this many outputs are computed from a plane split by column phase.
constexpr int64_t kSplitRowsFrom = 32;

// Whether directConv computes `filters` output channels of a group of `cg` input channels in bands of output rows
// (vecTapsDotRows): 2-D outputs with rows of 8 or more, fewer filters than vecTapsDot4 takes, column stride 1 or 2.
bool runsInRowBands(const Window3& w, int64_t cg, int64_t filters) {
  return w.out[0] == 1 && w.out[2] >= 8 && filters < 4 && w.stride[2] <= 2 &&
         cg * w.kernel[0] * w.kernel[1] * w.kernel[2] <= static_cast<int64_t>(cpu::kMaxRowTaps);
}

// Direct convolution of output channels [m0, m1) of one image's group: the group's input planes are copied once
// with their padding (columns split by stride phase); each output row is then a weighted sum of contiguous tap
// rows over (c, kd, kh, kw), which is the filter's layout, kept in registers for all taps (cpu::vecTapsDot).
void directConv(const float* xg, int64_t cg, const float* wg, const float* biasG, float* yg, int64_t m0, int64_t m1,
                const Window3& w, const ops::Epilogue& act) {
  PaddedPlane& plane = threadScratch().convPlane;
  std::vector<const float*>& taps = threadScratch().convTaps;
  if (runsInRowBands(w, cg, m1 - m0)) {
    // A depthwise Conv (one filter per group): its output rows four at a time, each tap's weight applied to all
    // of them at once (row by row, one chain of dependent adds ran at the adds' latency: 3x ONNX Runtime's time on
    // 28x28 maps). Stride-2 columns of rows under kSplitRowsFrom outputs are read from the unsplit rows and split
    // in registers: splitting the plane by phase as it is loaded costs more there (144 channels 5x5 onto 14x14:
    // 0.095 against 0.087 ms); longer rows load it split, which then costs less than the shuffles (72 channels 5x5
    // onto 40x40: 0.23 against 0.31 ms).
    Window3 rowsWindow = w;
    const bool split = w.stride[2] == 2 && w.out[2] >= kSplitRowsFrom;
    if (w.stride[2] == 2 && !split) {  // the same columns, loaded as for stride 1
      rowsWindow.stride[2] = 1;
      rowsWindow.out[2] = 2 * w.out[2] - 1;
    }
    plane.load(xg, rowsWindow, 0.0f, cg);
    taps.resize(plane.tapCount());
    plane.rowTaps(0, 0, taps.data());
    const int64_t outSize = w.out[1] * w.out[2];
    for (int64_t m = m0; m < m1; ++m) {
      cpu::vecTapsDotRows(taps.data(), wg + m * static_cast<int64_t>(taps.size()), taps.size(), biasG ? biasG[m] : 0.0f,
                          yg + m * outSize, static_cast<size_t>(w.out[2]), static_cast<size_t>(w.out[1]),
                          plane.rowStep(), w.out[2], split ? 1 : static_cast<size_t>(w.stride[2]));
      applyFusedActivation(act, yg + m * outSize, static_cast<size_t>(outSize));
    }
    return;
  }
  plane.load(xg, w, 0.0f, cg);
  taps.resize(plane.tapCount());
  const int64_t outSize = w.out[0] * w.out[1] * w.out[2];
  if (directRunLength(w) > 0) {
    // Rows narrower than a vector (the 7x7 and 4x4 maps of a mobile net's last stages) would go one output at a
    // time, and rows of 9-15 or 17-31 outputs end in blocks of 8 that run at the adds' latency: all rows are computed
    // as one run over the padded plane instead (output row r at r x rowStep, the columns between rows computed and
    // dropped), in vectors, then compacted.
    plane.rowTaps(0, 0, taps.data());
    const auto width = static_cast<size_t>(w.out[2]), step = static_cast<size_t>(plane.rowStep());
    const size_t flat = static_cast<size_t>(w.out[1] - 1) * step + width;
    // Runs shorter than a vector are computed 8 long (the columns past `flat` are dropped; their reads stay inside
    // the plane's kReadSlack): below 8 vecTapsDot4 goes one filter and one element at a time, which made ResNeXt's
    // grouped 3x3s onto 2x2 maps 7x slower than the same work onto 4x4.
    const size_t len = std::max<size_t>(flat, kMinDirectRun);
    std::vector<float>& runs = threadScratch().convRuns;
    runs.resize(4 * len);
    const int64_t rows = static_cast<int64_t>(taps.size());
    for (int64_t m = m0; m < m1;) {
      const int64_t count = m + 4 <= m1 ? 4 : 1;
      float init[4];
      float* out[4];
      for (int64_t f = 0; f < count; ++f) {
        init[f] = biasG ? biasG[m + f] : 0.0f;
        out[f] = runs.data() + static_cast<size_t>(f) * len;
      }
      if (count == 4) cpu::vecTapsDot4(taps.data(), wg + m * rows, taps.size(), init, out, len);
      else cpu::vecTapsDot(taps.data(), wg + m * rows, taps.size(), init[0], out[0], len);
      for (int64_t f = 0; f < count; ++f)
        for (int64_t oh = 0; oh < w.out[1]; ++oh)
          std::memcpy(yg + (m + f) * outSize + oh * w.out[2], out[f] + static_cast<size_t>(oh) * step,
                      width * sizeof(float));
      m += count;
    }
    for (int64_t m = m0; m < m1; ++m) applyFusedActivation(act, yg + m * outSize, static_cast<size_t>(outSize));
    return;
  }
  for (int64_t od = 0; od < w.out[0]; ++od) {
    for (int64_t oh = 0; oh < w.out[1]; ++oh) {
      plane.rowTaps(od, oh, taps.data());
      const int64_t row = (od * w.out[1] + oh) * w.out[2];
      const int64_t rows = static_cast<int64_t>(taps.size());
      const size_t width = static_cast<size_t>(w.out[2]);
      int64_t m = m0;
      for (; m + 4 <= m1; m += 4) {
        float init[4];
        float* out[4];
        for (int64_t f = 0; f < 4; ++f) {
          init[f] = biasG ? biasG[m + f] : 0.0f;
          out[f] = yg + (m + f) * outSize + row;
        }
        cpu::vecTapsDot4(taps.data(), wg + m * rows, taps.size(), init, out, width);
      }
      for (; m < m1; ++m)
        cpu::vecTapsDot(taps.data(), wg + m * rows, taps.size(), biasG ? biasG[m] : 0.0f, yg + m * outSize + row,
                        width);
    }
  }
  for (int64_t m = m0; m < m1; ++m) applyFusedActivation(act, yg + m * outSize, static_cast<size_t>(outSize));
}

// A band of output rows [oh0, oh1) (all of them for 3-D outputs) and the taps [k0[i], k1[i]) per spatial dim that
// land inside the input for some output of the band: the rest read only padding, and are left out of its GEMM.
struct TapBand {
  int64_t oh0 = 0, oh1 = 0;
  int64_t k0[3] = {}, k1[3] = {};
  int64_t taps() const { return (k1[0] - k0[0]) * (k1[1] - k0[1]) * (k1[2] - k0[2]); }
  bool operator==(const TapBand&) const = default;
};

// The taps [lo, hi) of one dim that land inside the input for some output in [o0, o1).
void tapsForOutputs(const Window3& w, int dim, int64_t o0, int64_t o1, int64_t& lo, int64_t& hi) {
  lo = w.kernel[dim];
  hi = 0;
  for (int64_t k = 0; k < w.kernel[dim]; ++k) {
    int64_t first, last;
    outputsForTap(k * w.dilation[dim] - w.padBegin[dim], w.stride[dim], w.in[dim], w.out[dim], first, last);
    if (std::max(first, o0) < std::min(last, o1)) {
      lo = std::min(lo, k);
      hi = k + 1;
    }
  }
  if (hi <= lo) lo = hi = 0;
}

// A band's cost in multiply-adds per (input channel x output channel), with a fixed share for its own weight
// gather, im2col and GEMM call: a band split off must save more than that.
constexpr int64_t kBandOverheadPositions = 64;
int64_t bandCost(const TapBand& b, int64_t rowWidth) {
  return b.taps() * ((b.oh1 - b.oh0) * rowWidth + kBandOverheadPositions);
}

// Splits the output rows into bands whose taps inside the input differ (dilated convs at small spatial sizes,
// where most taps land in the padding), merging neighbours while one GEMM over both costs no more than two.
void planTapBands(const Window3& w, std::vector<TapBand>& bands) {
  bands.clear();
  TapBand all;
  all.oh1 = w.out[1];
  for (int d = 0; d < 3; ++d) tapsForOutputs(w, d, 0, w.out[d], all.k0[d], all.k1[d]);
  if (w.out[0] != 1) {  // 3-D outputs: the union of every output's taps, for the whole image
    bands.push_back(all);
    return;
  }
  for (int64_t oh = 0; oh < w.out[1]; ++oh) {
    TapBand b = all;
    b.oh0 = oh;
    b.oh1 = oh + 1;
    tapsForOutputs(w, 1, oh, oh + 1, b.k0[1], b.k1[1]);
    if (!bands.empty()) {
      TapBand& last = bands.back();
      TapBand merged = last;
      merged.oh1 = b.oh1;
      merged.k0[1] = std::min(last.k0[1], b.k0[1]);
      merged.k1[1] = std::max(last.k1[1], b.k1[1]);
      if (last.taps() == 0) merged.k0[1] = b.k0[1], merged.k1[1] = b.k1[1];
      if (b.taps() == 0) merged.k0[1] = last.k0[1], merged.k1[1] = last.k1[1];
      if (bandCost(merged, w.out[2]) <= bandCost(last, w.out[2]) + bandCost(b, w.out[2])) {
        last = merged;
        continue;
      }
    }
    bands.push_back(b);
  }
}

// im2col of rows [r0, r1) and output positions [c0, c1) into `col` (from row r0), split over the pool's threads when
// large.
void unfoldColumns(ThreadPool* pool, const float* x, const Window3& w, float* col, int64_t r0, int64_t r1, int64_t c0,
                   int64_t c1) {
  const int64_t rows = r1 - r0;
  if (pool && rows >= 8 && rows * (c1 - c0) >= 65536) {
    auto unfold = [&](size_t i0, size_t i1) {
      im2col(x, w, col + static_cast<int64_t>(i0) * (c1 - c0), r0 + static_cast<int64_t>(i0),
             r0 + static_cast<int64_t>(i1), c0, c1);
    };
    // A std::function holding a reference does not allocate; one holding the captures would.
    pool->parallelFor(static_cast<size_t>(rows), 1, std::function<void(size_t, size_t)>(std::ref(unfold)));
  } else {
    im2col(x, w, col, r0, r1, c0, c1);
  }
}

// A depthwise 2-D Conv (one input and one output channel per group) onto a small map: the direct path's per-channel
// setup (a padded plane, its taps) outweighs its few outputs there, so channels go in vectors instead (blocks of
// channels, as ONNX Runtime's NCHWc depthwise kernel has them). Channels [c, c + kDepthwiseLanes) of one image are
// transposed to position-major and copied into a zero-padded plane (`xp`: [padded rows][padded columns][lanes], zeros
// in the padding and past the last channel), their weights to [taps][lanes]; each output is its bias plus every tap in
// tap order (the padding's zeros included, as the direct path adds them), kDepthwiseRun outputs of a row at once.
// One output at a time, its taps clipped to the input, ran one chain of dependent adds at the adds' latency.
constexpr int64_t kDepthwiseLanes = 16;
constexpr int64_t kDepthwiseMaxOutputs = 256;
constexpr int64_t kDepthwiseRun = 4;

// depthwiseSmallMap's and groupedBlocks' scratch starts at a cache line (its planes are read in whole vectors of 16
// floats): where the allocator put the vector at 16 bytes past one, every such load split a line, and the small-map
// depthwise Convs of MnasNet ran 20-30% slower after an unrelated allocation moved it. kAlignFloats spare floats
// make room.
constexpr int64_t kAlignFloats = 16;
float* alignedStart(float* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  return p + ((64 - at % 64) % 64) / sizeof(float);
}

// The padded plane's rows and columns: the pads around the input, or as far as the last output's taps read.
void depthwisePlane(const Window3& w, int64_t& rows, int64_t& cols) {
  rows = std::max(w.padBegin[1] + w.in[1] + w.padEnd[1],
                  (w.out[1] - 1) * w.stride[1] + (w.kernel[1] - 1) * w.dilation[1] + 1);
  cols = std::max(w.padBegin[2] + w.in[2] + w.padEnd[2],
                  (w.out[2] - 1) * w.stride[2] + (w.kernel[2] - 1) * w.dilation[2] + 1);
}

// `R` outputs of output row `oh` from column `ow` into `out` ([R][lanes]). The lanes are one vector type and the
// loops over the R accumulators unrolled: as arrays of floats the accumulators lived on the stack.
typedef float DepthwiseLanes __attribute__((vector_size(kDepthwiseLanes * sizeof(float))));
template <int R>
__attribute__((always_inline)) inline void depthwiseRun(const float* xp, const float* wt, const float* bias, float* out,
                                                        const Window3& w, int64_t cols, int64_t oh, int64_t ow) {
  DepthwiseLanes sum[R], bv;
  __builtin_memcpy(&bv, bias, sizeof bv);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) sum[r] = bv;
  const int64_t step = w.stride[2] * kDepthwiseLanes;
  for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
    const float* row = xp + ((oh * w.stride[1] + kh * w.dilation[1]) * cols + ow * w.stride[2]) * kDepthwiseLanes;
    const float* wrow = wt + kh * w.kernel[2] * kDepthwiseLanes;
    for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
      const float* xv = row + kw * w.dilation[2] * kDepthwiseLanes;
      DepthwiseLanes wv;
      __builtin_memcpy(&wv, wrow + kw * kDepthwiseLanes, sizeof wv);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        DepthwiseLanes x;
        __builtin_memcpy(&x, xv + r * step, sizeof x);
        sum[r] += wv * x;
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) __builtin_memcpy(out + r * kDepthwiseLanes, &sum[r], sizeof sum[r]);
}

CTX_SIMD_CLONES void depthwiseBlock(const float* xp, const float* wt, const float* bias, float* acc, const Window3& w,
                                    int64_t cols) {
  const int64_t outW = w.out[2];
  for (int64_t oh = 0; oh < w.out[1]; ++oh) {
    float* out = acc + oh * outW * kDepthwiseLanes;
    int64_t ow = 0;
    for (; ow + kDepthwiseRun <= outW; ow += kDepthwiseRun)
      depthwiseRun<kDepthwiseRun>(xp, wt, bias, out + ow * kDepthwiseLanes, w, cols, oh, ow);
    switch (outW - ow) {
      case 3: depthwiseRun<3>(xp, wt, bias, out + ow * kDepthwiseLanes, w, cols, oh, ow); break;
      case 2: depthwiseRun<2>(xp, wt, bias, out + ow * kDepthwiseLanes, w, cols, oh, ow); break;
      case 1: depthwiseRun<1>(xp, wt, bias, out + ow * kDepthwiseLanes, w, cols, oh, ow); break;
      default: break;
    }
  }
}

// Floats of depthwiseSmallMap's scratch: the padded plane, the transposed input, the weights and the outputs.
int64_t depthwiseScratch(const Window3& w) {
  int64_t rows, cols;
  depthwisePlane(w, rows, cols);
  return (rows * cols + w.in[1] * w.in[2] + w.kernel[1] * w.kernel[2] + w.out[1] * w.out[2]) * kDepthwiseLanes +
         kAlignFloats;
}

bool depthwiseOnSmallMap(const Window3& w, int64_t cg, int64_t mg, int64_t group) {
  return cg == 1 && mg == 1 && group > 1 && w.out[0] == 1 && w.kernel[0] == 1 && w.in[0] == 1 &&
         w.out[1] * w.out[2] <= kDepthwiseMaxOutputs;
}

typedef float Lanes8 __attribute__((vector_size(8 * sizeof(float))));

// dst[c * dstLd + r] = src[r * srcLd + c] for r, c < 8: three rounds of shuffles, 8 loads and 8 stores.
__attribute__((always_inline)) inline void transpose8x8(const float* src, int64_t srcLd, float* dst, int64_t dstLd) {
  Lanes8 r[8], t[8], u[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) __builtin_memcpy(&r[i], src + i * srcLd, sizeof(Lanes8));
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    u[i] = __builtin_shufflevector(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    u[i + 1] = __builtin_shufflevector(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    u[i + 2] = __builtin_shufflevector(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    u[i + 3] = __builtin_shufflevector(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const Lanes8 lo = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    const Lanes8 hi = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    __builtin_memcpy(dst + i * dstLd, &lo, sizeof lo);
    __builtin_memcpy(dst + (i + 4) * dstLd, &hi, sizeof hi);
  }
}

}  // namespace

// dst[i * dstLd + r] = src[r * srcLd + i] for r < rows, i < n: 8 x 8 blocks, the edges one element at a time.
// Element by element, depthwiseSmallMap's three transposes (inputs, weights, outputs) took 3/4 of its own time.
CTX_SIMD_CLONES void transposeRows(const float* src, int64_t srcLd, int64_t rows, int64_t n, float* dst,
                                   int64_t dstLd) {
  const int64_t rows8 = rows / 8 * 8, n8 = n / 8 * 8;
  for (int64_t r = 0; r < rows8; r += 8) {
    for (int64_t i = 0; i < n8; i += 8) transpose8x8(src + r * srcLd + i, srcLd, dst + i * dstLd + r, dstLd);
    for (int64_t i = n8; i < n; ++i)
      for (int64_t k = r; k < r + 8; ++k) dst[i * dstLd + k] = src[k * srcLd + i];
  }
  for (int64_t k = rows8; k < rows; ++k)
    for (int64_t i = 0; i < n; ++i) dst[i * dstLd + k] = src[k * srcLd + i];
}

namespace {

// Channels [c0, c1) of image `xn` (planes of inSize) into `yn` (planes of outSize).
void depthwiseSmallMap(const float* xn, const float* weights, const float* bias, float* yn, int64_t c0, int64_t c1,
                       const Window3& w, const ops::Epilogue& act) {
  constexpr int64_t L = kDepthwiseLanes;
  const int64_t inSize = w.in[1] * w.in[2], outSize = w.out[1] * w.out[2], taps = w.kernel[1] * w.kernel[2];
  int64_t rows, cols;
  depthwisePlane(w, rows, cols);
  // The block's padded plane, inputs, weights and outputs, in this thread's scratch (reserved on every pool thread).
  std::vector<float>& scratch = threadScratch().depthwise;
  scratch.resize(static_cast<size_t>(depthwiseScratch(w)));
  float* xp = alignedStart(scratch.data());
  float* xt = xp + rows * cols * L;
  float* wt = xt + inSize * L;
  float* acc = wt + taps * L;
  // Zeros in the padding only (each block writes every input position, all lanes): the whole plane was 2% of MnasNet's
  // time in memset (perf), its 5x5 convs' planes onto 14x14 being 40% padding.
  const int64_t rowFloats = cols * L, left = w.padBegin[2] * L, used = w.in[2] * L;
  std::fill(xp, xp + w.padBegin[1] * rowFloats, 0.0f);
  std::fill(xp + (w.padBegin[1] + w.in[1]) * rowFloats, xt, 0.0f);
  for (int64_t ih = 0; ih < w.in[1]; ++ih) {
    float* row = xp + (w.padBegin[1] + ih) * rowFloats;
    std::fill(row, row + left, 0.0f);
    std::fill(row + left + used, row + rowFloats, 0.0f);
  }
  float b[L];
  for (int64_t c = c0; c < c1; c += L) {
    const int64_t lanes = std::min(L, c1 - c);
    for (int64_t j = 0; j < L; ++j) b[j] = j < lanes && bias ? bias[c + j] : 0.0f;
    transposeRows(weights + c * taps, taps, lanes, taps, wt, L);
    transposeRows(xn + c * inSize, inSize, lanes, inSize, xt, L);
    if (lanes < L) {  // the lanes past the last channel read zeros
      for (int64_t t = 0; t < taps; ++t) std::fill(wt + t * L + lanes, wt + (t + 1) * L, 0.0f);
      for (int64_t i = 0; i < inSize; ++i) std::fill(xt + i * L + lanes, xt + (i + 1) * L, 0.0f);
    }
    // Each input row is one run of position-major floats.
    for (int64_t ih = 0; ih < w.in[1]; ++ih)
      std::memcpy(xp + ((w.padBegin[1] + ih) * cols + w.padBegin[2]) * L, xt + ih * w.in[2] * L,
                  static_cast<size_t>(w.in[2] * L) * sizeof(float));
    depthwiseBlock(xp, wt, b, acc, w, cols);
    transposeRows(acc, L, outSize, lanes, yn + c * outSize, outSize);
  }
  applyFusedActivation(act, yn + c0 * outSize, static_cast<size_t>((c1 - c0) * outSize));
}

// A grouped Conv with output channels in vectors (grouped-blocks): each group's input planes are transposed to
// position-major and copied into a zero-padded plane ([padded rows][padded columns][cg]); its output channels go in
// blocks of kGroupedLanes (a vector), each block's weights packed as [taps][cg][lanes] (zeros past the group's last
// channel: packGroupedWeights, once at prepare for a constant weight). An output of a block is its bias plus, for
// every tap and input channel, that input broadcast times the weight vector: a small GEMM per group over its own
// input channels and taps, kGroupedRun outputs of a row (kGroupedPairRun with two blocks) at once, in registers.
// The direct path computes the same taps along output rows, which on the 7x7 and 14x14 maps of a grouped net's late
// stages are shorter than its vectors (RegNetX-400MF's 16-channel groups: 2.4x ONNX Runtime's time).
constexpr int64_t kGroupedLanes = kDepthwiseLanes;
constexpr int kGroupedRun = 8, kGroupedPairRun = 6;
// Output positions computed between transposes into the output planes (whole output rows, at least one).
constexpr int64_t kGroupedTile = 256;
// Input rows at least this wide are transposed one at a time, straight into the padded plane.
constexpr int64_t kWideTransposeRow = 16;

bool groupedBlocksFit(const Window3& w) { return w.out[0] == 1 && w.kernel[0] == 1 && w.in[0] == 1; }

int64_t groupedBlockCount(int64_t mg) { return (mg + kGroupedLanes - 1) / kGroupedLanes; }

// Floats of a weight packed for grouped-blocks: [group][block][tap][cg][lanes].
int64_t groupedWeightFloats(int64_t group, int64_t cg, int64_t mg, int64_t taps) {
  return group * groupedBlockCount(mg) * taps * cg * kGroupedLanes;
}

void packGroupedWeights(const float* w, int64_t group, int64_t cg, int64_t mg, int64_t taps, float* dst) {
  const int64_t blocks = groupedBlockCount(mg);
  for (int64_t g = 0; g < group; ++g)
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t l = 0; l < kGroupedLanes; ++l) {
            const int64_t m = b * kGroupedLanes + l;
            *dst++ = m < mg ? w[((g * mg + m) * cg + ci) * taps + t] : 0.0f;
          }
}

// The rows and columns of a group's padded plane (depthwisePlane), and the output rows of one tile.
struct GroupedGeometry {
  int64_t rows = 0, cols = 0, tileRows = 0;
};
GroupedGeometry groupedGeometry(const Window3& w) {
  GroupedGeometry g;
  depthwisePlane(w, g.rows, g.cols);
  g.tileRows = std::clamp<int64_t>(kGroupedTile / w.out[2], 1, w.out[1]);
  return g;
}

// Floats of groupedBlocks' scratch: the padded plane, the transposed input and a tile of two blocks.
int64_t groupedScratch(const Window3& w, int64_t cg) {
  const GroupedGeometry g = groupedGeometry(w);
  return (g.rows * g.cols + w.in[1] * w.in[2]) * cg + 2 * g.tileRows * w.out[2] * kGroupedLanes + kAlignFloats;
}

// `R` outputs of output row `oh` from column `ow` for `B` blocks (weights `blockStep` floats apart), into `out`
// ([B][..][lanes], blocks `outStep` floats apart). Inputs are broadcast from the position-major plane `xp`.
template <int R, int B>
__attribute__((always_inline)) inline void groupedRun(const float* xp, const float* wt, int64_t blockStep,
                                                      const float* bias, float* out, int64_t outStep, const Window3& w,
                                                      int64_t cols, int64_t cg, int64_t oh, int64_t ow) {
  DepthwiseLanes sum[B][R];
#pragma GCC unroll 2
  for (int b = 0; b < B; ++b) {
    DepthwiseLanes bv;
    __builtin_memcpy(&bv, bias + b * kGroupedLanes, sizeof bv);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) sum[b][r] = bv;
  }
  const int64_t step = w.stride[2] * cg;
  for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
    const float* row = xp + ((oh * w.stride[1] + kh * w.dilation[1]) * cols + ow * w.stride[2]) * cg;
    for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
      const float* xv = row + kw * w.dilation[2] * cg;
      const float* wv = wt + (kh * w.kernel[2] + kw) * cg * kGroupedLanes;
      for (int64_t ci = 0; ci < cg; ++ci) {
        DepthwiseLanes wl[B];
#pragma GCC unroll 2
        for (int b = 0; b < B; ++b) __builtin_memcpy(&wl[b], wv + b * blockStep + ci * kGroupedLanes, sizeof wl[b]);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const float x = xv[r * step + ci];
#pragma GCC unroll 2
          for (int b = 0; b < B; ++b) sum[b][r] += x * wl[b];
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int b = 0; b < B; ++b)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) __builtin_memcpy(out + b * outStep + r * kGroupedLanes, &sum[b][r], sizeof sum[b][r]);
}

// The last `n` (< R) outputs of a row.
template <int R, int B>
__attribute__((always_inline)) inline void groupedTail(int64_t n, const float* xp, const float* wt, int64_t blockStep,
                                                       const float* bias, float* out, int64_t outStep, const Window3& w,
                                                       int64_t cols, int64_t cg, int64_t oh, int64_t ow) {
  if constexpr (R > 0) {
    if (n == R) groupedRun<R, B>(xp, wt, blockStep, bias, out, outStep, w, cols, cg, oh, ow);
    else groupedTail<R - 1, B>(n, xp, wt, blockStep, bias, out, outStep, w, cols, cg, oh, ow);
  }
}

// Output rows [oh0, oh1) of `B` blocks into `tile` ([B][positions][lanes]).
template <int B>
CTX_SIMD_CLONES void groupedRows(const float* xp, const float* wt, int64_t blockStep, const float* bias, float* tile,
                                 const Window3& w, int64_t cols, int64_t cg, int64_t oh0, int64_t oh1) {
  constexpr int R = B == 2 ? kGroupedPairRun : kGroupedRun;
  const int64_t outW = w.out[2], outStep = (oh1 - oh0) * outW * kGroupedLanes;
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    float* out = tile + (oh - oh0) * outW * kGroupedLanes;
    int64_t ow = 0;
    for (; ow + R <= outW; ow += R)
      groupedRun<R, B>(xp, wt, blockStep, bias, out + ow * kGroupedLanes, outStep, w, cols, cg, oh, ow);
    groupedTail<R - 1, B>(outW - ow, xp, wt, blockStep, bias, out + ow * kGroupedLanes, outStep, w, cols, cg, oh, ow);
  }
}

// Blocks [b0, b1) of one image's group: `xg` its cg input planes, `wg` its packed blocks, `yg` its mg output planes.
void groupedBlocks(const float* xg, int64_t cg, const float* wg, const float* biasG, float* yg, int64_t mg, int64_t b0,
                   int64_t b1, const Window3& w, const ops::Epilogue& act) {
  constexpr int64_t L = kGroupedLanes;
  const GroupedGeometry geo = groupedGeometry(w);
  const int64_t inSize = w.in[1] * w.in[2], outSize = w.out[1] * w.out[2], outW = w.out[2];
  const int64_t taps = w.kernel[1] * w.kernel[2], blockStep = taps * cg * L;
  std::vector<float>& scratch = threadScratch().depthwise;
  scratch.resize(static_cast<size_t>(groupedScratch(w, cg)));
  float* xp = alignedStart(scratch.data());
  float* xt = xp + geo.rows * geo.cols * cg;
  float* tile = xt + inSize * cg;
  // Zeros in the padding only; rows of the input transposed straight into the plane when they are wide enough for
  // 8x8 transposes, else all planes at once into `xt` and copied (7-wide maps: element by element otherwise). A
  // whole-plane pass over large maps cost more than the multiply-adds (32 channels onto 112x112, 2 groups).
  const int64_t inW = w.in[2], rowFloats = geo.cols * cg, left = w.padBegin[2] * cg, used = inW * cg;
  std::fill(xp, xp + w.padBegin[1] * rowFloats, 0.0f);
  std::fill(xp + (w.padBegin[1] + w.in[1]) * rowFloats, xt, 0.0f);
  const bool wide = inW >= kWideTransposeRow;
  if (!wide) transposeRows(xg, inSize, cg, inSize, xt, cg);
  for (int64_t ih = 0; ih < w.in[1]; ++ih) {
    float* row = xp + (w.padBegin[1] + ih) * rowFloats;
    std::fill(row, row + left, 0.0f);
    std::fill(row + left + used, row + rowFloats, 0.0f);
    if (wide) transposeRows(xg + ih * inW, inSize, cg, inW, row + left, cg);
    else std::memcpy(row + left, xt + ih * used, static_cast<size_t>(used) * sizeof(float));
  }
  float bias[2 * L];
  for (int64_t oh0 = 0; oh0 < w.out[1]; oh0 += geo.tileRows) {
    const int64_t oh1 = std::min(w.out[1], oh0 + geo.tileRows), positions = (oh1 - oh0) * outW;
    for (int64_t b = b0; b < b1;) {
      const int64_t pair = b + 2 <= b1 ? 2 : 1;
      for (int64_t j = 0; j < pair * L; ++j) {
        const int64_t m = b * L + j;
        bias[j] = biasG && m < mg ? biasG[m] : 0.0f;
      }
      if (pair == 2) groupedRows<2>(xp, wg + b * blockStep, blockStep, bias, tile, w, geo.cols, cg, oh0, oh1);
      else groupedRows<1>(xp, wg + b * blockStep, blockStep, bias, tile, w, geo.cols, cg, oh0, oh1);
      for (int64_t j = 0; j < pair; ++j) {
        const int64_t m0 = (b + j) * L;
        transposeRows(tile + j * positions * L, L, positions, std::min(L, mg - m0), yg + m0 * outSize + oh0 * outW,
                      outSize);
      }
      b += pair;
    }
  }
  const int64_t m0 = b0 * L, m1 = std::min(mg, b1 * L);
  applyFusedActivation(act, yg + m0 * outSize, static_cast<size_t>((m1 - m0) * outSize));
}

bool isPointwise(const Window3& w) {
  for (int i = 0; i < 3; ++i)
    if (w.kernel[i] != 1 || w.stride[i] != 1 || w.padBegin[i] != 0 || w.padEnd[i] != 0) return false;
  return true;
}

// Whether a grouped Conv runs on grouped-blocks by default: at least two input channels per group, 1-D or 2-D, and
// output channels that fill at least 3/4 of their blocks' lanes. From ctxgen --tune's timings (AVX-512, one thread)
// of ResNeXt-50 and RegNetX-400MF: 16 and 32 channels per group 0.2-0.8x the direct path's time (onto 4x4 to 56x56,
// strides 1 and 2); 8 per group (half the lanes idle) 1.5x at stride 1 onto 14x14, 0.75x at stride 2; 4 per group 3x.
// A dense Conv (one group) too, when it has taps beyond 1x1, no dilation (bands of output rows skip the taps that
// land in the padding, which this kernel multiplies), at least kDenseBlocksMinChannels input channels (first layers
// of 3 channels: the direct path 0.8x) and a depth (input channels x taps) of at most kDenseBlocksMaxDepth: every run
// of outputs streams its blocks' weights (depth x 16 floats each) once, which the panels path's GEMM blocks by depth
// instead (512 channels 3x3 onto 4x4 and 192 onto 3x3: 1.0-1.1x the panels path). Measured 0.6-0.9x the panels
// path's time on the 3x3s of GoogLeNet, ResNet-18 and SqueezeNet of depth 144 to 2304, onto 3x3 to 28x28.
// And a dense 1x1 onto a small map (kPointwiseBlocksMinOutputs to kPointwiseBlocksMaxOutputs positions, rows of 5 or
// more) of at most kPointwiseBlocksMaxDepth input channels: 0.6-0.95x the best of the GEMM paths on MnasNet's and
// GoogLeNet's 1x1s onto 5x5 and 6x6 (depth 40 to 480); onto 3x3 (rows of 3: runs of 3 outputs per weight load) and
// at depth 512 or more 1.05-1.4x; onto 11x11 and larger the GEMM paths win.
constexpr int64_t kDenseBlocksMinChannels = 8;
constexpr int64_t kDenseBlocksMaxDepth = 2304;
constexpr int64_t kPointwiseBlocksMinOutputs = 25, kPointwiseBlocksMaxOutputs = 64, kPointwiseBlocksMinRow = 5;
constexpr int64_t kPointwiseBlocksMaxDepth = 480;
bool groupedOnBlocks(const Window3& w, int64_t cg, int64_t mg, int64_t group) {
  if (!groupedBlocksFit(w) || cg < 2 || 4 * mg < 3 * groupedBlockCount(mg) * kGroupedLanes) return false;
  if (group > 1) return true;
  const int64_t taps = w.kernel[1] * w.kernel[2], positions = w.out[1] * w.out[2];
  if (isPointwise(w))
    return positions >= kPointwiseBlocksMinOutputs && positions <= kPointwiseBlocksMaxOutputs &&
           w.out[2] >= kPointwiseBlocksMinRow && cg <= kPointwiseBlocksMaxDepth;
  return cg >= kDenseBlocksMinChannels && taps > 1 && cg * taps <= kDenseBlocksMaxDepth && w.dilation[1] == 1 &&
         w.dilation[2] == 1;
}

// A weight packed for grouped-blocks at prepare (planConvOnce).
using GroupedWeights = std::vector<float>;

// Whether runConv takes the direct path for a group of `cg` input channels.
// A depthwise Conv always does: the other paths would make one im2col and one GEMM of a single row per channel (a 5x5
// depthwise Conv onto 4x4 in MobileNetV3 spent more time unfolding than multiplying).
bool fewOutputsDirect(const Window3& w, int64_t mg) {
  return mg <= kDirectFewOutputs && w.out[2] >= kDirectFewOutputsMinRow;
}

bool runsDirect(const Window3& w, int64_t cg, int64_t mg, int64_t group) {
  const int64_t kSize = w.kernel[0] * w.kernel[1] * w.kernel[2];
  const bool rowsWideEnough = w.out[2] >= kDirectMinRow || kSize <= 9;
  const bool fewInputs =
      cg <= kDirectMaxChannels && (mg <= kDirectFewInputsMaxOutputs || cg <= kDirectFirstLayerChannels);
  return (cg == 1 && group > 1) || (kSize > 1 && rowsWideEnough && (fewInputs || fewOutputsDirect(w, mg)));
}

// The algorithm a run takes: the recorded one, or the heuristic's for what the op was prepared with; Heuristic when
// the recorded one cannot run these shapes. The heuristic takes Winograd only for a weight transformed at prepare
// (`winogradPlanned`: planConvOnce transforms a constant weight when this says Winograd for it).
cpu::ConvAlgorithm runAlgorithm(const OpContext& ctx, const ConvPlan& p, const Window3& w, bool winogradPlanned) {
  const int64_t cg = p.channels / p.group, mg = p.outChannels / p.group;
  const bool depthwise = cg == 1 && mg == 1 && groupedBlocksFit(w);
  const cpu::ConvAlgorithm recorded = ctx.kernel.algorithm;
  if (recorded == cpu::ConvAlgorithm::Heuristic)
    return ctx.panelsB && p.group == 1                                       ? cpu::ConvAlgorithm::Panels
           : p.group == 1 && winogradPlanned && winogradByDefault(w, cg, mg) ? cpu::ConvAlgorithm::Winograd
           : depthwiseOnSmallMap(w, cg, mg, p.group)                         ? cpu::ConvAlgorithm::DepthwiseSmallMap
           : groupedOnBlocks(w, cg, mg, p.group)                             ? cpu::ConvAlgorithm::GroupedBlocks
           : runsDirect(w, cg, mg, p.group)                                  ? cpu::ConvAlgorithm::Direct
                                                                             : cpu::ConvAlgorithm::Gemm;
  if ((recorded == cpu::ConvAlgorithm::Panels) != (ctx.panelsB != nullptr) ||
      (recorded == cpu::ConvAlgorithm::Panels && p.group != 1) ||
      (recorded == cpu::ConvAlgorithm::DepthwiseSmallMap && !depthwise) ||
      (recorded == cpu::ConvAlgorithm::GroupedBlocks && !groupedBlocksFit(w)) ||
      (recorded == cpu::ConvAlgorithm::Winograd && (p.group != 1 || !winogradFits(w))))
    return cpu::ConvAlgorithm::Heuristic;
  return recorded;
}

// The panels path splits the output positions into blocks of at least this many for threads (the GEMM's row block,
// whose packed A strip is reused across every panel of a task), and then splits the panels.
constexpr int64_t kPanelsRowBlock = 144;

// The output positions of one task of the panels path on `threads` threads: as few blocks per image as give the
// threads about two tasks each (no smaller than kPanelsRowBlock: the panels are split instead) and keep a task's
// columns (`depthRows` x positions) and tile (positions x `channels`) within kColBudget, of about even size in whole
// strips of 8 rows of the GEMM's micro-kernels. im2col's cost per row of taps, paid once per task, made blocks of
// 144 positions 6% slower than one block at 64 channels onto 28x28.
int64_t panelsRowBlock(int64_t outSize, int64_t depthRows, int64_t channels, int64_t batch, size_t threads) {
  const int64_t maxBlock = std::max<int64_t>(8, kColBudget / std::max<int64_t>(1, std::max(depthRows, channels)));
  const auto wanted = threads > 1 ? (2 * static_cast<int64_t>(threads) + batch - 1) / batch : 1;
  const int64_t rowBlocks = std::max((outSize + maxBlock - 1) / maxBlock,
                                     std::min(wanted, (outSize + kPanelsRowBlock - 1) / kPanelsRowBlock));
  return std::min(outSize, ((outSize + rowBlocks - 1) / rowBlocks + 7) / 8 * 8);
}

// How the panels path splits an op over `threads` threads. One thread: one block per image as large as kColBudget
// allows. More: cpu::splitPanelsWork, among blocks no larger than panelsRowBlock's (which keeps about two tasks per
// thread on large maps). For two threads: 128 channels 3x3 onto 14x14 in two blocks of 104 and 92 positions with
// every panel; 256 onto 7x7 and 512 onto 4x4 in one block, two ranges of panels.
cpu::PanelsSplit panelsSplit(int64_t outSize, int64_t depthRows, int64_t channels, size_t panelCount, size_t width,
                             int64_t batch, size_t threads, bool pointwise) {
  const int64_t first = panelsRowBlock(outSize, depthRows, channels, batch, threads);
  if (threads <= 1) return {static_cast<size_t>(first), 1, panelCount};
  // A pointwise Conv's positions are packed, not unfolded.
  return cpu::splitPanelsWork(static_cast<size_t>(outSize), static_cast<size_t>((outSize + first - 1) / first),
                              static_cast<size_t>(batch), panelCount, width, threads, pointwise ? 0.5 : 1.0);
}

// unfoldIntoStrips' offset table, on the stack: at most this many taps x strip rows.
constexpr int64_t kStripTapsMax = 1024;

bool unfoldsIntoStrips(const Window3& w, size_t mr) {
  const int64_t kSize = w.kernel[0] * w.kernel[1] * w.kernel[2];
  return kSize * static_cast<int64_t>(mr) <= kStripTapsMax &&
         w.in[0] * w.in[1] * w.in[2] < std::numeric_limits<int32_t>::max();
}

// unfoldIntoStrips' rows for AVX-512's strips of 8: a tap's lanes read as up to two masked loads of inputs 1 or 2
// apart (a run cut by the padding or by the end of an output row: most of a 3x3's taps that are not one plain run;
// every tap of a stride-2 conv), else gathered.
// (Asked on first use, after __builtin_cpu_init: a namespace-scope initializer may run before libgcc's detection.)
bool stripAvx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  }();
  return has;
}

struct StripTap8 {
  int32_t base[2] = {0, 0};   // lane i of a run reads offset base + step * i
  uint16_t mask[2] = {0, 0};  // the floats loaded from base (masked-off ones are not read): lane i's is bit step * i
  int step = 0;               // 1 or 2; 0: gathered
};

// The tap whose lanes read offsets o[0..7] (-1: a zero), or a gather when they form more than two runs of a step.
StripTap8 stripTap8(const int32_t* o) {
  for (int step = 1; step <= 2; ++step) {
    StripTap8 d;
    d.step = step;
    int runs = 0;
    for (int i = 0; i < 8 && runs <= 2; ++i) {
      if (o[i] < 0) continue;
      if (i == 0 || o[i - 1] < 0 || o[i] != o[i - 1] + step) {
        if (++runs > 2) break;
        d.base[runs - 1] = o[i] - step * i;
      }
      d.mask[runs - 1] = static_cast<uint16_t>(d.mask[runs - 1] | (1u << (step * i)));
    }
    if (runs <= 2) return d;
  }
  return StripTap8{};
}

__attribute__((target("avx512f,avx512vl"))) void copyStripRows8(const float* x, int64_t inSize, const int32_t* off,
                                                                const StripTap8* taps, int64_t kSize, int64_t c,
                                                                int64_t t, size_t kc, float* dst) {
  // A run's first float may lie before the plane (a padded first column): its address is formed as an integer, and
  // the masked-off floats are not read.
  auto at = [](const float* p, int32_t base) {
    return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(p) +
                                          static_cast<uintptr_t>(static_cast<intptr_t>(base) * 4));
  };
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  for (size_t r = 0; r < kc; ++r, dst += 8) {
    const float* xc = x + c * inSize;
    const StripTap8& d = taps[t];
    __m256 v;
    if (d.step == 1) {
      v = _mm256_maskz_loadu_ps(static_cast<__mmask8>(d.mask[0]), at(xc, d.base[0]));
      if (d.mask[1]) v = _mm256_mask_loadu_ps(v, static_cast<__mmask8>(d.mask[1]), at(xc, d.base[1]));
    } else if (d.step == 2) {
      __m512 w = _mm512_maskz_loadu_ps(d.mask[0], at(xc, d.base[0]));
      if (d.mask[1]) w = _mm512_mask_loadu_ps(w, d.mask[1], at(xc, d.base[1]));
      _mm512_mask_storeu_ps(dst, 0xFF, _mm512_maskz_permutexvar_ps(0xFF, even, w));  // the first 8: its even floats
      if (++t == kSize) t = 0, ++c;
      continue;
    } else {
      const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(off + t * 8));
      const __mmask8 valid = _mm256_cmpge_epi32_mask(idx, _mm256_setzero_si256());
      v = _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), valid, idx, xc, 4);
    }
    _mm256_storeu_ps(dst, v);
    if (++t == kSize) t = 0, ++c;
  }
}

// im2col of rows [r0, r1) (of (c, kd, kh, kw)) and output positions [c0, c1) straight into the strips of A that
// sgemmPanelsPackedA reads: `mr` positions per strip, k-major, a last strip's missing positions 0. Per strip, each
// tap's `mr` input offsets within a channel (-1 in the padding) are worked out once; a tap whose positions read
// consecutive inputs (stride 1, one output row, no padding: most of a 3x3's) is then one `mr`-float copy per channel,
// written where the GEMM reads it. Unfolding into rows and then packing those into strips wrote and read every
// unfolded value once more: 11% of a dense 3x3's time (960 -> 256 channels onto 20x20).
void unfoldIntoStrips(const float* x, const Window3& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1, size_t mr,
                      float* strips) {
  const int64_t kSize = w.kernel[0] * w.kernel[1] * w.kernel[2], inSize = w.in[0] * w.in[1] * w.in[2];
  const auto lanes = static_cast<int64_t>(mr);
  const auto kc = static_cast<size_t>(r1 - r0);
  int32_t off[kStripTapsMax];
  bool run[kStripTapsMax];
  // The next position's (od, oh, ow), stepped.
  int64_t ow = c0 % w.out[2], oh = (c0 / w.out[2]) % w.out[1], od = c0 / (w.out[2] * w.out[1]);
  float* dst = strips;
  for (int64_t p0 = c0; p0 < c1; p0 += lanes) {
    for (int64_t i = 0; i < lanes; ++i) {
      const bool inside = p0 + i < c1;
      const int64_t d0 = od * w.stride[0] - w.padBegin[0], h0 = oh * w.stride[1] - w.padBegin[1];
      const int64_t q0 = ow * w.stride[2] - w.padBegin[2];
      int64_t t = 0;
      for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
        const int64_t id = d0 + kd * w.dilation[0];
        for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
          const int64_t ih = h0 + kh * w.dilation[1];
          const bool rowInside = inside && id >= 0 && id < w.in[0] && ih >= 0 && ih < w.in[1];
          for (int64_t kw = 0; kw < w.kernel[2]; ++kw, ++t) {
            const int64_t iw = q0 + kw * w.dilation[2];
            off[t * lanes + i] =
                rowInside && iw >= 0 && iw < w.in[2] ? static_cast<int32_t>((id * w.in[1] + ih) * w.in[2] + iw) : -1;
          }
        }
      }
      if (inside && ++ow == w.out[2]) {
        ow = 0;
        if (++oh == w.out[1]) oh = 0, ++od;
      }
    }
    const bool avx512Rows = mr == 8 && stripAvx512();
    for (int64_t t = 0; t < kSize && !avx512Rows; ++t) {
      const int32_t* o = off + t * lanes;
      bool consecutive = o[0] >= 0;
      for (int64_t i = 1; i < lanes && consecutive; ++i) consecutive = o[i] == o[0] + i;
      run[t] = consecutive;
    }
    int64_t c = r0 / kSize, t = r0 % kSize;
    if (avx512Rows) {
      StripTap8 taps[kStripTapsMax / 8];
      for (int64_t k = 0; k < kSize; ++k) taps[k] = stripTap8(off + k * 8);
      copyStripRows8(x, inSize, off, taps, kSize, c, t, kc, dst);
      dst += kc * 8;
      continue;
    }
    for (size_t r = 0; r < kc; ++r, dst += mr) {
      const float* xc = x + c * inSize;
      const int32_t* o = off + t * lanes;
      if (run[t] && mr == 8) std::memcpy(dst, xc + o[0], 8 * sizeof(float));  // one vector move
      else if (run[t]) std::memcpy(dst, xc + o[0], mr * sizeof(float));
      else
        for (size_t i = 0; i < mr; ++i) dst[i] = o[i] >= 0 ? xc[o[i]] : 0.0f;
      if (++t == kSize) t = 0, ++c;
    }
  }
}

// A Conv with its weight in panels as B (convOnPanels): Yᵀ [positions x M] = colᵀ (C·taps) x Wᵀ. The work is split
// (panelsSplit) into tasks of (image, block of output positions, range of output-channel panels), all handed to the
// pool at once: a task unfolds its positions one depth block at a time (in cache, just before the GEMM reads them),
// multiplies them by its panels into a tile of this thread's scratch, and transposes the tile into the output planes
// with the bias and the fused activation. A task only reads columns it unfolded itself: unfolding a small map's
// image once on all threads and having every range read it (columns written by the other core, and larger than
// its cache) made ResNet-18's 14x14 and 7x7 3x3s slower on two threads than on one (128 channels onto 14x14: 0.66
// ms on one thread, 1.35 on two; 0.43 when each task unfolds its own).
void runConvOnPanels(const OpContext& ctx, const ConvPlan& p, const Window3& w, const float* px, const float* pb,
                     float* py, const ops::Epilogue& act) {
  const cpu::PanelsB& panels = *ctx.panelsB;
  const auto m = static_cast<size_t>(p.outChannels);
  const size_t width = panels.width, panelCount = (m + width - 1) / width;
  const auto depth = static_cast<int64_t>(panels.depth);
  const int64_t inSize = w.in[0] * w.in[1] * w.in[2], outSize = w.out[0] * w.out[1] * w.out[2];
  const int64_t rows = p.channels * w.kernel[0] * w.kernel[1] * w.kernel[2];
  const bool pointwise = isPointwise(w);
  const size_t threads = ctx.pool ? static_cast<size_t>(ctx.pool->threads()) : 1;
  const cpu::PanelsSplit split = panelsSplit(outSize, pointwise ? 0 : std::min(rows, depth), p.outChannels, panelCount,
                                             width, p.batch, threads, pointwise);
  const auto block = static_cast<int64_t>(split.block);
  const size_t ranges = split.ranges, perRange = split.perRange;
  const int64_t rowBlocks = (outSize + block - 1) / block;
  const auto spans = static_cast<size_t>(p.batch * rowBlocks);
  const auto workPerTask = static_cast<size_t>(block * rows) * perRange * width;
  parallelForWork(ctx, spans * ranges, workPerTask, [&](size_t t0, size_t t1) {
    ThreadScratch& scratch = threadScratch();
    for (size_t t = t0; t < t1; ++t) {
      const size_t range = t % ranges, span = t / ranges;
      const auto n = static_cast<int64_t>(span) / rowBlocks, i0 = static_cast<int64_t>(span) % rowBlocks * block;
      const int64_t i1 = std::min(outSize, i0 + block);
      const size_t q0 = range * perRange, q1 = std::min(panelCount, q0 + perRange);
      const size_t ch0 = q0 * width, ch1 = std::min(m, q1 * width), nw = ch1 - ch0;
      const auto cols = static_cast<size_t>(i1 - i0);
      const float* xn = px + n * p.channels * inSize;
      float* yn = py + n * p.outChannels * outSize;
      float* tile = scratchAtLeast(scratch.convTile, cols * nw);
      // A pointwise Conv reads the input planes themselves as A (rows outSize apart), like unfolded images.
      if (pointwise) {
        cpu::sgemmPanelsRange(true, cols, 1.0f, xn + i0, static_cast<size_t>(outSize), panels, q0, q1, 0.0f, tile, nw);
      } else if (cols > 2 && unfoldsIntoStrips(w, cpu::panelStripRows(width))) {
        // Unfolded straight into the GEMM's strips of A, one depth block at a time.
        const size_t mr = cpu::panelStripRows(width), stripRows = (cols + mr - 1) / mr * mr;
        for (int64_t r0 = 0; r0 < rows; r0 += depth) {
          const int64_t r1 = std::min(rows, r0 + depth);
          float* strips = scratchAtLeast(scratch.convColumns, static_cast<size_t>(r1 - r0) * stripRows);
          unfoldIntoStrips(xn, w, r0, r1, i0, i1, mr, strips);
          cpu::sgemmPanelsPackedA(cols, 1.0f, strips, panels, static_cast<size_t>(r0), q0, q1, r0 != 0, tile, nw);
        }
      } else {
        for (int64_t r0 = 0; r0 < rows; r0 += depth) {
          const int64_t r1 = std::min(rows, r0 + depth);
          float* col = scratchAtLeast(scratch.convColumns, static_cast<size_t>(r1 - r0) * cols);
          im2col(xn, w, col, r0, r1, i0, i1);
          const cpu::PanelsB blockB{panels.data + static_cast<size_t>(r0) * panelCount * width,
                                    static_cast<size_t>(r1 - r0),
                                    m,
                                    width,
                                    panels.depth,
                                    {}};
          cpu::sgemmPanelsRange(true, cols, 1.0f, col, cols, blockB, q0, q1, r0 == 0 ? 0.0f : 1.0f, tile, nw);
        }
      }
      // The tile (positions x channels) into the output planes in 8 x 8 blocks; then each plane's bias and activation.
      transposeRows(tile, static_cast<int64_t>(nw), static_cast<int64_t>(cols), static_cast<int64_t>(nw),
                    yn + ch0 * static_cast<size_t>(outSize) + i0, outSize);
      for (size_t c = ch0; c < ch1; ++c) {
        float* yc = yn + c * static_cast<size_t>(outSize) + i0;
        applyBiasActivation(act, pb ? pb[c] : 0.0f, yc, cols);
      }
    }
  });
}

}  // namespace

namespace {

// A Conv's window from its typed attributes and shapes alone (compile-time and prepare-time decisions); none when the
// attributes do not fit the shapes.
std::optional<Window3> convWindow(const ops::ConvAttrs& attrs, std::span<const int64_t> x,
                                  std::span<const int64_t> weight) {
  static const ir::Attributes kNoAttributes;
  const OpContext ctx{ir::OpKind::Conv, 0, kNoAttributes, "", nullptr};
  auto window = computeWindow(ctx, attrs.window, x.subspan(2), weight.subspan(2), false);
  if (!window) return std::nullopt;
  return toWindow3(*window);
}

}  // namespace

bool convRunsOnPanels(const ops::ConvAttrs& attrs, std::span<const int64_t> x, std::span<const int64_t> weight) {
  if (attrs.group != 1 || x.size() < 3 || x.size() > 5 || weight.size() != x.size() || x[1] != weight[1] ||
      weight[0] <= 0 || weight[1] <= 0)
    return false;
  const std::optional<Window3> window = convWindow(attrs, x, weight);
  if (!window) return false;
  const Window3& w = *window;
  const int64_t positions = w.out[0] * w.out[1] * w.out[2];
  if (positions <= 0 || winogradByDefault(w, x[1], weight[0]) || groupedOnBlocks(w, x[1], weight[0], 1)) return false;
  if (positions <= cpu::kSmallConvOutputs && (isPointwise(w) || !fewOutputsDirect(w, weight[0]))) return true;
  // The direct path reads no unfolded input; bands of output rows skip the taps that land in the padding (dilated
  // convs at small sizes), which a GEMM over every tap would multiply.
  if (runsDirect(w, x[1], weight[0], 1)) return false;
  if (isPointwise(w)) {
    // Both paths read the input planes in place, but the plain one packs the weight (M x C) on every run, the panels
    // one the input (C x positions) and then transposes its result (M x positions): a 1x1 of 2048 channels onto 7x7
    // (ResNet-50's last stage) packs 1M weights for 49 positions.
    const double m = static_cast<double>(weight[0]), c = static_cast<double>(x[1]);
    return m * c > static_cast<double>(positions) * (c + m);
  }
  std::vector<TapBand> bands;  // (a compile-time or prepare-time decision: allocating here is fine)
  planTapBands(w, bands);
  const int64_t kSize = w.kernel[0] * w.kernel[1] * w.kernel[2];
  // Every other dense Conv multiplies by the weight stored in panels: the plain path's GEMM packs the weight as A
  // on every run, which at small spatial sizes costs as much as the multiply (512 channels onto 7x7: 43% of its
  // time in packing 9.4 MB of weights for 49 positions), and even at 28x28 it measured slower (128 channels: 3.07
  // against 2.66 ms, bench/kernels.sh).
  return bands.size() == 1 && bands[0].taps() == kSize;
}

cpu::ConvAlgorithm convHeuristicAlgorithm(const ops::ConvAttrs& attrs, std::span<const int64_t> x,
                                          std::span<const int64_t> weight, bool constantWeight) {
  if (x.size() < 3 || x.size() > 5 || weight.size() != x.size() || attrs.group < 1 || weight[0] <= 0 ||
      weight[1] <= 0 || x[1] != weight[1] * attrs.group || weight[0] % attrs.group != 0)
    return cpu::ConvAlgorithm::Heuristic;
  const std::optional<Window3> window = convWindow(attrs, x, weight);
  if (!window) return cpu::ConvAlgorithm::Heuristic;
  const Window3& w = *window;
  const int64_t cg = weight[1], mg = weight[0] / attrs.group;
  if (constantWeight && attrs.group == 1 && winogradByDefault(w, cg, mg)) return cpu::ConvAlgorithm::Winograd;
  if (constantWeight && convRunsOnPanels(attrs, x, weight)) return cpu::ConvAlgorithm::Panels;
  if (depthwiseOnSmallMap(w, cg, mg, attrs.group)) return cpu::ConvAlgorithm::DepthwiseSmallMap;
  if (groupedOnBlocks(w, cg, mg, attrs.group)) return cpu::ConvAlgorithm::GroupedBlocks;
  return runsDirect(w, cg, mg, attrs.group) ? cpu::ConvAlgorithm::Direct : cpu::ConvAlgorithm::Gemm;
}

Expected<std::shared_ptr<const void>> planConvOnce(const OpContext& ctx, InDescs inputs) {
  if (inputs.size() < 2 || !inputs[1].value || inputs[0].type != ElemType::Float || inputs[1].type != ElemType::Float)
    return std::shared_ptr<const void>();
  CTX_ASSIGN_OR_RETURN(ConvPlan p, planConv(ctx, inputs[0].shape, inputs[1].shape, nullptr));
  const Window3 w = toWindow3(p.window);
  const int64_t cg = p.channels / p.group, mg = p.outChannels / p.group;
  if (p.batch * p.group == 0 || mg == 0) return std::shared_ptr<const void>();
  const cpu::ConvAlgorithm algorithm = runAlgorithm(ctx, p, w, true);
  if (algorithm == cpu::ConvAlgorithm::Winograd)
    return std::shared_ptr<const void>(
        transformWinogradWeights(inputs[1].value->dataAs<float>(), p.outChannels, p.channels));
  if (algorithm != cpu::ConvAlgorithm::GroupedBlocks) return std::shared_ptr<const void>();
  const int64_t taps = w.kernel[0] * w.kernel[1] * w.kernel[2];
  auto packed = std::make_shared<GroupedWeights>(static_cast<size_t>(groupedWeightFloats(p.group, cg, mg, taps)));
  packGroupedWeights(inputs[1].value->dataAs<float>(), p.group, cg, mg, taps, packed->data());
  return std::shared_ptr<const void>(std::move(packed));
}

InferResult inferConv(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float) | kHalfTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  const ValueDesc* bias = optionalInput(inputs, 2);
  if (bias) CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
  CTX_ASSIGN_OR_RETURN(ConvPlan p, planConv(ctx, inputs[0].shape, inputs[1].shape, bias ? &bias->shape : nullptr));
  ir::Shape out{p.batch, p.outChannels};
  out.insert(out.end(), p.window.out.begin(), p.window.out.end());
  return single(inputs[0].type, std::move(out));
}

Status runConv(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const ir::Tensor& wt = *inputs[1];
  const ir::Tensor* bias = inputs.size() > 2 ? inputs[2] : nullptr;
  ir::Tensor& y = *outputs[0];
  // A weight stored in panels is bound as its stored 1-D tensor: plan with its logical shape.
  const std::span<const int64_t> wShape =
      ctx.panelsB && !ctx.panelsB->weightShape.empty() ? ctx.panelsB->weightShape : wt.shape();
  CTX_ASSIGN_OR_RETURN(ConvPlan p, planConv(ctx, x.shape(), wShape, bias ? &bias->shape() : nullptr));
  const ops::Epilogue& act = attrsOf<ops::ConvAttrs>(ctx).epilogue;
  const Window3 w = toWindow3(p.window);
  const int64_t cg = p.channels / p.group;     // input channels per group
  const int64_t mg = p.outChannels / p.group;  // output channels per group
  const int64_t kSize = w.kernel[0] * w.kernel[1] * w.kernel[2];
  const int64_t inSize = w.in[0] * w.in[1] * w.in[2];
  const int64_t outSize = w.out[0] * w.out[1] * w.out[2];
  const int64_t rows = cg * kSize;  // GEMM depth
  const bool pointwise = isPointwise(w);
  const float* px = x.dataAs<float>();
  const float* pw = wt.dataAs<float>();
  float* py = y.mutableDataAs<float>();
  const int64_t jobs = p.batch * p.group;
  if (jobs == 0 || outSize == 0 || mg == 0) return Status::ok();

  const cpu::ConvAlgorithm algorithm = runAlgorithm(ctx, p, w, ctx.plan != nullptr);
  if (algorithm == cpu::ConvAlgorithm::Heuristic)  // the program verifier and the prepared op refuse these first
    return invalid(ctx, "the recorded kernel {} cannot run input {} with weight {} and group {}",
                   cpu::convAlgorithmName(ctx.kernel.algorithm), shapeStr(x.shape()), shapeStr(wShape), p.group);

  if (algorithm == cpu::ConvAlgorithm::Panels) {
    runConvOnPanels(ctx, p, w, px, bias ? bias->dataAs<float>() : nullptr, py, act);
    return Status::ok();
  }
  if (algorithm == cpu::ConvAlgorithm::Winograd) {
    // The weight transformed at prepare (planConvOnce), or here (a recorded choice for an op evaluated unprepared).
    std::shared_ptr<const WinogradWeights> transformed;
    const auto* u = static_cast<const WinogradWeights*>(ctx.plan);
    if (!u) u = (transformed = transformWinogradWeights(pw, p.outChannels, p.channels)).get();
    runWinograd(ctx, *u, w, p.batch, px, bias ? bias->dataAs<float>() : nullptr, py, act);
    return Status::ok();
  }

  // The direct path vectorizes along output rows: rows of a few outputs under many taps (a 1-D "STFT" Conv of 256
  // taps with 3 outputs) go through im2col + GEMM instead.
  if (algorithm == cpu::ConvAlgorithm::DepthwiseSmallMap) {
    const float* pb = bias ? bias->dataAs<float>() : nullptr;
    const int64_t blocks = (p.group + kDepthwiseLanes - 1) / kDepthwiseLanes;
    parallelForWork(ctx, static_cast<size_t>(p.batch * blocks), static_cast<size_t>(kDepthwiseLanes * outSize * rows),
                    [&](size_t i0, size_t i1) {
                      for (auto i = static_cast<int64_t>(i0); i < static_cast<int64_t>(i1); ++i) {
                        const int64_t n = i / blocks, c0 = (i % blocks) * kDepthwiseLanes;
                        depthwiseSmallMap(px + n * p.channels * inSize, pw, pb, py + n * p.outChannels * outSize, c0,
                                          std::min(p.group, c0 + kDepthwiseLanes), w, act);
                      }
                    });
    return Status::ok();
  }
  if (algorithm == cpu::ConvAlgorithm::GroupedBlocks) {
    // The weight packed at prepare (planConvOnce), or here into this thread's scratch (a weight computed per run).
    const float* packed = ctx.plan ? static_cast<const GroupedWeights*>(ctx.plan)->data() : nullptr;
    if (!packed) {
      float* dst =
          scratchAtLeast(threadScratch().convWeights, static_cast<size_t>(groupedWeightFloats(p.group, cg, mg, kSize)));
      packGroupedWeights(pw, p.group, cg, mg, kSize, dst);
      packed = dst;
    }
    // Work items are (image, group, range of blocks): a group's blocks are split when there are too few groups to
    // give each thread two items (a dense Conv is one group); each item builds the group's padded plane itself.
    const float* pb = bias ? bias->dataAs<float>() : nullptr;
    const int64_t groupFloats = groupedWeightFloats(1, cg, mg, kSize), blocks = groupedBlockCount(mg);
    const int64_t threads = ctx.pool ? ctx.pool->threads() : 1;
    const int64_t ranges = threads > 1 ? std::min(blocks, (2 * threads + jobs - 1) / jobs) : 1;
    const int64_t perRange = (blocks + ranges - 1) / ranges;
    parallelForWork(ctx, static_cast<size_t>(jobs * ranges),
                    static_cast<size_t>(outSize * rows * perRange * kGroupedLanes), [&](size_t i0, size_t i1) {
                      for (auto i = static_cast<int64_t>(i0); i < static_cast<int64_t>(i1); ++i) {
                        const int64_t j = i / ranges, b0 = i % ranges * perRange;
                        const int64_t n = j / p.group, g = j % p.group;
                        if (b0 >= blocks) continue;
                        groupedBlocks(px + (n * p.channels + g * cg) * inSize, cg, packed + g * groupFloats,
                                      pb ? pb + g * mg : nullptr, py + (n * p.outChannels + g * mg) * outSize, mg, b0,
                                      std::min(blocks, b0 + perRange), w, act);
                      }
                    });
    return Status::ok();
  }
  if (algorithm == cpu::ConvAlgorithm::Direct) {
    // Work items are (image, group, output channel); a thread's run of items loads each group's planes once, so
    // when the groups have many input channels each thread takes one run of items per group.
    const float* pb = bias ? bias->dataAs<float>() : nullptr;
    const size_t threads = ctx.pool ? static_cast<size_t>(ctx.pool->threads()) : 1;
    const size_t minItems = cg > 1 ? (static_cast<size_t>(mg) + threads - 1) / threads : 1;
    parallelForWork(
        ctx, static_cast<size_t>(jobs * mg), static_cast<size_t>(outSize * rows),
        [&](size_t i0, size_t i1) {
          for (int64_t i = static_cast<int64_t>(i0); i < static_cast<int64_t>(i1);) {
            const int64_t job = i / mg, m0 = i % mg, m1 = std::min(mg, m0 + static_cast<int64_t>(i1) - i);
            const int64_t n = job / p.group, g = job % p.group;
            directConv(px + (n * p.channels + g * cg) * inSize, cg, pw + g * mg * rows, pb ? pb + g * mg : nullptr,
                       py + (n * p.outChannels + g * mg) * outSize, m0, m1, w, act);
            i += m1 - m0;
          }
        },
        minItems);
    return Status::ok();
  }

  // Bands of output rows, each multiplied by only the taps that land inside the input for it.
  thread_local std::vector<TapBand> tBands;  // kept between runs: a steady-state run allocates nothing
  std::vector<TapBand>& bands = tBands;      // the caller's, also where jobs run on other threads
  if (!pointwise) planTapBands(w, bands);
  auto oneJob = [&](int64_t job, std::vector<float>& col, ThreadPool* pool) {
    int64_t n = job / p.group, g = job % p.group;
    const float* xg = px + (n * p.channels + g * cg) * inSize;
    float* yg = py + (n * p.outChannels + g * mg) * outSize;
    const float* wg = pw + g * mg * rows;
    if (pointwise) {
      cpu::sgemm(false, false, static_cast<size_t>(mg), static_cast<size_t>(outSize), static_cast<size_t>(rows), 1.0f,
                 wg, static_cast<size_t>(rows), xg, static_cast<size_t>(outSize), 0.0f, yg,
                 static_cast<size_t>(outSize), pool);
    } else {
      for (const TapBand& band : bands) {
        // Output positions [p0, p1) of the band; its taps' window, weights and GEMM depth.
        const int64_t p0 = w.out[0] == 1 ? band.oh0 * w.out[2] : 0, p1 = w.out[0] == 1 ? band.oh1 * w.out[2] : outSize;
        const int64_t bandRows = cg * band.taps();
        if (bandRows == 0) {  // every tap lands in the padding
          for (int64_t m = 0; m < mg; ++m) std::fill(yg + m * outSize + p0, yg + m * outSize + p1, 0.0f);
          continue;
        }
        Window3 bw = w;
        const float* bandWeights = wg;
        if (band.taps() != kSize) {
          for (int d = 0; d < 3; ++d) {
            bw.kernel[d] = band.k1[d] - band.k0[d];
            bw.padBegin[d] -= band.k0[d] * w.dilation[d];
          }
          float* dst = scratchAtLeast(threadScratch().convWeights, static_cast<size_t>(mg * bandRows));
          bandWeights = dst;
          const int64_t kw0 = band.k0[2], kw1 = band.k1[2];
          for (int64_t mc = 0; mc < mg * cg; ++mc)
            for (int64_t kd = band.k0[0]; kd < band.k1[0]; ++kd)
              for (int64_t kh = band.k0[1]; kh < band.k1[1]; ++kh) {
                const float* src = wg + mc * kSize + (kd * w.kernel[1] + kh) * w.kernel[2];
                for (int64_t kw = kw0; kw < kw1; ++kw) *dst++ = src[kw];  // runs of a few: no memcpy call
              }
        }
        // The unfolded input is built a column range at a time, so it stays small and in cache.
        const int64_t chunk = std::max<int64_t>(64, std::min(p1 - p0, kColBudget / bandRows));
        for (int64_t c0 = p0; c0 < p1; c0 += chunk) {
          int64_t c1 = std::min(p1, c0 + chunk);
          scratchAtLeast(col, static_cast<size_t>(bandRows * (c1 - c0)));
          unfoldColumns(pool, xg, bw, col.data(), 0, bandRows, c0, c1);
          cpu::sgemm(false, false, static_cast<size_t>(mg), static_cast<size_t>(c1 - c0), static_cast<size_t>(bandRows),
                     1.0f, bandWeights, static_cast<size_t>(bandRows), col.data(), static_cast<size_t>(c1 - c0), 0.0f,
                     yg + c0, static_cast<size_t>(outSize), pool);
        }
      }
    }
    // The bias and a Relu or Clip in one pass over each output plane (a separate Add pass and activation pass were
    // 5% of MobileNetV2's time, perf).
    for (int64_t m = 0; m < mg; ++m)
      applyBiasActivation(act, bias ? bias->dataAs<float>()[g * mg + m] : 0.0f, yg + m * outSize,
                          static_cast<size_t>(outSize));
  };

  int threads = ctx.pool ? ctx.pool->threads() : 1;
  if (threads > 1 && jobs >= 2 * threads) {
    parallelFor(ctx, static_cast<size_t>(jobs), 1, [&](size_t j0, size_t j1) {
      std::vector<float>& col = threadScratch().convColumns;
      for (size_t j = j0; j < j1; ++j) oneJob(static_cast<int64_t>(j), col, nullptr);
    });
  } else {
    std::vector<float>& col = threadScratch().convColumns;
    for (int64_t j = 0; j < jobs; ++j) oneJob(j, col, ctx.pool);
  }
  return Status::ok();
}

Status noteConvScratch(const OpContext& ctx, std::span<const int64_t> x, std::span<const int64_t> weight) {
  CTX_ASSIGN_OR_RETURN(ConvPlan p, planConv(ctx, x, weight, nullptr));
  const Window3 w = toWindow3(p.window);
  const int64_t cg = p.channels / p.group, mg = p.outChannels / p.group;
  const int64_t kSize = w.kernel[0] * w.kernel[1] * w.kernel[2], rows = cg * kSize;
  const int64_t outSize = w.out[0] * w.out[1] * w.out[2];
  if (p.batch * p.group == 0 || outSize == 0 || mg == 0) return Status::ok();
  auto raise = [](ScratchBuffer b, int64_t elements) { raiseThreadScratchMark(b, static_cast<size_t>(elements)); };
  switch (runAlgorithm(ctx, p, w, ctx.plan != nullptr)) {
    case cpu::ConvAlgorithm::Winograd:
      raise(ScratchBuffer::Winograd,
            static_cast<int64_t>(winogradScratchFloats(w, p.batch, p.channels, p.outChannels)));
      break;
    case cpu::ConvAlgorithm::Panels: {
      // One thread's blocks are the largest.
      const int64_t depthRows = isPointwise(w) ? 0 : std::min(rows, static_cast<int64_t>(ctx.panelsB->depth));
      const int64_t block = panelsRowBlock(outSize, depthRows, p.outChannels, p.batch, 1);
      // Strips of A (unfoldIntoStrips): the positions rounded up to whole strips.
      if (depthRows > 0) raise(ScratchBuffer::ConvColumns, depthRows * (block + 8));
      raise(ScratchBuffer::ConvTile, block * p.outChannels);
      break;
    }
    case cpu::ConvAlgorithm::DepthwiseSmallMap: raise(ScratchBuffer::Depthwise, depthwiseScratch(w)); break;
    case cpu::ConvAlgorithm::GroupedBlocks:
      raise(ScratchBuffer::Depthwise, groupedScratch(w, cg));
      if (!ctx.plan) raise(ScratchBuffer::ConvWeights, groupedWeightFloats(p.group, cg, mg, kSize));
      break;
    case cpu::ConvAlgorithm::Direct: {
      // What PaddedPlane::load sizes for the group's planes, and directConv's runs onto narrow maps.
      int64_t ext[3];
      for (int i = 0; i < 3; ++i)
        ext[i] = std::max(w.padBegin[i] + w.in[i] + w.padEnd[i],
                          (w.out[i] - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i] + 1);
      const int64_t phase = (ext[2] + w.stride[2] - 1) / w.stride[2];
      raise(ScratchBuffer::ConvPlaneData, cg * ext[0] * ext[1] * w.stride[2] * phase + PaddedPlane::kReadSlack);
      raise(ScratchBuffer::ConvPlaneTaps, rows);
      raise(ScratchBuffer::ConvTaps, rows);
      if (directRunLength(w) > 0) raise(ScratchBuffer::ConvRuns, 4 * directRunLength(w));
      break;
    }
    default: {  // im2col + GEMM, a band of output rows and a column chunk at a time
      if (isPointwise(w)) break;
      std::vector<TapBand> bands;
      planTapBands(w, bands);
      for (const TapBand& band : bands) {
        const int64_t bandRows = cg * band.taps();
        if (bandRows == 0) continue;
        const int64_t p0 = w.out[0] == 1 ? band.oh0 * w.out[2] : 0, p1 = w.out[0] == 1 ? band.oh1 * w.out[2] : outSize;
        const int64_t chunk = std::max<int64_t>(64, std::min(p1 - p0, kColBudget / bandRows));
        raise(ScratchBuffer::ConvColumns, bandRows * std::min(chunk, p1 - p0));
        if (band.taps() != kSize) raise(ScratchBuffer::ConvWeights, mg * bandRows);
      }
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail

namespace ctxkit::kernels {

bool convOnPanels(const ops::ConvAttrs& attrs, std::span<const int64_t> x, std::span<const int64_t> weight) {
  return detail::convRunsOnPanels(attrs, x, weight);
}

cpu::ConvAlgorithm convHeuristic(const ops::ConvAttrs& attrs, std::span<const int64_t> x,
                                 std::span<const int64_t> weight, bool constantWeight) {
  return detail::convHeuristicAlgorithm(attrs, x, weight, constantWeight);
}

std::vector<cpu::ConvAlgorithm> convAlgorithms(const ops::ConvAttrs& attrs, std::span<const int64_t> x,
                                               std::span<const int64_t> weight, bool constantWeight) {
  using cpu::ConvAlgorithm;
  const ConvAlgorithm first = convHeuristic(attrs, x, weight, constantWeight);
  if (first == ConvAlgorithm::Heuristic) return {};
  std::vector<ConvAlgorithm> all{first};
  const bool depthwise = weight[1] == 1 && weight[0] == attrs.group && x[1] == attrs.group && x.size() <= 4;
  // grouped-blocks for grouped Convs with more than one channel per group (a depthwise one would fill one lane).
  const bool grouped = !depthwise && x.size() <= 4;
  // Winograd for dense 2-D 3x3 Convs of stride 1 without dilation, on a weight transformed at prepare.
  bool winograd = false;
  if (constantWeight && attrs.group == 1 && x.size() == 4) {
    const std::optional<detail::Window3> window = detail::convWindow(attrs, x, weight);
    winograd = window && detail::winogradFits(*window);
  }
  for (ConvAlgorithm a : {ConvAlgorithm::Panels, ConvAlgorithm::DepthwiseSmallMap, ConvAlgorithm::GroupedBlocks,
                          ConvAlgorithm::Winograd, ConvAlgorithm::Direct, ConvAlgorithm::Gemm}) {
    if (a == first || (a == ConvAlgorithm::Panels && (attrs.group != 1 || !constantWeight)) ||
        (a == ConvAlgorithm::DepthwiseSmallMap && !depthwise) || (a == ConvAlgorithm::GroupedBlocks && !grouped) ||
        (a == ConvAlgorithm::Winograd && !winograd))
      continue;
    all.push_back(a);
  }
  return all;
}

}  // namespace ctxkit::kernels
