// The 8-bit integer GEMM (qgemm.h): a register-tiled kernel per x86-64 level, picked at run time — AVX-512 VNNI
// (vpdpbusd: four unsigned x signed byte products summed into each int32 lane), AVX2 (the same sums from 16-bit
// multiply-adds, exact: no intermediate saturates), and portable C++. All three read the same packed operands and
// apply the same epilogue arithmetic, so they give the same bits.
#include "cpu/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CTX_QGEMM_X86 1
#endif

namespace ctxkit::cpu {

namespace {

// sum + the corrections of row i, column j (the scalar form of every kernel's epilogue).
inline int32_t corrected(const QGemm& g, int32_t sum, size_t i, size_t j) {
  if (g.rowAdd) sum += g.rowAdd[i];
  if (g.colAdd) sum += g.colAdd[j];
  if (g.rowMul) sum += g.rowMul[i] * g.colMul[j];
  if (g.rowMul2) sum += g.rowMul2[i] * g.colMul2[j];
  return sum;
}

inline bool requantizes(const QGemm& g) { return g.rowScale || g.colScale; }

// round-half-even(sum x scale) + zero, saturated to [lo, hi]: clamping first to the integral bounds [lo - zero,
// hi - zero] gives the same value and keeps the conversion in range.
inline void storeOne(const QGemm& g, int32_t sum, size_t i, size_t j) {
  if (!requantizes(g)) {
    static_cast<int32_t*>(g.out)[i * g.ldOut + j] = sum;
    return;
  }
  float f = static_cast<float>(sum) * (g.rowScale ? g.rowScale[i] : g.colScale[j]);
  f = std::min(std::max(f, static_cast<float>(g.lo - g.zero)), static_cast<float>(g.hi - g.zero));
  static_cast<uint8_t*>(g.out)[i * g.ldOut + j] =
      static_cast<uint8_t>(static_cast<int32_t>(std::nearbyint(f)) + g.zero);
}

void columnsScalar(const QGemm& g, size_t j0, size_t j1) {
  for (size_t i = 0; i < g.m; ++i) {
    const uint8_t* row = g.rows + i * g.rowStride;
    for (size_t j = j0; j < j1; ++j) {
      int32_t sum = 0;
      const uint8_t* col = g.panels + j * kQuad;
      for (size_t q = 0; q < g.quads; ++q)
        for (size_t t = 0; t < kQuad; ++t) {
          const uint8_t r = row[q * kQuad + t], p = col[q * g.panelStride + t];
          sum += g.rowsSigned ? static_cast<int8_t>(r) * static_cast<int32_t>(p)
                              : static_cast<int32_t>(r) * static_cast<int8_t>(p);
        }
      storeOne(g, corrected(g, sum, i, j), i, j);
    }
  }
}

#ifdef CTX_QGEMM_X86

inline int32_t load32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The kernels below are built for their instruction sets (picked at run time): GCC through `#pragma GCC target`,
// clang (the fuzzing and sanitizer trees) through `#pragma clang attribute`.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"))),                 \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")
// GCC 12's AVX-512 headers start some intrinsics from an "undefined" register and warn about it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// MR rows x NV vectors of 16 columns from column j0; columns at or past g.n are computed but not stored.
struct TileVnni {
  static constexpr int kRows = 8, kLanes = 16;
  template <int MR, int NV, bool RowsSigned> static void run(const QGemm& g, size_t i0, size_t j0);
};

template <int MR, int NV, bool RowsSigned> void TileVnni::run(const QGemm& g, size_t i0, size_t j0) {
  __m512i acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_si512();
  const uint8_t* panel = g.panels + j0 * kQuad;
  const uint8_t* rows = g.rows + i0 * g.rowStride;
  for (size_t q = 0; q < g.quads; ++q) {
    __m512i p[NV];
    for (int v = 0; v < NV; ++v) p[v] = _mm512_loadu_si512(panel + q * g.panelStride + v * 64);
    for (int r = 0; r < MR; ++r) {
      const __m512i a = _mm512_set1_epi32(load32(rows + r * g.rowStride + q * kQuad));
      for (int v = 0; v < NV; ++v)
        acc[r][v] = RowsSigned ? _mm512_dpbusd_epi32(acc[r][v], p[v], a) : _mm512_dpbusd_epi32(acc[r][v], a, p[v]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    const size_t i = i0 + static_cast<size_t>(r);
    for (int v = 0; v < NV; ++v) {
      const size_t j = j0 + static_cast<size_t>(v) * 16;
      if (j >= g.n) break;
      const size_t count = std::min<size_t>(16, g.n - j);
      const __mmask16 mask = count == 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
      __m512i s = acc[r][v];
      if (g.rowAdd) s = _mm512_add_epi32(s, _mm512_set1_epi32(g.rowAdd[i]));
      if (g.colAdd) s = _mm512_add_epi32(s, _mm512_maskz_loadu_epi32(mask, g.colAdd + j));
      if (g.rowMul)
        s = _mm512_add_epi32(
            s, _mm512_mullo_epi32(_mm512_set1_epi32(g.rowMul[i]), _mm512_maskz_loadu_epi32(mask, g.colMul + j)));
      if (g.rowMul2)
        s = _mm512_add_epi32(
            s, _mm512_mullo_epi32(_mm512_set1_epi32(g.rowMul2[i]), _mm512_maskz_loadu_epi32(mask, g.colMul2 + j)));
      if (!requantizes(g)) {
        _mm512_mask_storeu_epi32(static_cast<int32_t*>(g.out) + i * g.ldOut + j, mask, s);
        continue;
      }
      const __m512 scale = g.rowScale ? _mm512_set1_ps(g.rowScale[i]) : _mm512_maskz_loadu_ps(mask, g.colScale + j);
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(s), scale);
      f = _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps(static_cast<float>(g.lo - g.zero))),
                        _mm512_set1_ps(static_cast<float>(g.hi - g.zero)));
      const __m512i y = _mm512_add_epi32(_mm512_cvtps_epi32(f), _mm512_set1_epi32(g.zero));
      _mm_mask_storeu_epi8(static_cast<uint8_t*>(g.out) + i * g.ldOut + j, mask, _mm512_cvtepi32_epi8(y));
    }
  }
}

#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

// vpdpbusd from 16-bit products: even and odd bytes widened (unsigned: masked and shifted; signed: shifted
// arithmetically), then two multiply-adds of pairs. Products are at most 255 x 128, pairs of them fit 32 bits.
struct SplitBytes {
  __m256i even, odd;
};
__attribute__((always_inline)) inline SplitBytes splitUnsigned(__m256i u) {
  return {_mm256_and_si256(u, _mm256_set1_epi16(0x00FF)), _mm256_srli_epi16(u, 8)};
}
__attribute__((always_inline)) inline SplitBytes splitSigned(__m256i s) {
  return {_mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8), _mm256_srai_epi16(s, 8)};
}

