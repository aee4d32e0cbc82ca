// The vectorized window kernels (depthwise Conv, float MaxPool/AveragePool, fused LeakyRelu/HardSigmoid) against
// plain loops written here: strides 1-3, dilations, asymmetric pads, ceil_mode, 1-3 spatial dims, odd widths.
#include "kernel_test_util.h"

#include <array>
#include <optional>
#include <random>

using namespace ctxkit;
using namespace ctxkit::test;

namespace {

// A window over up to 3 spatial dims, padded with leading unit dims to exactly 3 (the reference loops use 3).
struct Geometry {
  std::vector<int64_t> in, kernel, stride, dilation, padBegin, padEnd;
  bool ceilMode = false;

  size_t rank() const { return in.size(); }
  int64_t get(const std::vector<int64_t>& v, size_t i) const {
    size_t lead = 3 - rank();
    return i < lead ? (&v == &in || &v == &kernel || &v == &stride || &v == &dilation ? 1 : 0) : v[i - lead];
  }
  int64_t out(size_t i) const {  // spatial output dim i of 3 (with ONNX's ceil_mode rule)
    int64_t padded = get(in, i) + get(padBegin, i) + get(padEnd, i);
    int64_t span = get(dilation, i) * (get(kernel, i) - 1) + 1;
    int64_t s = get(stride, i);
    int64_t o = (ceilMode ? (padded - span + s - 1) / s : (padded - span) / s) + 1;
    if (ceilMode && (o - 1) * s >= get(in, i) + get(padBegin, i)) --o;
    return o;
  }
  std::vector<int64_t> outShape(int64_t n, int64_t c) const {
    std::vector<int64_t> s{n, c};
    for (size_t i = 3 - rank(); i < 3; ++i) s.push_back(out(i));
    return s;
  }
  std::vector<int64_t> pads() const {
    std::vector<int64_t> p = padBegin;
    p.insert(p.end(), padEnd.begin(), padEnd.end());
    return p;
  }
};

enum class Reduce { Dot, Max, Average, AverageCountPad };

// Reference: per (plane, output position), folds every tap; taps outside the input are skipped (Dot, Max,
// Average) or counted in the divisor when inside the padded extent (AverageCountPad). For Dot, output plane p
// reads the cg input planes of its group, (p / mg) * cg on (mg output planes per group), with weights
// [p][c][tap] and bias[p].
std::vector<float> reference(const std::vector<float>& x, int64_t planes, const Geometry& g, Reduce mode,
                             const std::vector<float>& weights = {}, const std::vector<float>& bias = {},
                             int64_t mg = 1, int64_t cg = 1) {
  std::array<int64_t, 3> in{}, out{}, k{}, s{}, d{}, pb{}, pe{};
  for (size_t i = 0; i < 3; ++i) {
    in[i] = g.get(g.in, i), out[i] = g.out(i), k[i] = g.get(g.kernel, i), s[i] = g.get(g.stride, i);
    d[i] = g.get(g.dilation, i), pb[i] = g.get(g.padBegin, i), pe[i] = g.get(g.padEnd, i);
  }
  const int64_t inSize = in[0] * in[1] * in[2], outSize = out[0] * out[1] * out[2], taps = k[0] * k[1] * k[2];
  std::vector<float> y(static_cast<size_t>(planes * outSize));
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t o0 = 0; o0 < out[0]; ++o0)
      for (int64_t o1 = 0; o1 < out[1]; ++o1)
        for (int64_t o2 = 0; o2 < out[2]; ++o2) {
          double acc = mode == Reduce::Dot && !bias.empty() ? bias[static_cast<size_t>(p)] : 0.0;
          float best = -INFINITY;
          int64_t count = 0;
          for (int64_t ct = 0; ct < cg * taps; ++ct) {
            int64_t c = ct / taps, t = ct % taps;
            int64_t t0 = t / (k[1] * k[2]), t1 = (t / k[2]) % k[1], t2 = t % k[2];
            int64_t i0 = o0 * s[0] - pb[0] + t0 * d[0], i1 = o1 * s[1] - pb[1] + t1 * d[1];
            int64_t i2 = o2 * s[2] - pb[2] + t2 * d[2];
            bool inside = i0 >= 0 && i0 < in[0] && i1 >= 0 && i1 < in[1] && i2 >= 0 && i2 < in[2];
            bool inPadded = i0 >= -pb[0] && i0 < in[0] + pe[0] && i1 >= -pb[1] && i1 < in[1] + pe[1] &&
                            i2 >= -pb[2] && i2 < in[2] + pe[2];
            if (mode == Reduce::AverageCountPad ? inPadded : inside) ++count;
            if (!inside) continue;
            float v = x[static_cast<size_t>(((p / mg) * cg + c) * inSize + (i0 * in[1] + i1) * in[2] + i2)];
            if (mode == Reduce::Dot)
              acc += static_cast<double>(weights[static_cast<size_t>((p * cg + c) * taps + t)]) * v;
            else
              acc += v;
            best = std::max(best, v);
          }
          float r = static_cast<float>(acc);
          if (mode == Reduce::Max) r = best;
          if (mode == Reduce::Average || mode == Reduce::AverageCountPad)
            r = count > 0 ? static_cast<float>(acc / static_cast<double>(count)) : 0.0f;
          y[static_cast<size_t>(p * outSize + (o0 * out[1] + o1) * out[2] + o2)] = r;
        }
  return y;
}

