// QLinearConv and QLinearMatMul with per-channel weight scales and zero points, groups and padding, against the
// ONNX definition written out here (exact integer sums, then the float requantization with halves to even).
#include "kernel_test_util.h"
#include "kernels/qgemm.h"

#include <cmath>

using namespace ctxkit;
using namespace ctxkit::test;

namespace {

template <typename T> ir::Tensor bytes(ElemType type, ir::Shape shape, const std::vector<T>& v) {
  return ir::Tensor::fromVector(type, std::move(shape), v);
}

// round-half-even(acc * scale) + zero, saturated to uint8; scale = x_scale * w_scale / y_scale in float, as ORT does.
int32_t requantU8(int64_t acc, float scale, int32_t zero) {
  return static_cast<int32_t>(std::clamp(std::nearbyint(static_cast<float>(acc) * scale) + zero, 0.0f, 255.0f));
}

}  // namespace

TEST_CASE("QLinearConv with per-channel weight scales, groups and padding follows the definition") {
  const int64_t C = 4, M = 6, group = 2, H = 5, W = 4, K = 3;
  const int64_t cg = C / group, mg = M / group;
  std::vector<uint8_t> xv(static_cast<size_t>(C * H * W));
  std::vector<int8_t> wv(static_cast<size_t>(M * cg * K * K));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<uint8_t>((i * 37) % 251);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<int8_t>(static_cast<int>((i * 53) % 255) - 127);
  const float xScale = 0.02f, yScale = 0.5f;
  const uint8_t xZero = 121, yZero = 100;
  std::vector<float> wScale{0.01f, 0.02f, 0.015f, 0.03f, 0.005f, 0.012f};
  std::vector<int8_t> wZero{0, 3, -2, 0, 1, -1};
  std::vector<int32_t> bias{100, -50, 0, 7, -300, 42};
  auto x = bytes(ElemType::Uint8, {1, C, H, W}, xv);
  auto w = bytes(ElemType::Int8, {M, cg, K, K}, wv);
  auto xs = floats({}, {xScale}), ys = floats({}, {yScale}), ws = floats({M}, wScale);
  auto xz = bytes(ElemType::Uint8, {}, std::vector<uint8_t>{xZero});
  auto yz = bytes(ElemType::Uint8, {}, std::vector<uint8_t>{yZero});
  auto wz = bytes(ElemType::Int8, {M}, wZero);
  auto b = int32s({M}, bias);
  auto y = Op(OpKind::QLinearConv, 10).i("group", group).ints("pads", {1, 1, 1, 1}).run1({&x, &xs, &xz, &w, &ws, &wz, &ys, &yz, &b});
  REQUIRE(y.shape() == ir::Shape{1, M, H, W});
  for (int64_t m = 0; m < M; ++m)
    for (int64_t oh = 0; oh < H; ++oh)
      for (int64_t ow = 0; ow < W; ++ow) {
        const int64_t g = m / mg;
        int64_t acc = bias[static_cast<size_t>(m)];
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t kh = 0; kh < K; ++kh)
            for (int64_t kw = 0; kw < K; ++kw) {
              int64_t ih = oh + kh - 1, iw = ow + kw - 1;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              int64_t xq = xv[static_cast<size_t>(((g * cg + c) * H + ih) * W + iw)] - xZero;
              int64_t wq = wv[static_cast<size_t>(((m * cg + c) * K + kh) * K + kw)] - wZero[static_cast<size_t>(m)];
              acc += xq * wq;
            }
        float scale = xScale * wScale[static_cast<size_t>(m)] / yScale;
        int32_t want = requantU8(acc, scale, yZero);
        INFO("m " << m << " at " << oh << "," << ow);
        REQUIRE(static_cast<int32_t>(y.dataAs<uint8_t>()[(m * H + oh) * W + ow]) == want);
      }
}

TEST_CASE("MatMulInteger with per-row and per-column zero points, and QLinearMatMul per-column scales") {
  const int64_t M = 3, K = 5, N = 4;
  std::vector<int8_t> av(static_cast<size_t>(M * K));
  std::vector<uint8_t> bv(static_cast<size_t>(K * N));
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<int8_t>(static_cast<int>(i * 29 % 200) - 100);
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<uint8_t>(i * 41 % 256);
  std::vector<int8_t> azv{1, -2, 3};
  std::vector<uint8_t> bzv{128, 0, 7, 255};
  auto a = bytes(ElemType::Int8, {M, K}, av), b = bytes(ElemType::Uint8, {K, N}, bv);
  auto az = bytes(ElemType::Int8, {M}, azv), bz = bytes(ElemType::Uint8, {N}, bzv);
  auto y = Op(OpKind::MatMulInteger, 10).run1({&a, &b, &az, &bz});
  REQUIRE(y.type() == ElemType::Int32);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += (av[static_cast<size_t>(i * K + k)] - azv[static_cast<size_t>(i)]) *
               (bv[static_cast<size_t>(k * N + j)] - bzv[static_cast<size_t>(j)]);
      REQUIRE(y.dataAs<int32_t>()[i * N + j] == acc);
    }
  // QLinearMatMul: a per tensor, b per column.
  auto as = floats({}, {0.1f}), ys = floats({}, {0.75f}), bs = floats({N}, {0.01f, 0.02f, 0.03f, 0.04f});
  auto azs = bytes(ElemType::Int8, {}, std::vector<int8_t>{1});
  auto yz = bytes(ElemType::Int8, {}, std::vector<int8_t>{-3});
  auto q = Op(OpKind::QLinearMatMul, 21).run1({&a, &as, &azs, &b, &bs, &bz, &ys, &yz});
  REQUIRE(q.type() == ElemType::Int8);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += (av[static_cast<size_t>(i * K + k)] - 1) * (bv[static_cast<size_t>(k * N + j)] - bzv[static_cast<size_t>(j)]);
      float scale = 0.1f * (0.01f * static_cast<float>(j + 1)) / 0.75f;
      int32_t want = static_cast<int32_t>(std::clamp(std::nearbyint(static_cast<float>(acc) * scale) - 3.0f, -128.0f, 127.0f));
      REQUIRE(static_cast<int32_t>(q.dataAs<int8_t>()[i * N + j]) == want);
    }
}

