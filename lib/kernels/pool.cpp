// MaxPool (with optional Indices), AveragePool (count_include_pad) and GlobalAveragePool over 1-3 spatial dims.
#include "cpu/vec_math.h"
#include "kernels/ops.h"
#include "kernels/spatial.h"
#include "kernels/thread_scratch.h"

#include <algorithm>
#include <limits>

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

// Float planes: the padded, phase-split copy (filled with -inf for max, 0 for average) lets every output row
// reduce contiguous tap rows in registers (cpu::vecTapsMax, cpu::vecTapsDot with unit weights), whatever the stride.
// `counts` holds, per output column, the divisor's column factor (see columnDivisors).
template <bool IsMax>
void poolPlaneF32(const float* xp, float* yp, const Window3& w, bool countPad, std::span<const float> counts) {
  ThreadScratch& scratch = threadScratch();
  PaddedPlane& plane = scratch.poolPlane;
  std::vector<const float*>& taps = scratch.poolTaps;
  std::vector<float>& ones = scratch.poolOnes;
  std::vector<float>& divisors = scratch.poolDivisors;
  plane.load(xp, w, IsMax ? -std::numeric_limits<float>::infinity() : 0.0f);
  taps.resize(plane.tapCount());
  ones.assign(taps.size(), 1.0f);
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

// 2-D float pooling is separable: each output row reduces its window's input rows (whole rows, in vector registers:
// cpu::vecTapsMax, or cpu::vecTapsDot with unit weights, over the rows inside the input), then each output its window's
// columns of that row (the same kernels on the row, phase-split for stride 2; edge columns one at a time); an average
// then divides by the row and column factors of its divisor (outerDivisor, `counts`). Padding only removes taps (-inf
// never wins a max; a zero adds nothing to a sum). No padded copy of the plane: that copy and its phase split cost
// five to ten times ONNX Runtime's time on SqueezeNet's and DenseNet's pools.
template <bool IsMax>
void poolPlaneSeparable(const float* xp, float* yp, const Window3& w, bool countPad, std::span<const float> counts) {
  ThreadScratch& scratch = threadScratch();
  std::vector<float>& row = scratch.poolDivisors;  // one output row's column reductions, then (stride 2) its phases
  std::vector<const float*>& taps = scratch.poolTaps;
  std::vector<float>& ones = scratch.poolOnes;
  const int64_t in = w.in[2], s = w.stride[2], dil = w.dilation[2], k = w.kernel[2], pad = w.padBegin[2];
  row.resize(static_cast<size_t>(2 * in + 2));
  const auto most = static_cast<size_t>(std::max(w.kernel[1], k));
  taps.resize(most);
  if constexpr (!IsMax) ones.assign(most, 1.0f);
  float* phases[2] = {row.data() + in, row.data() + in + (in + 1) / 2};
  // Output columns whose window lies wholly inside the row: [lo, hi).
  const int64_t lo = std::min(w.out[2], (pad + s - 1) / s);
  const int64_t last = in - 1 - (k - 1) * dil + pad;  // the largest ow * s
  const int64_t hi = std::max(lo, std::min(w.out[2], last < 0 ? 0 : last / s + 1));
  constexpr float kNone = IsMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  auto reduce = [&](const float* const* t, size_t count, float* out, size_t n) {
    if constexpr (IsMax) cpu::vecTapsMax(t, count, out, n);
    else cpu::vecTapsDot(t, ones.data(), count, 0.0f, out, n);
  };
  auto edge = [&](float* orow, int64_t ow) {  // a window that reaches into the padding
    float acc = kNone;
    for (int64_t kw = 0; kw < k; ++kw) {
      const int64_t iw = ow * s - pad + kw * dil;
      if (iw < 0 || iw >= in) continue;
      const float v = row[static_cast<size_t>(iw)];
      if constexpr (IsMax) acc = acc < v ? v : acc;  // as vecTapsMax: a NaN never replaces a number
      else acc += v;
    }
    orow[ow] = acc;
  };
  for (int64_t oh = 0; oh < w.out[1]; ++oh) {
    float* orow = yp + oh * w.out[2];
    int64_t h0, h1;
    tapsForOutput(oh, w.stride[1], w.padBegin[1], w.dilation[1], w.kernel[1], w.in[1], h0, h1);
    const int64_t outer = IsMax ? 1 : outerDivisor(w, 0, oh, countPad);
    if (h0 >= h1 || outer == 0) {  // a window wholly in the padding (an average over nothing is 0)
      std::fill(orow, orow + w.out[2], kNone);
      continue;
    }
    for (int64_t kh = h0; kh < h1; ++kh)
      taps[static_cast<size_t>(kh - h0)] = xp + (oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1]) * in;
    reduce(taps.data(), static_cast<size_t>(h1 - h0), row.data(), static_cast<size_t>(in));
    for (int64_t ow = 0; ow < lo; ++ow) edge(orow, ow);
    for (int64_t ow = hi; ow < w.out[2]; ++ow) edge(orow, ow);
    if (hi > lo) {
      if (s == 1) {
        for (int64_t kw = 0; kw < k; ++kw) taps[static_cast<size_t>(kw)] = row.data() + lo - pad + kw * dil;
      } else if (s == 2) {  // the row split into its even and odd columns: each tap reads one phase contiguously
        cpu::vecGatherEven(row.data(), phases[0], static_cast<size_t>((in + 1) / 2));
        cpu::vecGatherEven(row.data() + 1, phases[1], static_cast<size_t>(in / 2));
        for (int64_t kw = 0; kw < k; ++kw) {
          const int64_t t = kw * dil - pad, q = ((t % 2) + 2) % 2;
          taps[static_cast<size_t>(kw)] = phases[q] + lo + (t - q) / 2;
        }
      }
      if (s == 1 || s == 2) reduce(taps.data(), static_cast<size_t>(k), orow + lo, static_cast<size_t>(hi - lo));
      else
        for (int64_t ow = lo; ow < hi; ++ow) edge(orow, ow);
    }
    if constexpr (!IsMax) {
      const auto factor = static_cast<float>(outer);
      for (int64_t ow = 0; ow < w.out[2]; ++ow) {
        const float c = counts[static_cast<size_t>(ow)];
        orow[ow] = c == 0.0f ? 0.0f : orow[ow] / (factor * c);  // exact divisors: small integers
      }
    }
  }
}

