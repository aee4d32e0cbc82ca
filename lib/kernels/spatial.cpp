// Sliding-window output sizes and padding (explicit pads or auto_pad), and padded input planes, shared by Conv
// and pooling.
#include "kernels/spatial.h"
#include "cpu/simd.h"

#include <algorithm>

namespace ctxkit::kernels::detail {

namespace {

// For b >= 1 and a >= 0 (a - 1 + b never overflows where a + b - 1 could).
int64_t ceilDiv(int64_t a, int64_t b) { return a == 0 ? 0 : (a - 1) / b + 1; }
int64_t floorDiv(int64_t a, int64_t b) { return a / b; }

}  // namespace

Expected<Window> computeWindow(const OpContext& ctx, const ops::WindowAttrs& attrs, std::span<const int64_t> in,
                               std::span<const int64_t> kernel, bool ceilMode) {
  size_t n = in.size();
  Window w;
  for (int64_t d : in) w.in.push_back(d);
  for (int64_t k : kernel) w.kernel.push_back(k);
  for (int64_t k : w.kernel)
    if (k < 1) return invalid(ctx, "kernel shape {} has a dimension below 1", shapeStr(w.kernel));
  CTX_ASSIGN_OR_RETURN(w.strides, listOrDefault<Dims>(ctx, attrs.strides, "strides", n, 1));
  CTX_ASSIGN_OR_RETURN(w.dilations, listOrDefault<Dims>(ctx, attrs.dilations, "dilations", n, 1));
  CTX_ASSIGN_OR_RETURN(Dims pads, listOrDefault<Dims>(ctx, attrs.pads, "pads", 2 * n, 0));
  using ops::AutoPad;
  w.padBegin.assign(n, 0);
  w.padEnd.assign(n, 0);
  w.out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    // Every size below is checked: the attributes and the input come from a file and may be anything.
    const CheckedInt span = CheckedInt(w.dilations[i]) * (CheckedInt(w.kernel[i]) - 1) + 1;  // dilated kernel
    const int64_t s = w.strides[i];
    if (!span.ok())
      return invalid(ctx, "kernel {} with dilation {} overflows in spatial dimension {}", w.kernel[i], w.dilations[i],
                     i);
    if (attrs.autoPad == AutoPad::SameUpper || attrs.autoPad == AutoPad::SameLower) {
      const int64_t out = ceilDiv(w.in[i], s);
      const CheckedInt needed = (CheckedInt(out) - 1) * s + span - w.in[i];
      if (!needed.ok())
        return invalid(ctx, "the padding of spatial dimension {} overflows (stride {}, kernel extent {})", i, s,
                       span.value());
      const int64_t total = std::max<int64_t>(0, needed.value());
      int64_t small = total / 2, large = total - total / 2;
      w.padBegin[i] = attrs.autoPad == AutoPad::SameUpper ? small : large;
      w.padEnd[i] = attrs.autoPad == AutoPad::SameUpper ? large : small;
      w.out[i] = out;
      continue;
    }
    if (attrs.autoPad == AutoPad::NotSet) {
      w.padBegin[i] = pads[i];
      w.padEnd[i] = pads[i + n];
    }
    const CheckedInt padded = CheckedInt(w.in[i]) + w.padBegin[i] + w.padEnd[i];
    if (!padded.ok())
      return invalid(ctx, "pads {} and {} overflow spatial dimension {} of extent {}", w.padBegin[i], w.padEnd[i], i,
                     w.in[i]);
    if (padded.value() < span.value())
      return invalid(ctx, "kernel extent {} exceeds the padded input extent {} in spatial dimension {}", span.value(),
                     padded.value(), i);
    const int64_t rest = padded.value() - span.value();
    int64_t out = (ceilMode ? ceilDiv(rest, s) : floorDiv(rest, s)) + 1;
    // With ceil_mode, a last window starting inside the end padding is dropped.
    if (ceilMode && (out - 1) * s >= w.in[i] + w.padBegin[i]) --out;
    w.out[i] = out;
  }
  return w;
}

Window3 toWindow3(const Window& w) {
  Window3 r{};
  size_t lead = 3 - w.in.size();
  for (size_t i = 0; i < 3; ++i) {
    bool real = i >= lead;
    size_t j = i - lead;
    r.in[i] = real ? w.in[j] : 1;
    r.kernel[i] = real ? w.kernel[j] : 1;
    r.stride[i] = real ? w.strides[j] : 1;
    r.dilation[i] = real ? w.dilations[j] : 1;
    r.padBegin[i] = real ? w.padBegin[j] : 0;
    r.padEnd[i] = real ? w.padEnd[j] : 0;
    r.out[i] = real ? w.out[j] : 1;
  }
  return r;
}

