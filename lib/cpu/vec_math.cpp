// Vectorizable float32 exp/tanh/sigmoid/erf/gelu: polynomial approximations over fixed-size local blocks.
#include "cpu/vec_math.h"
#include "cpu/simd.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace ctxkit::cpu {

namespace {

constexpr size_t kBlock = 64;  // a multiple of every vector width, so the block loops need no tail

// Helpers are force-inlined so that each CTX_SIMD_CLONES variant compiles them for its own ISA (an
// out-of-line copy would be built once, for the baseline).
#define CTX_INLINE __attribute__((always_inline)) inline

// exp(x) by range reduction x = n ln2 + r, |r| <= ln2/2, and a degree-7 polynomial for e^r.
CTX_INLINE float expScalar(float x) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693359375f;
  const float kLn2Lo = -2.12194440e-4f;
  const float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer held in the low bits
  // Clamping to [-104, 89] keeps 2^n within two normal factors: results underflow to 0 and overflow to
  // infinity through the final multiply, with no branches (which would stop vectorization).
  float xc = std::min(std::max(x, -104.0f), 89.0f);
  float t = xc * kLog2e + kRound;
  float n = t - kRound;
  int32_t ni = std::bit_cast<int32_t>(t) - 0x4B400000;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t n1 = ni >> 1;
  int32_t n2 = ni - n1;
  float s1 = std::bit_cast<float>((n1 + 127) << 23);
  float s2 = std::bit_cast<float>((n2 + 127) << 23);
  return p * s1 * s2;  // NaN passes the clamp (std::max(NaN, a) is NaN) and stays NaN
}

CTX_INLINE float tanhScalar(float x) {
  float ax = std::fabs(x);
  // Large |x|: 1 - 2 / (e^{2|x|} + 1); small |x|: odd polynomial (avoids cancellation near 0).
  float e = expScalar(2.0f * std::min(ax, 9.0f));
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = std::copysign(big, x);
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = p * z * x + x;
  return ax < 0.625f ? small : big;
}

CTX_INLINE float sigmoidScalar(float x) { return 1.0f / (1.0f + expScalar(-x)); }

CTX_INLINE float erfScalar(float x) {
  float ax = std::fabs(x);
  // Abramowitz & Stegun 7.1.26 for |x| >= 0.5, Maclaurin series below (better relative accuracy near 0).
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  float big = 1.0f - poly * t * expScalar(-ax * ax);
  big = std::copysign(big, x);
  float z = x * x;
  float s = 1.0f / 75600.0f;  // coefficients of x^(2k+1) over 2/sqrt(pi): (-1)^k / (k! (2k+1))
  s = s * z - 1.0f / 9360.0f;
  s = s * z + 1.0f / 1320.0f;
  s = s * z - 1.0f / 216.0f;
  s = s * z + 1.0f / 42.0f;
  s = s * z - 1.0f / 10.0f;
  s = s * z + 1.0f / 3.0f;
  float small = x * (1.1283791670955126f - 1.1283791670955126f * s * z);
  return ax < 0.5f ? small : big;
}

CTX_INLINE float geluErfScalar(float x) { return 0.5f * x * (1.0f + erfScalar(x * 0.70710678118654752f)); }

CTX_INLINE float geluTanhScalar(float x) {
  float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhScalar(inner));
}

CTX_INLINE float clampScalar(float x, float lo, float hi) {
  float y = x < lo ? lo : x;
  return y > hi ? hi : y;
}

// Runs `f` on every element in blocks of fixed length: g++ -O2 vectorizes only loops with a known trip count,
// and `ivdep` drops the runtime aliasing check (in == out is fine: element i only reads element i).
template <size_t B, typename F> CTX_INLINE size_t unaryBlocks(const float* in, float* out, size_t i, size_t n, F f) {
  for (; i + B <= n; i += B) {
#pragma GCC ivdep
    for (size_t j = 0; j < B; ++j) out[i + j] = f(in[i + j]);
  }
  return i;
}

template <typename F> CTX_INLINE void blocked(const float* in, float* out, size_t n, F f) {
  size_t i = unaryBlocks<kBlock>(in, out, 0, n, f);
  i = unaryBlocks<8>(in, out, i, n, f);
  for (; i < n; ++i) out[i] = f(in[i]);
}

}  // namespace

