// The blocked sgemm and its packed panels (lib/cpu), checked against naive loops on odd sizes, with and without threads.
#include "../common/random.h"
#include "cpu/gemm.h"
#include "cpu/thread_pool.h"
#include "support/hash.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace ctxkit;
using ctxkit::testing::randomFloats;

namespace {

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

// One sgemm problem for a test loop: seeded operands, the four transpose/alpha/beta variants, and the naive result.
struct GemmCase {
  size_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  std::vector<float> A, B, C, want;

  GemmCase(size_t m_, size_t n_, size_t k_, int variant)
      : m(m_), n(n_), k(k_), ta(variant & 1), tb(variant & 2), alpha(variant == 3 ? 0.5f : 1.0f),
        beta(variant == 1 ? 0.0f : (variant == 2 ? 2.0f : 1.0f)), A(randomFloats(m * k, 1)),
        B(randomFloats(k * n, 2)), C(randomFloats(m * n, 3)), want(naiveGemm(ta, tb, m, n, k, alpha, A, B, beta, C)) {}
  // The output buffer a call starts from: C, or NaN where beta = 0 says C must not be read.
  std::vector<float> start() const {
    return beta == 0.0f ? std::vector<float>(C.size(), std::numeric_limits<float>::quiet_NaN()) : C;
  }
  void require(const std::vector<float>& got) const {
    for (size_t i = 0; i < got.size(); ++i) REQUIRE(std::fabs(got[i] - want[i]) <= 1e-4f * (1 + std::sqrt(float(k))));
  }
};

}  // namespace

