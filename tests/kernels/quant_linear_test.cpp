// QLinearConv and QLinearMatMul with per-channel weight scales and zero points, groups and padding, against the
// ONNX definition written out here (exact integer sums, then the float requantization with halves to even), and the
// 8-bit GEMM kernels they run on against each other.
#include "kernel_test_util.h"
#include "cpu/qgemm.h"

#include <cmath>

using namespace ctxkit;
using namespace ctxkit::test;

namespace {

template <typename T> ir::Tensor bytes(ElemType type, ir::Shape shape, const std::vector<T>& v) {
  return ir::Tensor::fromVector(type, std::move(shape), v);
}

}  // namespace

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
  using namespace ctxkit::cpu;
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

namespace {

// QLinearConv's output prepared with every input but x constant (the plan worked out once), run once.
ir::Tensor runPrepared(const Op& op, const std::vector<const ir::Tensor*>& inputs) {
  std::vector<kernels::ValueDesc> descs;
  for (size_t i = 0; i < inputs.size(); ++i)
    descs.push_back({inputs[i]->type(), inputs[i]->shape(), i == 0 ? nullptr : inputs[i]});
  auto prepared = kernels::prepare(op.ctx(), descs, 1);
  if (!prepared) FAIL("prepare failed: " << prepared.error().message());
  const kernels::OutputDesc& out = (*prepared)->outputs()[0];
  ir::Tensor y = ir::Tensor::allocate(out.type, out.shape).value();
  ir::Tensor* outs[] = {&y};
  REQUIRE((*prepared)->run(inputs, outs, nullptr).ok());
  return y;
}

}  // namespace

