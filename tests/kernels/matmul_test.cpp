// MatMul, Gemm and the blocked sgemm, checked against naive loops on odd sizes, with and without threads.
#include "kernel_test_util.h"

#include "cpu/gemm.h"
#include "support/hash.h"

#include <cstring>
#include <random>

using namespace ctxkit;
using namespace ctxkit::test;

namespace {

std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// C = alpha op(A) op(B) + beta C in double precision.
std::vector<float> naiveGemm(bool ta, bool tb, size_t M, size_t N, size_t K, float alpha, const std::vector<float>& A,
                             const std::vector<float>& B, float beta, std::vector<float> C) {
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      double acc = 0;
      for (size_t k = 0; k < K; ++k)
        acc += double(ta ? A[k * M + i] : A[i * K + k]) * double(tb ? B[j * K + k] : B[k * N + j]);
      C[i * N + j] = static_cast<float>(alpha * acc + (beta == 0 ? 0.0 : beta * double(C[i * N + j])));
    }
  return C;
}

}  // namespace

TEST_CASE("sgemm matches a naive triple loop on odd sizes") {
  kernels::ThreadPool pool(2);
  struct Size {
    size_t m, n, k;
  };
  for (Size s : {Size{1, 1, 1}, Size{7, 13, 5}, Size{65, 129, 33}, Size{2, 300, 17}, Size{150, 3, 300},
                 Size{33, 2100, 9}, Size{5, 4, 600}}) {
    for (bool threaded : {false, true}) {
      for (int variant = 0; variant < 4; ++variant) {
        bool ta = variant & 1, tb = variant & 2;
        auto A = randomFloats(s.m * s.k, 1);
        auto B = randomFloats(s.k * s.n, 2);
        auto C = randomFloats(s.m * s.n, 3);
        float alpha = variant == 3 ? 0.5f : 1.0f;
        float beta = variant == 1 ? 0.0f : (variant == 2 ? 2.0f : 1.0f);
        auto want = naiveGemm(ta, tb, s.m, s.n, s.k, alpha, A, B, beta, C);
        std::vector<float> got = C;
        if (beta == 0.0f) std::fill(got.begin(), got.end(), std::numeric_limits<float>::quiet_NaN());
        cpu::sgemm(ta, tb, s.m, s.n, s.k, alpha, A.data(), ta ? s.m : s.k, B.data(), tb ? s.k : s.n, beta,
                       got.data(), s.n, threaded ? &pool : nullptr);
        INFO(s.m << "x" << s.n << "x" << s.k << " transA=" << ta << " transB=" << tb << " threads=" << threaded);
        for (size_t i = 0; i < got.size(); ++i)
          REQUIRE(std::fabs(got[i] - want[i]) <= 1e-4f * (1 + std::sqrt(float(s.k))));
      }
    }
  }
}

TEST_CASE("sgemm honours leading dimensions larger than the matrix") {
  const size_t M = 9, N = 11, K = 7, lda = 10, ldb = 15, ldc = 20;
  auto A = randomFloats(M * lda, 4), B = randomFloats(K * ldb, 5);
  std::vector<float> C(M * ldc, 7.0f);
  cpu::sgemm(false, false, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), ldc, nullptr);
  for (size_t i = 0; i < M; ++i) {
    for (size_t j = 0; j < N; ++j) {
      double acc = 0;
      for (size_t k = 0; k < K; ++k) acc += A[i * lda + k] * B[k * ldb + j];
      REQUIRE(std::fabs(C[i * ldc + j] - acc) < 1e-5);
    }
    for (size_t j = N; j < ldc; ++j) REQUIRE(C[i * ldc + j] == 7.0f);  // untouched padding
  }
  REQUIRE(std::string(cpu::sgemmKernelName()).size() > 0);
}