namespace {

// dst[0 .. n) = src[0 .. n) and dst[0 .. n) = value, in 16-float moves (the last one moved back to end at n): rows
// of a few dozen floats, where a library call or a float at a time cost as much as a depthwise Conv's multiply-adds.
#define CTX_PLANE_INLINE __attribute__((always_inline)) inline
CTX_PLANE_INLINE void copyFloats(const float* src, float* dst, int64_t n) {
  if (n < 16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
    return;
  }
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t at = std::min(i, n - 16);
    __builtin_memcpy(dst + at, src + at, 16 * sizeof(float));
  }
}

CTX_PLANE_INLINE void fillFloats(float* dst, int64_t n, float value) {
  float block[16];
  for (float& b : block) b = value;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) __builtin_memcpy(dst + i, block, sizeof block);
  for (; i < n; ++i) dst[i] = value;
}

PhaseColumns phaseColumns(int64_t width, int64_t first, int64_t s, int64_t count) {
  PhaseColumns p;
  p.first = first;
  // Columns inside the input: j * s + first in [0, width).
  p.lo = std::min(first >= 0 ? 0 : (-first + s - 1) / s, count);
  p.hi = std::clamp(width - first <= 0 ? 0 : (width - first + s - 1) / s, p.lo, count);
  return p;
}

// What copyPaddedRows copies: `channels` planes of `in` from x into rows of ext[0] x ext[1] padded rows (`s` phases of
// `count` floats each), the input rows starting at padded row (padBegin[0], padBegin[1]).
struct PlaneRows {
  const float* x;
  int64_t channels, in[3], ext[2], padBegin[3], s, count;
  const PhaseColumns* phases;  // per phase, for strides 1 and 2 (wider ones work theirs out per row)
  float fill;
};

// The padded rows of every plane of `g` into dst. Compiled once per x86-64 level: the per-row copies and fills of a
// depthwise Conv's small planes took 35-45% of its time in baseline SSE2 moves and per-row calls.
template <int S> CTX_PLANE_INLINE void copyPaddedRow(const float* src, const PlaneRows& g, float* dst) {
  const int64_t s = S > 0 ? S : g.s, count = g.count;
  const float fill = g.fill;
  for (int64_t p = 0; p < s; ++p) {
    const PhaseColumns c = S > 0 ? g.phases[p] : phaseColumns(g.in[2], p - g.padBegin[2], s, count);
    float* out = dst + p * count;
    for (int64_t j = 0; j < c.lo; ++j) out[j] = fill;
    const float* in = src + (c.lo * s + c.first);  // input column of out[lo]
    if constexpr (S == 1) {
      copyFloats(in, out + c.lo, c.hi - c.lo);
    } else if constexpr (S == 2) {
      // 16 outputs from in[2k .. 2k + 30]: the second load starts one float early (at 2k + 15) so that it ends at
      // the block's last input, never past the row's last column read; the last block is moved back to end at hi
      // (it rewrites outputs of the block before with the same values). Rows of 24 outputs (MobileNetV2's 48 ->
      // 24 stride-2 depthwise Conv) went 16 in a vector and 8 a float at a time.
      typedef float Lanes16 __attribute__((vector_size(64)));
      const int64_t n = c.hi - c.lo;
      auto block = [&](int64_t k) {
        Lanes16 a, b;
        __builtin_memcpy(&a, in + 2 * k, sizeof a);
        __builtin_memcpy(&b, in + 2 * k + 15, sizeof b);
        const Lanes16 even = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31);
        __builtin_memcpy(out + c.lo + k, &even, sizeof even);
      };
      if (n >= 16) {
        int64_t k = 0;
        for (; k + 16 <= n; k += 16) block(k);
        if (k < n) block(n - 16);
      } else {
        for (int64_t k = 0; k < n; ++k) out[c.lo + k] = in[2 * k];
      }
    } else {
      for (int64_t j = c.lo; j < c.hi; ++j) out[j] = in[(j - c.lo) * s];
    }
    for (int64_t j = c.hi; j < count; ++j) out[j] = fill;
  }
}

