// MatMulNBits (com.microsoft), ONNX Runtime's block-quantized weight product (docs/runtime.md#block-quantized-weights):
// Y = A x dequantize(B)^T (+ bias). B stays as stored (2, 4 or 8-bit codes); each run dequantizes a tile of its rows
// at a time into per-thread scratch and multiplies A by it with the float32 GEMM, so the whole matrix is never
// widened. A few rows of A (an LLM's decode step, a short prompt) by 4-bit blocks take a fused path instead: B's codes
// are dequantized eight at a time in vector registers and multiplied straight into the rows' sums, so no row of B is
// written out and read back.
#include "cpu/gemm.h"
#include "cpu/simd.h"
#include "kernels/ops.h"
#include "kernels/thread_scratch.h"

#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

// Rows of B dequantized per GEMM call.
constexpr int64_t kTileRows = 32;

// The fused 4-bit path: up to kFusedRows rows of A, blocks of a multiple of 16 codes, sums kept in kLanes-wide partial
// sums.
constexpr size_t kFusedRows = 16, kLanes = 8;

struct NBitsLayout {
  int64_t k, n, bits, blockSize, blocks, blobBytes, zeroBytesPerRow;
};

NBitsLayout layoutOf(const ops::MatMulNBitsAttrs& a) {
  const int64_t blocks = (a.k + a.blockSize - 1) / a.blockSize;
  return NBitsLayout{a.k, a.n, a.bits, a.blockSize, blocks, a.blockSize * a.bits / 8, (blocks * a.bits + 7) / 8};
}

// Code `j` of a run of `bits`-bit codes packed low bits first.
inline uint32_t codeAt(const uint8_t* p, int64_t j, int64_t bits) {
  switch (bits) {
    case 2: return (p[j >> 2] >> ((j & 3) * 2)) & 0x3u;
    case 4: return (p[j >> 1] >> ((j & 1) * 4)) & 0xFu;
    default: return p[j];
  }
}

// Every g_idx entry names a block.
Status checkGroups(const OpContext& ctx, const NBitsLayout& l, const int32_t* groups) {
  for (int64_t k = 0; k < l.k; ++k)
    if (groups[k] < 0 || groups[k] >= l.blocks)
      return invalid(ctx, "input 4 (g_idx) names block {} at position {}; there are {} blocks", groups[k], k, l.blocks);
  return Status::ok();
}

// A's rows for the fused 4-bit path: within each block of `block` positions, the positions of the low nibbles (0, 2,
// 4, ...) then those of the high nibbles (1, 3, 5, ...), as dequantizeBlock4 writes a block's weights; zero past K.
void reorderForNibbles(const float* a, size_t rows, size_t k, size_t blocks, size_t block, float* out) {
  const size_t half = block / 2;
  for (size_t m = 0; m < rows; ++m)
    for (size_t g = 0; g < blocks; ++g) {
      float* o = out + (m * blocks + g) * block;
      for (size_t i = 0; i < half; ++i) {
        const size_t lo = g * block + 2 * i, hi = lo + 1;
        o[i] = lo < k ? a[m * k + lo] : 0.0f;
        o[half + i] = hi < k ? a[m * k + hi] : 0.0f;
      }
    }
}

// Row n of Y for `rows` rows of A reordered by reorderForNibbles: the sum over B's blocks of each block's weights,
// (code - zero point) x scale as the tiled path computes them, times A's values. Row n's zero points are packed
// (`zpPacked`), of A's type (`zpFloat`) or all `zpDefault`.
struct NBitsRow {
  const uint8_t* codes;
  const float* scales;
  const uint8_t* zpPacked;
  const float* zpFloat;
  float zpDefault;
};

// Eight lanes in GCC's vector extension (as lib/cpu/vec_math.cpp uses it): each CTX_SIMD_CLONES clone lowers them
// to its widest registers.
typedef uint64_t Longs4 __attribute__((vector_size(32)));
typedef uint8_t Bytes32 __attribute__((vector_size(32)));
typedef uint32_t Words8 __attribute__((vector_size(32)));
typedef int32_t Ints8 __attribute__((vector_size(32)));
typedef float Floats8 __attribute__((vector_size(32)));
static_assert(kLanes == 8);