TEST_CASE("packed panels put B's elements where docs/format/program.md says") {
  const size_t K = 5, N = 11, W = 8, D = 3, P = 2;  // blocks of 3 and 2 rows; panels of 8 and 3 (+5 zero) columns
  std::vector<float> B(K * N);
  for (size_t i = 0; i < B.size(); ++i) B[i] = static_cast<float>(i + 1);
  for (bool transposed : {false, true}) {
    std::vector<float> src = B;  // Bᵀ (N x K) when transposed
    if (transposed)
      for (size_t k = 0; k < K; ++k)
        for (size_t j = 0; j < N; ++j) src[j * K + k] = B[k * N + j];
    REQUIRE(cpu::panelElements(K, N, W) == K * P * W);
    std::vector<float> packed(cpu::panelElements(K, N, W), -1.0f);
    cpu::packPanels(transposed, src.data(), transposed ? K : N, K, N, W, D, packed.data());
    for (size_t k = 0; k < K; ++k)
      for (size_t col = 0; col < P * W; ++col) {
        size_t b = k / D, rows = std::min(D, K - b * D), p = col / W, j = col % W;
        float want = col < N ? B[k * N + col] : 0.0f;
        INFO("k=" << k << " column " << col << " transposed=" << transposed);
        REQUIRE(packed[b * D * P * W + p * rows * W + (k - b * D) * W + j] == want);
      }
  }
}

TEST_CASE("a weight packed a few panels at a time gives packWeight's bytes, hash and elements, in bounded pieces") {
  // K and N not multiples of the panel depth or width: shallow last blocks, zero-padded last panels.
  struct Size {
    int64_t rows, cols;
  };
  for (Size s : {Size{1, 1}, Size{5, 11}, Size{300, 70}, Size{513, 33}, Size{17, 129}}) {
    const auto values = randomFloats(static_cast<size_t>(s.rows * s.cols), 5);
    const ir::Tensor weight = ir::Tensor::fromVector(ir::ElemType::Float, {s.rows, s.cols}, values);
    for (auto kind : {ops::WeightLayoutKind::GemmPanels, ops::WeightLayoutKind::GemmPanelsTransposed})
      for (uint16_t width : {8, 16, 32})
        for (uint16_t depth : {256, 7})
          for (size_t chunk : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
            const ops::WeightLayout layout{kind, width, depth};
            INFO(s.rows << "x" << s.cols << " " << ops::layoutName(layout) << " pieces of " << chunk << " bytes");
            auto packed = cpu::packWeight(layout, weight);
            REQUIRE(packed);
            auto stream = cpu::PackedWeightStream::open(layout, weight, chunk);
            REQUIRE(stream);
            CHECK(stream->byteSize() == packed->byteSize());
            // The widest piece: as many panels of one block as fit in `chunk`, and at least one.
            const size_t k = static_cast<size_t>(kind == ops::WeightLayoutKind::GemmPanels ? s.rows : s.cols);
            const size_t panelBytes = std::min<size_t>(k, depth) * width * sizeof(float);
            const size_t widest = std::max(panelBytes, chunk / panelBytes * panelBytes);
            std::vector<std::byte> joined;
            Hasher128 hasher;
            std::span<const std::byte> previous;  // still valid: the one before may be in use on another thread
            for (auto piece = stream->next(); !piece.empty(); piece = stream->next()) {
              REQUIRE(piece.size() <= widest);
              if (!previous.empty())
                REQUIRE(std::memcmp(previous.data(), packed->data() + joined.size() - previous.size(), previous.size()) == 0);
              joined.insert(joined.end(), piece.begin(), piece.end());
              hasher.update(piece);
              previous = piece;
            }
            REQUIRE(joined.size() == packed->byteSize());
            CHECK(std::memcmp(joined.data(), packed->data(), joined.size()) == 0);
            CHECK(hasher.digest() == hash128(packed->bytes()));
            // Any one packed float, without packing (how the weight pool samples a weight).
            bool elementsMatch = true;
            for (size_t i = 0; i < packed->byteSize() / sizeof(float); ++i)
              elementsMatch = elementsMatch && stream->element(i) == packed->dataAs<float>()[i];
            CHECK(elementsMatch);
            // Two streams taking every other piece (one packs where the other skips) give the pieces in order.
            auto even = cpu::PackedWeightStream::open(layout, weight, chunk);
            auto odd = cpu::PackedWeightStream::open(layout, weight, chunk);
            REQUIRE((even && odd));
            std::vector<float> buffer(even->maxPieceElements());
            size_t at = 0;
            bool piecesMatch = true;
            for (size_t n = 0;; ++n) {
              auto& packing = n % 2 ? *odd : *even;
              auto& skipping = n % 2 ? *even : *odd;
              auto piece = packing.next(buffer.data());
              CHECK(skipping.skip() == !piece.empty());
              if (piece.empty()) break;
              piecesMatch = piecesMatch && std::memcmp(piece.data(), packed->data() + at, piece.size()) == 0;
              at += piece.size();
            }
            CHECK(piecesMatch);
            CHECK(at == packed->byteSize());
          }
  }
  // The same refusals as packWeight's.
  const ir::Tensor vector = ir::Tensor::fromVector(ir::ElemType::Float, {4}, std::vector<float>(4));
  CHECK_FALSE(cpu::PackedWeightStream::open(ops::WeightLayout{ops::WeightLayoutKind::GemmPanels, 8, 256}, vector));
  const ir::Tensor matrix = ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>(4));
  CHECK_FALSE(cpu::PackedWeightStream::open(ops::WeightLayout{ops::WeightLayoutKind::GemmPanels, 12, 256}, matrix));
}