// Folds kBlock lanes pairwise (64 -> 32 -> ... -> 1): log-depth and vectorizable, where a running scalar
// over 64 lanes would be a chain of 64 dependent operations.
template <size_t Width = kBlock / 2, typename Op> CTX_INLINE float reduceLanes(float* lanes, Op op) {
  for (size_t j = 0; j < Width; ++j) lanes[j] = op(lanes[j], lanes[j + Width]);
  if constexpr (Width > 1) return reduceLanes<Width / 2>(lanes, op);
  else return lanes[0];
}

CTX_SIMD_CLONES void vecExp(const float* in, float* out, size_t n) { blocked(in, out, n, expScalar); }
CTX_SIMD_CLONES void vecSigmoid(const float* in, float* out, size_t n) { blocked(in, out, n, sigmoidScalar); }
CTX_SIMD_CLONES void vecTanh(const float* in, float* out, size_t n) { blocked(in, out, n, tanhScalar); }
CTX_SIMD_CLONES void vecErf(const float* in, float* out, size_t n) { blocked(in, out, n, erfScalar); }

CTX_SIMD_CLONES void vecGeluErf(const float* in, float* out, size_t n) { blocked(in, out, n, geluErfScalar); }
CTX_SIMD_CLONES void vecGeluTanh(const float* in, float* out, size_t n) { blocked(in, out, n, geluTanhScalar); }

CTX_SIMD_CLONES void vecClamp(const float* in, float* out, size_t n, float lo, float hi) {
  blocked(in, out, n, [lo, hi](float x) { return clampScalar(x, lo, hi); });
}

CTX_SIMD_CLONES void vecAddClamp(const float* in, float* out, size_t n, float add, float lo, float hi) {
  blocked(in, out, n, [add, lo, hi](float x) { return clampScalar(x + add, lo, hi); });
}

CTX_SIMD_CLONES void vecLeakyRelu(const float* in, float* out, size_t n, float alpha) {
  blocked(in, out, n, [alpha](float x) { return x < 0.0f ? alpha * x : x; });
}

CTX_SIMD_CLONES void vecHardSigmoid(const float* in, float* out, size_t n, float alpha, float beta) {
  blocked(in, out, n, [alpha, beta](float x) { return std::max(0.0f, std::min(1.0f, alpha * x + beta)); });
}

CTX_SIMD_CLONES void vecSwish(const float* in, float* out, size_t n) {
  blocked(in, out, n, [](float x) { return x * sigmoidScalar(x); });
}

CTX_SIMD_CLONES void vecHardSwish(const float* in, float* out, size_t n) {
  blocked(in, out, n, [](float x) { return x * std::max(0.0f, std::min(1.0f, x * (1.0f / 6.0f) + 0.5f)); });
}

CTX_SIMD_CLONES float vecExpShiftSum(const float* in, float* out, size_t n, float shift) {
  float lanes[kBlock] = {};
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
#pragma GCC ivdep
    for (size_t j = 0; j < kBlock; ++j) {
      float e = expScalar(in[i + j] - shift);
      out[i + j] = e;
      lanes[j] += e;
    }
  }
  // Rows shorter than a block (attention over 32 or 49 keys) in lanes of 16, not one exp at a time.
  float lanes16[16] = {};
  for (; i + 16 <= n; i += 16) {
#pragma GCC ivdep
    for (size_t j = 0; j < 16; ++j) {
      float e = expScalar(in[i + j] - shift);
      out[i + j] = e;
      lanes16[j] += e;
    }
  }
  float sum = reduceLanes(lanes, [](float p, float q) { return p + q; }) +
              reduceLanes<8>(lanes16, [](float p, float q) { return p + q; });
  for (; i < n; ++i) {
    out[i] = expScalar(in[i] - shift);
    sum += out[i];
  }
  return sum;
}

