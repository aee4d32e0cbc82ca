// Float32 GEMM: packed A blocks and B panels, a register-blocked micro-kernel in plain C++ compiled for the
// CPU's widest vector ISA (picked at run time), threads over row blocks and column strips.
#include "cpu/gemm.h"

#include "cpu/simd.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>
#include <vector>

#include <immintrin.h>

namespace ctxkit::cpu {

namespace {

constexpr size_t kKc = kPanelDepth;  // depth of a packed block: an A strip and a B strip stay in L1
constexpr size_t kNc = 2048;         // columns of a packed B panel (L3)
constexpr size_t kMcTarget = 144;    // rows of a packed A block (L2); rounded to the kernel's MR

// The clipped write-back of a tile (the last rows or columns of C): C(mr x nr) = or += alpha * tile, rows tileLd apart.
__attribute__((always_inline)) inline void writeClipped(const float* tile, size_t tileLd, float* c, size_t ldc,
                                                        float alpha, size_t mr, size_t nr, bool store) {
  for (size_t i = 0; i < mr; ++i)
    for (size_t j = 0; j < nr; ++j) c[i * ldc + j] = (store ? 0.0f : c[i * ldc + j]) + alpha * tile[i * tileLd + j];
}

// acc = Apack(MR x kc) * Bpack(kc x NR); C(mr x nr) += alpha * acc. Packed operands are zero-padded, so
// the loop always computes a full tile; only the write-back is clipped. AS is the rows of the packed A strip, more
// than MR for a tile of a strip's first rows (the last strip of an M that is not a multiple of the kernel's rows).
template <int MR, int NR, int AS = MR>
__attribute__((always_inline)) inline void microKernel(size_t kc, const float* __restrict a, const float* __restrict b,
                                                       size_t bStride, float* __restrict c, size_t ldc, float alpha,
                                                       size_t mr, size_t nr, bool store) {
  float acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = 0.0f;
  for (size_t p = 0; p < kc; ++p) {
    const float* bp = b + p * bStride;
    const float* ap = a + p * AS;
    for (int i = 0; i < MR; ++i) {
      const float av = ap[i];
      for (int j = 0; j < NR; ++j) acc[i][j] += av * bp[j];
    }
  }
  // `store`: the first depth block of a product with beta = 0 writes C instead of adding to it (no clearing pass).
  if (mr == MR && nr == NR) {
    if (store) {
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) c[i * ldc + j] = alpha * acc[i][j];
    } else {
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) c[i * ldc + j] += alpha * acc[i][j];
    }
  } else {
    writeClipped(&acc[0][0], NR, c, ldc, alpha, mr, nr, store);
  }
}

// microKernel for AVX2 + FMA written with intrinsics: MR rows times NV vectors of 8 columns (NR = 8 NV), the
// MR x NV accumulators in ymm registers (at most 12, leaving room for B's NV vectors and A's broadcast). Left to
// the auto-vectorizer, g++ 12 builds the 6 x 16 tile from 128-bit shuffles and stack spills, ten times slower.
//
// Not always_inline: a caller without the target attribute may not force it inline. The block functions below are
// `flatten`, which inlines it (and blockKernel around it) into them, where the target matches.
template <int MR, int NV, int AS = MR>
__attribute__((target("avx2,fma"))) inline void
microAvx2(size_t kc, const float* __restrict a, const float* __restrict b, size_t bStride, float* __restrict c,
          size_t ldc, float alpha, size_t mr, size_t nr, bool store) {
  static_assert(MR * NV <= 12, "the accumulators must fit in the 16 ymm registers with B and A");
  __m256 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  for (size_t p = 0; p < kc; ++p) {
    __m256 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(b + p * bStride + 8 * v);
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + p * AS + i);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  const __m256 scale = _mm256_set1_ps(alpha);
  if (mr == MR && nr == 8 * NV) {
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v) {
        float* out = c + i * ldc + 8 * v;
        const __m256 r = _mm256_mul_ps(scale, acc[i][v]);
        _mm256_storeu_ps(out, store ? r : _mm256_add_ps(_mm256_loadu_ps(out), r));
      }
    return;
  }
  // A clipped tile (the last rows or columns of C): through a buffer, as the portable kernel writes it.
  alignas(32) float tile[MR][8 * NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) _mm256_store_ps(&tile[i][8 * v], acc[i][v]);
  writeClipped(&tile[0][0], sizeof tile[0] / sizeof(float), c, ldc, alpha, mr, nr, store);
}

// microKernel for AVX-512 written with intrinsics: MR rows times NV vectors of 16 columns. Left to the
// auto-vectorizer (PortableTile<8, 32>), the full 8 x 32 tile compiled well but the tiles of a strip's last rows
// (`rows<R>`, every odd map: 7x7, 5x5, 3x3 leave one row past whole strips of 8) kept their loop counters on the
// stack: 15-19% of the kernel's time on MnasNet and SqueezeNet went to those few rows.
template <int MR, int NV, int AS = MR>
__attribute__((target("avx512f,avx512vl,avx2,fma"))) inline void
microAvx512(size_t kc, const float* __restrict a, const float* __restrict b, size_t bStride, float* __restrict c,
            size_t ldc, float alpha, size_t mr, size_t nr, bool store) {
  static_assert(MR * NV <= 28, "the accumulators must fit in the 32 zmm registers with B and A");
  __m512 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (size_t p = 0; p < kc; ++p) {
    __m512 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + p * bStride + 16 * v);
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(a[p * AS + i]);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
  if (mr == MR && nr == 16 * NV) {
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v) {
        float* out = c + i * ldc + 16 * v;
        const __m512 r = _mm512_mul_ps(scale, acc[i][v]);
        _mm512_storeu_ps(out, store ? r : _mm512_add_ps(_mm512_loadu_ps(out), r));
      }
    return;
  }
  alignas(64) float tile[MR][16 * NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) _mm512_store_ps(&tile[i][16 * v], acc[i][v]);
  writeClipped(&tile[0][0], sizeof tile[0] / sizeof(float), c, ldc, alpha, mr, nr, store);
}

