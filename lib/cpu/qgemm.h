// 8-bit integer GEMM with exact int32 sums, as QLinearConv, ConvInteger, QLinearMatMul and MatMulInteger need it.
// Operands take the form x86's VNNI dot-product instruction reads: unsigned bytes times signed bytes, four
// consecutive k at a time. One operand ("rows") is row-major with its k padded to a multiple of 4; the other
// ("panels") is packed by packQuads. int8 activations and uint8 weights are shifted by 128 into that form (their
// zero points with them), which changes no product of differences. The kernel adds the zero-point corrections and
// the bias, and requantizes (float scale, halves to even, saturation) or stores the int32 sums.
#pragma once

#include "cpu/thread_pool.h"

#include <cstddef>
#include <cstdint>

namespace ctxkit::cpu {

inline constexpr size_t kQuad = 4;

inline size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

// Packs rows [0, k) x columns [0, n) of a row-major byte matrix (rows `ld` bytes apart), each byte xor `flip`,
// into quads: out[(r / 4) * ldOut + c * 4 + r % 4] with ldOut = 4 * nPad; rows k..roundUp(k, 4) and columns
// n..nPad are zero. `colSums` (nPad values, or null) receives each column's sum of its packed bytes as unsigned.
void packQuads(const uint8_t* src, size_t ld, size_t k, size_t n, size_t nPad, uint8_t flip, uint8_t* out,
               int32_t* colSums);

// One group of 2-D input planes with their padding already in place (32 bytes of slack after the last), seen as
// its unfolded (im2col) matrix: row (c, i, j) at output position (oh, ow) reads
// planes[c * planeStride + (oh * strideH + i * dilationH) * rowStride + ow * strideW + j * dilationW].
struct PaddedWindow {
  const uint8_t* planes = nullptr;
  size_t planeStride = 0, rowStride = 0;
  size_t kernelH = 1, kernelW = 1, strideH = 1, strideW = 1, dilationH = 1, dilationW = 1, outH = 0, outW = 0;
};

// packQuads of that matrix's k rows and outH x outW columns, read straight from the planes.
void packWindowQuads(const PaddedWindow& w, size_t k, size_t nPad, uint8_t flip, uint8_t* out, int32_t* colSums);

// The column count packed panels are padded to (a multiple of the kernel's vector width).
size_t qgemmColumnAlign();

// The kernel this CPU runs ("avx512vnni", "avx2", "scalar"), for logs and tests.
const char* qgemmKernelName();

struct QGemm {
  // rows: M x (4 x quads) bytes, `rowStride` apart; signed (weights) when rowsSigned, else unsigned (activations).
  const uint8_t* rows = nullptr;
  size_t rowStride = 0;
  bool rowsSigned = true;
  // panels: packQuads output with `panelStride` = 4 x padded columns; the other signedness.
  const uint8_t* panels = nullptr;
  size_t panelStride = 0;
  size_t m = 0, n = 0, quads = 0;
  // sum + rowAdd[i] + colAdd[j] + rowMul[i] x colMul[j] + rowMul2[i] x colMul2[j] (each pair optional).
  const int32_t *rowAdd = nullptr, *colAdd = nullptr;
  const int32_t *rowMul = nullptr, *colMul = nullptr, *rowMul2 = nullptr, *colMul2 = nullptr;
  // Requantized with rowScale[i] or colScale[j] to [lo, hi] + zero as 8-bit; neither: stored as int32.
  const float *rowScale = nullptr, *colScale = nullptr;
  int32_t zero = 0, lo = 0, hi = 255;
  void* out = nullptr;  // row i at out + i * ldOut elements (int8/uint8, or int32)
  size_t ldOut = 0;
};

// Computes output rows and columns [0, m) x [0, n); with a pool, large products split their column strips.
void qgemm(const QGemm& g, ThreadPool* pool);

// For tests: qgemm with the named kernel ("avx512vnni", "avx2", "scalar"); false when this CPU lacks it. Panels
// must be padded to 32 columns.
bool qgemmWithKernel(const char* name, const QGemm& g);

}  // namespace ctxkit::cpu