namespace {

// Processes whole blocks of B elements from `i` on, returning where it stopped.
template <size_t B, typename Op>
CTX_INLINE size_t binaryBlocks(const float* a, size_t aStep, const float* b, size_t bStep, float* out, size_t i,
                               size_t n, Op op) {
  const float a0 = a[0], b0 = b[0];
  for (; i + B <= n; i += B) {
    if (aStep && bStep) {
#pragma GCC ivdep
      for (size_t j = 0; j < B; ++j) out[i + j] = op(a[i + j], b[i + j]);
    } else if (aStep) {
#pragma GCC ivdep
      for (size_t j = 0; j < B; ++j) out[i + j] = op(a[i + j], b0);
    } else if (bStep) {
#pragma GCC ivdep
      for (size_t j = 0; j < B; ++j) out[i + j] = op(a0, b[i + j]);
    } else {
      const float v = op(a0, b0);
      for (size_t j = 0; j < B; ++j) out[i + j] = v;
    }
  }
  return i;
}

// Blocks of 64, then of 8 (short rows such as a pooling row of 56), then single elements.
template <typename Op>
CTX_INLINE void binaryBlocked(const float* a, size_t aStep, const float* b, size_t bStep, float* out, size_t n, Op op) {
  if (n == 0) return;
  size_t i = binaryBlocks<kBlock>(a, aStep, b, bStep, out, 0, n, op);
  i = binaryBlocks<8>(a, aStep, b, bStep, out, i, n, op);
  for (; i < n; ++i) out[i] = op(aStep ? a[i] : a[0], bStep ? b[i] : b[0]);
}

}  // namespace

CTX_SIMD_CLONES void vecBinary(BinaryOp op, const float* a, size_t aStep, const float* b, size_t bStep, float* out,
                               size_t n) {
  switch (op) {
    case BinaryOp::Add: return binaryBlocked(a, aStep, b, bStep, out, n, [](float x, float y) { return x + y; });
    case BinaryOp::Sub: return binaryBlocked(a, aStep, b, bStep, out, n, [](float x, float y) { return x - y; });
    case BinaryOp::Mul: return binaryBlocked(a, aStep, b, bStep, out, n, [](float x, float y) { return x * y; });
    case BinaryOp::Div: return binaryBlocked(a, aStep, b, bStep, out, n, [](float x, float y) { return x / y; });
  }
}

CTX_SIMD_CLONES void vecScaleShift(const float* x, float* y, size_t n, float a, float b) {
  binaryBlocked(x, 1, x, 0, y, n, [a, b](float p, float) { return p * a + b; });
}

CTX_SIMD_CLONES float vecMax(const float* x, size_t n) {
  float lanes[kBlock];
  for (size_t j = 0; j < kBlock; ++j) lanes[j] = -INFINITY;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    for (size_t j = 0; j < kBlock; ++j) lanes[j] = lanes[j] < x[i + j] ? x[i + j] : lanes[j];
  for (; i + 16 <= n; i += 16)  // (the first 16 lanes take what is left in blocks of 16)
    for (size_t j = 0; j < 16; ++j) lanes[j] = lanes[j] < x[i + j] ? x[i + j] : lanes[j];
  float m = reduceLanes(lanes, [](float p, float q) { return p < q ? q : p; });
  for (; i < n; ++i) m = m < x[i] ? x[i] : m;
  return m;
}

// Vector extrema ignore NaN (a NaN lane loses every comparison), so the lanes also sum x - x, which is NaN for a NaN
// or an infinite element: only then is the row scanned again for a NaN.
namespace {
template <bool Max> CTX_INLINE float extremum(const float* x, size_t n) {
  auto pick = [](float acc, float v) { return Max ? (acc < v ? v : acc) : (v < acc ? v : acc); };
  float lanes[kBlock], check[kBlock];
  for (size_t j = 0; j < kBlock; ++j) {
    lanes[j] = Max ? -INFINITY : INFINITY;
    check[j] = 0;
  }
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    for (size_t j = 0; j < kBlock; ++j) {
      lanes[j] = pick(lanes[j], x[i + j]);
      check[j] += x[i + j] - x[i + j];
    }
  float m = reduceLanes(lanes, pick);
  float c = reduceLanes(check, [](float p, float q) { return p + q; });
  for (; i < n; ++i) {
    m = pick(m, x[i]);
    c += x[i] - x[i];
  }
  if (c != c)
    for (size_t k = 0; k < n; ++k)
      if (x[k] != x[k]) return x[k];
  return m;
}
}  // namespace

CTX_SIMD_CLONES float vecReduceMax(const float* x, size_t n) { return extremum<true>(x, n); }
CTX_SIMD_CLONES float vecReduceMin(const float* x, size_t n) { return extremum<false>(x, n); }