// The micro-kernels as types for blockKernel: a tile of MR x NR, computed by `tile`; `rows<R>` computes only the
// first R rows of a strip.
template <int Rows, int Cols> struct PortableTile {
  static constexpr int MR = Rows, NR = Cols;
  template <typename... Args> __attribute__((always_inline)) static void tile(Args... args) {
    microKernel<MR, NR>(args...);
  }
  template <int R, typename... Args> __attribute__((always_inline)) static void rows(Args... args) {
    microKernel<R, NR, MR>(args...);
  }
};
template <int Rows, int Vectors> struct Avx2Tile {
  static constexpr int MR = Rows, NR = 8 * Vectors;
  template <typename... Args> __attribute__((always_inline)) static void tile(Args... args) {
    microAvx2<MR, Vectors>(args...);
  }
  template <int R, typename... Args> __attribute__((always_inline)) static void rows(Args... args) {
    microAvx2<R, Vectors, MR>(args...);
  }
};

template <int Rows, int Vectors> struct Avx512Tile {
  static constexpr int MR = Rows, NR = 16 * Vectors;
  template <typename... Args> __attribute__((always_inline)) static void tile(Args... args) {
    microAvx512<MR, Vectors>(args...);
  }
  template <int R, typename... Args> __attribute__((always_inline)) static void rows(Args... args) {
    microAvx512<R, Vectors, MR>(args...);
  }
};

// The last strip of rows, mr < MR of them, by the tile of exactly mr rows: a full tile would multiply the zero
// padding too (a 7x7 map's 49 output positions in strips of 8: 56 rows computed, 12% of the work wasted).
template <typename Tile, int R = Tile::MR - 1, typename... Args>
__attribute__((always_inline)) inline void partialTile(size_t mr, Args... args) {
  if constexpr (R >= 1) {
    if (mr == R) Tile::template rows<R>(args...);
    else partialTile<Tile, R - 1>(mr, args...);
  }
}

// One packed A block (mc x kc) times columns [nBegin, nEnd) of a B panel. Full-width strips are read from
// `bDirect` (B itself, rows ldbDirect apart) when it is set, else from the packed panels, PW columns wide: a tile
// narrower than its panels reads its columns of each panel row (PW a multiple of NR; nBegin a multiple of NR).
template <typename Tile, size_t PW = Tile::NR>
__attribute__((always_inline)) inline void
blockKernel(size_t mc, size_t nBegin, size_t nEnd, size_t kc, const float* aPack, const float* bPack,
            const float* bDirect, size_t ldbDirect, float* c, size_t ldc, float alpha, bool store) {
  constexpr size_t MR = Tile::MR, NR = Tile::NR;
  static_assert(PW % NR == 0, "a tile reads whole strips of its panels");
  for (size_t j = nBegin; j < nEnd; j += NR) {
    size_t nr = std::min<size_t>(NR, nEnd - j);
    bool direct = bDirect != nullptr && nr == NR;
    const float* bStrip = direct ? bDirect + j : bPack + (j / PW) * kc * PW + j % PW;
    size_t bStride = direct ? ldbDirect : PW;
    for (size_t i = 0; i < mc; i += MR) {
      size_t mr = std::min<size_t>(MR, mc - i);
      const float* aStrip = aPack + (i / MR) * kc * MR;
      if (mr == MR) Tile::tile(kc, aStrip, bStrip, bStride, c + i * ldc + j, ldc, alpha, mr, nr, store);
      else partialTile<Tile>(mr, kc, aStrip, bStrip, bStride, c + i * ldc + j, ldc, alpha, mr, nr, store);
    }
  }
}

using BlockFn = void (*)(size_t, size_t, size_t, size_t, const float*, const float*, const float*, size_t, float*,
                         size_t, float, bool);

#define CTX_BLOCK_PARAMS                                                                                               \
  size_t mc, size_t nb, size_t ne, size_t kc, const float *a, const float *b, const float *bd, size_t ldbd, float *c,  \
      size_t ldc, float alpha, bool store

// A block function of the kernel table: blockKernel on one tile type, under `attrs` (`flatten` where microAvx2 is).
#define CTX_BLOCK_FN(name, attrs, ...)                                                                                 \
  attrs void name(CTX_BLOCK_PARAMS) { blockKernel<__VA_ARGS__>(mc, nb, ne, kc, a, b, bd, ldbd, c, ldc, alpha, store); }

CTX_BLOCK_FN(blockAvx512, __attribute__((target("avx512f,avx512vl,avx2,fma"), flatten)), Avx512Tile<8, 2>)
CTX_BLOCK_FN(blockAvx2, __attribute__((target("avx2,fma"), flatten)), Avx2Tile<6, 2>)
CTX_BLOCK_FN(blockSse2, , PortableTile<4, 8>)