TEST_CASE("sgemm matches a naive triple loop on odd sizes") {
  cpu::ThreadPool pool(2);
  struct Size {
    size_t m, n, k;
  };
  for (Size s : {Size{1, 1, 1}, Size{7, 13, 5}, Size{65, 129, 33}, Size{2, 300, 17}, Size{150, 3, 300},
                 Size{33, 2100, 9}, Size{5, 4, 600}}) {
    for (bool threaded : {false, true}) {
      for (int variant = 0; variant < 4; ++variant) {
        const GemmCase c(s.m, s.n, s.k, variant);
        std::vector<float> got = c.start();
        cpu::sgemm(c.ta, c.tb, s.m, s.n, s.k, c.alpha, c.A.data(), c.ta ? s.m : s.k, c.B.data(), c.tb ? s.k : s.n,
                   c.beta, got.data(), s.n, threaded ? &pool : nullptr);
        INFO(s.m << "x" << s.n << "x" << s.k << " transA=" << c.ta << " transB=" << c.tb << " threads=" << threaded);
        c.require(got);
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
    for (auto kind : {cpu::WeightLayoutKind::GemmPanels, cpu::WeightLayoutKind::GemmPanelsTransposed})
      for (uint16_t width : {8, 16, 32})
        for (uint16_t depth : {256, 7})
          for (size_t chunk : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
            const cpu::WeightLayout layout{kind, width, depth};
            INFO(s.rows << "x" << s.cols << " " << cpu::layoutName(layout) << " pieces of " << chunk << " bytes");
            auto packed = cpu::packWeight(layout, weight);
            REQUIRE(packed);
            auto stream = cpu::PackedWeightStream::open(layout, weight, chunk);
            REQUIRE(stream);
            CHECK(stream->byteSize() == packed->byteSize());
            // The widest piece: as many panels of one block as fit in `chunk`, and at least one.
            const size_t k = static_cast<size_t>(kind == cpu::WeightLayoutKind::GemmPanels ? s.rows : s.cols);
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
  CHECK_FALSE(cpu::PackedWeightStream::open(cpu::WeightLayout{cpu::WeightLayoutKind::GemmPanels, 8, 256}, vector));
  const ir::Tensor matrix = ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>(4));
  CHECK_FALSE(cpu::PackedWeightStream::open(cpu::WeightLayout{cpu::WeightLayoutKind::GemmPanels, 12, 256}, matrix));
}

TEST_CASE("sgemmPanels matches a naive triple loop for every panel width, depth and shape") {
  cpu::ThreadPool pool(2);
  struct Size {
    size_t m, n, k;
  };
  REQUIRE(cpu::isPanelWidth(cpu::sgemmNaturalPanelWidth()));
  for (Size s : {Size{1, 1, 1}, Size{1, 70, 300}, Size{2, 33, 17}, Size{7, 13, 5}, Size{65, 129, 600},
                 Size{150, 2100, 9}, Size{301, 45, 130}}) {
    for (size_t width : {8, 16, 32}) {
      for (size_t depth : {256, 7}) {
        for (int variant = 0; variant < 4; ++variant) {
          const GemmCase c(s.m, s.n, s.k, variant);
          std::vector<float> packed(cpu::panelElements(s.k, s.n, width));
          cpu::packPanels(c.tb, c.B.data(), c.tb ? s.k : s.n, s.k, s.n, width, depth, packed.data());
          cpu::PanelsB panels{packed.data(), s.k, s.n, width, depth, {}};
          std::vector<float> got = c.start();
          cpu::sgemmPanels(c.ta, s.m, c.alpha, c.A.data(), c.ta ? s.m : s.k, panels, c.beta, got.data(), s.n,
                           variant % 2 ? &pool : nullptr);
          INFO(s.m << "x" << s.n << "x" << s.k << " width " << width << " depth " << depth << " transA=" << c.ta
                   << " transB=" << c.tb);
          c.require(got);
        }
      }
    }
  }
}


TEST_CASE("splitPanelsWork covers every row and panel in whole strips, and splits the panels of a small product") {
  for (size_t threads : {1, 2, 3, 8})
    for (size_t rows : {1, 7, 16, 49, 196, 3136})
      for (size_t panels : {1, 3, 16, 33})
        for (size_t minBlocks : {1, 4}) {
          const cpu::PanelsSplit s = cpu::splitPanelsWork(rows, minBlocks, 2, panels, 32, threads, 1.0);
          INFO(threads << " threads, " << rows << " rows, " << panels << " panels, " << minBlocks << " blocks");
          REQUIRE(s.block > 0);
          REQUIRE(s.block <= rows);
          CHECK((s.block % 8 == 0 || s.block == rows));
          CHECK(s.block <= ((rows + minBlocks - 1) / minBlocks + 7) / 8 * 8);  // no larger than asked
          REQUIRE(s.perRange > 0);
          CHECK(s.ranges * s.perRange >= panels);  // every panel in a range, none empty
          CHECK((s.ranges - 1) * s.perRange < panels);
          if (threads == 1) CHECK(s.ranges == 1);
        }
  // 16 rows by 16 panels of 32 (ResNet's 512-channel 3x3 onto 4x4) on 2 threads: the weights are what costs, so
  // each thread reads half of them; 196 rows by 4 panels (128 channels onto 14x14): the rows are split.
  CHECK(cpu::splitPanelsWork(16, 1, 1, 16, 32, 2, 1.0).ranges == 2);
  const cpu::PanelsSplit rowsSplit = cpu::splitPanelsWork(196, 2, 1, 4, 32, 2, 1.0);
  CHECK(rowsSplit.ranges == 1);
  CHECK(rowsSplit.block == 104);
}

TEST_CASE("sgemm and sgemmPanels compute every partial last strip of rows exactly") {
  // M from 3 (below that a row-at-a-time path runs) to 17: every remainder of the 8-, 6- and 4-row kernels, each
  // multiplied by a tile of just those rows.
  for (size_t m = 3; m <= 17; ++m) {
    const size_t n = 37, k = 19, width = cpu::sgemmNaturalPanelWidth();
    for (int variant = 0; variant < 4; ++variant) {
      const GemmCase c(m, n, k, variant);
      std::vector<float> got = c.start();
      cpu::sgemm(c.ta, c.tb, m, n, k, c.alpha, c.A.data(), c.ta ? m : k, c.B.data(), c.tb ? k : n, c.beta, got.data(),
                 n, nullptr);
      INFO("sgemm " << m << "x" << n << "x" << k << " variant " << variant);
      c.require(got);
      std::vector<float> packed(cpu::panelElements(k, n, width));
      cpu::packPanels(c.tb, c.B.data(), c.tb ? k : n, k, n, width, cpu::kPanelDepth, packed.data());
      const cpu::PanelsB panels{packed.data(), k, n, width, cpu::kPanelDepth, {}};
      got = c.start();
      cpu::sgemmPanels(c.ta, m, c.alpha, c.A.data(), c.ta ? m : k, panels, c.beta, got.data(), n, nullptr);
      INFO("sgemmPanels");
      c.require(got);
    }
  }
}