struct TileAvx2 {
  static constexpr int kRows = 4, kLanes = 8;
  template <int MR, int NV, bool RowsSigned> static void run(const QGemm& g, size_t i0, size_t j0);
};

template <int MR, int NV, bool RowsSigned> void TileAvx2::run(const QGemm& g, size_t i0, size_t j0) {
  __m256i acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_si256();
  const uint8_t* panel = g.panels + j0 * kQuad;
  const uint8_t* rows = g.rows + i0 * g.rowStride;
  for (size_t q = 0; q < g.quads; ++q) {
    SplitBytes p[NV];
    for (int v = 0; v < NV; ++v) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + q * g.panelStride + v * 32));
      p[v] = RowsSigned ? splitUnsigned(raw) : splitSigned(raw);
    }
    for (int r = 0; r < MR; ++r) {
      const __m256i raw = _mm256_set1_epi32(load32(rows + r * g.rowStride + q * kQuad));
      const SplitBytes a = RowsSigned ? splitSigned(raw) : splitUnsigned(raw);
      for (int v = 0; v < NV; ++v)
        acc[r][v] = _mm256_add_epi32(
            acc[r][v], _mm256_add_epi32(_mm256_madd_epi16(p[v].even, a.even), _mm256_madd_epi16(p[v].odd, a.odd)));
    }
  }
  alignas(32) int32_t sums[8];
  for (int r = 0; r < MR; ++r) {
    const size_t i = i0 + static_cast<size_t>(r);
    for (int v = 0; v < NV; ++v) {
      const size_t j = j0 + static_cast<size_t>(v) * 8;
      if (j >= g.n) break;
      const size_t count = std::min<size_t>(8, g.n - j);
      _mm256_store_si256(reinterpret_cast<__m256i*>(sums), acc[r][v]);
      for (size_t c = 0; c < count; ++c) storeOne(g, corrected(g, sums[c], i, j + c), i, j + c);
    }
  }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// Column strips of two vectors (one at the end), each down all rows in tiles of Tile::kRows, then 4, 2, 1.