namespace {

// Eight floats as one value: g++ keeps these in registers (two SSE halves in the baseline clone), which the
// tap loops below need: an accumulator array indexed in a runtime-length loop would live in memory.
// The helpers taking and returning it are always inlined, so the baseline clone's ABI note (-Wpsabi: 32-byte
// vectors passed without AVX) concerns no real call.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float Vec8 __attribute__((vector_size(32)));

CTX_INLINE Vec8 load8(const float* p) {
  Vec8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
CTX_INLINE void store8(float* p, Vec8 v) { __builtin_memcpy(p, &v, sizeof v); }
CTX_INLINE Vec8 max8(Vec8 acc, Vec8 x) { return acc < x ? x : acc; }

// Reduces the taps for outputs [i, i + 8 * V) with V independent accumulators (V > 1 hides the latency of
// each tap's dependent step): the max, or the sum weighted by `weights`. The loops over accumulators must
// unroll (-O2 does not on its own), or the accumulators live on the stack. No lambdas here: one taking Vec8
// would be a real call at -O0, compiled for the baseline ABI but called from the AVX clones.
template <bool IsMax, int V>
CTX_INLINE void tapsBlock(const float* const* taps, const float* weights, size_t tapCount, Vec8 init, float* out,
                          size_t i) {
  Vec8 acc[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) acc[v] = init;
  for (size_t t = 0; t < tapCount; ++t) {
    const float* row = taps[t] + i;
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      if constexpr (IsMax) acc[v] = max8(acc[v], load8(row + 8 * v));
      else acc[v] += weights[t] * load8(row + 8 * v);
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) store8(out + i + 8 * v, acc[v]);
}

// Runs tapsBlock over n outputs: 32 at a time, then 8; a ragged end is recomputed as the last 8 (outputs are
// written, not accumulated, so overlap is harmless); rows shorter than 8 go one element at a time.
template <bool IsMax>
CTX_INLINE void tapsRows(const float* const* taps, const float* weights, size_t tapCount, float init, float* out,
                         size_t n) {
  const Vec8 init8 = Vec8{} + init;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) tapsBlock<IsMax, 4>(taps, weights, tapCount, init8, out, i);
  for (; i + 8 <= n; i += 8) tapsBlock<IsMax, 1>(taps, weights, tapCount, init8, out, i);
  if (i == n) return;
  if (n >= 8) {
    tapsBlock<IsMax, 1>(taps, weights, tapCount, init8, out, n - 8);
    return;
  }
  for (; i < n; ++i) {
    float acc = init;
    for (size_t t = 0; t < tapCount; ++t) {
      const float x = taps[t][i];
      acc = IsMax ? (acc < x ? x : acc) : acc + weights[t] * x;
    }
    out[i] = acc;
  }
}

// Four filters over outputs [i, i + 8 * V): 4 x V accumulators, each tap row loaded once for all four.
template <int V>
CTX_INLINE void tapsBlock4(const float* const* taps, const float* weights, size_t tapCount, const float* init,
                           float* const* out, size_t i) {
  Vec8 acc[4][V];
#pragma GCC unroll 8
  for (int f = 0; f < 4; ++f)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[f][v] = Vec8{} + init[f];
  for (size_t t = 0; t < tapCount; ++t) {
    const float* row = taps[t] + i;
    Vec8 x[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) x[v] = load8(row + 8 * v);
#pragma GCC unroll 8
    for (int f = 0; f < 4; ++f) {
      const float wv = weights[f * tapCount + t];
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[f][v] += wv * x[v];
    }
  }
#pragma GCC unroll 8
  for (int f = 0; f < 4; ++f)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) store8(out[f] + i + 8 * v, acc[f][v]);
}

typedef float Vec16 __attribute__((vector_size(64)));