// Kernels for panels of a given width on narrower vector units (a stored layout of another CPU's width).
// AVX2 reads 32-wide panels (the built-in targets' layout) 16 columns at a time with its 6 x 16 tile: the strip of B
// a tile walks is then 16 KiB at depth 256 (one 64-byte line per row), where a 3 x 32 tile over a whole panel row
// walks 32 KiB, all of L1, and evicts its own A strip.
CTX_BLOCK_FN(blockAvx2W32, __attribute__((target("avx2,fma"), flatten)), Avx2Tile<6, 2>, 32)
CTX_BLOCK_FN(blockAvx2W8, __attribute__((target("avx2,fma"), flatten)), Avx2Tile<6, 1>)
CTX_BLOCK_FN(blockSse2W32, , PortableTile<2, 32>)
CTX_BLOCK_FN(blockSse2W16, , PortableTile<3, 16>)

#undef CTX_BLOCK_FN
#undef CTX_BLOCK_PARAMS

struct Kernel {
  const char* name;
  size_t mr;
  size_t nr;
  BlockFn block;
};

const Kernel& pickKernel() {
  static const Kernel kernel = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
      return Kernel{"avx512", 8, 32, blockAvx512};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Kernel{"avx2", 6, 16, blockAvx2};
    return Kernel{"sse2", 4, 8, blockSse2};
  }();
  return kernel;
}

// The kernel that reads panels of `width` columns (nr == width) on this CPU, or null for other widths.
const Kernel* panelKernel(size_t width) {
  static const std::array<Kernel, 3> kernels = [] {
    const Kernel& best = pickKernel();
    const bool avx512 = std::string_view(best.name) == "avx512";
    const bool avx2 = avx512 || std::string_view(best.name) == "avx2";
    Kernel w8 = avx2 ? Kernel{"avx2", 6, 8, blockAvx2W8} : best;
    Kernel w16 = avx2 ? Kernel{"avx2", 6, 16, blockAvx2} : Kernel{"sse2", 3, 16, blockSse2W16};
    Kernel w32 = avx512 ? best : avx2 ? Kernel{"avx2", 6, 32, blockAvx2W32} : Kernel{"sse2", 2, 32, blockSse2W32};
    return std::array<Kernel, 3>{w8, w16, w32};
  }();
  switch (width) {
    case 8: return &kernels[0];
    case 16: return &kernels[1];
    case 32: return &kernels[2];
    default: return nullptr;
  }
}

// Packs rows [i0, i0 + mc) and depth [p0, p0 + kc) of op(A) into MR-row strips, k-major, zero-padded.
void packA(bool transA, const float* A, size_t lda, size_t i0, size_t mc, size_t p0, size_t kc, size_t mr, float* out) {
  for (size_t s = 0; s < mc; s += mr) {
    size_t rows = std::min(mr, mc - s);
    float* dst = out + (s / mr) * kc * mr;
    if (!transA) {
      for (size_t i = 0; i < rows; ++i) {
        const float* src = A + (i0 + s + i) * lda + p0;
        for (size_t p = 0; p < kc; ++p) dst[p * mr + i] = src[p];
      }
    } else {
      for (size_t p = 0; p < kc; ++p) {
        const float* src = A + (p0 + p) * lda + i0 + s;
        for (size_t i = 0; i < rows; ++i) dst[p * mr + i] = src[i];
      }
    }
    if (rows < mr)
      for (size_t p = 0; p < kc; ++p)
        for (size_t i = rows; i < mr; ++i) dst[p * mr + i] = 0.0f;
  }
}

// Packs NR-column strips [strip0, strip1) of op(B)'s block (depth [p0, p0 + kc), columns from j0).
void packB(bool transB, const float* B, size_t ldb, size_t p0, size_t kc, size_t j0, size_t nc, size_t nr,
           size_t strip0, size_t strip1, float* out) {
  for (size_t s = strip0; s < strip1; ++s) {
    size_t col = s * nr;
    size_t cols = std::min(nr, nc - col);
    float* dst = out + s * kc * nr;
    if (!transB) {
      for (size_t p = 0; p < kc; ++p) {
        const float* src = B + (p0 + p) * ldb + j0 + col;
        float* d = dst + p * nr;
        size_t j = 0;
        for (; j < cols; ++j) d[j] = src[j];
        for (; j < nr; ++j) d[j] = 0.0f;
      }
    } else {
      for (size_t j = 0; j < cols; ++j) {
        const float* src = B + (j0 + col + j) * ldb + p0;
        for (size_t p = 0; p < kc; ++p) dst[p * nr + j] = src[p];
      }
      for (size_t j = cols; j < nr; ++j)
        for (size_t p = 0; p < kc; ++p) dst[p * nr + j] = 0.0f;
    }
  }
}