TEST_CASE("QLinearConv follows the definition: per-channel weight scales and zero points, groups, 1 to 3 dims, strides, "
          "dilations, uneven padding, int8 and uint8 either side, evaluated and prepared") {
  struct Case {
    int rank;                     // spatial dims
    int64_t d, h, w, k, stride, dilation, group;
    int64_t padBegin, padEnd;     // on every spatial dim
    bool xSigned, wSigned, wZero;
  };
  const Case cases[] = {
      {2, 1, 9, 11, 3, 2, 1, 1, 1, 1, true, false, true},   {2, 1, 7, 20, 3, 1, 2, 2, 2, 1, false, true, false},
      {2, 1, 6, 5, 1, 1, 1, 1, 0, 0, true, true, true},     {1, 1, 1, 37, 5, 3, 1, 1, 2, 0, false, false, false},
      {3, 3, 4, 5, 2, 1, 1, 1, 1, 0, true, true, true},     {2, 1, 18, 18, 3, 2, 1, 3, 1, 1, false, true, false},
  };
  for (const Case& c : cases) {
    const int64_t C = 3 * c.group, M = 2 * c.group, cg = C / c.group, mg = M / c.group;
    const int64_t kd = c.rank == 3 ? c.k : 1, kh = c.rank >= 2 ? c.k : 1, kw = c.k;
    const int64_t pd = c.rank == 3 ? 1 : 0, ph = c.rank >= 2 ? 1 : 0;
    auto outDim = [&](int64_t in, int64_t k, bool real) {
      return real ? (in + c.padBegin + c.padEnd - c.dilation * (k - 1) - 1) / c.stride + 1 : 1;
    };
    const int64_t od = outDim(c.d, kd, pd), oh = outDim(c.h, kh, ph), ow = outDim(c.w, kw, true);
    std::vector<uint8_t> xv(static_cast<size_t>(C * c.d * c.h * c.w)), wv(static_cast<size_t>(M * cg * kd * kh * kw));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<uint8_t>((i * 73 + 11) % 256);
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<uint8_t>((i * 151 + 5) % 256);
    const ElemType xt = c.xSigned ? ElemType::Int8 : ElemType::Uint8, wt = c.wSigned ? ElemType::Int8 : ElemType::Uint8;
    auto value = [](bool isSigned, uint8_t b) { return isSigned ? int32_t{static_cast<int8_t>(b)} : int32_t{b}; };
    const uint8_t xZero = 37;
    std::vector<uint8_t> wZero(static_cast<size_t>(M));
    for (size_t m = 0; m < wZero.size(); ++m) wZero[m] = c.wZero ? static_cast<uint8_t>(m * 29 + 3) : (c.wSigned ? 0 : 128);
    std::vector<float> wScale(static_cast<size_t>(M));
    for (size_t m = 0; m < wScale.size(); ++m) wScale[m] = 0.002f * static_cast<float>(m + 1);
    std::vector<int32_t> bias(static_cast<size_t>(M));
    for (size_t m = 0; m < bias.size(); ++m) bias[m] = static_cast<int32_t>(m * 97) - 200;
    ir::Shape xShape{1, C}, wShape{M, cg};
    const int64_t xs3[3] = {c.d, c.h, c.w}, ks3[3] = {kd, kh, kw};
    for (int dim = 3 - c.rank; dim < 3; ++dim) xShape.push_back(xs3[dim]), wShape.push_back(ks3[dim]);
    auto x = ir::Tensor::fromVector(xt, xShape, xv), w = ir::Tensor::fromVector(wt, wShape, wv);
    auto xs = floats({}, {0.05f}), ys = floats({}, {0.3f}), ws = floats({M}, wScale);
    auto xz = ir::Tensor::fromVector(xt, {}, std::vector<uint8_t>{xZero});
    auto yz = ir::Tensor::fromVector(xt, {}, std::vector<uint8_t>{c.xSigned ? uint8_t{250} : uint8_t{120}});
    auto wz = ir::Tensor::fromVector(wt, {M}, wZero);
    auto b = int32s({M}, bias);
    Op op(OpKind::QLinearConv, 10);
    op.i("group", c.group)
        .ints("strides", std::vector<int64_t>(static_cast<size_t>(c.rank), c.stride))
        .ints("dilations", std::vector<int64_t>(static_cast<size_t>(c.rank), c.dilation));
    std::vector<int64_t> pads(static_cast<size_t>(c.rank), c.padBegin);
    pads.resize(2 * static_cast<size_t>(c.rank), c.padEnd);
    op.ints("pads", pads);
    const std::vector<const ir::Tensor*> inputs{&x, &xs, &xz, &w, &ws, &wz, &ys, &yz, &b};
    const ir::Tensor evaluated = op.run1(inputs), prepared = runPrepared(op, inputs);
    REQUIRE(static_cast<int64_t>(evaluated.elementCount()) == M * od * oh * ow);
    const int32_t yZero = value(c.xSigned, yz.dataAs<uint8_t>()[0]);
    const int64_t pb[3] = {pd ? c.padBegin : 0, ph ? c.padBegin : 0, c.padBegin};
    const int64_t sd = pd ? c.stride : 1, sh = ph ? c.stride : 1;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t z = 0; z < od; ++z)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t g = m / mg;
            int64_t acc = bias[static_cast<size_t>(m)];
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t a = 0; a < kd; ++a)
                for (int64_t i = 0; i < kh; ++i)
                  for (int64_t j = 0; j < kw; ++j) {
                    const int64_t id = z * sd - pb[0] + a * c.dilation, ih = y * sh - pb[1] + i * c.dilation,
                                  iw = xo * c.stride - pb[2] + j * c.dilation;
                    if (id < 0 || id >= c.d || ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                    const size_t xi = static_cast<size_t>((((g * cg + ci) * c.d + id) * c.h + ih) * c.w + iw);
                    const size_t wi = static_cast<size_t>((((m * cg + ci) * kd + a) * kh + i) * kw + j);
                    acc += int64_t{value(c.xSigned, xv[xi]) - value(c.xSigned, xZero)} *
                           (value(c.wSigned, wv[wi]) - value(c.wSigned, wZero[static_cast<size_t>(m)]));
                  }
            const float scale = 0.05f * wScale[static_cast<size_t>(m)] / 0.3f;
            const float lo = c.xSigned ? -128.0f : 0.0f, hi = c.xSigned ? 127.0f : 255.0f;
            const auto want = static_cast<int32_t>(
                std::clamp(std::nearbyint(static_cast<float>(acc) * scale) + static_cast<float>(yZero), lo, hi));
            const size_t at = static_cast<size_t>(((m * od + z) * oh + y) * ow + xo);
            INFO("case rank " << c.rank << " stride " << c.stride << " at m " << m << " " << z << "," << y << "," << xo);
            REQUIRE(value(c.xSigned, evaluated.dataAs<uint8_t>()[at]) == want);
            REQUIRE(value(c.xSigned, prepared.dataAs<uint8_t>()[at]) == want);
          }
  }
}

TEST_CASE("QLinearConv large enough to split across threads gives the bytes of the serial run") {
  const int64_t C = 32, M = 48, H = 30, W = 30;
  std::vector<uint8_t> xv(static_cast<size_t>(C * H * W));
  std::vector<int8_t> wv(static_cast<size_t>(M * C * 9));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<uint8_t>((i * 193 + 7) % 256);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<int8_t>(static_cast<int>((i * 61) % 255) - 127);
  auto x = bytes(ElemType::Uint8, {1, C, H, W}, xv), w = bytes(ElemType::Int8, {M, C, 3, 3}, wv);
  auto xs = floats({}, {0.02f}), ws = floats({}, {0.003f}), ys = floats({}, {0.4f});
  auto xz = bytes(ElemType::Uint8, {}, std::vector<uint8_t>{128}), yz = bytes(ElemType::Uint8, {}, std::vector<uint8_t>{9});
  auto wz = bytes(ElemType::Int8, {}, std::vector<int8_t>{0});
  Op op(OpKind::QLinearConv, 10);
  op.ints("pads", {1, 1, 1, 1});
  kernels::ThreadPool pool(2);
  const std::vector<const ir::Tensor*> inputs{&x, &xs, &xz, &w, &ws, &wz, &ys, &yz};
  REQUIRE(values<uint8_t>(op.run1(inputs, &pool)) == values<uint8_t>(op.run1(inputs)));
}
