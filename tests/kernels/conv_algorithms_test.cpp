// Every Conv algorithm a compiled program can record (cpu::ConvAlgorithm, docs/format/program.md#kernel-choices) computes
// what ONNX's Conv node tests expect, and what a plain loop computes on odd shapes (groups, dilation, strides,
// asymmetric pads, 1-D and 3-D); the default choice is the heuristic's, the same every time.
#include "../common/material.h"
#include "kernel_test_util.h"

#include "cpu/gemm.h"
#include "kernels/conv_winograd.h"
#include "onnx_io/onnx_io.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <span>

using namespace ctxkit;
using cpu::ConvAlgorithm;
namespace fs = std::filesystem;

namespace {

// Conv prepared as a program's op recording `algorithm` is (the weight and bias constants) and run once.
Expected<ir::Tensor> runWith(const kernels::OpContext& base, const std::vector<const ir::Tensor*>& ins,
                             ConvAlgorithm algorithm, kernels::ThreadPool* pool = nullptr) {
  kernels::OpContext ctx = base;
  ctx.kernel.algorithm = algorithm;
  std::vector<kernels::ValueDesc> descs;
  for (size_t i = 0; i < ins.size(); ++i)
    descs.push_back(kernels::ValueDesc{ins[i]->type(), ins[i]->shape(), i == 0 ? nullptr : ins[i], true});
  CTX_ASSIGN_OR_RETURN(auto op, kernels::prepare(ctx, descs, 1));
  CTX_ASSIGN_OR_RETURN(ir::Tensor out, ir::Tensor::allocate(op->outputs()[0].type, op->outputs()[0].shape));
  ir::Tensor* outs[] = {&out};
  CTX_RETURN_IF_ERROR(op->run(ins, outs, pool));
  return out;
}

// max |got - want| over (1e-5 + 1e-3 |want|) above 1: a mismatch.
bool close(const ir::Tensor& got, const ir::Tensor& want) {
  if (got.shape() != want.shape()) return false;
  const float* g = got.dataAs<float>();
  const float* w = want.dataAs<float>();
  for (uint64_t i = 0; i < want.elementCount(); ++i)
    if (!(std::fabs(g[i] - w[i]) <= 1e-5 + 1e-3 * std::fabs(w[i]))) return false;
  return true;
}

std::vector<float> ramp(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 9) / static_cast<float>(1u << 22) - 1.0f;
  }
  return v;
}

// A plain 2-D Conv (input [N, C, H, W]; 1-D and 3-D cases use H or D of 1), written from the ONNX definition.
std::vector<float> reference(const std::vector<float>& x, const ir::Shape& xs, const std::vector<float>& w,
                             const ir::Shape& ws, const std::vector<float>& b, int64_t group, std::array<int64_t, 3> s,
                             std::array<int64_t, 3> d, std::array<int64_t, 3> pb, const ir::Shape& ys) {
  const int64_t n = xs[0], c = xs[1], m = ws[0], cg = c / group, mg = m / group;
  const int64_t in[3] = {xs[2], xs[3], xs[4]}, k[3] = {ws[2], ws[3], ws[4]}, out[3] = {ys[2], ys[3], ys[4]};
  std::vector<float> y(static_cast<size_t>(n * m * out[0] * out[1] * out[2]));
  size_t at = 0;
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t mi = 0; mi < m; ++mi)
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            double sum = b.empty() ? 0.0 : b[static_cast<size_t>(mi)];
            const int64_t g = mi / mg;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t i0 = o0 * s[0] - pb[0] + k0 * d[0], i1 = o1 * s[1] - pb[1] + k1 * d[1],
                                  i2 = o2 * s[2] - pb[2] + k2 * d[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                    sum += static_cast<double>(x[static_cast<size_t>(
                               (((ni * c + g * cg + ci) * in[0] + i0) * in[1] + i1) * in[2] + i2)]) *
                           w[static_cast<size_t>((((mi * cg + ci) * k[0] + k0) * k[1] + k1) * k[2] + k2)];
                  }
            y[at++] = static_cast<float>(sum);
          }
  return y;
}

struct Case {
  const char* name;
  ir::Shape x, w;  // rank 3 to 5
  int64_t group;
  std::vector<int64_t> strides, dilations, pads;
  bool bias;
};

// A case's attributes (its group, strides, dilations and pads).
ops::ConvAttrs attrsOf(const Case& c) {
  ops::ConvAttrs attrs;
  attrs.group = c.group;
  attrs.window.strides.emplace(c.strides.begin(), c.strides.end());
  attrs.window.dilations.emplace(c.dilations.begin(), c.dilations.end());
  attrs.window.pads.emplace(c.pads.begin(), c.pads.end());
  return attrs;
}