// Packing buffers, per thread, reserved at their largest by reserveGemmScratch: which pool thread packs which
// block varies from run to run, so buffers grown to fit would allocate whenever a thread first met a bigger block.
thread_local std::vector<float> tAPack, tBPack;
// `v`'s first `n` elements for packing into: grown, never shrunk (a resize to each block's size would zero-fill
// whatever it regrew, a memset per block once sizes vary between calls).
float* packBuffer(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Runs body over [0, count), on the pool only when `worthIt` (enough work to pay for waking threads).
// The pool gets a std::function holding a reference to `body`: one holding the lambda would allocate per call.
template <typename F> void runParallel(ThreadPool* pool, bool worthIt, size_t count, F&& body) {
  if (worthIt && pool && pool->threads() > 1 && count > 1)
    pool->parallelFor(count, 1, std::function<void(size_t, size_t)>(std::ref(body)));
  else body(0, count);
}

// A dot product in 16 independent lanes, so that it vectorizes without reassociating a single sum.
float dot(const float* a, const float* b, size_t n) {
  constexpr size_t kLanes = 16;
  float lanes[kLanes] = {};
  size_t p = 0;
  for (; p + kLanes <= n; p += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += a[p + j] * b[p + j];
  float sum = 0.0f;
  for (size_t j = 0; j < kLanes; ++j) sum += lanes[j];
  for (; p < n; ++p) sum += a[p] * b[p];
  return sum;
}

// Few rows: stream B once instead of packing it (matrix-vector products, decode-time linear layers).
void smallM(bool transA, bool transB, size_t M, size_t N, size_t K, float alpha, const float* A, size_t lda,
            const float* B, size_t ldb, float* C, size_t ldc, ThreadPool* pool) {
  constexpr size_t kChunk = 256;
  size_t chunks = (N + kChunk - 1) / kChunk;
  runParallel(pool, K * N >= 65536, chunks, [&](size_t c0, size_t c1) {
    size_t jBegin = c0 * kChunk;
    size_t jEnd = std::min(N, c1 * kChunk);
    for (size_t i = 0; i < M; ++i) {
      float* c = C + i * ldc;
      if (!transB) {
        for (size_t p = 0; p < K; ++p) {
          float av = alpha * (transA ? A[p * lda + i] : A[i * lda + p]);
          const float* b = B + p * ldb;
          for (size_t j = jBegin; j < jEnd; ++j) c[j] += av * b[j];
        }
      } else {
        for (size_t j = jBegin; j < jEnd; ++j) {
          const float* b = B + j * ldb;
          float sum = 0.0f;
          if (!transA) {
            sum = dot(A + i * lda, b, K);
          } else {
            for (size_t p = 0; p < K; ++p) sum += A[p * lda + i] * b[p];
          }
          c[j] += alpha * sum;
        }
      }
    }
  });
}

// C = beta * C (beta == 0 clears C, NaN included).
void scaleC(size_t M, size_t N, float beta, float* C, size_t ldc) {
  if (beta == 1.0f) return;
  for (size_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.0f) std::fill(c, c + N, 0.0f);
    else
      for (size_t j = 0; j < N; ++j) c[j] *= beta;
  }
}

// C(M x nc) += alpha * op(A)[:, p0 : p0 + kc] * (one depth block of B in `kernel.nr`-wide strips), over tasks of
// row blocks, split further into column ranges when there are fewer row blocks than threads.
void multiplyBlock(const Kernel& kernel, bool transA, size_t M, const float* A, size_t lda, size_t p0, size_t kc,
                   size_t nc, const float* bp, const float* bDirect, size_t ldb, float* C, size_t ldc, float alpha,
                   bool store, ThreadPool* pool) {
  const size_t mr = kernel.mr, nr = kernel.nr;
  const size_t mcBlock = std::max(mr, kMcTarget / mr * mr);
  const size_t threads = pool ? static_cast<size_t>(pool->threads()) : 1;
  const size_t strips = (nc + nr - 1) / nr;
  size_t rowBlocks = (M + mcBlock - 1) / mcBlock;
  size_t colSplits = 1;
  if (threads > 1 && rowBlocks < 2 * threads) colSplits = std::min(strips, (2 * threads + rowBlocks - 1) / rowBlocks);
  size_t stripsPerSplit = (strips + colSplits - 1) / colSplits;
  colSplits = (strips + stripsPerSplit - 1) / stripsPerSplit;
  size_t tasks = rowBlocks * colSplits;
  bool worthThreads = static_cast<double>(M) * static_cast<double>(nc) * static_cast<double>(kc) >= 1.5e5;
  runParallel(pool, worthThreads, tasks, [&](size_t t0, size_t t1) {
    reserveGemmScratch();  // a no-op after this thread's first call
    std::vector<float>& aPack = tAPack;
    for (size_t t = t0; t < t1; ++t) {
      size_t rb = t / colSplits, cs = t % colSplits;
      size_t i0 = rb * mcBlock;
      size_t mc = std::min(mcBlock, M - i0);
      float* aPacked = packBuffer(aPack, ((mc + mr - 1) / mr) * mr * kc);
      packA(transA, A, lda, i0, mc, p0, kc, mr, aPacked);
      size_t nBegin = cs * stripsPerSplit * nr;
      size_t nEnd = std::min(nc, (cs + 1) * stripsPerSplit * nr);
      kernel.block(mc, nBegin, nEnd, kc, aPacked, bp, bDirect, ldb, C + i0 * ldc, ldc, alpha, store);
    }
  });
}

// Vector values of 8 and 16 floats (GCC's vector extension; split into the registers each SIMD clone has). Declared
// here: a vector_size attribute on an alias that depends on a template parameter is dropped, leaving a float.
using Floats8 = float __attribute__((vector_size(32)));
using Floats16 = float __attribute__((vector_size(64)));

// One row of op(A) (K values, `stride` apart) times the panels [panel0, panel1) of B, added into c (W columns each,
// the first of panel0 at c[0]). Depth blocks outside, panels inside: B is read in the order it is stored, one
// stream (a classifier's 1280 x 1000 weight, 5 MB read once per run, ran at 60% of ONNX Runtime's bandwidth when
// each panel's depth blocks, a megabyte apart, were read in turn). The accumulators are vector values, four rows of
// K in flight: an array accumulator was kept on the stack, one store-to-load round trip per row of K (an LSTM step's
// H·R^T ran at a fifth of its speed).
template <size_t W>
__attribute__((always_inline)) inline void rowTimesPanels(const float* a, size_t stride, const PanelsB& B,
                                                          size_t panels, size_t panel0, size_t panel1, float alpha,
                                                          float* c) {
  using V = std::conditional_t<W == 8, Floats8, Floats16>;
  constexpr size_t L = sizeof(V) / sizeof(float), NV = W / L, U = 4;  // lanes; vectors per panel row; rows in flight
  for (size_t p0 = 0; p0 < B.k; p0 += B.depth) {
    const size_t rows = std::min(B.depth, B.k - p0);
    const float* ak = a + p0 * stride;
    for (size_t p = panel0; p < panel1; ++p) {
      const float* panel = B.data + p0 * panels * W + p * rows * W;
      V acc[U][NV] = {};
      size_t k = 0;
      for (; k + U <= rows; k += U)
        for (size_t u = 0; u < U; ++u) {
          const float av = ak[(k + u) * stride];
          for (size_t l = 0; l < NV; ++l) {
            V b;
            std::memcpy(&b, panel + (k + u) * W + l * L, sizeof b);
            acc[u][l] += av * b;
          }
        }
      for (; k < rows; ++k) {
        const float av = ak[k * stride];
        for (size_t l = 0; l < NV; ++l) {
          V b;
          std::memcpy(&b, panel + k * W + l * L, sizeof b);
          acc[0][l] += av * b;
        }
      }
      float sum[W] = {};
      for (size_t l = 0; l < NV; ++l) {
        const V v = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
        std::memcpy(sum + l * L, &v, sizeof v);
      }
      const size_t cols = std::min(W, B.n - p * W);
      for (size_t j = 0; j < cols; ++j) c[(p - panel0) * W + j] += alpha * sum[j];
    }
  }
}

CTX_SIMD_CLONES void rowTimesPanelsAnyWidth(const float* a, size_t stride, const PanelsB& B, size_t panels,
                                            size_t panel0, size_t panel1, float alpha, float* c) {
  switch (B.width) {
    case 8: rowTimesPanels<8>(a, stride, B, panels, panel0, panel1, alpha, c); break;
    case 16: rowTimesPanels<16>(a, stride, B, panels, panel0, panel1, alpha, c); break;
    default: rowTimesPanels<32>(a, stride, B, panels, panel0, panel1, alpha, c); break;
  }
}

// Few rows (decode-time linear layers): each panel is streamed once per row, accumulating across K in registers.
void smallMPanels(bool transA, size_t M, float alpha, const float* A, size_t lda, const PanelsB& B, size_t panels,
                  float* C, size_t ldc, ThreadPool* pool) {
  runParallel(pool, B.k * B.n >= 65536, panels, [&](size_t q0, size_t q1) {
    for (size_t i = 0; i < M; ++i)
      rowTimesPanelsAnyWidth(transA ? A + i : A + i * lda, transA ? lda : 1, B, panels, q0, q1, alpha,
                             C + i * ldc + q0 * B.width);
  });
}

}  // namespace