CTX_SIMD_CLONES void fusedRow4(const NBitsRow& r, const float* a, size_t rows, size_t blocks, size_t block,
                               float* sums) {
  const size_t half = block / 2, rowStride = blocks * block;
  // Rows of A four at a time, each group's sums in registers (B's codes are decoded again for each group). A group of
  // one row (a decode step) sums its low and high nibbles' products apart, in two registers (two dependency chains).
  for (size_t m0 = 0; m0 < rows; m0 += 4) {
    const size_t count = std::min<size_t>(4, rows - m0);
    Floats8 s0 = {}, s1 = {}, s2 = {}, s3 = {};
    for (size_t g = 0; g < blocks; ++g) {
      const uint8_t* blob = r.codes + g * half;
      const float scale = r.scales[g];
      const float zero = r.zpFloat    ? r.zpFloat[g]
                         : r.zpPacked ? static_cast<float>((r.zpPacked[g / 2] >> ((g & 1) * 4)) & 0xF)
                                      : r.zpDefault;
      const float* ag = a + m0 * rowStride + g * block;
      for (size_t i = 0; i < half; i += kLanes) {
        uint64_t eight;
        std::memcpy(&eight, blob + i, sizeof eight);
        // Byte j of the eight into lane j (byte 31 of `wide` is zero).
        const Bytes32 wide = reinterpret_cast<Bytes32>(Longs4{eight, 0, 0, 0});
        const auto bytes = reinterpret_cast<Words8>(__builtin_shufflevector(wide, wide, 0, 31, 31, 31, 1, 31, 31, 31, 2,
                                                                            31, 31, 31, 3, 31, 31, 31, 4, 31, 31, 31, 5,
                                                                            31, 31, 31, 6, 31, 31, 31, 7, 31, 31, 31));
        const Floats8 lo = (__builtin_convertvector(reinterpret_cast<Ints8>(bytes & 0xFu), Floats8) - zero) * scale;
        const Floats8 hi =
            (__builtin_convertvector(reinterpret_cast<Ints8>((bytes >> 4) & 0xFu), Floats8) - zero) * scale;
        Floats8 x, y;
        std::memcpy(&x, ag + i, sizeof x);
        std::memcpy(&y, ag + half + i, sizeof y);
        if (count == 1) {
          s0 += x * lo;
          s1 += y * hi;
          continue;
        }
        s0 += x * lo + y * hi;
        std::memcpy(&x, ag + rowStride + i, sizeof x);
        std::memcpy(&y, ag + rowStride + half + i, sizeof y);
        s1 += x * lo + y * hi;
        if (count > 2) {
          std::memcpy(&x, ag + 2 * rowStride + i, sizeof x);
          std::memcpy(&y, ag + 2 * rowStride + half + i, sizeof y);
          s2 += x * lo + y * hi;
        }
        if (count > 3) {
          std::memcpy(&x, ag + 3 * rowStride + i, sizeof x);
          std::memcpy(&y, ag + 3 * rowStride + half + i, sizeof y);
          s3 += x * lo + y * hi;
        }
      }
    }
    if (count == 1) s0 += s1;
    const Floats8 groupSums[4] = {s0, s1, s2, s3};
    for (size_t m = 0; m < count; ++m) {
      float sum = 0;
      for (size_t j = 0; j < kLanes; ++j) sum += groupSums[m][j];
      sums[m0 + m] = sum;
    }
  }
}

}  // namespace

// At prepare: a constant g_idx (as every exporter writes it) is checked once, not on every run. A g_idx computed at
// run time leaves the op unplanned, and each run checks it.
Expected<std::shared_ptr<const void>> planMatMulNBitsOnce(const OpContext& ctx, InDescs inputs) {
  const ValueDesc* g = optionalInput(inputs, 4);
  if (g && !g->value) return unsupported(ctx, "input 4 (g_idx) is computed at run time");
  if (g)
    CTX_RETURN_IF_ERROR(checkGroups(ctx, layoutOf(attrsOf<ops::MatMulNBitsAttrs>(ctx)), g->value->dataAs<int32_t>()));
  return std::shared_ptr<const void>(std::make_shared<const bool>(true));
}