TEST_CASE("sgemmPanels matches a naive triple loop for every panel width, depth and shape") {
  kernels::ThreadPool pool(2);
  struct Size {
    size_t m, n, k;
  };
  REQUIRE(cpu::isPanelWidth(cpu::sgemmNaturalPanelWidth()));
  for (Size s : {Size{1, 1, 1}, Size{1, 70, 300}, Size{2, 33, 17}, Size{7, 13, 5}, Size{65, 129, 600},
                 Size{150, 2100, 9}}) {
    for (size_t width : {8, 16, 32}) {
      for (size_t depth : {256, 7}) {
        for (int variant = 0; variant < 4; ++variant) {
          bool ta = variant & 1, tb = variant & 2;
          auto A = randomFloats(s.m * s.k, 1);
          auto B = randomFloats(s.k * s.n, 2);
          auto C = randomFloats(s.m * s.n, 3);
          float alpha = variant == 3 ? 0.5f : 1.0f;
          float beta = variant == 1 ? 0.0f : (variant == 2 ? 2.0f : 1.0f);
          auto want = naiveGemm(ta, tb, s.m, s.n, s.k, alpha, A, B, beta, C);
          std::vector<float> packed(cpu::panelElements(s.k, s.n, width));
          cpu::packPanels(tb, B.data(), tb ? s.k : s.n, s.k, s.n, width, depth, packed.data());
          cpu::PanelsB panels{packed.data(), s.k, s.n, width, depth, {}};
          std::vector<float> got = C;
          if (beta == 0.0f) std::fill(got.begin(), got.end(), std::numeric_limits<float>::quiet_NaN());
          cpu::sgemmPanels(ta, s.m, alpha, A.data(), ta ? s.m : s.k, panels, beta, got.data(), s.n,
                               variant % 2 ? &pool : nullptr);
          INFO(s.m << "x" << s.n << "x" << s.k << " width " << width << " depth " << depth << " transA=" << ta
                   << " transB=" << tb);
          for (size_t i = 0; i < got.size(); ++i)
            REQUIRE(std::fabs(got[i] - want[i]) <= 1e-4f * (1 + std::sqrt(float(s.k))));
        }
      }
    }
  }
}

TEST_CASE("MatMul 2-D, batched with broadcasting, and 1-D operands") {
  auto a = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = floats({3, 2}, {1, 0, 0, 1, 1, 1});
  auto y = Op(OpKind::MatMul).run1({&a, &b});
  REQUIRE(y.shape() == ir::Shape{2, 2});
  requireClose(values<float>(y), {4, 5, 10, 11});

  auto v = floats({3}, {1, 1, 1});
  auto yv = Op(OpKind::MatMul).run1({&v, &b});  // (3) x (3,2) -> (2)
  REQUIRE(yv.shape() == ir::Shape{2});
  requireClose(values<float>(yv), {2, 2});
  auto ym = Op(OpKind::MatMul).run1({&a, &v});  // (2,3) x (3) -> (2)
  REQUIRE(ym.shape() == ir::Shape{2});
  requireClose(values<float>(ym), {6, 15});
  auto yd = Op(OpKind::MatMul).run1({&v, &v});  // dot product -> scalar
  REQUIRE(yd.shape().empty());
  requireClose(values<float>(yd), {3});

  // (2,1,2,3) x (3,3,2) -> (2,3,2,2): batch dims broadcast both ways.
  std::vector<float> av = randomFloats(12, 7), bv = randomFloats(18, 8);
  auto ba = floats({2, 1, 2, 3}, av);
  auto bb = floats({3, 3, 2}, bv);
  auto yb = Op(OpKind::MatMul).run1({&ba, &bb});
  REQUIRE(yb.shape() == ir::Shape{2, 3, 2, 2});
  auto got = values<float>(yb);
  for (size_t p = 0; p < 2; ++p)
    for (size_t q = 0; q < 3; ++q)
      for (size_t i = 0; i < 2; ++i)
        for (size_t j = 0; j < 2; ++j) {
          float acc = 0;
          for (size_t k = 0; k < 3; ++k) acc += av[p * 6 + i * 3 + k] * bv[q * 6 + k * 2 + j];
          REQUIRE(std::fabs(got[((p * 3 + q) * 2 + i) * 2 + j] - acc) < 1e-5f);
        }
}