const char* sgemmKernelName() { return pickKernel().name; }

void sgemm(bool transA, bool transB, size_t M, size_t N, size_t K, float alpha, const float* A, size_t lda,
           const float* B, size_t ldb, float beta, float* C, size_t ldc, ThreadPool* pool) {
  if (M == 0 || N == 0) return;
  // The blocked path writes C on its first depth block when beta = 0, so C needs no clearing pass.
  const bool storeFirst = beta == 0.0f && K > 0 && alpha != 0.0f && M > 2;
  if (!storeFirst) scaleC(M, N, beta, C, ldc);
  if (K == 0 || alpha == 0.0f) return;
  if (M <= 2) {
    smallM(transA, transB, M, N, K, alpha, A, lda, B, ldb, C, ldc, pool);
    return;
  }
  const Kernel& kernel = pickKernel();
  const size_t nr = kernel.nr;
  const size_t mcBlock = std::max(kernel.mr, kMcTarget / kernel.mr * kernel.mr);
  // Grows to the largest block once per thread instead of being allocated (and zero-filled) on every call.
  reserveGemmScratch();
  std::vector<float>& bPack = tBPack;
  for (size_t j0 = 0; j0 < N; j0 += kNc) {
    size_t nc = std::min(kNc, N - j0);
    size_t strips = (nc + nr - 1) / nr;
    for (size_t p0 = 0; p0 < K; p0 += kKc) {
      size_t kc = std::min(kKc, K - p0);
      float* bp = packBuffer(bPack, strips * nr * kc);
      // With a single row block every B element is used once per pass: reading full strips straight from B
      // saves packing them (a copy as costly as the multiply when M is small, as in convolutions).
      const bool direct = !transB && M <= mcBlock;
      const float* bDirect = direct ? B + p0 * ldb + j0 : nullptr;
      size_t firstPacked = direct ? nc / nr : 0;  // direct: only a partial last strip is packed
      runParallel(pool, nc * kc >= 32768, strips - firstPacked, [&](size_t s0, size_t s1) {
        packB(transB, B, ldb, p0, kc, j0, nc, nr, firstPacked + s0, firstPacked + s1, bp);
      });
      multiplyBlock(kernel, transA, M, A, lda, p0, kc, nc, bp, bDirect, ldb, C + j0, ldc, alpha, storeFirst && p0 == 0,
                    pool);
    }
  }
}