InferResult inferMatMulNBits(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 6));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float) | kHalfTypes));
  const NBitsLayout l = layoutOf(attrsOf<ops::MatMulNBitsAttrs>(ctx));
  const auto& a = inputs[0].shape;
  if (a.empty() || a.back() != l.k)
    return invalid(ctx, "input 0 (A) has shape {}; its last axis must be K = {}", shapeStr(a), l.k);
  if (inputs[1].type != ElemType::Uint8 || inputs[1].shape != ir::Shape{l.n, l.blocks, l.blobBytes})
    return invalid(ctx, "input 1 (B) is {} {}; K = {}, N = {}, bits = {} and block_size = {} make it uint8 {}",
                   ir::elemTypeName(inputs[1].type), shapeStr(inputs[1].shape), l.k, l.n, l.bits, l.blockSize,
                   shapeStr(ir::Shape{l.n, l.blocks, l.blobBytes}));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
  if (dimProduct(inputs[2].shape) != l.n * l.blocks)
    return invalid(ctx, "input 2 (scales) has shape {}; it needs N x blocks = {} x {} values",
                   shapeStr(inputs[2].shape), l.n, l.blocks);
  if (const ValueDesc* zp = optionalInput(inputs, 3)) {
    const bool packed = zp->type == ElemType::Uint8;
    if (!packed && zp->type != inputs[0].type)
      return invalid(ctx, "input 3 (zero_points) is {}; expected uint8 (packed) or {}", ir::elemTypeName(zp->type),
                     ir::elemTypeName(inputs[0].type));
    const int64_t want = packed ? l.n * l.zeroBytesPerRow : l.n * l.blocks;
    if (dimProduct(zp->shape) != want)
      return invalid(ctx, "input 3 (zero_points) has shape {}; expected {} values", shapeStr(zp->shape), want);
  }
  if (const ValueDesc* g = optionalInput(inputs, 4)) {
    if (g->type != ElemType::Int32 || dimProduct(g->shape) != l.k)
      return invalid(ctx, "input 4 (g_idx) is {} {}; expected int32 with K = {} values", ir::elemTypeName(g->type),
                     shapeStr(g->shape), l.k);
  }
  if (const ValueDesc* bias = optionalInput(inputs, 5)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 5));
    if (dimProduct(bias->shape) != l.n)
      return invalid(ctx, "input 5 (bias) has shape {}; expected N = {} values", shapeStr(bias->shape), l.n);
  }
  ir::Shape out(a.begin(), a.end());
  out.back() = l.n;
  return single(inputs[0].type, std::move(out));
}

