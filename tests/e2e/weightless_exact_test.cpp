// Weightless contexts compute at load the constants a model computes by exact arithmetic (docs/weight-sharing.md,
// "Derived weights"): an anchors-like grid (Range, Add, Div, Expand, Concat, Mul), an attention-like mask (Floor, Sub,
// Equal, Where) and a float16 BatchNorm folded into a Conv. Each model's output is checked against a reference computed
// here, the weightless run must be byte for byte the ordinary compile's, and the weightless .bin must not hold the
// computed bytes. A crafted Range bound in the .bin is refused naming the .bin and the op.
#include "cpu/convert.h"
#include "format/container.h"
#include "ir/npy.h"
#include "onnx_io/onnx_io.h"
#include "samples/graph_builder.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string bytesOf(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<float> ramp(size_t n, float lo, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = lo + step * static_cast<float>(i % 97);
  return v;
}

// A model with one float32 input and one output, its input data and the expected output (computed here).
struct Case {
  std::string stem;
  ir::Model model;
  ir::Tensor x, y;
  double atol = 1e-5;
};

// The bytes a weightless .bin stores itself (weights not found in a source model), and its largest such weight.
std::pair<uint64_t, uint64_t> storedBytes(const fs::path& bin) {
  auto view = format::ContainerView::openFile(bin);
  REQUIRE(view);
  uint64_t total = 0, largest = 0;
  for (const auto& w : view->weights())
    if (!w.inSource()) {
      total += w.size;
      largest = std::max(largest, w.size);
    }
  return {total, largest};
}

// Compiles `c` ordinarily and weightless for `target`, runs both against the expected output, and checks that the
// outputs are byte-equal and that the weightless .bin stores no weight larger than 4 KiB (or, `atLoad` false, that it
// stores the computed constant as the ordinary one does). Returns the weightless output directory (the source model
// and context beside it).
fs::path checkCase(const TempDir& dir, const Case& c, const char* target, bool atLoad = true) {
  INFO(c.stem << " on " << target);
  const fs::path data = dir / (c.stem + "_in"), expected = dir / (c.stem + "_expected");
  fs::create_directories(data);
  fs::create_directories(expected);
  REQUIRE(ir::saveNpy(c.x, data / "input_0.npy"));
  REQUIRE(ir::saveNpy(c.y, expected / "output_0.npy"));
  const fs::path src = dir / (c.stem + "_" + target), full = dir / (c.stem + "_" + target + "_full");
  fs::create_directories(src);
  REQUIRE(onnx_io::saveModel(c.model, src / (c.stem + ".onnx")));
  const std::string model = (src / (c.stem + ".onnx")).string();
  testing::runToolOk(CTXKIT_CTXGEN, {model, "--target", target, "-o", full.string(), "-q"});
  testing::runToolOk(CTXKIT_CTXGEN, {model, "--weightless", "--target", target, "-o", src.string(), "-q"});
  const auto [total, largest] = storedBytes(src / (c.stem + "_ctxkit.bin"));
  const auto [fullTotal, fullLargest] = storedBytes(full / (c.stem + "_ctxkit.bin"));
  CHECK(fullLargest > 4096);  // the ordinary compile stores the computed constant
  if (atLoad) {
    CHECK(largest <= 4096);  // the weightless one computes it at load
    CHECK(total < fullTotal);
  } else {
    CHECK(largest == fullLargest);
  }
  const fs::path rFull = dir / (c.stem + "_" + target + "_r_full"), rWl = dir / (c.stem + "_" + target + "_r_wl");
  for (const auto& [ctx, out] : {std::pair{full / (c.stem + "_ctx.onnx"), rFull},
                                 std::pair{src / (c.stem + "_ctx.onnx"), rWl}}) {
    auto r = runTool(CTXKIT_CTXRUN, {ctx.string(), "--inputs", data.string(), "--expected", expected.string(), "--atol",
                                     std::to_string(c.atol), "--output-dir", out.string()});
    INFO(r.out << r.err);
    CHECK(r.exitCode == 0);
  }
  const std::string a = bytesOf(rFull / "output_0.npy");
  CHECK(!a.empty());
  CHECK(a == bytesOf(rWl / "output_0.npy"));
  return src;
}