void reserveGemmScratch() {
  const Kernel& kernel = pickKernel();
  const size_t aMax = std::max(kernel.mr, kMcTarget) * kKc;  // mcBlock rounded to mr never exceeds this
  const size_t bMax = (kNc + kernel.nr - 1) / kernel.nr * kernel.nr * kKc;
  // Written once when allocated, so that the pages are mapped here (a pool thread's start, at load), not in a run.
  for (auto [buffer, size] : {std::pair{&tAPack, aMax}, std::pair{&tBPack, bMax}}) {
    if (buffer->capacity() >= size) continue;
    buffer->reserve(size);
    const size_t used = buffer->size();
    buffer->resize(buffer->capacity());
    buffer->resize(used);
  }
}

size_t panelElements(size_t k, size_t n, size_t width) { return k * ((n + width - 1) / width) * width; }

bool isPanelWidth(size_t width) { return width == 8 || width == 16 || width == 32; }

size_t sgemmNaturalPanelWidth() { return pickKernel().nr; }

void packPanels(bool transB, const float* B, size_t ldb, size_t k, size_t n, size_t width, size_t depth, float* out) {
  const size_t panels = (n + width - 1) / width;
  for (size_t p0 = 0; p0 < k; p0 += depth) {
    size_t rows = std::min(depth, k - p0);
    packB(transB, B, ldb, p0, rows, 0, n, width, 0, panels, out + p0 * panels * width);
  }
}

namespace {

// op(B) of a weight packWeight accepts: K, N, B's row stride and whether it is stored transposed.
struct PackShape {
  size_t k, n, ldb;
  bool transposed;
};

Expected<PackShape> packShape(const cpu::WeightLayout& layout, const ir::Tensor& weight) {
  const bool transposed = layout.kind == cpu::WeightLayoutKind::GemmPanelsTransposed;
  // Transposed panels also hold a weight of higher rank (a Conv's) as [shape[0], the product of the rest].
  if ((layout.kind != cpu::WeightLayoutKind::GemmPanels && !transposed) || !isPanelWidth(layout.width) ||
      layout.depth == 0 || weight.type() != ir::ElemType::Float || weight.rank() < 2 ||
      (!transposed && weight.rank() != 2))
    return makeError(ErrorCode::InvalidArgument, "a {} {} weight cannot be packed in layout {}",
                     ir::elemTypeName(weight.type()), ir::shapeToString(weight.shape()), cpu::layoutName(layout));
  const auto rows = static_cast<size_t>(weight.shape()[0]);
  size_t cols = 1;
  for (size_t d = 1; d < weight.shape().size(); ++d) cols *= static_cast<size_t>(weight.shape()[d]);
  return PackShape{transposed ? cols : rows, transposed ? rows : cols, cols, transposed};
}

// packB's bytes for B not transposed, in another order: row by row, each row's stretch read once front to back and
// scattered over `panels` panels of width W. packB walks a panel at a time down the rows, a stride of a whole row
// per 4 * W bytes read, which is the slow way through a weight many times the cache.
template <size_t W>
void scatterRows(const float* B, size_t ldb, size_t p0, size_t kc, size_t j0, size_t nc, size_t panels, float* out) {
  const size_t full = std::min(panels, nc / W);
  for (size_t p = 0; p < kc; ++p) {
    const float* src = B + (p0 + p) * ldb + j0;
    float* dst = out + p * W;
    for (size_t s = 0; s < full; ++s) std::memcpy(dst + s * kc * W, src + s * W, W * sizeof(float));
    if (full < panels) {  // the last panel, zero-padded
      const size_t cols = nc - full * W;
      float* d = dst + full * kc * W;
      std::memcpy(d, src + full * W, cols * sizeof(float));
      std::fill(d + cols, d + W, 0.0f);
    }
  }
}

}  // namespace

Expected<ir::Tensor> packWeight(const cpu::WeightLayout& layout, const ir::Tensor& weight) {
  CTX_ASSIGN_OR_RETURN(PackShape s, packShape(layout, weight));
  const size_t elements = panelElements(s.k, s.n, layout.width);
  CTX_ASSIGN_OR_RETURN(ir::Tensor packed, ir::Tensor::allocate(ir::ElemType::Float, {static_cast<int64_t>(elements)}));
  if (elements > 0)
    packPanels(s.transposed, weight.dataAs<float>(), s.ldb, s.k, s.n, layout.width, layout.depth,
               packed.mutableDataAs<float>());
  return packed;
}

Expected<PackedWeightStream> PackedWeightStream::open(const cpu::WeightLayout& layout, const ir::Tensor& weight,
                                                      size_t chunkBytes) {
  CTX_ASSIGN_OR_RETURN(PackShape s, packShape(layout, weight));
  return PackedWeightStream(weight, s.transposed, s.k, s.n, s.ldb, layout.width, layout.depth, chunkBytes);
}