// The plain loop's output for a case of output shape `ys`, on 3 spatial dims (leading ones of size 1).
std::vector<float> referenceFor(const Case& c, const ir::Tensor& x, const ir::Tensor& w, const ir::Tensor* b,
                                ir::Shape ys) {
  const size_t spatial = c.x.size() - 2;
  ir::Shape x5 = c.x, w5 = c.w;
  std::array<int64_t, 3> s{1, 1, 1}, d{1, 1, 1}, pb{0, 0, 0};
  for (size_t i = 0; i < spatial; ++i) {
    s[3 - spatial + i] = c.strides[i];
    d[3 - spatial + i] = c.dilations[i];
    pb[3 - spatial + i] = c.pads[i];
  }
  while (x5.size() < 5) x5.insert(x5.begin() + 2, 1), w5.insert(w5.begin() + 2, 1), ys.insert(ys.begin() + 2, 1);
  return reference(test::values<float>(x), x5, test::values<float>(w), w5,
                   b ? test::values<float>(*b) : std::vector<float>{}, c.group, s, d, pb, ys);
}

// Winograd's error bound, relative to the largest output of a case: its transforms add and cancel terms up to 100x
// the inputs, so its error scales with the largest output, not each one (docs/runtime.md#winograd-f4x4-3x3).
constexpr float kWinogradTolerance = 2e-5f;

void requireWithinWinogradBound(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  float scale = 1;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i] << ", largest " << scale);
    REQUIRE(std::fabs(got[i] - want[i]) <= kWinogradTolerance * scale);
  }
}

// Runs every case with each algorithm convAlgorithms offers for it (or only `only`), on each of `pools` (null:
// serially), against the plain loop; counts the runs per algorithm.
void checkCases(const std::vector<Case>& cases, std::span<kernels::ThreadPool* const> pools,
                std::optional<ConvAlgorithm> only, std::map<ConvAlgorithm, int>& runs) {
  for (const Case& c : cases) {
    INFO(c.name);
    const ops::ConvAttrs attrs = attrsOf(c);
    const ops::OpAttrs typed(attrs);
    static const ir::Attributes kNoAttrs;
    const kernels::OpContext ctx{ir::OpKind::Conv, 17, kNoAttrs, c.name, nullptr, &typed};
    const int64_t xn = *ir::elementCount(c.x), wn = *ir::elementCount(c.w);
    const ir::Tensor x = test::floats(c.x, ramp(xn, 1)), w = test::floats(c.w, ramp(wn, 2));
    const ir::Tensor b = test::floats({c.w[0]}, ramp(c.w[0], 3));
    std::vector<const ir::Tensor*> ins{&x, &w};
    if (c.bias) ins.push_back(&b);
    const auto algorithms = kernels::convAlgorithms(attrs, c.x, c.w, true);
    REQUIRE(!algorithms.empty());
    CHECK(algorithms == kernels::convAlgorithms(attrs, c.x, c.w, true));  // deterministic
    for (ConvAlgorithm a : algorithms) {
      if (only && a != *only) continue;
      for (kernels::ThreadPool* p : pools) {
        INFO(cpu::convAlgorithmName(a) << " on " << (p ? p->threads() : 1) << " threads");
        auto got = runWith(ctx, ins, a, p);
        REQUIRE(got);
        const std::vector<float> want = referenceFor(c, x, w, c.bias ? &b : nullptr, got->shape());
        if (a == ConvAlgorithm::Winograd) {
          requireWithinWinogradBound(test::values<float>(*got), want);
        } else {
          test::requireClose(test::values<float>(*got), want, 1e-4f);
        }
        ++runs[a];
      }
    }
  }
}

}  // namespace

