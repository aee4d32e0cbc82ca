// The sample generator's reference ops against values worked out by hand, and properties they must keep.
#include "samples/reference.h"
#include "samples/sample_models.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

using namespace ctxkit::samples;
using ref::Array;

namespace {
std::vector<float> iota(size_t n, float start = 1.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}
}  // namespace

TEST_CASE("softmax rows sum to one and match a hand-computed row", "[samples][reference]") {
  const Array x({2, 3}, {0.0f, std::log(3.0f), -100.0f, 5.0f, 5.0f, 5.0f});
  const Array y = ref::softmaxLastAxis(x);
  REQUIRE(y.shape == std::vector<int64_t>{2, 3});
  CHECK(y.data[0] == Approx(0.25f));
  CHECK(y.data[1] == Approx(0.75f));
  CHECK(y.data[2] == Approx(0.0f).margin(1e-30));
  for (int i = 3; i < 6; ++i) CHECK(y.data[i] == Approx(1.0f / 3.0f));
  // Large values must not overflow: the row maximum is subtracted first.
  const Array big = ref::softmaxLastAxis(Array({1, 2}, {1000.0f, 1000.0f}));
  CHECK(big.data[0] == Approx(0.5f));
  CHECK(big.data[1] == Approx(0.5f));
}

TEST_CASE("layerNorm gives mean 0 and variance 1 per row before scale and bias", "[samples][reference]") {
  std::vector<float> data;
  for (int i = 0; i < 3 * 8; ++i) data.push_back(static_cast<float>((i * 7) % 11) - 3.0f + 0.25f * i);
  const Array x({3, 8}, data);
  const std::vector<float> ones(8, 1.0f), zeros(8, 0.0f), twos(8, 2.0f), threes(8, 3.0f);
  const Array plain = ref::layerNorm(x, ones, zeros, 0.0f);
  const Array affine = ref::layerNorm(x, twos, threes, 0.0f);
  for (int row = 0; row < 3; ++row) {
    double mean = 0, var = 0, meanAffine = 0;
    for (int c = 0; c < 8; ++c) {
      mean += plain.data[row * 8 + c];
      meanAffine += affine.data[row * 8 + c];
    }
    mean /= 8;
    meanAffine /= 8;
    for (int c = 0; c < 8; ++c) var += (plain.data[row * 8 + c] - mean) * (plain.data[row * 8 + c] - mean);
    var /= 8;
    CHECK(mean == Approx(0.0).margin(1e-6));
    CHECK(var == Approx(1.0).epsilon(1e-5));
    CHECK(meanAffine == Approx(3.0).epsilon(1e-5));
  }
  // Hand-computed: [1, 3] has mean 2, deviation 1, so it normalizes to [-1, 1].
  const Array pair =
      ref::layerNorm(Array({1, 2}, {1.0f, 3.0f}), std::vector<float>{1, 1}, std::vector<float>{0, 0}, 0.0f);
  CHECK(pair.data[0] == Approx(-1.0f));
  CHECK(pair.data[1] == Approx(1.0f));
}

TEST_CASE("matMul multiplies plain, shared-weight and batched operands", "[samples][reference]") {
  const Array a({2, 3}, {1, 2, 3, 4, 5, 6});
  const Array b({3, 2}, {7, 8, 9, 10, 11, 12});
  const Array y = ref::matMul(a, b);
  REQUIRE(y.shape == std::vector<int64_t>{2, 2});
  CHECK(y.data == std::vector<float>{58, 64, 139, 154});

  // [2, 2, 3] x [3, 2]: the weight is shared by both batches.
  Array a3({2, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 0, 1, 1, 0, 0});
  const Array shared = ref::matMul(a3, b);
  CHECK(shared.data == std::vector<float>{58, 64, 139, 154, 11, 12, 7, 8});

  // [2, 1, 2] x [2, 2, 1]: one matrix per batch.
  const Array batched = ref::matMul(Array({2, 1, 2}, {1, 2, 3, 4}), Array({2, 2, 1}, {5, 6, 7, 8}));
  REQUIRE(batched.shape == std::vector<int64_t>{2, 1, 1});
  CHECK(batched.data == std::vector<float>{17, 53});
}