std::vector<float> randomValues(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-2, 2);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

const std::vector<Geometry> kGeometries = {
    // 2-D: 3x3 stride 1 and 2 with pads 1, widths below, at and around the 8- and 32-lane blocks
    {{9, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {{6, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {{7, 41}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {{11, 67}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
    {{10, 16}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}},
    // stride 3, dilation 2, asymmetric pads, a 5x5 and a 1x7 kernel
    {{13, 29}, {3, 3}, {3, 3}, {2, 2}, {2, 0}, {1, 3}},
    {{12, 37}, {5, 5}, {1, 2}, {1, 1}, {2, 2}, {2, 2}},
    {{9, 70}, {1, 7}, {1, 1}, {1, 2}, {0, 6}, {0, 6}},
    // pads beyond the kernel: whole windows (rows and columns) of padding only
    {{3, 4}, {2, 2}, {1, 2}, {1, 1}, {3, 2}, {2, 3}},
    // 1-D and 3-D
    {{50}, {4}, {3}, {1}, {2}, {1}},
    {{5, 6, 19}, {3, 2, 3}, {2, 1, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 0}},
};

// Runs Conv (2 images, c -> m channels in `group` groups, bias, optionally a fused LeakyRelu with `alpha`) on
// one and two threads and compares with the reference loop.
void checkConv(const Geometry& g, int64_t c, int64_t m, int64_t group, std::optional<float> alpha,
               kernels::ThreadPool& pool, std::mt19937& rng) {
  const int64_t n = 2, cg = c / group, mg = m / group;
  std::vector<int64_t> xs{n, c}, ws{m, cg};
  xs.insert(xs.end(), g.in.begin(), g.in.end());
  ws.insert(ws.end(), g.kernel.begin(), g.kernel.end());
  auto xv = randomValues(static_cast<size_t>(product(xs)), rng);
  auto wv = randomValues(static_cast<size_t>(product(ws)), rng);
  auto bv = randomValues(static_cast<size_t>(m), rng);
  auto x = floats(xs, xv), w = floats(ws, wv), b = floats({m}, bv);
  // Reference planes are (image, output channel): weights and biases repeat per image.
  std::vector<float> wAll, bAll;
  for (int64_t i = 0; i < n; ++i) {
    wAll.insert(wAll.end(), wv.begin(), wv.end());
    bAll.insert(bAll.end(), bv.begin(), bv.end());
  }
  std::vector<float> want = reference(xv, n * m, g, Reduce::Dot, wAll, bAll, mg, cg);
  auto op = Op(OpKind::Conv).i("group", group).ints("strides", g.stride).ints("dilations", g.dilation);
  op.ints("pads", g.pads());
  if (alpha) {
    for (float& v : want) v = v < 0 ? *alpha * v : v;
    op.s("activation", "LeakyRelu").fl("activation_params", {*alpha});
  }
  INFO("input " << ir::shapeToString(xs) << " weight " << ir::shapeToString(ws) << " group " << group);
  auto y = op.run1({&x, &w, &b});
  REQUIRE(y.shape() == g.outShape(n, m));
  requireClose(values<float>(y), want, 1e-4f);
  requireClose(values<float>(op.run1({&x, &w, &b}, &pool)), want, 1e-4f);
}

}  // namespace

TEST_CASE("depthwise Conv matches a direct loop: strides 1-3, dilations, pads, multipliers, 1-3 dims") {
  kernels::ThreadPool pool(2);
  std::mt19937 rng(17);
  for (const Geometry& g : kGeometries)
    for (int64_t multiplier : {1, 2}) checkConv(g, 3, 3 * multiplier, 3, std::nullopt, pool, rng);
}

TEST_CASE("few-channel Conv (direct path) and wider groups (GEMM path) match a direct loop") {
  kernels::ThreadPool pool(2);
  std::mt19937 rng(23);
  // (input channels, output channels, group): channels per group 3, 16, 64 (direct) and 65 (im2col + GEMM);
  // output channels per group 4 and 8 (four filters at a time), 3 and 5 (one at a time)
  const std::vector<std::array<int64_t, 3>> shapes{{3, 4, 1}, {32, 6, 2}, {64, 8, 1}, {65, 5, 1}};
  for (const Geometry& g : kGeometries)
    for (auto [c, m, group] : shapes) checkConv(g, c, m, group, 0.125f, pool, rng);
}

// Depthwise Convs whose rows go four at a time (vecTapsDotRows): 1-6 and 13 output rows, widths 8-16 (8-lane
// blocks) and 17-41 (16-lane blocks, the last moved back), 3x3 to 7x7 and 9x9 (81 taps: row by row) kernels.
const std::vector<Geometry> kRowBandGeometries = {
    {{1, 8}, {1, 3}, {1, 1}, {1, 1}, {0, 1}, {0, 1}},
    {{2, 12}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {{3, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {{5, 17}, {3, 3}, {1, 1}, {1, 1}, {0, 1}, {2, 1}},
    {{13, 28}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {{14, 14}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}},
    {{28, 28}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}},
    {{23, 81}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}},
    {{11, 33}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}},
    {{12, 25}, {3, 3}, {1, 1}, {3, 2}, {3, 1}, {3, 2}},
    {{9, 20}, {9, 9}, {1, 1}, {1, 1}, {4, 4}, {4, 4}},
};

TEST_CASE("depthwise Conv on mid-size maps (rows four at a time) matches a direct loop, 19 channels, 1 and 2 threads") {
  kernels::ThreadPool pool(2);
  std::mt19937 rng(31);
  for (const Geometry& g : kRowBandGeometries) {
    checkConv(g, 19, 19, 19, std::nullopt, pool, rng);
    checkConv(g, 19, 19, 19, 0.25f, pool, rng);
  }
}

TEST_CASE("depthwise Conv on a mid-size map without bias") {
  std::mt19937 rng(7);
  Geometry g{{6, 20}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
  auto xv = randomValues(5 * 120, rng), wv = randomValues(5 * 9, rng);
  auto x = floats({1, 5, 6, 20}, xv), w = floats({5, 1, 3, 3}, wv);
  auto y = Op(OpKind::Conv).i("group", 5).ints("pads", g.pads()).run1({&x, &w});
  REQUIRE(y.shape() == ir::Shape{1, 5, 6, 20});
  requireClose(values<float>(y), reference(xv, 5, g, Reduce::Dot, wv), 1e-4f);
}

TEST_CASE("depthwise Conv with auto_pad SAME_UPPER and no bias") {
  std::mt19937 rng(5);
  Geometry g{{7, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 0}, {1, 1}};  // SAME_UPPER pads for these sizes
  auto xv = randomValues(4 * 70, rng), wv = randomValues(4 * 9, rng);
  auto x = floats({1, 4, 7, 10}, xv), w = floats({4, 1, 3, 3}, wv);
  auto y = Op(OpKind::Conv).i("group", 4).ints("strides", {2, 2}).s("auto_pad", "SAME_UPPER").run1({&x, &w});
  REQUIRE(y.shape() == ir::Shape{1, 4, 4, 5});
  requireClose(values<float>(y), reference(xv, 4, g, Reduce::Dot, wv), 1e-4f);
}

// Pooling's own shapes (2-D float pools run a block of planes at once, see pool.cpp): maps of 1x1, 2x3 and 7x7,
// SqueezeNet's and GoogLeNet's 3x3 stride-2 pools (ceil mode adds a column and row past the input), Inception's 3x3
// stride-1 averages on 9x9 and a 9x9 window over it, a 2x2 stride 2 pool needing no padded copy, a one-row kernel at
// column stride 2 over an unpadded map (its reads must stay inside the input), a stride of 4, and row stride 2 with a
// one-row kernel.
const std::vector<Geometry> kPoolGeometries = {
    {{1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},  {{1, 1}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {{2, 3}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},  {{2, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
    {{7, 7}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}},  {{7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {{47, 47}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}}, {{6, 6}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}},
    {{9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},  {{9, 9}, {9, 9}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
    {{8, 12}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}}, {{3, 16}, {1, 2}, {1, 2}, {1, 1}, {0, 0}, {0, 0}},
    {{17, 23}, {3, 5}, {4, 4}, {1, 2}, {1, 2}, {0, 1}}, {{9, 20}, {1, 3}, {2, 1}, {1, 1}, {0, 1}, {0, 1}},
    {{5, 4}, {2, 3}, {2, 2}, {3, 1}, {1, 0}, {2, 2}},
};

TEST_CASE("float MaxPool and AveragePool match a direct loop: strides, dilations, pads, ceil_mode") {
  kernels::ThreadPool pool(2);
  std::mt19937 rng(29);
  std::vector<Geometry> geometries = kGeometries;
  geometries.insert(geometries.end(), kPoolGeometries.begin(), kPoolGeometries.end());
  // Tiny maps with many channels: blocks of many planes, and more planes than one block holds.
  geometries.push_back({{2, 3}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}});
  geometries.push_back({{1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}});
  for (size_t gi = 0; gi < geometries.size(); ++gi) {
    Geometry g = geometries[gi];
    for (bool ceil : {false, true}) {
      g.ceilMode = ceil;
      const int64_t n = 2, c = gi + 2 < geometries.size() ? 3 : 1100;
      std::vector<int64_t> xs{n, c};
      xs.insert(xs.end(), g.in.begin(), g.in.end());
      auto xv = randomValues(static_cast<size_t>(product(xs)), rng);
      auto x = floats(xs, xv);
      INFO("input " << ir::shapeToString(xs) << " kernel " << ir::shapeToString(g.kernel) << " ceil_mode " << ceil);
      auto maxOp = Op(OpKind::MaxPool)
                       .ints("kernel_shape", g.kernel)
                       .ints("strides", g.stride)
                       .ints("dilations", g.dilation)
                       .ints("pads", g.pads())
                       .i("ceil_mode", ceil);
      auto y = maxOp.run1({&x});
      REQUIRE(y.shape() == g.outShape(n, c));
      auto wantMax = reference(xv, n * c, g, Reduce::Max);
      // Max is exact; windows of padding only give -inf.
      REQUIRE(values<float>(y) == wantMax);
      REQUIRE(values<float>(maxOp.run1({&x}, &pool)) == wantMax);
      for (int64_t countPad : {0, 1}) {
        INFO("count_include_pad " << countPad);
        auto avgOp = Op(OpKind::AveragePool, 19)
                         .ints("kernel_shape", g.kernel)
                         .ints("strides", g.stride)
                         .ints("dilations", g.dilation)
                         .ints("pads", g.pads())
                         .i("ceil_mode", ceil)
                         .i("count_include_pad", countPad);
        auto ya = avgOp.run1({&x}, &pool);
        REQUIRE(ya.shape() == g.outShape(n, c));
        requireClose(values<float>(ya), reference(xv, n * c, g, countPad ? Reduce::AverageCountPad : Reduce::Average),
                     1e-5f);
      }
    }
  }
}

TEST_CASE("MaxPool keeps -inf and skips NaN like the scalar kernel") {
  auto x = floats({1, 1, 1, 10}, {-INFINITY, -INFINITY, NAN, 1, NAN, NAN, 2, -3, -INFINITY, 0});
  auto y = Op(OpKind::MaxPool).ints("kernel_shape", {1, 2}).ints("strides", {1, 2}).run1({&x});
  auto v = values<float>(y);
  REQUIRE(v.size() == 5);
  REQUIRE(v[0] == -INFINITY);
  REQUIRE(v[1] == 1);
  REQUIRE(v[2] == -INFINITY);  // both taps NaN: nothing beats the starting -inf
  REQUIRE(v[3] == 2);
  REQUIRE(v[4] == 0);
}

TEST_CASE("fused LeakyRelu and HardSigmoid epilogues on Conv match the activation applied after it") {
  std::mt19937 rng(41);
  Geometry g{{5, 23}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
  auto xv = randomValues(2 * 5 * 23, rng), wv = randomValues(2 * 9, rng), bv = randomValues(2, rng);
  auto x = floats({1, 2, 5, 23}, xv), w = floats({2, 1, 3, 3}, wv), b = floats({2}, bv);
  auto conv = reference(xv, 2, g, Reduce::Dot, wv, bv);
  auto base = Op(OpKind::Conv).i("group", 2).ints("pads", {1, 1, 1, 1});
  std::vector<float> leaky = conv, hard = conv;
  size_t negatives = 0, clipped = 0;
  for (float& v : leaky) {
    negatives += v < 0;
    v = v < 0 ? 0.25f * v : v;
  }
  for (float& v : hard) {
    float t = 0.3f * v + 0.4f;
    clipped += t < 0 || t > 1;
    v = std::max(0.0f, std::min(1.0f, t));
  }
  REQUIRE(negatives > 10);  // both branches of each activation are exercised
  REQUIRE(clipped > 10);
  auto yl = Op(base).s("activation", "LeakyRelu").fl("activation_params", {0.25f}).run1({&x, &w, &b});
  requireClose(values<float>(yl), leaky, 1e-4f);
  auto yh = Op(base).s("activation", "HardSigmoid").fl("activation_params", {0.3f, 0.4f}).run1({&x, &w, &b});
  requireClose(values<float>(yh), hard, 1e-4f);
  // A standard (grouped but not depthwise) Conv takes the same epilogue after its GEMM.
  auto x2 = floats({1, 2, 5, 23}, xv);
  auto w2 = floats({1, 2, 1, 1}, {1.0f, -1.0f});
  auto y2 = Op(OpKind::Conv).s("activation", "LeakyRelu").fl("activation_params", {0.5f}).run1({&x2, &w2});
  std::vector<float> want2(115);
  for (size_t i = 0; i < want2.size(); ++i) {
    float d = xv[i] - xv[i + 115];
    want2[i] = d < 0 ? 0.5f * d : d;
  }
  requireClose(values<float>(y2), want2);
}