// y = x * 0.5 + anchors: for 1200 positions i, boxes [c - 1/16, c / 2 - 1/16, c + 1/16, c / 2 + 1/16] with centres
// c = (i + 0.5) / 1200, for both images of a batch of 2, built as exporters write anchors: Range -> Add -> Div ->
// Unsqueeze -> Concat -> Mul -> Add -> Expand. Range's limit is Add(599.75, 599.75) (folded, 4 bytes, stored in the
// .bin: the hostile case crafts it); Range's result (4.7 KiB) is computed at load.
Case anchorsCase() {
  constexpr int64_t P = 1200;
  samples::GraphBuilder b("anchors", "");
  b.addInput("x", {2, P, 4});
  b.addOutput("y", {2, P, 4});
  b.addFloats("zero", {}, {0});
  b.addFloats("half_limit", {}, {599.75f});
  b.addFloats("one", {}, {1});
  b.addFloats("half", {}, {0.5f});
  b.addFloats("count", {}, {static_cast<float>(P)});
  b.addFloats("scales", {4}, {1, 0.5f, 1, 0.5f});
  b.addFloats("offsets", {4}, {-0.0625f, -0.0625f, 0.0625f, 0.0625f});
  b.addNode("limit", "Add", {"half_limit", "half_limit"});
  b.addNode("range", "Range", {"zero", "limit", "one"});
  b.addNode("shifted", "Add", {"range", "half"});
  b.addNode("centres", "Div", {"shifted", "count"});
  b.addNode("column", "Unsqueeze", {"centres", b.addInt64s("axis1", {1}, {1})});
  b.addNode("centres4", "Concat", {"column", "column", "column", "column"}, {ir::Attribute::makeInt("axis", 1)});
  b.addNode("scaled", "Mul", {"centres4", "scales"});
  b.addNode("boxes", "Add", {"scaled", "offsets"});
  b.addNode("anchors", "Expand", {"boxes", b.addInt64s("batch", {3}, {2, 1, 1})});
  b.addNode("xs", "Mul", {"x", "half"});
  b.addNode("sum", "Add", {"xs", "anchors"}, {}, "y");
  Case c{"anchors", std::move(b).finish("weightless anchors"), {}, {}};
  const std::vector<float> x = ramp(2 * P * 4, -1, 0.02f);
  std::vector<float> y(2 * P * 4);
  const double scales[4] = {1, 0.5, 1, 0.5}, offsets[4] = {-0.0625, -0.0625, 0.0625, 0.0625};
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < P; ++i)
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t at = (n * P + i) * 4 + k;
        y[at] = static_cast<float>(double{x[at]} * 0.5 + (i + 0.5) / P * scales[k] + offsets[k]);
      }
  c.x = ir::Tensor::fromVector(ir::ElemType::Float, {2, P, 4}, x);
  c.y = ir::Tensor::fromVector(ir::ElemType::Float, {2, P, 4}, y);
  return c;
}

// y = x + mask: mask[i][j] = 0 where positions i and j fall in the same window of 8, else -100, built as Swin's
// shifted-window mask is: Range -> Div -> Floor -> Sub of the two broadcasts -> Equal 0 -> Where.
Case maskCase() {
  constexpr int64_t N = 64;
  samples::GraphBuilder b("mask", "");
  b.addInput("x", {1, N, N});
  b.addOutput("y", {1, N, N});
  b.addFloats("zero", {}, {0});
  b.addFloats("n", {}, {static_cast<float>(N)});
  b.addFloats("one", {}, {1});
  b.addFloats("window", {}, {8});
  b.addFloats("blocked", {}, {-100});
  b.addNode("range", "Range", {"zero", "n", "one"});
  b.addNode("scaled", "Div", {"range", "window"});
  b.addNode("ids", "Floor", {"scaled"});
  b.addNode("col", "Unsqueeze", {"ids", b.addInt64s("axis1", {1}, {1})});
  b.addNode("row", "Unsqueeze", {"ids", b.addInt64s("axis0", {1}, {0})});
  b.addNode("diff", "Sub", {"col", "row"});
  b.addNode("same", "Equal", {"diff", "zero"});
  b.addNode("mask", "Where", {"same", "zero", "blocked"});
  b.addNode("sum", "Add", {"x", "mask"}, {}, "y");
  Case c{"mask", std::move(b).finish("weightless mask"), {}, {}};
  const std::vector<float> x = ramp(N * N, -2, 0.04f);
  std::vector<float> y(N * N);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = x[i * N + j] + (i / 8 == j / 8 ? 0.0f : -100.0f);
  c.x = ir::Tensor::fromVector(ir::ElemType::Float, {1, N, N}, x);
  c.y = ir::Tensor::fromVector(ir::ElemType::Float, {1, N, N}, y);
  return c;
}

