// Conv and pooling: padding modes, strides, dilations, groups, ceil_mode, count_include_pad, Indices.
#include "kernel_test_util.h"

#include <random>

using namespace ctxkit;
using namespace ctxkit::test;

namespace {

std::vector<float> iota(size_t n, float start = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// Direct 2-D convolution for checking (NCHW, explicit pads).
std::vector<float> naiveConv2d(const std::vector<float>& x, ir::Shape xs, const std::vector<float>& w, ir::Shape ws,
                               int64_t group, std::array<int64_t, 2> stride, std::array<int64_t, 2> dil,
                               std::array<int64_t, 4> pads, ir::Shape& outShape) {
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], M = ws[0], KH = ws[2], KW = ws[3];
  int64_t OH = (H + pads[0] + pads[2] - dil[0] * (KH - 1) - 1) / stride[0] + 1;
  int64_t OW = (W + pads[1] + pads[3] - dil[1] * (KW - 1) - 1) / stride[1] + 1;
  outShape = {N, M, OH, OW};
  std::vector<float> y(static_cast<size_t>(N * M * OH * OW), 0);
  int64_t cg = C / group, mg = M / group;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          int64_t g = m / mg;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * stride[0] - pads[0] + kh * dil[0], iw = ow * stride[1] - pads[1] + kw * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += x[static_cast<size_t>(((n * C + g * cg + c) * H + ih) * W + iw)] *
                       w[static_cast<size_t>(((m * cg + c) * KH + kh) * KW + kw)];
              }
          y[static_cast<size_t>(((n * M + m) * OH + oh) * OW + ow)] = static_cast<float>(acc);
        }
  return y;
}

// Runs each case's Conv serially and on two threads against naiveConv2d.
struct ConvCase {
  ir::Shape xs, ws;
  int64_t group;
  std::array<int64_t, 2> stride, dil;
  std::array<int64_t, 4> pads;
};
void checkConvCases(const std::vector<ConvCase>& cases, unsigned seed) {
  kernels::ThreadPool pool(2);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const ConvCase& c : cases) {
    std::vector<float> xv(*ir::elementCount(c.xs)), wv(*ir::elementCount(c.ws));
    for (float& v : xv) v = dist(rng);
    for (float& v : wv) v = dist(rng);
    ir::Shape outShape;
    auto want = naiveConv2d(xv, c.xs, wv, c.ws, c.group, c.stride, c.dil, c.pads, outShape);
    auto x = floats(c.xs, xv), w = floats(c.ws, wv);
    Op op(OpKind::Conv);
    op.i("group", c.group).ints("strides", {c.stride[0], c.stride[1]}).ints("dilations", {c.dil[0], c.dil[1]});
    op.ints("pads", {c.pads[0], c.pads[1], c.pads[2], c.pads[3]});
    // Prepared with the weight constant, as a compiled program runs it: a dense Conv then multiplies by the weight
    // packed in panels (kernels::convOnPanels), another path than the one-shot evaluate's.
    kernels::ValueDesc xd{ir::ElemType::Float, c.xs, nullptr}, wd{ir::ElemType::Float, c.ws, &w};
    std::vector<kernels::ValueDesc> descs{xd, wd};
    auto prepared = kernels::prepare(op.ctx(), descs, 1);
    REQUIRE(prepared);
    for (kernels::ThreadPool* p : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
      auto y = op.run1({&x, &w}, p);
      REQUIRE(y.shape() == outShape);
      requireClose(values<float>(y), want, 1e-4f);
      auto z = ir::Tensor::allocate(ir::ElemType::Float, outShape);
      REQUIRE(z);
      std::vector<const ir::Tensor*> ins{&x, &w};
      std::vector<ir::Tensor*> outs{&*z};
      REQUIRE((*prepared)->run(ins, outs, p));
      requireClose(values<float>(*z), want, 1e-4f);
    }
  }
}

}  // namespace