TEST_CASE("every Conv algorithm computes the ONNX Conv node tests' expected outputs") {
  fs::path root = CTXKIT_NODE_TESTS_DIR;
  CTX_REQUIRE_MATERIAL(fs::is_directory(root), root.string() << " is absent (ONNX's node tests beside the project)");
  std::map<ConvAlgorithm, int> runs;
  int tests = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (name.find("conv") == std::string::npos) continue;  // (ConvTranspose, ConvInteger: not Conv nodes)
    auto model = onnx_io::loadModel(e.path() / "model.onnx");
    REQUIRE(model);
    const ir::Graph& g = model->graph;
    if (g.nodes.size() != 1 || g.nodes[0].kind != ir::OpKind::Conv) continue;
    INFO(name);
    ++tests;
    const kernels::OpContext ctx = kernels::nodeContext(g.nodes[0]);
    std::vector<ir::Tensor> ins;
    for (size_t i = 0; i < g.nodes[0].inputs.size(); ++i) {
      auto t = onnx_io::loadTensorFile(e.path() / "test_data_set_0" / fmt::format("input_{}.pb", i));
      REQUIRE(t);
      ins.push_back(std::move(*t));
    }
    auto want = onnx_io::loadTensorFile(e.path() / "test_data_set_0" / "output_0.pb");
    REQUIRE(want);
    std::vector<const ir::Tensor*> ptrs;
    for (const ir::Tensor& t : ins) ptrs.push_back(&t);
    const auto& attrs = std::get<ops::ConvAttrs>(*ctx.typed);
    const auto algorithms = kernels::convAlgorithms(attrs, ins[0].shape(), ins[1].shape(), true);
    REQUIRE(algorithms.size() >= 2);
    CHECK(algorithms[0] == kernels::convHeuristic(attrs, ins[0].shape(), ins[1].shape(), true));
    for (ConvAlgorithm a : algorithms) {
      INFO(cpu::convAlgorithmName(a));
      auto got = runWith(ctx, ptrs, a);
      REQUIRE(got);
      CHECK(close(*got, *want));
      ++runs[a];
    }
  }
  CHECK(tests >= 6);  // test_basic_conv_with_padding, test_conv_with_autopad_same, ...
  for (ConvAlgorithm a : {ConvAlgorithm::Direct, ConvAlgorithm::Gemm, ConvAlgorithm::Panels}) CHECK(runs[a] == tests);
}