// y = x + Exp(Range(0, 2000) / 1000): Exp is not exact (libm's and the vector polynomial's results may differ from
// machine to machine), so a weightless context stores the 7.8 KiB constant as the ordinary compile does.
Case inexactCase() {
  constexpr int64_t N = 2000;
  samples::GraphBuilder b("inexact", "");
  b.addInput("x", {N});
  b.addOutput("y", {N});
  b.addFloats("zero", {}, {0});
  b.addFloats("n", {}, {static_cast<float>(N)});
  b.addFloats("one", {}, {1});
  b.addFloats("thousand", {}, {1000});
  b.addNode("range", "Range", {"zero", "n", "one"});
  b.addNode("scaled", "Div", {"range", "thousand"});
  b.addNode("grown", "Exp", {"scaled"});
  b.addNode("sum", "Add", {"x", "grown"}, {}, "y");
  Case c{"inexact", std::move(b).finish("weightless inexact constant"), {}, {}};
  const std::vector<float> x = ramp(N, -1, 0.02f);
  std::vector<float> y(N);
  for (int64_t i = 0; i < N; ++i) y[i] = static_cast<float>(x[i] + std::exp(static_cast<double>(i) / 1000));
  c.x = ir::Tensor::fromVector(ir::ElemType::Float, {N}, x);
  c.y = ir::Tensor::fromVector(ir::ElemType::Float, {N}, y);
  c.atol = 1e-5;
  return c;
}

ir::Tensor halfTensor(const ir::Shape& shape, const std::vector<float>& values) {
  std::vector<uint16_t> h(values.size());
  for (size_t i = 0; i < values.size(); ++i) h[i] = cpu::floatToHalf(values[i]);
  return ir::Tensor::fromVector(ir::ElemType::Float16, shape, h);
}

// y = float32(BatchNorm(Conv(float16(x), W))) with float16 W [32, 8, 3, 3] (4.5 KiB) and float16 BatchNorm
// parameters: on cpu the fold is made in float16 as ONNX Runtime makes it; weightless, at load from the source W.
// The reference is computed in double from the float16 values (float16 rounding of the folded weights and of the
// activations between ops: atol 0.05 on outputs of order 1).
Case halfBatchNormCase() {
  constexpr int64_t C = 8, M = 32, H = 6;
  samples::GraphBuilder b("half_bn", "");
  b.addInput("x", {1, C, H, H});
  b.addOutput("y", {1, M, H, H});
  std::vector<float> w(M * C * 9), gamma(M), beta(M), mean(M), var(M);
  for (size_t i = 0; i < w.size(); ++i) w[i] = cpu::halfToFloat(cpu::floatToHalf(0.01f * static_cast<float>(i % 29) - 0.14f));
  for (int64_t m = 0; m < M; ++m) {
    gamma[m] = cpu::halfToFloat(cpu::floatToHalf(0.5f + 0.03f * static_cast<float>(m)));
    beta[m] = cpu::halfToFloat(cpu::floatToHalf(0.1f * static_cast<float>(m % 5) - 0.2f));
    mean[m] = cpu::halfToFloat(cpu::floatToHalf(0.05f * static_cast<float>(m % 7) - 0.15f));
    var[m] = cpu::halfToFloat(cpu::floatToHalf(0.6f + 0.02f * static_cast<float>(m)));
  }
  b.addInitializer("w", halfTensor({M, C, 3, 3}, w));
  b.addInitializer("gamma", halfTensor({M}, gamma));
  b.addInitializer("beta", halfTensor({M}, beta));
  b.addInitializer("mean", halfTensor({M}, mean));
  b.addInitializer("var", halfTensor({M}, var));
  b.addNode("xh", "Cast", {"x"}, {ir::Attribute::makeInt("to", 10)});
  b.addNode("conv", "Conv", {"xh", "w"}, {ir::Attribute::makeInts("pads", {1, 1, 1, 1})});
  b.addNode("bn", "BatchNormalization", {"conv", "gamma", "beta", "mean", "var"});
  b.addNode("out", "Cast", {"bn"}, {ir::Attribute::makeInt("to", 1)}, "y");
  Case c{"half_bn", std::move(b).finish("weightless float16 BatchNorm"), {}, {}, 0.05};
  std::vector<float> x = ramp(C * H * H, -1, 0.025f);
  for (float& v : x) v = cpu::halfToFloat(cpu::floatToHalf(v));
  std::vector<float> y(M * H * H);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t p = 0; p < H * H; ++p) {
      double sum = 0;
      for (int64_t ci = 0; ci < C; ++ci)
        for (int64_t ty = 0; ty < 3; ++ty)
          for (int64_t tx = 0; tx < 3; ++tx) {
            const int64_t iy = p / H + ty - 1, ix = p % H + tx - 1;
            if (iy >= 0 && iy < H && ix >= 0 && ix < H)
              sum += double{w[((m * C + ci) * 3 + ty) * 3 + tx]} * x[(ci * H + iy) * H + ix];
          }
      y[m * H * H + p] = static_cast<float>((sum - mean[m]) / std::sqrt(double{var[m]} + 1e-5) * gamma[m] + beta[m]);
    }
  c.x = ir::Tensor::fromVector(ir::ElemType::Float, {1, C, H, H}, ramp(C * H * H, -1, 0.025f));
  c.y = ir::Tensor::fromVector(ir::ElemType::Float, {1, M, H, H}, y);
  return c;
}

}  // namespace