Status runMatMulNBits(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const NBitsLayout l = layoutOf(attrsOf<ops::MatMulNBitsAttrs>(ctx));
  const ir::Tensor& a = *inputs[0];
  const uint8_t* b = inputs[1]->dataAs<uint8_t>();
  const float* scales = inputs[2]->dataAs<float>();
  const ir::Tensor* zp = inputs.size() > 3 ? inputs[3] : nullptr;
  const ir::Tensor* gIdx = inputs.size() > 4 ? inputs[4] : nullptr;
  const ir::Tensor* bias = inputs.size() > 5 ? inputs[5] : nullptr;
  const int32_t* groups = gIdx ? gIdx->dataAs<int32_t>() : nullptr;
  if (groups && !ctx.plan) CTX_RETURN_IF_ERROR(checkGroups(ctx, l, groups));  // a planned op checked them at prepare
  const uint8_t* zpPacked = zp && zp->type() == ElemType::Uint8 ? zp->dataAs<uint8_t>() : nullptr;
  const float* zpFloat = zp && zp->type() != ElemType::Uint8 ? zp->dataAs<float>() : nullptr;
  const float zpDefault = static_cast<float>(int64_t{1} << (l.bits - 1));
  const size_t rowsA = static_cast<size_t>(a.elementCount() / static_cast<uint64_t>(l.k));
  const float* pa = a.dataAs<float>();
  float* py = outputs[0]->mutableDataAs<float>();
  const float* pbias = bias ? bias->dataAs<float>() : nullptr;
  const auto K = static_cast<size_t>(l.k), N = static_cast<size_t>(l.n);

  // Row n of dequantize(B): code q of block g is (q - zero point) x scale.
  auto dequantizeRow = [&](int64_t n, float* w) {
    auto zeroOf = [&](int64_t g) {
      if (zpFloat) return zpFloat[n * l.blocks + g];
      if (zpPacked) return static_cast<float>(codeAt(zpPacked + n * l.zeroBytesPerRow, g, l.bits));
      return zpDefault;
    };
    const uint8_t* row = b + n * l.blocks * l.blobBytes;
    if (!groups) {
      for (int64_t g = 0; g < l.blocks; ++g) {
        const float scale = scales[n * l.blocks + g], zero = zeroOf(g);
        const uint8_t* blob = row + g * l.blobBytes;
        const int64_t k0 = g * l.blockSize, k1 = std::min(l.k, k0 + l.blockSize);
        for (int64_t k = k0; k < k1; ++k) w[k] = (static_cast<float>(codeAt(blob, k - k0, l.bits)) - zero) * scale;
      }
      return;
    }
    // Act-order (g_idx): position k's code is stored in order, its scale and zero point are block g_idx[k]'s.
    for (int64_t k = 0; k < l.k; ++k) {
      const int64_t g = groups[k];
      const uint8_t* blob = row + (k / l.blockSize) * l.blobBytes;
      w[k] = (static_cast<float>(codeAt(blob, k % l.blockSize, l.bits)) - zeroOf(g)) * scales[n * l.blocks + g];
    }
  };

  const size_t tiles = (N + kTileRows - 1) / kTileRows;
  const size_t block = static_cast<size_t>(l.blockSize), blocks = static_cast<size_t>(l.blocks);
  if (l.bits == 4 && !groups && rowsA <= kFusedRows && block % 16 == 0) {
    // The calling thread's tile scratch holds A reordered; the pool's loop below needs no tile.
    std::vector<float>& reordered = threadScratch().nbitsTile;
    reordered.resize(rowsA * blocks * block);
    reorderForNibbles(pa, rowsA, K, blocks, block, reordered.data());
    // A code's multiply-adds run eight lanes wide with no tile written out: an eighth of a work unit each (the
    // products of a small model's decode step stay on one thread, where handing them to the pool cost more than it
    // saved).
    parallelForWork(ctx, tiles, static_cast<size_t>(kTileRows) * K * rowsA / kLanes, [&](size_t t0, size_t t1) {
      float sums[kFusedRows];
      for (size_t n = t0 * kTileRows; n < std::min(N, t1 * kTileRows); ++n) {
        const auto row = static_cast<int64_t>(n);
        const NBitsRow r{b + row * l.blocks * l.blobBytes, scales + row * l.blocks,
                         zpPacked ? zpPacked + row * l.zeroBytesPerRow : nullptr,
                         zpFloat ? zpFloat + row * l.blocks : nullptr, zpDefault};
        fusedRow4(r, reordered.data(), rowsA, blocks, block, sums);
        for (size_t m = 0; m < rowsA; ++m) py[m * N + n] = sums[m] + (pbias ? pbias[n] : 0.0f);
      }
    });
    return Status::ok();
  }
  parallelForWork(ctx, tiles, static_cast<size_t>(kTileRows) * K * std::max<size_t>(rowsA, 1),
                  [&](size_t t0, size_t t1) {
                    std::vector<float>& w = threadScratch().nbitsTile;  // this thread's dequantized rows
                    w.resize(static_cast<size_t>(kTileRows) * K);
                    for (size_t t = t0; t < t1; ++t) {
                      const size_t n0 = t * kTileRows, rows = std::min<size_t>(kTileRows, N - n0);
                      for (size_t r = 0; r < rows; ++r) dequantizeRow(static_cast<int64_t>(n0 + r), w.data() + r * K);
                      cpu::sgemm(false, true, rowsA, rows, K, 1.0f, pa, K, w.data(), K, 0.0f, py + n0, N, nullptr);
                      if (pbias)
                        for (size_t m = 0; m < rowsA; ++m)
                          for (size_t r = 0; r < rows; ++r) py[m * N + n0 + r] += pbias[n0 + r];
                    }
                  });
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