PackedWeightStream::PackedWeightStream(ir::Tensor weight, bool transposed, size_t k, size_t n, size_t ldb, size_t width,
                                       size_t depth, size_t chunkBytes)
    : weight_(std::move(weight)), transposed_(transposed), k_(k), n_(n), ldb_(ldb), width_(width), depth_(depth),
      panels_((n + width - 1) / width) {
  const size_t panelBytes = std::min(k, depth) * width * sizeof(float);
  panelsPerPiece_ = std::max<size_t>(1, panelBytes == 0 ? 1 : chunkBytes / panelBytes);
}

std::span<const std::byte> PackedWeightStream::next() {
  // Every element is written by next(out), so a buffer is allocated once, at its largest, and never cleared.
  std::unique_ptr<float[]>& buffer = buffers_[current_];
  if (!buffer) buffer = std::make_unique_for_overwrite<float[]>(maxPieceElements());
  auto piece = next(buffer.get());
  if (!piece.empty()) current_ ^= 1;
  return piece;
}

bool PackedWeightStream::advance(size_t& rows, size_t& count) {
  if (panel_ == panels_) {  // the block is done: on to the next one
    block_ += depth_;
    panel_ = 0;
  }
  if (block_ >= k_ || panels_ == 0) return false;
  // Panels of a block lie one after another, each rows x width: a run of them is a contiguous piece of the layout.
  rows = std::min(depth_, k_ - block_);
  count = std::min(panelsPerPiece_, panels_ - panel_);
  return true;
}

bool PackedWeightStream::skip() {
  size_t rows = 0, count = 0;
  if (!advance(rows, count)) return false;
  panel_ += count;
  return true;
}

std::span<const std::byte> PackedWeightStream::next(float* out) {
  size_t rows = 0, count = 0;
  if (!advance(rows, count)) return {};
  const size_t elements = count * rows * width_;
  const size_t column = panel_ * width_;
  const size_t ldb = ldb_;
  if (transposed_) {
    packB(true, weight_.dataAs<float>(), ldb, block_, rows, column, n_ - column, width_, 0, count, out);
  } else {
    switch (width_) {
      case 8: scatterRows<8>(weight_.dataAs<float>(), ldb, block_, rows, column, n_ - column, count, out); break;
      case 16: scatterRows<16>(weight_.dataAs<float>(), ldb, block_, rows, column, n_ - column, count, out); break;
      default: scatterRows<32>(weight_.dataAs<float>(), ldb, block_, rows, column, n_ - column, count, out); break;
    }
  }
  panel_ += count;
  return std::as_bytes(std::span<const float>(out, elements));
}

float PackedWeightStream::element(uint64_t index) const {
  // K blocks of depth_ rows (the last may be shorter), each `panels_` panels of rows x width_, row by row.
  const uint64_t blockElements = uint64_t{depth_} * panels_ * width_;
  const uint64_t block = index / blockElements, first = block * depth_;
  const uint64_t rows = std::min<uint64_t>(depth_, k_ - first), inBlock = index - block * blockElements;
  const uint64_t panel = inBlock / (rows * width_), inPanel = inBlock % (rows * width_);
  const uint64_t row = first + inPanel / width_, column = panel * width_ + inPanel % width_;
  if (column >= n_) return 0.0f;  // the last panel's padding
  const auto ldb = static_cast<uint64_t>(weight_.shape()[1]);
  const float* b = weight_.dataAs<float>();
  return transposed_ ? b[column * ldb + row] : b[row * ldb + column];
}

PanelsSplit splitPanelsWork(size_t rows, size_t minBlocks, size_t batch, size_t panelCount, size_t width,
                            size_t threads, double packCost) {
  minBlocks = std::clamp<size_t>(minBlocks, 1, std::max<size_t>(rows, 1));
  const auto blockOf = [&](size_t s) { return std::min(rows, ((rows + s - 1) / s + 7) / 8 * 8); };
  PanelsSplit best{blockOf(minBlocks), 1, panelCount};
  if (threads <= 1 || rows == 0 || panelCount == 0) return best;
  constexpr double kWeightRead = 24.0 / 32.0;  // per weight, in multiplies of one row by 32 columns
  const size_t strips = (rows + 7) / 8, most = 4 * threads;
  double bestCost = std::numeric_limits<double>::infinity();
  for (size_t s = minBlocks; s <= std::min(strips, minBlocks + most); ++s) {
    const size_t block = blockOf(s), spans = batch * ((rows + block - 1) / block);
    for (size_t r = 1; r <= std::min(panelCount, most); ++r) {
      const size_t perRange = (panelCount + r - 1) / r, ranges = (panelCount + perRange - 1) / perRange;
      const auto columns = static_cast<double>(perRange * width);
      const double task = static_cast<double>(block) * (packCost + columns / 32.0) + columns * kWeightRead;
      const double cost = static_cast<double>((spans * ranges + threads - 1) / threads) * task;
      if (cost < bestCost * 0.999) bestCost = cost, best = {block, ranges, perRange};
    }
  }
  return best;
}