TEST_CASE("every Conv algorithm matches a plain loop on odd shapes, serially and on 2 threads") {
  const std::vector<Case> cases = {
      {"3x3 dense, asymmetric pads", {1, 5, 9, 7}, {6, 5, 3, 3}, 1, {1, 1}, {1, 1}, {1, 0, 2, 1}, true},
      {"5x5 stride 2 dilation 2", {2, 3, 11, 10}, {4, 3, 5, 5}, 1, {2, 2}, {2, 2}, {4, 4, 4, 4}, false},
      {"dilation past the map (padding-only taps)", {1, 4, 5, 5}, {3, 4, 3, 3}, 1, {1, 1}, {6, 6}, {6, 6, 6, 6}, true},
      {"1x1", {1, 7, 3, 5}, {9, 7, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
      {"depthwise 5x5 stride 2 onto a small map", {1, 33, 9, 9}, {33, 1, 5, 5}, 33, {2, 2}, {1, 1}, {2, 2, 2, 2}, true},
      {"depthwise 3x3 on a larger map", {2, 5, 12, 11}, {5, 1, 3, 3}, 5, {1, 1}, {1, 1}, {1, 1, 1, 1}, false},
      {"depthwise 1-D", {1, 6, 17}, {6, 1, 4}, 6, {1}, {2}, {3, 1}, true},
      // The channel-blocked kernel's padded plane: dilation with asymmetric pads (a pad of 0 on one side), 21 and
      // 40 channels (a block of 5 and of 8 channels past whole blocks of 16; positions past whole 8x8 transposes),
      // rows of 10 and 7 outputs (runs of 4 and the rest), stride 2, batch 2.
      {"depthwise 3x3 dilation 2 onto 11x10", {1, 21, 13, 11}, {21, 1, 3, 3}, 21, {1, 1}, {2, 2}, {2, 1, 0, 2}, true},
      {"depthwise 5x5 stride 2 onto 8x7", {2, 40, 15, 13}, {40, 1, 5, 5}, 40, {2, 2}, {1, 1}, {2, 2, 2, 2}, false},
      {"grouped 2x2", {1, 6, 8, 8}, {9, 2, 3, 3}, 3, {1, 2}, {1, 1}, {1, 1, 0, 1}, true},
      {"3-D", {1, 3, 4, 5, 6}, {2, 3, 2, 3, 2}, 1, {1, 2, 1}, {1, 1, 2}, {0, 1, 1, 1, 0, 1}, true},
      // Runs shorter than a vector on narrow maps (ResNeXt's late grouped 3x3s): 2x2, 3x2 and 2x3 outputs, 5 and 8
      // filters per group (a group of 4 and a single one).
      {"grouped 3x3 onto 2x2", {1, 64, 2, 2}, {40, 8, 3, 3}, 8, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"grouped 3x3 onto 3x2", {1, 32, 3, 2}, {64, 4, 3, 3}, 8, {1, 1}, {1, 1}, {1, 1, 1, 1}, false},
      {"dense 3x3 onto 2x3", {1, 9, 2, 3}, {5, 9, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      // Rows of 11 and 23 outputs that the direct path computes as one run over the padded plane (13 filters: three
      // of 4 and a single one).
      {"dense 3x3 in one run onto 13x11", {1, 8, 13, 11}, {13, 8, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"dense 3x3 in one run onto 3x23", {2, 5, 3, 23}, {6, 5, 3, 3}, 1, {1, 1}, {1, 1}, {1, 0, 1, 2}, false},
      // Rows of 21 outputs at stride 2, row by row: a block of 16, then one moved back to end at the row's end.
      {"first layer 3x3 stride 2 onto 5x21", {1, 3, 9, 42}, {7, 3, 3, 3}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},
      // grouped-blocks: 16 channels per group onto 7x7 (RegNetX's late stages); stride 2 with asymmetric pads onto
      // rows of 7 (one run of 6 and a tail); 40 outputs per group (a pair of blocks and one of 8 lanes) with
      // dilation; 2 and 3 channels per group; 1-D; a map of several tiles (rows of 35: runs of 8 and 6 and tails);
      // 64 channels per group; 5 input and 24 output channels per group at batch 3 (a block of 8 lanes).
      {"grouped 16 per group onto 7x7", {1, 48, 7, 7}, {48, 16, 3, 3}, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"grouped stride 2 asymmetric pads", {2, 32, 15, 13}, {64, 8, 3, 3}, 4, {2, 2}, {1, 1}, {1, 0, 2, 1}, true},
      {"grouped 40 outputs per group dilation 2", {1, 6, 9, 10}, {80, 3, 3, 3}, 2, {1, 1}, {2, 2}, {2, 1, 2, 0},
       false},
      {"grouped 2 per group", {1, 8, 5, 6}, {8, 2, 3, 3}, 4, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"grouped 1-D stride 2", {1, 12, 19}, {18, 4, 3}, 3, {2}, {1}, {1, 2}, true},
      {"grouped over several tiles", {1, 32, 40, 35}, {64, 16, 3, 3}, 2, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"grouped 64 per group", {1, 128, 5, 4}, {128, 64, 3, 3}, 2, {1, 1}, {1, 1}, {1, 1, 1, 1}, false},
      {"grouped 5 in 24 out batch 3", {3, 10, 6, 9}, {48, 5, 3, 3}, 2, {2, 1}, {1, 1}, {1, 1, 1, 1}, true},
      // One group of 9 channels and 70 outputs (5 blocks, split between threads), a 5x3 kernel with stride 2 x 1.
      {"dense on blocks, 5x3 kernel", {1, 9, 11, 8}, {70, 9, 5, 3}, 1, {2, 1}, {1, 1}, {2, 1, 2, 1}, true},
      // Winograd F(4x4, 3x3) (and every other 3x3 above of stride 1): two depth blocks (300 channels), 37 outputs
      // (a vector of 16 and a tail; panels past whole ones), maps not a multiple of 4 with asymmetric or no pads,
      // batch 2, a map split into several tasks of tile rows (40x38: 100 tiles), and one row of tiles, which two
      // threads split into ranges of output-channel panels (40 outputs: 3 panels of 16 or 5 of 8).
      {"winograd 300 channels, two depth blocks", {2, 300, 10, 9}, {37, 300, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1},
       true},
      {"winograd no pads onto 7x13", {1, 20, 9, 15}, {70, 20, 3, 3}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, false},
      {"winograd asymmetric pads onto 18x21", {1, 64, 17, 20}, {64, 64, 3, 3}, 1, {1, 1}, {1, 1}, {2, 0, 1, 3}, true},
      {"winograd several tasks onto 40x38", {1, 40, 40, 38}, {33, 40, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"winograd one row of tiles onto 3x17", {1, 24, 3, 17}, {40, 24, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
  };
  kernels::ThreadPool pool(2);
  kernels::ThreadPool* const pools[] = {nullptr, &pool};
  std::map<ConvAlgorithm, int> runs;
  checkCases(cases, pools, std::nullopt, runs);
  for (ConvAlgorithm a : {ConvAlgorithm::Direct, ConvAlgorithm::Gemm, ConvAlgorithm::Panels,
                          ConvAlgorithm::DepthwiseSmallMap, ConvAlgorithm::GroupedBlocks, ConvAlgorithm::Winograd})
    CHECK(runs[a] > 0);
  CHECK(runs[ConvAlgorithm::GroupedBlocks] >= 2 * 9);  // every grouped case above, serially and on 2 threads
  CHECK(runs[ConvAlgorithm::Winograd] >= 2 * 8);       // every 3x3 of stride 1 without dilation in one group
}

// Depthwise stride-2 rows of 32 outputs or more, which the direct path computes from a plane split by column phase:
// phase rows of 37/38 floats (blocks of 16, the last moved back to end at the row's end), of exactly 32 (two whole
// blocks) and of 34/33 with no pads; 3 to 7 channels, batch 2, rows of odd and even width.
TEST_CASE("depthwise stride 2 from a plane split by column phase matches a plain loop") {
  const std::vector<Case> cases = {
      {"depthwise 3x3 stride 2 rows of 38", {2, 5, 7, 75}, {5, 1, 3, 3}, 5, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},
      {"depthwise 3x3 stride 2 rows of 32", {1, 5, 9, 64}, {5, 1, 3, 3}, 5, {2, 2}, {1, 1}, {1, 1, 1, 1}, false},
      {"depthwise 5x5 stride 2 rows of 32 no pads", {1, 3, 9, 67}, {3, 1, 5, 5}, 3, {2, 2}, {1, 1}, {0, 0, 0, 0}, true},
      {"depthwise 3x3 stride 2 rows of 33", {1, 7, 5, 66}, {7, 1, 3, 3}, 7, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},
  };
  kernels::ThreadPool pool(2);
  kernels::ThreadPool* const pools[] = {nullptr, &pool};
  std::map<ConvAlgorithm, int> runs;
  checkCases(cases, pools, ConvAlgorithm::Direct, runs);
  CHECK(runs[ConvAlgorithm::Direct] == 2 * 4);
}

// A Conv's fused epilogue after its GEMM: the bias and a Relu or Clip in one pass (applyBiasActivation), any other
// activation after the bias; the vector depthwise and grouped kernels' activation on their tiles. Against the plain
// loop with the activation written out here, for every algorithm, on 1x1s onto 1x1, 3x3, 6x6, 7x7 and 13x13 (the plain
// GEMM path, the panels path, grouped-blocks), a 3x3 and depthwise and grouped Convs, with odd channel counts, batch
// 2, a bias with a zero entry and without a bias.
TEST_CASE("Conv's fused bias and activation match a plain loop for every algorithm") {
  const std::vector<Case> cases = {
      {"1x1 onto 1x1", {2, 19, 1, 1}, {37, 19, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
      {"1x1 onto 3x3", {1, 40, 3, 3}, {21, 40, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
      {"1x1 onto 7x7", {2, 13, 7, 7}, {45, 13, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
      {"1x1 onto 13x13", {1, 24, 13, 13}, {144, 24, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
      {"1x1 onto 13x13 without bias", {1, 24, 13, 13}, {17, 24, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, false},
      {"3x3 stride 2 onto 7x7", {2, 9, 13, 13}, {11, 9, 3, 3}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},
      // The vector depthwise and grouped kernels apply the activation to their tiles: 21 channels (a block of 5
      // lanes past one of 16), 5x5 stride 2 at batch 2, 40 outputs per group (a pair of blocks and one of 8 lanes).
      {"depthwise 3x3 onto 7x7", {1, 21, 7, 7}, {21, 1, 3, 3}, 21, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"depthwise 5x5 stride 2 onto 7x7", {2, 19, 13, 13}, {19, 1, 5, 5}, 19, {2, 2}, {1, 1}, {2, 2, 2, 2}, true},
      {"grouped 40 outputs per group", {1, 6, 9, 10}, {80, 3, 3, 3}, 2, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"1x1 onto 6x6 on blocks", {1, 37, 6, 6}, {50, 37, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
  };
  struct Act {
    const char* name;
    ops::Activation kind;
    float alpha, beta;
  };
  const Act acts[] = {{"none", ops::Activation::None, 0, 0},
                      {"relu", ops::Activation::Relu, 0, 0},
                      {"clip", ops::Activation::Clip, -0.25f, 0.5f},
                      {"hardswish", ops::Activation::HardSwish, 0, 0}};
  auto activate = [](const Act& a, float v) {
    switch (a.kind) {
      case ops::Activation::Relu: return v < 0 ? 0.0f : v;
      case ops::Activation::Clip: return std::min(a.beta, std::max(a.alpha, v));
      case ops::Activation::HardSwish: return v * std::max(0.0f, std::min(1.0f, v / 6 + 0.5f));
      default: return v;
    }
  };
  kernels::ThreadPool pool(2);
  std::map<ConvAlgorithm, int> runs;
  for (const Case& c : cases)
    for (const Act& a : acts) {
      INFO(c.name << " " << a.name);
      ops::ConvAttrs attrs = attrsOf(c);
      attrs.epilogue.activation = a.kind;
      attrs.epilogue.alpha = a.alpha;
      attrs.epilogue.beta = a.beta;
      const ops::OpAttrs typed(attrs);
      static const ir::Attributes kNoAttrs;
      const kernels::OpContext ctx{ir::OpKind::Conv, 17, kNoAttrs, c.name, nullptr, &typed};
      const ir::Tensor x = test::floats(c.x, ramp(*ir::elementCount(c.x), 4));
      const ir::Tensor w = test::floats(c.w, ramp(*ir::elementCount(c.w), 5));
      std::vector<float> bv = ramp(c.w[0], 6);
      bv[1] = 0.0f;  // a zero bias among the others
      const ir::Tensor b = test::floats({c.w[0]}, bv);
      std::vector<const ir::Tensor*> ins{&x, &w};
      if (c.bias) ins.push_back(&b);
      for (ConvAlgorithm alg : kernels::convAlgorithms(attrs, c.x, c.w, true))
        for (kernels::ThreadPool* p : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
          INFO(cpu::convAlgorithmName(alg) << " on " << (p ? p->threads() : 1) << " threads");
          auto got = runWith(ctx, ins, alg, p);
          REQUIRE(got);
          std::vector<float> want = referenceFor(c, x, w, c.bias ? &b : nullptr, got->shape());
          for (float& v : want) v = activate(a, v);
          test::requireClose(test::values<float>(*got), want, 1e-4f);
          ++runs[alg];
        }
    }
  for (ConvAlgorithm alg : {ConvAlgorithm::Gemm, ConvAlgorithm::Panels, ConvAlgorithm::DepthwiseSmallMap,
                            ConvAlgorithm::GroupedBlocks, ConvAlgorithm::Direct})
    CHECK(runs[alg] > 0);
}

TEST_CASE("Conv on panels splits its work by output positions and ranges of output-channel panels, on 1, 2 and 3 "
          "threads") {
  // Output channels that are no multiple of any panel width; 1, 2 and hundreds of positions (row blocks of uneven
  // length); depths past one block of 256 rows; batch 3 with few positions (the panels split); a 1x1 on a 1x1 map.
  const std::vector<Case> cases = {
      {"1 position, 97 channels, depth 630", {2, 70, 3, 3}, {97, 70, 3, 3}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
      {"1x1 onto 1x1, 150 channels", {1, 500, 1, 1}, {150, 500, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
      {"2 positions", {1, 36, 4, 3}, {50, 36, 3, 3}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, false},
      {"437 positions, 45 channels", {1, 34, 23, 19}, {45, 34, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"batch 3 of 25 positions, 257 channels", {3, 48, 10, 10}, {257, 48, 3, 3}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1},
       true},
      {"1x1 of 300 channels onto 6x6", {1, 300, 6, 6}, {200, 300, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
      {"14x14, 130 channels", {1, 40, 14, 14}, {130, 40, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"4x4, 520 channels", {1, 30, 4, 4}, {520, 30, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, false},
  };
  kernels::ThreadPool two(2), three(3);
  kernels::ThreadPool* const pools[] = {nullptr, &two, &three};
  std::map<ConvAlgorithm, int> runs;
  checkCases(cases, pools, ConvAlgorithm::Panels, runs);
  CHECK(runs[ConvAlgorithm::Panels] == static_cast<int>(cases.size() * 3));
}

// A Conv whose weight a program stores in panels of a width other than this CPU's (another machine's): 8, 16 and 32
// columns. Each width has its own micro-kernel and strip height (the rows of A the unfolded input is packed into:
// 8 with AVX-512, 6 with AVX2's 16-wide tile), so each takes its own unfolding path.
TEST_CASE("Conv on stored panels of widths 8, 16 and 32 on 1 and 2 threads") {
  const std::vector<Case> cases = {
      {"3x3 onto 20x20 (strips across rows)", {1, 30, 20, 20}, {37, 30, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"5x5 stride 2, asymmetric pads", {2, 6, 13, 11}, {9, 6, 5, 5}, 1, {2, 2}, {1, 1}, {2, 1, 0, 2}, false},
      {"dilation 2 onto 7x9", {1, 40, 7, 9}, {20, 40, 3, 3}, 1, {1, 1}, {2, 2}, {2, 2, 2, 2}, true},
      {"3-D", {1, 5, 4, 6, 7}, {11, 5, 2, 3, 3}, 1, {1, 1, 2}, {1, 1, 1}, {0, 1, 1, 1, 1, 0}, true},
      {"1-D stride 3", {1, 4, 50}, {7, 4, 5}, 1, {3}, {1}, {2, 2}, false},
  };
  kernels::ThreadPool pool(2);
  for (const Case& c : cases) {
    INFO(c.name);
    const ops::OpAttrs typed(attrsOf(c));
    static const ir::Attributes kNoAttrs;
    kernels::OpContext ctx{ir::OpKind::Conv, 17, kNoAttrs, c.name, nullptr, &typed};
    ctx.kernel.algorithm = ConvAlgorithm::Panels;
    const int64_t xn = *ir::elementCount(c.x), wn = *ir::elementCount(c.w);
    const ir::Tensor x = test::floats(c.x, ramp(xn, 4)), w = test::floats(c.w, ramp(wn, 5));
    const ir::Tensor b = test::floats({c.w[0]}, ramp(c.w[0], 6));
    const size_t m = static_cast<size_t>(c.w[0]), k = static_cast<size_t>(wn) / m;
    for (uint16_t width : {8, 16, 32}) {
      INFO("panels " << width << " wide");
      std::vector<float> packed(cpu::panelElements(k, m, width));
      cpu::packPanels(true, w.dataAs<float>(), k, k, m, width, cpu::kPanelDepth, packed.data());
      const ir::Tensor stored = test::floats({static_cast<int64_t>(packed.size())}, packed);
      const cpu::WeightLayout layouts[] = {
          {}, {cpu::WeightLayoutKind::GemmPanelsTransposed, width, static_cast<uint16_t>(cpu::kPanelDepth)}, {}};
      std::vector<kernels::ValueDesc> descs{{x.type(), x.shape(), nullptr, true},
                                            {w.type(), w.shape(), &stored, true}};
      if (c.bias) descs.push_back({b.type(), b.shape(), &b, true});
      auto op = kernels::prepare(ctx, descs, 1, std::span(layouts, descs.size()));
      REQUIRE(op);
      std::vector<const ir::Tensor*> ins{&x, &stored};
      if (c.bias) ins.push_back(&b);
      for (kernels::ThreadPool* p : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
        auto out = ir::Tensor::allocate((*op)->outputs()[0].type, (*op)->outputs()[0].shape);
        REQUIRE(out);
        ir::Tensor* outs[] = {&*out};
        REQUIRE((*op)->run(ins, outs, p).isOk());
        test::requireClose(test::values<float>(*out), referenceFor(c, x, w, c.bias ? &b : nullptr, out->shape()),
                           1e-4f);
      }
    }
  }
}

TEST_CASE("Winograd on weights in panels of widths 8, 16 and 32 on 1 and 2 threads") {
  // Widths 8 and 16 run the GEMM strips of 6 rows (AVX2's kernels), which scatter the transformed tiles row by row.
  const std::vector<Case> cases = {
      {"onto 20x20", {1, 30, 20, 20}, {37, 30, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {"asymmetric pads onto 11x14, batch 2", {2, 17, 10, 13}, {20, 17, 3, 3}, 1, {1, 1}, {1, 1}, {1, 2, 2, 1}, false},
  };
  kernels::ThreadPool pool(2);
  for (const Case& c : cases) {
    INFO(c.name);
    const ops::OpAttrs typed(attrsOf(c));
    static const ir::Attributes kNoAttrs;
    const int64_t xn = *ir::elementCount(c.x), wn = *ir::elementCount(c.w);
    const ir::Tensor x = test::floats(c.x, ramp(xn, 7)), w = test::floats(c.w, ramp(wn, 8));
    const ir::Tensor b = test::floats({c.w[0]}, ramp(c.w[0], 9));
    std::vector<const ir::Tensor*> ins{&x, &w};
    if (c.bias) ins.push_back(&b);
    for (size_t width : {8, 16, 32}) {
      INFO("panels " << width << " wide");
      const auto u = kernels::detail::transformWinogradWeights(w.dataAs<float>(), c.w[0], c.w[1], width);
      kernels::OpContext ctx{ir::OpKind::Conv, 17, kNoAttrs, c.name, nullptr, &typed};
      ctx.kernel.algorithm = ConvAlgorithm::Winograd;
      ctx.plan = u.get();
      for (kernels::ThreadPool* p : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
        ctx.pool = p;
        auto out = kernels::evaluate(ctx, ins, 1);
        REQUIRE(out);
        requireWithinWinogradBound(test::values<float>((*out)[0]),
                                   referenceFor(c, x, w, c.bias ? &b : nullptr, (*out)[0].shape()));
      }
    }
  }
}

TEST_CASE("the default Conv algorithm is the heuristic's: Winograd or panels for dense Convs, the vector depthwise "
          "kernel on small maps, direct for few channels") {
  ops::ConvAttrs dense;
  dense.window.pads.emplace(4, 1);
  ops::ConvAttrs pointwise;
  CHECK(kernels::convHeuristic(pointwise, ir::Shape{1, 1024, 7, 7}, ir::Shape{1024, 1024, 1, 1}, true) ==
        ConvAlgorithm::Panels);
  // Without a constant weight there are no panels to read.
  CHECK(kernels::convHeuristic(pointwise, ir::Shape{1, 1024, 7, 7}, ir::Shape{1024, 1024, 1, 1}, false) ==
        ConvAlgorithm::Gemm);
  // Dense 3x3s of stride 1 run on Winograd when the weight is constant (transformed at prepare) with 1024 channel
  // pairs or more onto 9 or more tiles of 4x4, or 8192 onto 4 to 8 tiles filled at least half; on grouped-blocks
  // otherwise (one group) when they have 8 or more input channels; dilated ones on panels, first layers direct.
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 256, 14, 14}, ir::Shape{256, 256, 3, 3}, true) ==
        ConvAlgorithm::Winograd);
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 256, 14, 14}, ir::Shape{256, 256, 3, 3}, false) ==
        ConvAlgorithm::GroupedBlocks);
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 32, 112, 112}, ir::Shape{32, 32, 3, 3}, true) ==
        ConvAlgorithm::Winograd);  // 1024 pairs
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 16, 32, 32}, ir::Shape{16, 16, 3, 3}, true) ==
        ConvAlgorithm::GroupedBlocks);  // 256 pairs
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 128, 28, 28}, ir::Shape{32, 128, 3, 3}, true) ==
        ConvAlgorithm::Winograd);  // 32 outputs
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 128, 16, 16}, ir::Shape{2, 128, 3, 3}, true) !=
        ConvAlgorithm::Winograd);  // 2 outputs
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 512, 8, 8}, ir::Shape{512, 512, 3, 3}, true) ==
        ConvAlgorithm::Winograd);  // 4 tiles of many pairs
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 32, 6, 6}, ir::Shape{64, 32, 3, 3}, true) ==
        ConvAlgorithm::GroupedBlocks);  // 4 tiles of 2048 pairs
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 64, 5, 5}, ir::Shape{256, 64, 3, 3}, true) ==
        ConvAlgorithm::GroupedBlocks);  // 25 outputs in 4 tiles of 16
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 192, 3, 3}, ir::Shape{384, 192, 3, 3}, true) !=
        ConvAlgorithm::Winograd);  // one tile
  ops::ConvAttrs dilated = dense;
  dilated.window.dilations.emplace(2, 2);
  CHECK(kernels::convHeuristic(dilated, ir::Shape{1, 256, 14, 14}, ir::Shape{256, 256, 3, 3}, true) ==
        ConvAlgorithm::Panels);
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 512, 7, 7}, ir::Shape{512, 512, 3, 3}, true) ==
        ConvAlgorithm::Winograd);  // 49 outputs in 4 tiles of 16
  // 1x1s onto 5x5 to 8x8 maps of at most 480 channels too; onto 3x3 (rows of 3) they stay on panels.
  CHECK(kernels::convHeuristic(pointwise, ir::Shape{1, 240, 6, 6}, ir::Shape{40, 240, 1, 1}, true) ==
        ConvAlgorithm::GroupedBlocks);
  CHECK(kernels::convHeuristic(pointwise, ir::Shape{1, 576, 3, 3}, ir::Shape{160, 576, 1, 1}, true) ==
        ConvAlgorithm::Panels);
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 3, 56, 56}, ir::Shape{16, 3, 3, 3}, true) ==
        ConvAlgorithm::Direct);
  ops::ConvAttrs depthwise = dense;
  depthwise.group = 96;
  CHECK(kernels::convHeuristic(depthwise, ir::Shape{1, 96, 7, 7}, ir::Shape{96, 1, 3, 3}, true) ==
        ConvAlgorithm::DepthwiseSmallMap);
  CHECK(kernels::convHeuristic(depthwise, ir::Shape{1, 96, 56, 56}, ir::Shape{96, 1, 3, 3}, true) ==
        ConvAlgorithm::Direct);
  // Grouped Convs of 16 channels per group (RegNetX) run on grouped-blocks, whatever the map.
  ops::ConvAttrs grouped = dense;
  grouped.group = 25;
  CHECK(kernels::convHeuristic(grouped, ir::Shape{1, 400, 7, 7}, ir::Shape{400, 16, 3, 3}, true) ==
        ConvAlgorithm::GroupedBlocks);
  CHECK(kernels::convHeuristic(grouped, ir::Shape{1, 400, 56, 56}, ir::Shape{400, 16, 3, 3}, false) ==
        ConvAlgorithm::GroupedBlocks);
  // Shapes that are no Conv's get no choice (the kernel reports them).
  CHECK(kernels::convHeuristic(dense, ir::Shape{1, 255, 14, 14}, ir::Shape{256, 256, 3, 3}, true) ==
        ConvAlgorithm::Heuristic);
  CHECK(kernels::convAlgorithms(dense, ir::Shape{1, 255, 14, 14}, ir::Shape{256, 256, 3, 3}, true).empty());
  // A recorded algorithm the shapes cannot take is refused when the op is prepared.
  const ops::OpAttrs typed(dense);
  static const ir::Attributes kNoAttrs;
  const kernels::OpContext ctx{ir::OpKind::Conv, 17, kNoAttrs, "dense", nullptr, &typed};
  const ir::Tensor x = test::floats({1, 2, 4, 4}, ramp(32, 1)), w = test::floats({2, 2, 3, 3}, ramp(36, 2));
  auto r = runWith(ctx, {&x, &w}, ConvAlgorithm::DepthwiseSmallMap);
  REQUIRE(!r);
  CHECK_THAT(r.error().message(), Catch::Contains("recorded kernel depthwise-small-map cannot run"));
}