// Planes whose rows are narrower than a vector (Inception's 4x4 and 1x1 pool branches, DenseNet's last transitions):
// the separable path's per-row vector calls cost more than the work, about 7 ns an output against ONNX Runtime's
// 0.6. Each output's window is listed once per op instead, as offsets into a plane with its divisor, and every plane
// walks that list.
struct SmallPoolTable {
  std::vector<int64_t> offsets;  // the taps inside the input, output after output
  std::vector<size_t> begin;     // output o's taps are offsets[begin[o], begin[o + 1])
  std::vector<float> divisor;    // an average's divisor (0: the output is 0)
};

constexpr int64_t kSmallPoolRow = 8;  // rows narrower than this take the table

bool takesSmallPoolTable(const Window3& w) {
  return w.kernel[0] == 1 && w.out[0] == 1 && w.in[0] == 1 && w.out[2] < kSmallPoolRow;
}

void buildSmallPoolTable(const Window3& w, bool isMax, bool countPad, std::span<const float> counts,
                         SmallPoolTable& t) {
  t.offsets.clear();
  t.begin.clear();
  t.divisor.clear();
  for (int64_t oh = 0; oh < w.out[1]; ++oh) {
    int64_t h0, h1;
    tapsForOutput(oh, w.stride[1], w.padBegin[1], w.dilation[1], w.kernel[1], w.in[1], h0, h1);
    const int64_t outer = isMax ? 1 : outerDivisor(w, 0, oh, countPad);
    for (int64_t ow = 0; ow < w.out[2]; ++ow) {
      t.begin.push_back(t.offsets.size());
      for (int64_t kh = h0; kh < h1; ++kh) {
        const int64_t ih = oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1];
        for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
          const int64_t iw = ow * w.stride[2] - w.padBegin[2] + kw * w.dilation[2];
          if (iw >= 0 && iw < w.in[2]) t.offsets.push_back(ih * w.in[2] + iw);
        }
      }
      t.divisor.push_back(isMax ? 1.0f : static_cast<float>(outer) * counts[static_cast<size_t>(ow)]);
    }
  }
  t.begin.push_back(t.offsets.size());
}