TEST_CASE("The 8-bit GEMM kernels agree with the exact sums and the requantization, tails and corrections included") {
  using namespace ctxkit::kernels::detail;
  uint32_t seed = 12345;
  auto next = [&] {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  for (size_t m : {1, 3, 8, 13})
    for (size_t n : {1, 15, 17, 40})
      for (size_t k : {1, 6, 27}) {
        const size_t quads = roundUp(k, kQuad) / kQuad, nPad = roundUp(n, 32);
        std::vector<uint8_t> rows(m * quads * kQuad, 0), src(k * n), panels(quads * nPad * kQuad);
        for (size_t i = 0; i < m; ++i)
          for (size_t t = 0; t < k; ++t) rows[i * quads * kQuad + t] = static_cast<uint8_t>(next());
        for (uint8_t& b : src) b = static_cast<uint8_t>(next());
        std::vector<int32_t> colSums(nPad);
        packQuads(src.data(), n, k, n, nPad, 0x80, panels.data(), colSums.data());
        std::vector<int32_t> rowAdd(m), colAdd(n), rowMul(m), colMul(n);
        std::vector<float> scale(m);
        for (size_t i = 0; i < m; ++i) {
          rowAdd[i] = static_cast<int32_t>(next() % 2001) - 1000;
          rowMul[i] = static_cast<int32_t>(next() % 7) - 3;
          scale[i] = 0.001f * static_cast<float>(1 + next() % 50);
        }
        for (size_t j = 0; j < n; ++j) colAdd[j] = static_cast<int32_t>(next() % 301) - 150;
        for (size_t j = 0; j < n; ++j) colMul[j] = colSums[j];
        for (bool rowsSigned : {true, false})
          for (bool requantize : {true, false}) {
            QGemm g;
            g.rows = rows.data();
            g.rowStride = quads * kQuad;
            g.rowsSigned = rowsSigned;
            g.panels = panels.data();
            g.panelStride = nPad * kQuad;
            g.m = m, g.n = n, g.quads = quads;
            g.rowAdd = rowAdd.data(), g.colAdd = colAdd.data(), g.rowMul = rowMul.data(), g.colMul = colMul.data();
            if (requantize) g.rowScale = scale.data(), g.zero = 7, g.lo = -128, g.hi = 127;
            g.ldOut = n + 3;
            std::vector<int32_t> want(m * g.ldOut, -1);
            for (size_t i = 0; i < m; ++i)
              for (size_t j = 0; j < n; ++j) {
                int64_t sum = rowAdd[i] + colAdd[j] + int64_t{rowMul[i]} * colSums[j];
                for (size_t t = 0; t < k; ++t) {
                  const uint8_t r = rows[i * g.rowStride + t], p = static_cast<uint8_t>(src[t * n + j] ^ 0x80);
                  sum += rowsSigned ? int64_t{static_cast<int8_t>(r)} * p : int64_t{r} * static_cast<int8_t>(p);
                }
                want[i * g.ldOut + j] =
                    requantize ? static_cast<int32_t>(std::clamp(
                                     std::nearbyint(static_cast<float>(sum) * scale[i]) + 7.0f, -128.0f, 127.0f))
                               : static_cast<int32_t>(sum);
              }
            for (const char* kernel : {"avx512vnni", "avx2", "scalar"}) {
              std::vector<int32_t> got32(m * g.ldOut, -1);
              std::vector<int8_t> got8(m * g.ldOut, -1);
              g.out = requantize ? static_cast<void*>(got8.data()) : static_cast<void*>(got32.data());
              if (!qgemmWithKernel(kernel, g)) continue;
              INFO(kernel << " m " << m << " n " << n << " k " << k << " signed rows " << rowsSigned);
              for (size_t i = 0; i < m; ++i)
                for (size_t j = 0; j < g.ldOut; ++j) {
                  const int32_t got = requantize ? got8[i * g.ldOut + j] : got32[i * g.ldOut + j];
                  REQUIRE(got == (j < n ? want[i * g.ldOut + j] : -1));
                }
            }
          }
      }
}