TEST_CASE("MatMul on integers and its shape errors") {
  auto a = int64s({2, 2}, {1, 2, 3, 4});
  auto y = Op(OpKind::MatMul).run1({&a, &a});
  REQUIRE(values<int64_t>(y) == std::vector<int64_t>{7, 10, 15, 22});
  auto b = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Error err = Op(OpKind::MatMul).fails({&b, &b});
  REQUIRE(err.code() == ErrorCode::InvalidGraph);
  REQUIRE(err.message() == "node 'n1' (MatMul): inputs have shapes 2x3 and 2x3 whose inner dimensions 3 and 2 differ");
}

TEST_CASE("MatMul with many batches uses threads and stays exact") {
  kernels::ThreadPool pool(2);
  auto av = randomFloats(16 * 5 * 7, 9), bv = randomFloats(16 * 7 * 3, 10);
  auto a = floats({16, 5, 7}, av), b = floats({16, 7, 3}, bv);
  auto serial = values<float>(Op(OpKind::MatMul).run1({&a, &b}));
  auto threaded = values<float>(Op(OpKind::MatMul).run1({&a, &b}, &pool));
  REQUIRE(serial == threaded);
}

TEST_CASE("Gemm transposes, alpha, beta and broadcast C") {
  auto a = floats({3, 2}, {1, 4, 2, 5, 3, 6});  // A^T = [[1,2,3],[4,5,6]]
  auto b = floats({2, 3}, {1, 0, 1, 0, 1, 1});  // B^T = [[1,0],[0,1],[1,1]]
  auto c = floats({2}, {10, 20});               // broadcast along rows
  auto y = Op(OpKind::Gemm).i("transA", 1).i("transB", 1).f("alpha", 2.0f).f("beta", 0.5f).run1({&a, &b, &c});
  REQUIRE(y.shape() == ir::Shape{2, 2});
  // A^T B^T = [[4,5],[10,11]]; 2x + 0.5c
  requireClose(values<float>(y), {13, 20, 25, 32});
  auto col = floats({2, 1}, {1, 2});
  auto y2 = Op(OpKind::Gemm).i("transA", 1).i("transB", 1).run1({&a, &b, &col});
  requireClose(values<float>(y2), {5, 6, 12, 13});
  auto y3 = Op(OpKind::Gemm, 13).i("transA", 1).i("transB", 1).run1({&a, &b, nullptr});
  requireClose(values<float>(y3), {4, 5, 10, 11});
  auto scalar = floats({}, {1});
  auto y4 = Op(OpKind::Gemm).i("transA", 1).i("transB", 1).run1({&a, &b, &scalar});
  requireClose(values<float>(y4), {5, 6, 11, 12});
}

TEST_CASE("Gemm on int32 and its errors") {
  auto a = int32s({2, 2}, {1, 2, 3, 4});
  auto c = int32s({1}, {100});
  REQUIRE(values<int32_t>(Op(OpKind::Gemm).run1({&a, &a, &c})) == std::vector<int32_t>{107, 110, 115, 122});
  auto f = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto badC = floats({3}, {1, 2, 3});
  REQUIRE(Op(OpKind::Gemm).fails({&f, &f}).code() == ErrorCode::InvalidGraph);
  auto ft = floats({3, 2}, {1, 2, 3, 4, 5, 6});
  Error err = Op(OpKind::Gemm).fails({&f, &ft, &badC});
  REQUIRE(err.message() == "node 'n1' (Gemm): input 2 has shape 3 which does not broadcast to the output shape 2x2");
  auto r3 = floats({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  REQUIRE(Op(OpKind::Gemm).fails({&r3, &ft}).message() ==
          "node 'n1' (Gemm): input 0 has shape 1x2x3 but expected rank 2");
}