TEST_CASE("gemmTransB multiplies by the transposed weight and adds the bias", "[samples][reference]") {
  const Array a({1, 3}, {1, 2, 3});
  const Array w({2, 3}, {1, 0, 0, 1, 1, 1});  // rows are output features
  const std::vector<float> c = {0.5f, -1.0f};
  const Array y = ref::gemmTransB(a, w, c);
  REQUIRE(y.shape == std::vector<int64_t>{1, 2});
  CHECK(y.data == std::vector<float>{1.5f, 5.0f});
}

TEST_CASE("transpose moves elements as the permutation says", "[samples][reference]") {
  const Array y = ref::transpose(Array({2, 3}, {1, 2, 3, 4, 5, 6}), std::vector<int64_t>{1, 0});
  REQUIRE(y.shape == std::vector<int64_t>{3, 2});
  CHECK(y.data == std::vector<float>{1, 4, 2, 5, 3, 6});

  // Rank 4 with the key permutation of the block: out[a][b][c][d] = in[a][d][b][c].
  const Array x({2, 3, 4, 5}, iota(120, 0.0f));
  const std::vector<int64_t> perm = {0, 2, 3, 1};
  const Array t = ref::transpose(x, perm);
  REQUIRE(t.shape == std::vector<int64_t>{2, 4, 5, 3});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 5; ++c)
        for (int d = 0; d < 3; ++d)
          REQUIRE(t.data[((a * 4 + b) * 5 + c) * 3 + d] == x.data[((a * 3 + d) * 4 + b) * 5 + c]);
}