void sgemmPanels(bool transA, size_t M, float alpha, const float* A, size_t lda, const PanelsB& B, float beta, float* C,
                 size_t ldc, ThreadPool* pool) {
  const size_t N = B.n, K = B.k;
  if (M == 0 || N == 0) return;
  const size_t panels = (N + B.width - 1) / B.width;
  if (M > 2 && K > 0 && alpha != 0.0f && pool && pool->threads() > 1 &&
      static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) >= 1.5e5) {
    // One hand-off per product: each task multiplies its block of rows by its range of panels over the whole depth
    // (sgemmPanelsRange), not one hand-off per depth block with a barrier after each (Faster R-CNN's fc6, 150 x
    // 12544 by 12544 x 1024: 49 of them, each split into rows of 144 and 6).
    const PanelsSplit split = splitPanelsWork(M, 1, 1, panels, B.width, static_cast<size_t>(pool->threads()), 1.0);
    const size_t spans = (M + split.block - 1) / split.block;
    auto task = [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) {
        const size_t i0 = t / split.ranges * split.block, rows = std::min(split.block, M - i0);
        const size_t q0 = t % split.ranges * split.perRange, q1 = std::min(panels, q0 + split.perRange);
        sgemmPanelsRange(transA, rows, alpha, transA ? A + i0 : A + i0 * lda, lda, B, q0, q1, beta,
                         C + i0 * ldc + q0 * B.width, ldc);
      }
    };
    pool->parallelFor(spans * split.ranges, 1, std::function<void(size_t, size_t)>(std::ref(task)));
    return;
  }
  const bool storeFirst = beta == 0.0f && K > 0 && alpha != 0.0f && M > 2;
  if (!storeFirst) scaleC(M, N, beta, C, ldc);
  if (K == 0 || alpha == 0.0f) return;
  if (M <= 2) {
    smallMPanels(transA, M, alpha, A, lda, B, panels, C, ldc, pool);
    return;
  }
  const Kernel& kernel = *panelKernel(B.width);
  for (size_t p0 = 0; p0 < K; p0 += B.depth) {
    const size_t kc = std::min(B.depth, K - p0);
    const float* block = B.data + p0 * panels * B.width;
    // Column blocks as sgemm's, so that the packed A block is reused across the same span of B.
    for (size_t j0 = 0; j0 < N; j0 += kNc) {
      size_t nc = std::min(kNc, N - j0);
      multiplyBlock(kernel, transA, M, A, lda, p0, kc, nc, block + (j0 / B.width) * kc * B.width, nullptr, 0, C + j0,
                    ldc, alpha, storeFirst && p0 == 0, pool);
    }
  }
}

void sgemmPanelsRange(bool transA, size_t M, float alpha, const float* A, size_t lda, const PanelsB& B, size_t panel0,
                      size_t panel1, float beta, float* C, size_t ldc) {
  const size_t panels = (B.n + B.width - 1) / B.width;
  panel1 = std::min(panel1, panels);
  if (M == 0 || panel0 >= panel1) return;
  const size_t n0 = panel0 * B.width, N = std::min(B.n, panel1 * B.width) - n0;
  const bool storeFirst = beta == 0.0f && B.k > 0 && alpha != 0.0f && M > 2;
  if (!storeFirst) scaleC(M, N, beta, C, ldc);
  if (B.k == 0 || alpha == 0.0f) return;
  if (M <= 2) {
    for (size_t i = 0; i < M; ++i)
      rowTimesPanelsAnyWidth(transA ? A + i : A + i * lda, transA ? lda : 1, B, panels, panel0, panel1, alpha,
                             C + i * ldc);
    return;
  }
  const Kernel& kernel = *panelKernel(B.width);
  const size_t mr = kernel.mr, mcBlock = std::max(mr, kMcTarget / mr * mr);
  reserveGemmScratch();
  std::vector<float>& aPack = tAPack;
  // Each depth block's A strip is packed once per row block and reused across every panel of the range.
  for (size_t p0 = 0; p0 < B.k; p0 += B.depth) {
    const size_t kc = std::min(B.depth, B.k - p0);
    const float* block = B.data + p0 * panels * B.width + panel0 * kc * B.width;
    for (size_t i0 = 0; i0 < M; i0 += mcBlock) {
      const size_t mc = std::min(mcBlock, M - i0);
      float* aPacked = packBuffer(aPack, ((mc + mr - 1) / mr) * mr * kc);
      packA(transA, A, lda, i0, mc, p0, kc, mr, aPacked);
      kernel.block(mc, 0, N, kc, aPacked, block, nullptr, 0, C + i0 * ldc, ldc, alpha, storeFirst && p0 == 0);
    }
  }
}

size_t panelStripRows(size_t width) { return panelKernel(width)->mr; }

void sgemmPanelsPackedA(size_t M, float alpha, const float* aPacked, const PanelsB& B, size_t p0, size_t panel0,
                        size_t panel1, bool accumulate, float* C, size_t ldc) {
  const size_t panels = (B.n + B.width - 1) / B.width;
  panel1 = std::min(panel1, panels);
  if (M == 0 || panel0 >= panel1 || p0 >= B.k) return;
  const size_t n0 = panel0 * B.width, N = std::min(B.n, panel1 * B.width) - n0;
  const size_t kc = std::min(B.depth, B.k - p0);
  const float* block = B.data + p0 * panels * B.width + panel0 * kc * B.width;
  const Kernel& kernel = *panelKernel(B.width);
  const size_t mr = kernel.mr, mcBlock = std::max(mr, kMcTarget / mr * mr);
  for (size_t i0 = 0; i0 < M; i0 += mcBlock)
    kernel.block(std::min(mcBlock, M - i0), 0, N, kc, aPacked + i0 * kc, block, nullptr, 0, C + i0 * ldc, ldc, alpha,
                 !accumulate);
}

}  // namespace ctxkit::cpu