template <typename Tile, int NV, bool RowsSigned> void stripWith(const QGemm& g, size_t j0) {
  size_t i = 0;
  for (; i + Tile::kRows <= g.m; i += Tile::kRows) Tile::template run<Tile::kRows, NV, RowsSigned>(g, i, j0);
  if constexpr (Tile::kRows > 4)
    if (g.m - i >= 4) Tile::template run<4, NV, RowsSigned>(g, i, j0), i += 4;
  if (g.m - i >= 2) Tile::template run<2, NV, RowsSigned>(g, i, j0), i += 2;
  if (g.m - i >= 1) Tile::template run<1, NV, RowsSigned>(g, i, j0);
}

template <typename Tile> void columnsWith(const QGemm& g, size_t j0, size_t j1) {
  for (size_t j = j0; j < j1; j += 2 * Tile::kLanes) {
    const bool two = j1 - j > Tile::kLanes;
    if (g.rowsSigned) two ? stripWith<Tile, 2, true>(g, j) : stripWith<Tile, 1, true>(g, j);
    else two ? stripWith<Tile, 2, false>(g, j) : stripWith<Tile, 1, false>(g, j);
  }
}

#endif  // CTX_QGEMM_X86

struct QKernel {
  const char* name;
  size_t strip;  // columns a kernel call covers at most (and the packed column alignment)
  void (*columns)(const QGemm&, size_t, size_t);
};

// The kernels this CPU runs, best first.
std::vector<QKernel> availableQKernels() {
  std::vector<QKernel> kernels;
#ifdef CTX_QGEMM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni"))
    kernels.push_back(QKernel{"avx512vnni", 32, columnsWith<TileVnni>});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    kernels.push_back(QKernel{"avx2", 16, columnsWith<TileAvx2>});
#endif
  kernels.push_back(QKernel{"scalar", 16, columnsScalar});
  return kernels;
}

const QKernel& pickQKernel() {
  static const QKernel kernel = availableQKernels().front();
  return kernel;
}

}  // namespace

size_t qgemmColumnAlign() { return pickQKernel().strip; }

const char* qgemmKernelName() { return pickQKernel().name; }

namespace {

#ifdef CTX_QGEMM_X86
// 16 bytes of a row at columns c, c + stride, ... (stride 1 or 2: up to 32 bytes read), xor flip; zero without a row.
inline __m128i load16(const uint8_t* row, size_t c, size_t stride, __m128i flip) {
  if (!row) return _mm_setzero_si128();
  const auto* p = reinterpret_cast<const __m128i*>(row + c * stride);
  __m128i v = _mm_loadu_si128(p);
  if (stride == 2) {
    const __m128i even = _mm_set1_epi16(0x00FF);
    v = _mm_packus_epi16(_mm_and_si128(v, even), _mm_and_si128(_mm_loadu_si128(p + 1), even));
  }
  return _mm_xor_si128(v, flip);
}

// Four rows of 16 bytes interleaved into 16 groups of 4 (SSE2, every x86-64 CPU has it); the first `count` groups
// are stored.
inline void interleave4(__m128i r0, __m128i r1, __m128i r2, __m128i r3, size_t count, uint8_t* out) {
  const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
  const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
  const __m128i groups[4] = {_mm_unpacklo_epi16(t0, t2), _mm_unpackhi_epi16(t0, t2), _mm_unpacklo_epi16(t1, t3),
                             _mm_unpackhi_epi16(t1, t3)};
  for (size_t i = 0; i < 4 && i * 4 < count; ++i) {
    uint8_t* d = out + i * 16;
    const size_t n = std::min<size_t>(4, count - i * 4);
    if (n == 4) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), groups[i]);
      continue;
    }
    alignas(16) uint8_t part[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(part), groups[i]);
    std::memcpy(d, part, n * kQuad);
  }
}
#endif