TEST_CASE("weightless: anchors and masks computed by exact arithmetic are computed at load, not stored",
          "[e2e][weightless]") {
  TempDir dir("weightless_exact");
  for (const char* target : {"cpu", "npu-sim"}) {
    checkCase(dir, anchorsCase(), target);
    checkCase(dir, maskCase(), target);
  }
}

TEST_CASE("weightless: a constant computed by an inexact op (Exp) stays stored", "[e2e][weightless]") {
  TempDir dir("weightless_inexact");
  checkCase(dir, inexactCase(), "cpu", false);
}

TEST_CASE("weightless: a float16 BatchNorm folded into a Conv is folded at load, bit for bit", "[e2e][weightless]") {
  TempDir dir("weightless_half_bn");
  const fs::path src = checkCase(dir, halfBatchNormCase(), "cpu");
  auto view = format::ContainerView::openFile(src / "half_bn_ctxkit.bin");
  REQUIRE(view);
  bool wInSource = false;
  for (const auto& w : view->weights())
    for (const auto& s : w.sources) wInSource = wInSource || s.initializer == "w";
  CHECK(wInSource);  // the folded weight is computed from it
}

TEST_CASE("weightless: a crafted bound of a load-time Range is refused, naming the .bin and the op",
          "[e2e][weightless][hostile]") {
  TempDir dir("weightless_exact_hostile");
  const fs::path src = checkCase(dir, anchorsCase(), "cpu");
  const fs::path bin = src / "anchors_ctxkit.bin";
  const std::string original = bytesOf(bin);
  // The folded limit Add(599.75, 599.75): a float32 scalar 1199.5 stored in the .bin (its inputs are in the source
  // model).
  std::optional<uint64_t> limitAt;
  {
    auto view = format::ContainerView::openFile(bin);
    REQUIRE(view);
    for (const auto& w : view->weights()) {
      if (w.inSource() || w.type != ir::ElemType::Float || w.size != 4) continue;
      float v;
      std::memcpy(&v, original.data() + w.offset, sizeof v);
      if (v == 1199.5f) limitAt = w.offset;
    }
  }
  REQUIRE(limitAt);
  for (float limit : {1200.5f, 0.0f, -1.0f, 1e30f, std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity()}) {
    INFO(limit);
    std::string crafted = original;
    std::memcpy(crafted.data() + *limitAt, &limit, sizeof limit);
    {
      std::ofstream out(bin, std::ios::binary | std::ios::trunc);
      out.write(crafted.data(), static_cast<std::streamsize>(crafted.size()));
    }
    auto r = runTool(CTXKIT_CTXRUN, {(src / "anchors_ctx.onnx").string()});
    INFO(r.err);
    CHECK(r.exitCode != 0);
    CHECK(r.err.find("anchors_ctxkit.bin") != std::string::npos);
    CHECK(r.err.find("'range'") != std::string::npos);
  }
}