template <bool IsMax> void poolPlaneSmall(const float* xp, float* yp, const SmallPoolTable& t) {
  const size_t outputs = t.divisor.size();
  for (size_t o = 0; o < outputs; ++o) {
    float acc = IsMax ? -std::numeric_limits<float>::infinity() : 0.0f;
    for (size_t j = t.begin[o]; j < t.begin[o + 1]; ++j) {
      const float v = xp[t.offsets[j]];
      if constexpr (IsMax) acc = acc < v ? v : acc;  // as vecTapsMax: a NaN never replaces a number
      else acc += v;
    }
    if constexpr (IsMax) yp[o] = acc;
    else yp[o] = t.divisor[o] == 0.0f ? 0.0f : acc / t.divisor[o];  // exact divisors: small integers
  }
}

template <typename T, bool IsMax>
void pool(const OpContext& ctx, const T* x, T* y, const Window3& w, int64_t planes, bool countPad) {
  const int64_t inSize = w.in[0] * w.in[1] * w.in[2];
  const int64_t outSize = w.out[0] * w.out[1] * w.out[2];
  if (outSize == 0) return;
  // Per-thread scratch that grows once, bound to references: the lambda below also runs on pool threads, where
  // the names of thread_local variables would denote those threads' own copies.
  thread_local std::vector<int64_t> countsScratch;
  thread_local std::vector<float> countsFScratch;
  std::vector<int64_t>& counts = countsScratch;
  std::vector<float>& countsF = countsFScratch;
  counts.clear();
  if constexpr (!IsMax) columnDivisors(w, countPad, counts);
  countsF.assign(counts.begin(), counts.end());
  const auto taps = static_cast<size_t>(w.kernel[0] * w.kernel[1] * w.kernel[2]);
  if constexpr (std::is_same_v<T, float>) {
    if (takesSmallPoolTable(w)) {
      thread_local SmallPoolTable tableScratch;  // grows once; bound to a reference for the pool threads
      SmallPoolTable& table = tableScratch;
      buildSmallPoolTable(w, IsMax, countPad, countsF, table);
      parallelForWork(ctx, static_cast<size_t>(planes), table.offsets.size() + 1, [&](size_t p0, size_t p1) {
        for (size_t plane = p0; plane < p1; ++plane)
          poolPlaneSmall<IsMax>(x + static_cast<int64_t>(plane) * inSize, y + static_cast<int64_t>(plane) * outSize,
                                table);
      });
      return;
    }
  }
  parallelForWork(ctx, static_cast<size_t>(planes), static_cast<size_t>(outSize) * taps, [&](size_t p0, size_t p1) {
    for (size_t plane = p0; plane < p1; ++plane) {
      const T* xp = x + static_cast<int64_t>(plane) * inSize;
      T* yp = y + static_cast<int64_t>(plane) * outSize;
      if constexpr (std::is_same_v<T, float>) {
        if (w.kernel[0] == 1 && w.out[0] == 1 && w.in[0] == 1) poolPlaneSeparable<IsMax>(xp, yp, w, countPad, countsF);
        else poolPlaneF32<IsMax>(xp, yp, w, countPad, countsF);
      } else poolPlane<T, IsMax>(xp, yp, w, countPad, counts);
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

Status runMaxPool(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  CTX_ASSIGN_OR_RETURN(PoolPlan p, planPool(ctx, x.shape()));
  Window3 w = toWindow3(p.window);
  int64_t* indices = outputs.size() > 1 && outputs[1] ? outputs[1]->mutableDataAs<int64_t>() : nullptr;
  bool columnMajor = attrsOf<ops::PoolAttrs>(ctx).columnMajorIndices;
  constexpr TypeSet types =
      typeBit(ElemType::Float) | typeBit(ElemType::Double) | typeBit(ElemType::Int8) | typeBit(ElemType::Uint8);
  return visitType<types>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    if (indices)
      maxPoolWithIndices<T>(ctx, x.dataAs<T>(), outputs[0]->mutableDataAs<T>(), indices, w, p.planes, columnMajor);
    else pool<T, true>(ctx, x.dataAs<T>(), outputs[0]->mutableDataAs<T>(), w, p.planes, false);
    return Status::ok();
  });
}

Status runAveragePool(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  CTX_ASSIGN_OR_RETURN(PoolPlan p, planPool(ctx, x.shape()));
  Window3 w = toWindow3(p.window);
  bool countPad = attrsOf<ops::PoolAttrs>(ctx).countIncludePad;
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    pool<T, false>(ctx, x.dataAs<T>(), outputs[0]->mutableDataAs<T>(), w, p.planes, countPad);
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