template <int S> CTX_PLANE_INLINE void copyPaddedRows(const PlaneRows& g, float* dst) {
  const int64_t rowLen = (S > 0 ? S : g.s) * g.count, inSize = g.in[0] * g.in[1] * g.in[2];
  for (int64_t c = 0; c < g.channels; ++c)
    for (int64_t pd = 0; pd < g.ext[0]; ++pd) {
      const int64_t id = pd - g.padBegin[0];
      for (int64_t ph = 0; ph < g.ext[1]; ++ph, dst += rowLen) {
        const int64_t ih = ph - g.padBegin[1];
        if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) fillFloats(dst, rowLen, g.fill);
        else copyPaddedRow<S>(g.x + c * inSize + (id * g.in[1] + ih) * g.in[2], g, dst);
      }
    }
}

CTX_SIMD_CLONES void copyPaddedRowsAny(const PlaneRows& g, float* dst) {
  if (g.s == 1) copyPaddedRows<1>(g, dst);
  else if (g.s == 2) copyPaddedRows<2>(g, dst);
  else copyPaddedRows<0>(g, dst);
}

}  // namespace

void PaddedPlane::load(const float* x, const Window3& w, float fill, int64_t channels) {
  // The geometry, the slack's fill and the taps carry over from the last load of the same window and fill (a
  // depthwise Conv loads one plane per channel): worked out again per plane, they were 5% of such a Conv's time.
  const bool same = planned_ && w_ == w && channels_ == channels && fill_ == fill && data_.size() == dataSize_;
  if (!same) {
    const bool sameGeometry = planned_ && w_ == w && channels_ == channels;
    w_ = w;
    channels_ = channels;
    for (int i = 0; i < 3; ++i) {
      int64_t needed = (w.out[i] - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i] + 1;
      ext_[i] = std::max(w.padBegin[i] + w.in[i] + w.padEnd[i], needed);
    }
    const int64_t s = w.stride[2];
    phaseLen_ = (ext_[2] + s - 1) / s;
    const auto planes = static_cast<size_t>(channels * ext_[0] * ext_[1] * s * phaseLen_);
    dataSize_ = planes + kReadSlack;
    data_.resize(dataSize_);
    std::fill(data_.begin() + static_cast<ptrdiff_t>(planes), data_.end(), fill);
    fill_ = fill;
    if (!sameGeometry) planTaps();
    planned_ = true;
  }
  const PlaneRows rows{x,
                       channels,
                       {w.in[0], w.in[1], w.in[2]},
                       {ext_[0], ext_[1]},
                       {w.padBegin[0], w.padBegin[1], w.padBegin[2]},
                       w.stride[2],
                       phaseLen_,
                       phases_,
                       fill};
  copyPaddedRowsAny(rows, data_.data());
}

void PaddedPlane::rowTaps(int64_t od, int64_t oh, const float** taps) const {
  const float* base = data_.data() + od * odStep_ + oh * ohStep_;
  for (size_t t = 0; t < tapOffsets_.size(); ++t) taps[t] = base + tapOffsets_[t];
}

void PaddedPlane::planTaps() {
  const int64_t s = w_.stride[2];
  const int64_t rowLen = s * phaseLen_;
  for (int64_t p = 0; p < std::min<int64_t>(s, 2); ++p)
    phases_[p] = phaseColumns(w_.in[2], p - w_.padBegin[2], s, phaseLen_);
  odStep_ = w_.stride[0] * ext_[1] * rowLen;
  ohStep_ = w_.stride[1] * rowLen;
  tapOffsets_.clear();
  for (int64_t ckd = 0; ckd < channels_ * w_.kernel[0]; ++ckd) {
    const int64_t c = ckd / w_.kernel[0], kd = ckd % w_.kernel[0];
    const int64_t pd = c * ext_[0] + kd * w_.dilation[0];
    for (int64_t kh = 0; kh < w_.kernel[1]; ++kh) {
      const int64_t ph = kh * w_.dilation[1];
      for (int64_t kw = 0; kw < w_.kernel[2]; ++kw) {
        const int64_t col = kw * w_.dilation[2];  // column of output 0's tap; output ow reads col + ow * s
        tapOffsets_.push_back((pd * ext_[1] + ph) * rowLen + (col % s) * phaseLen_ + col / s);
      }
    }
  }
}

}  // namespace ctxkit::kernels::detail