TEST_CASE("conv2d of a known tiny input matches hand-computed sums", "[samples][reference]") {
  const Array x({1, 1, 3, 3}, iota(9));  // 1..9
  const Array ones({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  const Array same = ref::conv2d(x, ones, std::vector<float>{0.5f}, 1, 1);
  REQUIRE(same.shape == std::vector<int64_t>{1, 1, 3, 3});
  CHECK(same.data[0] == 12.5f);  // 1+2+4+5 (the rest is padding)
  CHECK(same.data[4] == 45.5f);  // all nine
  CHECK(same.data[8] == 28.5f);  // 5+6+8+9
  const Array strided = ref::conv2d(x, ones, std::vector<float>{0.0f}, 1, 2);
  REQUIRE(strided.shape == std::vector<int64_t>{1, 1, 2, 2});
  CHECK(strided.data == std::vector<float>{12, 16, 24, 28});

  // An asymmetric kernel pins the orientation: ONNX Conv is a correlation (no kernel flip), so a single
  // tap at kernel (0, 0) with padding 1 reads the input one row up and one column left.
  std::vector<float> tap(9, 0.0f);
  tap[0] = 1.0f;
  const Array shifted = ref::conv2d(x, Array({1, 1, 3, 3}, tap), std::vector<float>{0.0f}, 1, 1);
  CHECK(shifted.data == std::vector<float>{0, 0, 0, 0, 1, 2, 0, 4, 5});

  // Two input channels, two output channels, 1x1 kernel: a per-pixel matrix product.
  const Array x2({1, 2, 1, 2}, {1, 2, 3, 4});
  const Array w2({2, 2, 1, 1}, {1, 10, -1, 0});
  const Array y2 = ref::conv2d(x2, w2, std::vector<float>{0, 1}, 0, 1);
  CHECK(y2.data == std::vector<float>{31, 42, 0, -1});
}

TEST_CASE("batchNorm, relu, maxPool and flatten", "[samples][reference]") {
  // (x - mean) / sqrt(var) * scale + bias with mean 1, var 4, scale 2, bias 1 is x itself.
  const Array x({1, 2, 1, 2}, {3, -5, 7, 9});
  const std::vector<float> scale = {2, 1}, bias = {1, 0}, mean = {1, 0}, var = {4, 1};
  const Array bn = ref::batchNorm(x, scale, bias, mean, var, 0.0f);
  CHECK(bn.data == std::vector<float>{3, -5, 7, 9});

  CHECK(ref::relu(Array({4}, {-1, 0, 2, -0.5f})).data == std::vector<float>{0, 0, 2, 0});

  const Array pooled = ref::maxPool2d(Array({1, 1, 4, 4}, iota(16)), 2, 2);
  REQUIRE(pooled.shape == std::vector<int64_t>{1, 1, 2, 2});
  CHECK(pooled.data == std::vector<float>{6, 8, 14, 16});
  const Array negative = ref::maxPool2d(Array({1, 1, 2, 2}, {-4, -3, -2, -1}), 2, 2);
  CHECK(negative.data == std::vector<float>{-1});

  CHECK(ref::flatten2d(Array({1, 2, 2, 2}, iota(8))).shape == std::vector<int64_t>{1, 8});
}

TEST_CASE("geluErf matches known values", "[samples][reference]") {
  const Array y = ref::geluErf(Array({4}, {0.0f, 1.0f, -1.0f, 10.0f}));
  CHECK(y.data[0] == 0.0f);
  CHECK(y.data[1] == Approx(0.8413447f));
  CHECK(y.data[2] == Approx(-0.1586553f));
  CHECK(y.data[3] == Approx(10.0f));
}

TEST_CASE("the block reference is equivariant to permuting positions", "[samples][reference]") {
  // No mask and no position encoding: reversing the sequence must reverse the output rows. A mistake in
  // the head split (reshape/transpose) would mix positions and break this.
  const BlockWeights w = makeBlockWeights(kBlockWeightSeed);
  const int64_t s = 5;
  std::vector<float> data(static_cast<size_t>(s * kHidden));
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<float> reversed(data.size());
  for (int64_t row = 0; row < s; ++row)
    for (int64_t c = 0; c < kHidden; ++c) reversed[(s - 1 - row) * kHidden + c] = data[row * kHidden + c];
  const Array y = runBlockReference(w, Array({1, s, kHidden}, data));
  const Array yr = runBlockReference(w, Array({1, s, kHidden}, reversed));
  REQUIRE(y.shape == std::vector<int64_t>{1, s, kHidden});
  for (int64_t row = 0; row < s; ++row)
    for (int64_t c = 0; c < kHidden; ++c)
      REQUIRE(yr.data[(s - 1 - row) * kHidden + c] == Approx(y.data[row * kHidden + c]).margin(1e-5));
}

TEST_CASE("with one position, attention is the value projection", "[samples][reference]") {
  // Softmax over a single key is 1, so the block reduces to x + Attn(x) with Attn = (LN(x) Wv + bv) Wo + bo.
  const BlockWeights w = makeBlockWeights(kBlockWeightSeed);
  std::vector<float> data(static_cast<size_t>(kHidden));
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::cos(0.11f * static_cast<float>(i * i));
  const Array x({1, 1, kHidden}, data);
  const Array h = ref::layerNorm(x, w.ln1Scale, w.ln1Bias, 1e-5f);
  Array attention = ref::addLastAxis(ref::matMul(h, Array({kHidden, kHidden}, w.wv)), w.bv);
  attention = ref::addLastAxis(ref::matMul(attention, Array({kHidden, kHidden}, w.wo)), w.bo);
  const Array residual = ref::add(attention, x);
  const Array h2 = ref::layerNorm(residual, w.ln2Scale, w.ln2Bias, 1e-5f);
  const Array up = ref::geluErf(ref::addLastAxis(ref::matMul(h2, Array({kHidden, kFeedForward}, w.w1)), w.b1));
  const Array expected =
      ref::add(ref::addLastAxis(ref::matMul(up, Array({kFeedForward, kHidden}, w.w2)), w.b2), residual);
  const Array y = runBlockReference(w, x);
  for (size_t i = 0; i < y.size(); ++i) REQUIRE(y.data[i] == Approx(expected.data[i]).margin(1e-5));
}