template <typename V> CTX_INLINE V loadVec(const float* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// Lanes 0, 2, 4, ... of the 2 x lanes floats at p: a stride-2 row's taps, read from the unsplit row.
CTX_INLINE Vec8 loadEven(const float* p, Vec8) {
  return __builtin_shufflevector(load8(p), load8(p + 8), 0, 2, 4, 6, 8, 10, 12, 14);
}
CTX_INLINE Vec16 loadEven(const float* p, Vec16) {
  const Vec16 a = loadVec<Vec16>(p), b = loadVec<Vec16>(p + 16);
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
template <typename V, int S> CTX_INLINE V loadTaps(const float* p) {
  if constexpr (S == 1) return loadVec<V>(p);
  else return loadEven(p, V{});
}

// R output rows x C column blocks of V at columns cols[0 .. C): R x C independent accumulators, each tap's weight
// loaded once for all of them (one row's single chain of dependent adds would be bound by their latency).
template <typename V, int S, int R, int C>
CTX_INLINE void tapsRowsBlock(const float* const* taps, const float* weights, size_t tapCount, float init, float* out,
                              ptrdiff_t tapStep, ptrdiff_t outStep, const size_t* cols) {
  V acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = V{} + init;
  for (size_t t = 0; t < tapCount; ++t) {
    const float wt = weights[t];
    const float* row = taps[t];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] += wt * loadTaps<V, S>(row + r * tapStep + S * cols[c]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) __builtin_memcpy(out + r * outStep + cols[c], &acc[r][c], sizeof(V));
}

// R rows of n outputs in column blocks of V, two blocks at a time; the last block moved back to end at n (outputs
// are written, not accumulated, so the overlap is harmless).
template <typename V, int S, int R>
CTX_INLINE void tapsRowsBand(const float* const* taps, const float* weights, size_t tapCount, float init, float* out,
                             ptrdiff_t tapStep, ptrdiff_t outStep, size_t n) {
  constexpr size_t kWidth = sizeof(V) / sizeof(float);
  size_t i = 0;
  for (; i + kWidth < n; i += 2 * kWidth) {
    const size_t cols[2] = {i, std::min(i + kWidth, n - kWidth)};
    tapsRowsBlock<V, S, R, 2>(taps, weights, tapCount, init, out, tapStep, outStep, cols);
  }
  if (i < n) {
    const size_t cols[1] = {n - kWidth};
    tapsRowsBlock<V, S, R, 1>(taps, weights, tapCount, init, out, tapStep, outStep, cols);
  }
}

template <typename V, int S>
CTX_INLINE void tapsRowsAll(const float* const* taps, const float* weights, size_t tapCount, float init, float* out,
                            size_t n, size_t rows, ptrdiff_t tapStep, ptrdiff_t outStep) {
  for (size_t r = 0; r < rows; r += 4) {
    const float* shifted[kMaxRowTaps];  // the taps moved down to row r
    for (size_t t = 0; t < tapCount; ++t) shifted[t] = taps[t] + static_cast<ptrdiff_t>(r) * tapStep;
    float* o = out + static_cast<ptrdiff_t>(r) * outStep;
    switch (std::min<size_t>(4, rows - r)) {
      case 4: tapsRowsBand<V, S, 4>(shifted, weights, tapCount, init, o, tapStep, outStep, n); break;
      case 3: tapsRowsBand<V, S, 3>(shifted, weights, tapCount, init, o, tapStep, outStep, n); break;
      case 2: tapsRowsBand<V, S, 2>(shifted, weights, tapCount, init, o, tapStep, outStep, n); break;
      default: tapsRowsBand<V, S, 1>(shifted, weights, tapCount, init, o, tapStep, outStep, n); break;
    }
  }
}

}  // namespace

CTX_SIMD_CLONES void vecTapsDotRows(const float* const* taps, const float* weights, size_t tapCount, float init,
                                    float* out, size_t n, size_t rows, ptrdiff_t tapStep, ptrdiff_t outStep,
                                    size_t colStride) {
  if (colStride == 2) {
    if (n >= 16) tapsRowsAll<Vec16, 2>(taps, weights, tapCount, init, out, n, rows, tapStep, outStep);
    else tapsRowsAll<Vec8, 2>(taps, weights, tapCount, init, out, n, rows, tapStep, outStep);
  } else if (n >= 16) {
    tapsRowsAll<Vec16, 1>(taps, weights, tapCount, init, out, n, rows, tapStep, outStep);
  } else {
    tapsRowsAll<Vec8, 1>(taps, weights, tapCount, init, out, n, rows, tapStep, outStep);
  }
}

CTX_SIMD_CLONES void vecTapsDot4(const float* const* taps, const float* weights, size_t tapCount, const float* init,
                                 float* const* out, size_t n) {
  if (n < 8) {  // too short for a vector: one filter at a time
    for (size_t f = 0; f < 4; ++f) vecTapsDot(taps, weights + f * tapCount, tapCount, init[f], out[f], n);
    return;
  }
  size_t i = 0;
  for (; i + 16 <= n; i += 16) tapsBlock4<2>(taps, weights, tapCount, init, out, i);
  // The rest of a run of 16 or more: one block of 16 moved back to end at the run's end (it recomputes outputs of the
  // block before, the same values). Blocks of 8 keep four accumulators, too few to hide the adds' latency: a rest of
  // 9-15 as two of them took twice as long (rows of 47 outputs: 4 blocks' time, now 3).
  if (i < n && n >= 16) {
    tapsBlock4<2>(taps, weights, tapCount, init, out, n - 16);
    return;
  }
  for (; i + 8 <= n; i += 8) tapsBlock4<1>(taps, weights, tapCount, init, out, i);
  if (i < n) tapsBlock4<1>(taps, weights, tapCount, init, out, n - 8);  // overlaps, as in tapsRows
}

CTX_SIMD_CLONES void vecTapsDot(const float* const* taps, const float* weights, size_t tapCount, float init, float* out,
                                size_t n) {
  tapsRows<false>(taps, weights, tapCount, init, out, n);
}

CTX_SIMD_CLONES void vecTapsMax(const float* const* taps, size_t tapCount, float* out, size_t n) {
  tapsRows<true>(taps, nullptr, tapCount, -INFINITY, out, n);
}

CTX_SIMD_CLONES void vecGatherEven(const float* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 < n; i += 8)  // i + 8 < n keeps the 16-float load inside in[0 .. 2n-2]
    store8(out + i, __builtin_shufflevector(load8(in + 2 * i), load8(in + 2 * i + 8), 0, 2, 4, 6, 8, 10, 12, 14));
  for (; i < n; ++i) out[i] = in[2 * i];
}