TEST_CASE("Conv 2-D with pads, bias and the 1x1 fast path") {
  auto x = floats({1, 1, 3, 3}, iota(9));
  auto w = floats({1, 1, 2, 2}, {1, 1, 1, 1});
  auto y = Op(OpKind::Conv).run1({&x, &w});
  REQUIRE(y.shape() == ir::Shape{1, 1, 2, 2});
  requireClose(values<float>(y), {8, 12, 20, 24});
  auto b = floats({1}, {100});
  auto yp = Op(OpKind::Conv).ints("pads", {1, 1, 0, 0}).run1({&x, &w, &b});
  REQUIRE(yp.shape() == ir::Shape{1, 1, 3, 3});
  requireClose(values<float>(yp), {100, 101, 103, 103, 108, 112, 109, 120, 124});
  auto w1 = floats({2, 1, 1, 1}, {2, -1});
  auto y1 = Op(OpKind::Conv).run1({&x, &w1});
  REQUIRE(y1.shape() == ir::Shape{1, 2, 3, 3});
  auto v1 = values<float>(y1);
  REQUIRE(v1[4] == 8);
  REQUIRE(v1[9 + 4] == -4);
}

TEST_CASE("Conv matches a direct loop: strides, dilations, groups, asymmetric pads, threads") {
  checkConvCases({
      {{2, 4, 9, 8}, {6, 2, 3, 3}, 2, {2, 1}, {1, 2}, {1, 0, 2, 1}},
      {{1, 3, 7, 7}, {5, 3, 3, 2}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      {{3, 8, 6, 5}, {8, 1, 3, 3}, 8, {1, 2}, {1, 1}, {1, 1, 1, 1}},  // depthwise
      {{1, 16, 20, 20}, {32, 16, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      {{1, 2, 12, 12}, {4, 2, 5, 5}, 1, {3, 3}, {2, 1}, {2, 2, 2, 2}},
      {{1, 16, 130, 131}, {4, 16, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},  // im2col in column chunks
      {{2, 6, 9, 9}, {4, 3, 3, 3}, 2, {2, 2}, {1, 1}, {0, 1, 1, 0}},
                 },
                 3);
}

TEST_CASE("depthwise Conv onto small maps (channels in vectors): odd channel counts, stride, dilation, pads") {
  // 8x8 or smaller outputs take the channel-vector path: channel counts below, at and past a block of 16, a 5x5
  // stride-2 kernel as MobileNetV3's, dilation, asymmetric pads, a 1x1 output, batch 2; and a larger map (9x9 = 81
  // outputs) that stays on the direct path.
  checkConvCases({
                     {{1, 37, 8, 8}, {37, 1, 5, 5}, 37, {2, 2}, {1, 1}, {2, 2, 2, 2}},
                     {{2, 16, 7, 7}, {16, 1, 3, 3}, 16, {1, 1}, {1, 1}, {1, 1, 1, 1}},
                     {{1, 5, 6, 5}, {5, 1, 3, 3}, 5, {1, 2}, {2, 1}, {0, 2, 1, 0}},
                     {{1, 33, 3, 3}, {33, 1, 3, 3}, 33, {1, 1}, {1, 1}, {0, 0, 0, 0}},  // a 1x1 output
                     {{1, 20, 9, 9}, {20, 1, 3, 3}, 20, {1, 1}, {1, 1}, {1, 1, 1, 1}},  // 81 outputs: direct path
                 },
                 11);
}

TEST_CASE("dense Conv on packed weight panels: odd channels, small maps, pads on every side, stride, dilation") {
  // Channel counts that are not multiples of the panel width or the micro-kernel's rows; a 1x1 output; batch 2.
  checkConvCases({
                     {{2, 70, 7, 7}, {37, 70, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},
                     {{1, 67, 14, 13}, {15, 67, 3, 3}, 1, {1, 1}, {1, 1}, {1, 2, 0, 1}},  // (16 outputs: Winograd)
                     {{1, 45, 9, 11}, {19, 45, 3, 3}, 1, {2, 2}, {1, 1}, {0, 1, 1, 0}},
                     {{2, 40, 3, 3}, {9, 40, 3, 3}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},
                     {{1, 33, 12, 12}, {65, 33, 3, 3}, 1, {1, 1}, {2, 2}, {2, 2, 2, 2}},
                     {{1, 300, 5, 5}, {130, 300, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},
                     {{2, 150, 5, 4}, {130, 150, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},  // a 1x1 heavier than its input
                 },
                 5);
}

TEST_CASE("Conv leaves out the taps that land in the padding: dilations, pads, strides, groups") {
  // More than 64 input channels per group, so these go through im2col + GEMM, which multiplies each band of output
  // rows by only the taps that reach the input for it.
  checkConvCases({
      {{1, 72, 20, 20}, {16, 72, 3, 3}, 1, {1, 1}, {36, 36}, {36, 36, 36, 36}},  // the centre tap alone
      {{1, 72, 20, 20}, {8, 72, 3, 3}, 1, {1, 1}, {6, 6}, {6, 6, 6, 6}},
      {{1, 72, 11, 13}, {8, 72, 3, 3}, 1, {2, 2}, {2, 2}, {2, 2, 2, 2}},
      {{1, 72, 9, 10}, {8, 72, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{1, 72, 17, 15}, {8, 72, 3, 3}, 1, {1, 2}, {12, 2}, {12, 1, 9, 3}},        // asymmetric everything
      {{2, 144, 7, 7}, {8, 72, 3, 3}, 2, {1, 1}, {6, 6}, {6, 6, 6, 6}},           // groups, jobs on threads
      {{1, 72, 5, 6}, {4, 72, 3, 3}, 1, {1, 1}, {2, 2}, {8, 1, 2, 1}},            // rows with no tap inside
      {{1, 72, 1, 9}, {4, 72, 1, 5}, 1, {1, 3}, {1, 4}, {0, 8, 0, 8}},            // one row
      {{1, 72, 12, 12}, {4, 72, 5, 3}, 1, {3, 1}, {5, 7}, {10, 7, 4, 7}},
  }, 5);
}

TEST_CASE("Conv auto_pad modes, 1-D and 3-D") {
  auto x = floats({1, 1, 5}, {1, 2, 3, 4, 5});
  auto w = floats({1, 1, 2}, {1, 10});
  // SAME_UPPER: out 3 with stride 2, total pad 1 at the end.
  auto up = Op(OpKind::Conv).s("auto_pad", "SAME_UPPER").ints("strides", {2}).run1({&x, &w});
  requireClose(values<float>(up), {21, 43, 5});
  auto lo = Op(OpKind::Conv).s("auto_pad", "SAME_LOWER").ints("strides", {2}).run1({&x, &w});
  requireClose(values<float>(lo), {10, 32, 54});
  auto valid = Op(OpKind::Conv).s("auto_pad", "VALID").ints("strides", {2}).run1({&x, &w});
  requireClose(values<float>(valid), {21, 43});
  auto x3 = floats({1, 1, 2, 2, 2}, iota(8));
  auto w3 = floats({1, 1, 2, 2, 2}, std::vector<float>(8, 1));
  auto y3 = Op(OpKind::Conv).run1({&x3, &w3});
  REQUIRE(y3.shape() == ir::Shape{1, 1, 1, 1, 1});
  requireClose(values<float>(y3), {28});
}

TEST_CASE("Conv rejects bad shapes and attributes") {
  auto x = floats({1, 2, 3, 3}, iota(18));
  auto w = floats({1, 3, 2, 2}, iota(12));
  Error e = Op(OpKind::Conv).fails({&x, &w});
  REQUIRE(e.code() == ErrorCode::InvalidGraph);
  REQUIRE(e.message() == "node 'n1' (Conv): input 0 has 2 channels but weight shape 1x3x2x2 with group 1 expects 3");
  auto w2 = floats({3, 3}, iota(9));
  REQUIRE(Op(OpKind::Conv).fails({&x, &w2}).message() ==
          "node 'n1' (Conv): input 1 has shape 3x3 but expected rank 4 like input 0");
  auto wk = floats({1, 2, 2, 2}, iota(8));
  REQUIRE(Op(OpKind::Conv).s("auto_pad", "SAME").fails({&x, &wk}).code() == ErrorCode::InvalidGraph);
  REQUIRE(Op(OpKind::Conv).ints("strides", {0, 1}).fails({&x, &wk}).code() == ErrorCode::InvalidGraph);
  auto big = floats({1, 2, 5, 5}, iota(50));
  REQUIRE(Op(OpKind::Conv).fails({&x, &big}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("MaxPool with pads, strides, ceil_mode and Indices") {
  auto x = floats({1, 1, 4, 4}, iota(16));
  auto y = Op(OpKind::MaxPool).ints("kernel_shape", {2, 2}).ints("strides", {2, 2}).run1({&x});
  requireClose(values<float>(y), {5, 7, 13, 15});
  auto c = Op(OpKind::MaxPool).ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).i("ceil_mode", 1).run1({&x});
  REQUIRE(c.shape() == ir::Shape{1, 1, 2, 2});
  requireClose(values<float>(c), {10, 11, 14, 15});
  auto p = Op(OpKind::MaxPool).ints("kernel_shape", {2, 2}).ints("pads", {1, 1, 1, 1}).ints("strides", {2, 2});
  auto yp = p.run1({&x});
  REQUIRE(yp.shape() == ir::Shape{1, 1, 3, 3});
  requireClose(values<float>(yp), {0, 2, 3, 8, 10, 11, 12, 14, 15});
  auto both = p.eval({&x}, 2);
  REQUIRE(both.isOk());
  REQUIRE(values<int64_t>((*both)[1]) == std::vector<int64_t>{0, 2, 3, 8, 10, 11, 12, 14, 15});
  auto colMajor = Op(OpKind::MaxPool).ints("kernel_shape", {2, 2}).ints("strides", {2, 2}).i("storage_order", 1);
  auto cm = colMajor.eval({&x}, 2);
  REQUIRE(cm.isOk());
  REQUIRE(values<int64_t>((*cm)[1]) == std::vector<int64_t>{5, 13, 7, 15});
  auto d = Op(OpKind::MaxPool).ints("kernel_shape", {2, 2}).ints("dilations", {2, 2}).run1({&x});
  requireClose(values<float>(d), {10, 11, 14, 15});
  auto i8 = typed<int8_t>(ElemType::Int8, {1, 1, 1, 4}, {-5, 3, -1, -7});
  auto yi = Op(OpKind::MaxPool).ints("kernel_shape", {1, 2}).run1({&i8});
  REQUIRE(values<int8_t>(yi) == std::vector<int8_t>{3, 3, -1});
}

TEST_CASE("AveragePool count_include_pad and ceil_mode divisors") {
  auto x = floats({1, 1, 3, 3}, iota(9, 1));
  auto base = [] {
    return Op(OpKind::AveragePool).ints("kernel_shape", {2, 2}).ints("pads", {1, 1, 1, 1}).ints("strides", {2, 2});
  };
  auto ex = base().run1({&x});
  REQUIRE(ex.shape() == ir::Shape{1, 1, 2, 2});
  requireClose(values<float>(ex), {1, 2.5f, 5.5f, 7});
  auto in = base().i("count_include_pad", 1).run1({&x});
  requireClose(values<float>(in), {0.25f, 1.25f, 2.75f, 7});
  // ceil_mode adds a partial last window that is averaged over its valid part.
  auto c = Op(OpKind::AveragePool).ints("kernel_shape", {2, 2}).ints("strides", {2, 2}).i("ceil_mode", 1).run1({&x});
  REQUIRE(c.shape() == ir::Shape{1, 1, 2, 2});
  requireClose(values<float>(c), {3, 4.5f, 7.5f, 9});
  auto g = Op(OpKind::GlobalAveragePool).run1({&x});
  REQUIRE(g.shape() == ir::Shape{1, 1, 1, 1});
  requireClose(values<float>(g), {5});
  REQUIRE(Op(OpKind::AveragePool).fails({&x}).message() ==
          "node 'n1' (AveragePool): required attribute kernel_shape is missing");
}