// Packs `count` columns (`stride` bytes apart) of four rows (null: a zero row, not flipped) into 4-byte groups at
// `out`. `overread`: the rows may be read up to 32 bytes past their last column (a padded plane's slack).
void packColumns(const uint8_t* const rows[kQuad], uint8_t flip, size_t count, size_t stride, bool overread,
                 uint8_t* out) {
  size_t c = 0;
#ifdef CTX_QGEMM_X86
  if (stride <= 2 && (stride == 1 || overread)) {
    const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
    auto chunk = [&](size_t n) {
      interleave4(load16(rows[0], c, stride, f), load16(rows[1], c, stride, f), load16(rows[2], c, stride, f),
                  load16(rows[3], c, stride, f), n, out + c * kQuad);
    };
    for (; c + 16 <= count; c += 16) chunk(16);
    if (overread && c < count) {
      chunk(count - c);
      c = count;
    }
  }
#endif
  for (; c < count; ++c)
    for (size_t t = 0; t < kQuad; ++t)
      out[c * kQuad + t] = rows[t] ? static_cast<uint8_t>(rows[t][c * stride] ^ flip) : uint8_t{0};
}

// Zero padding columns [n, nPad) of every quad, and the column sums when asked for.
void finishPanels(size_t k, size_t n, size_t nPad, uint8_t* out, int32_t* colSums) {
  const size_t ldOut = nPad * kQuad;
  for (size_t q = 0; q * kQuad < k; ++q) std::memset(out + q * ldOut + n * kQuad, 0, (nPad - n) * kQuad);
  if (!colSums) return;
  std::fill(colSums, colSums + nPad, 0);
  for (size_t q = 0; q * kQuad < k; ++q)
    for (size_t c = 0; c < n; ++c)
      for (size_t t = 0; t < kQuad; ++t) colSums[c] += out[q * ldOut + c * kQuad + t];
}

}  // namespace

void packQuads(const uint8_t* src, size_t ld, size_t k, size_t n, size_t nPad, uint8_t flip, uint8_t* out,
               int32_t* colSums) {
  for (size_t q = 0; q * kQuad < k; ++q) {
    const uint8_t* rows[kQuad];
    for (size_t t = 0; t < kQuad; ++t) rows[t] = q * kQuad + t < k ? src + (q * kQuad + t) * ld : nullptr;
    packColumns(rows, flip, n, 1, false, out + q * nPad * kQuad);
  }
  finishPanels(k, n, nPad, out, colSums);
}

void packWindowQuads(const PaddedWindow& w, size_t k, size_t nPad, uint8_t flip, uint8_t* out, int32_t* colSums) {
  const size_t taps = w.kernelH * w.kernelW;
  for (size_t q = 0; q * kQuad < k; ++q) {
    const uint8_t* base[kQuad];
    for (size_t t = 0; t < kQuad; ++t) {
      const size_t row = q * kQuad + t, tap = row % taps;
      base[t] = row < k ? w.planes + row / taps * w.planeStride + tap / w.kernelW * w.dilationH * w.rowStride +
                              tap % w.kernelW * w.dilationW
                        : nullptr;
    }
    for (size_t oh = 0; oh < w.outH; ++oh) {
      const uint8_t* rows[kQuad];
      for (size_t t = 0; t < kQuad; ++t) rows[t] = base[t] ? base[t] + oh * w.strideH * w.rowStride : nullptr;
      packColumns(rows, flip, w.outW, w.strideW, true, out + q * nPad * kQuad + oh * w.outW * kQuad);
    }
  }
  finishPanels(k, w.outH * w.outW, nPad, out, colSums);
}

void qgemm(const QGemm& g, ThreadPool* pool) {
  const QKernel& kernel = pickQKernel();
  const size_t strips = (g.n + kernel.strip - 1) / kernel.strip;
  // Split column strips across threads only when there is enough work to pay for waking them.
  constexpr size_t kMinParallelMacs = size_t{1} << 21;
  if (pool && pool->threads() > 1 && strips > 1 && g.m * g.n * g.quads * kQuad >= kMinParallelMacs) {
    auto body = [&](size_t s0, size_t s1) { kernel.columns(g, s0 * kernel.strip, std::min(g.n, s1 * kernel.strip)); };
    pool->parallelFor(strips, 1, std::function<void(size_t, size_t)>(std::ref(body)));
    return;
  }
  kernel.columns(g, 0, g.n);
}

bool qgemmWithKernel(const char* name, const QGemm& g) {
  for (const QKernel& k : availableQKernels())
    if (std::string_view(k.name) == name) {
      k.columns(g, 0, g.n);
      return true;
    }
  return false;
}

}  // namespace ctxkit::cpu