namespace {

// Sum of f(x[i]) with float lanes per block position (a vectorizable, order-fixed reduction), flushed into a
// double every 64 blocks so long rows keep their precision; what is left in lanes of 16 (rows of 16 to 63 floats, as
// LayerNorm's over 32 or 48 channels, were summed one float at a time in double), the last few one at a time.
template <typename F> CTX_INLINE double laneSum(const float* x, size_t n, F f) {
  constexpr size_t kShort = 16;
  double total = 0;
  size_t i = 0;
  while (i + kBlock <= n) {
    float lanes[kBlock] = {};
    for (size_t b = 0; b < 64 && i + kBlock <= n; ++b, i += kBlock)
      for (size_t j = 0; j < kBlock; ++j) lanes[j] += f(x[i + j]);
    total += reduceLanes(lanes, [](float p, float q) { return p + q; });
  }
  if (i + kShort <= n) {
    float lanes[kShort] = {};
    for (; i + kShort <= n; i += kShort)
      for (size_t j = 0; j < kShort; ++j) lanes[j] += f(x[i + j]);
    total += reduceLanes<kShort / 2>(lanes, [](float p, float q) { return p + q; });
  }
  for (; i < n; ++i) total += f(x[i]);
  return total;
}

}  // namespace

CTX_SIMD_CLONES double vecSum(const float* x, size_t n) {
  return laneSum(x, n, [](float v) { return v; });
}

CTX_SIMD_CLONES double vecSumSquaredDiff(const float* x, size_t n, float mean) {
  return laneSum(x, n, [mean](float v) { return (v - mean) * (v - mean); });
}

CTX_SIMD_CLONES void vecNormalize(const float* x, float* y, size_t n, float mean, float inv, const float* scale,
                                  const float* bias) {
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    if (bias) {
#pragma GCC ivdep
      for (size_t j = 0; j < kBlock; ++j) y[i + j] = (x[i + j] - mean) * inv * scale[i + j] + bias[i + j];
    } else {
#pragma GCC ivdep
      for (size_t j = 0; j < kBlock; ++j) y[i + j] = (x[i + j] - mean) * inv * scale[i + j];
    }
  }
  for (; i + 16 <= n; i += 16) {  // (rows of 32 or 48 channels)
    if (bias) {
#pragma GCC ivdep
      for (size_t j = 0; j < 16; ++j) y[i + j] = (x[i + j] - mean) * inv * scale[i + j] + bias[i + j];
    } else {
#pragma GCC ivdep
      for (size_t j = 0; j < 16; ++j) y[i + j] = (x[i + j] - mean) * inv * scale[i + j];
    }
  }
  for (; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i] + (bias ? bias[i] : 0.0f);
}

}  // namespace ctxkit::cpu
