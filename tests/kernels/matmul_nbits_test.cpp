// MatMulNBits (com.microsoft) against dequantize-then-multiply loops: the fused path of a few rows of A by 4-bit
// blocks and the tiled GEMM path of many rows, with every zero-point form, a partial last block and a bias.
#include "../common/random.h"
#include "kernel_test_util.h"

using namespace ctxkit;
using ctxkit::testing::randomFloats;
using namespace ctxkit::test;

namespace {

constexpr int64_t kK = 100, kN = 37;

enum class Zeros { Default, Packed, Float };

// Y = A x dequantize(B)^T + bias by the schema's definition, in double.
std::vector<float> reference(const std::vector<float>& a, int64_t rows, const std::vector<uint8_t>& codes,
                             const std::vector<float>& scales, Zeros zeros, const std::vector<uint8_t>& zp8,
                             const std::vector<float>& zpf, int64_t block, const std::vector<float>& bias) {
  const int64_t blocks = (kK + block - 1) / block, blob = block / 2, zpRow = (blocks + 1) / 2;
  std::vector<float> y(static_cast<size_t>(rows * kN));
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t n = 0; n < kN; ++n) {
      double sum = bias[static_cast<size_t>(n)];
      for (int64_t k = 0; k < kK; ++k) {
        const int64_t g = k / block, j = k % block;
        const uint8_t byte = codes[static_cast<size_t>((n * blocks + g) * blob + j / 2)];
        const double code = (j % 2) ? byte >> 4 : byte & 0xF;
        double zero = 8;
        if (zeros == Zeros::Packed) {
          const uint8_t z = zp8[static_cast<size_t>(n * zpRow + g / 2)];
          zero = (g % 2) ? z >> 4 : z & 0xF;
        } else if (zeros == Zeros::Float) {
          zero = zpf[static_cast<size_t>(n * blocks + g)];
        }
        sum += a[static_cast<size_t>(m * kK + k)] * (code - zero) * scales[static_cast<size_t>(n * blocks + g)];
      }
      y[static_cast<size_t>(m * kN + n)] = static_cast<float>(sum);
    }
  return y;
}

}  // namespace

TEST_CASE("MatMulNBits 4-bit: few rows (fused) and many rows (tiled) match dequantize-then-multiply") {
  for (int64_t block : {16, 32, 64})
    for (Zeros zeros : {Zeros::Default, Zeros::Packed, Zeros::Float})
      for (int64_t rows : {1, 3, 16, 20}) {
        INFO("block " << block << ", zero points " << static_cast<int>(zeros) << ", rows " << rows);
        const int64_t blocks = (kK + block - 1) / block, blob = block / 2;
        std::vector<uint8_t> codes(static_cast<size_t>(kN * blocks * blob)), zp8(static_cast<size_t>(kN * 4));
        for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 151 + 7) % 256);
        for (size_t i = 0; i < zp8.size(); ++i) zp8[i] = static_cast<uint8_t>((i * 37 + 3) % 256);
        std::vector<float> scales = randomFloats(static_cast<size_t>(kN * blocks), 3);
        std::vector<float> zpf = randomFloats(static_cast<size_t>(kN * blocks), 4);
        for (float& z : zpf) z = 7.5f + 2 * z;
        const std::vector<float> av = randomFloats(static_cast<size_t>(rows * kK), 5);
        const std::vector<float> bias = randomFloats(static_cast<size_t>(kN), 6);
        auto a = floats({rows, kK}, av);
        auto b = typed<uint8_t>(ElemType::Uint8, {kN, blocks, blob}, codes);
        auto s = floats({kN * blocks}, scales);
        auto zPacked = typed<uint8_t>(ElemType::Uint8, {kN * ((blocks + 1) / 2)},
                                      std::vector<uint8_t>(zp8.begin(), zp8.begin() + kN * ((blocks + 1) / 2)));
        auto zFloat = floats({kN * blocks}, zpf);
        auto c = floats({kN}, bias);
        const ir::Tensor* zp = zeros == Zeros::Packed ? &zPacked : zeros == Zeros::Float ? &zFloat : nullptr;
        auto y = Op(OpKind::MatMulNBits, 1)
                     .i("K", kK)
                     .i("N", kN)
                     .i("bits", 4)
                     .i("block_size", block)
                     .run1({&a, &b, &s, zp, nullptr, &c});
        REQUIRE(y.shape() == ir::Shape{rows, kN});
        requireClose(values<float>(y), reference(av, rows, codes, scales, zeros, zp8, zpf, block, bias), 1e-5f);
      }
}

TEST_CASE("MatMulNBits 4-bit: the fused path on two threads gives the serial sums") {
  constexpr int64_t K = 512, N = 256, block = 32, blocks = K / block;
  std::vector<uint8_t> codes(static_cast<size_t>(N * blocks * block / 2));
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 97 + 5) % 256);
  auto b = typed<uint8_t>(ElemType::Uint8, {N, blocks, block / 2}, codes);
  auto s = floats({N * blocks}, randomFloats(static_cast<size_t>(N * blocks), 8));
  auto pool = kernels::makeThreadPool(2);
  for (int64_t rows : {1, 16}) {
    auto a = floats({rows, K}, randomFloats(static_cast<size_t>(rows * K), 9));
    const Op op = Op(OpKind::MatMulNBits, 1).i("K", K).i("N", N).i("bits", 4).i("block_size", block);
    REQUIRE(values<float>(op.run1({&a, &b, &s}, pool.get())) == values<float>(op.run1({&a, &b, &s})));
  }
}
