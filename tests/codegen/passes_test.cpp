// One test per lowering pass, each on a graph built for it: the pass reports a change there (and none where it
// has nothing to do), and the lowered program computes what the source graph computes, node by node.
#include "analysis/analysis.h"
#include "codegen/lower.h"
#include "../common/graph_builder.h"
#include "lower_helpers.h"
#include "../common/random.h"
#include "cpu/convert.h"
#include "cpu/gemm.h"
#include "kernels/kernels.h"
#include "partitioner/partitioner.h"
#include "weightshare/weight_pool.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

ir::Graph gemmBatchNormGraph(bool transB) {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({3, 4}))};
  g.outputs = {floatValue("y", dims({3, 5}))};
  g.initializers = {floatInit("b", transB ? ir::Shape{5, 4} : ir::Shape{4, 5}, -0.3f), floatInit("c", {5}, 0.1f),
                    floatInit("scale", {5}, 0.7f), floatInit("bias", {5}, -0.2f), floatInit("mean", {5}, 0.05f),
                    floatInit("var", {5}, 0.9f)};
  ir::Node gemm = node("Gemm", {"x", "b", "c"}, {"g"});
  gemm.attrs.set(ir::Attribute::makeInt("transB", transB ? 1 : 0));
  gemm.attrs.set(ir::Attribute::makeFloat("beta", 0.5f));
  g.nodes = {gemm, node("BatchNormalization", {"g", "scale", "bias", "mean", "var"}, {"y"})};
  return g;
}

}  // namespace

TEST_CASE("the lowering passes run in the order docs/compiler.md lists", "[codegen][passes]") {
  CHECK(codegen::loweringPassNames() == std::vector<std::string_view>{"fuse-qdq", "fold-constants", "fuse-pad", "prune-conv-taps", "fold-batchnorm", "fold-affine",
                                                                       "widen-float16", "fuse-matmul-add",
                                                                       "match-activations", "match-layer-norm", "fuse-epilogue", "choose-kernels",
                                                                       "choose-layouts", "emit-program", "plan-memory"});
}

TEST_CASE("each lowering pass is an object, and its change report counts what it did", "[codegen][passes]") {
  std::vector<std::string_view> names;
  for (const codegen::LoweringPass* p : codegen::loweringPasses()) {
    names.push_back(p->name());
    CHECK(p->required() == (p->name() == "emit-program" || p->name() == "plan-memory"));
  }
  CHECK(names == codegen::loweringPassNames());

  auto l = lowerAll(gemmBatchNormGraph(false));
  REQUIRE(l->partition.passes.size() == names.size());
  const ir::PassRun& bn = l->run("fold-batchnorm");
  CHECK(bn.kind == ir::PassKind::Lowering);
  CHECK(bn.changed == 1);
  CHECK(bn.change.countOf("batchnorms_folded") == 1);
  CHECK(bn.change.summary() == "1 batchnorms folded");
  const ir::PassRun& fc = l->run("fold-constants");
  CHECK(fc.changed == 0);
  CHECK(fc.change.counts.empty());
  CHECK(fc.change.summary() == "no change");
  CHECK(l->run("emit-program").change.countOf("program_ops") == 1);
  CHECK(l->run("plan-memory").change.countOf("buffers_placed") == 0);  // Gemm writes the output directly
  CHECK(!l->changed("plan-memory"));
}

TEST_CASE("pass fold-constants evaluates ops whose inputs are all constants", "[codegen][passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2, 3}))};
  g.outputs = {floatValue("y", dims({2, 3}))};
  g.initializers = {floatInit("a", {2, 3}), floatInit("b", {2, 3}, -1.0f)};
  g.nodes = {node("Mul", {"a", "b"}, {"ab"}), node("Add", {"x", "ab"}, {"y"})};
  auto folded = lowerAll(g);
  CHECK(folded->changed("fold-constants"));
  CHECK(folded->run("fold-constants").change.countOf("ops_folded") == 1);
  // (analysis already knew ab's value: the op goes, no constant is made)
  CHECK(folded->run("fold-constants").change.summary() == "1 ops folded");
  CHECK(folded->kinds() == std::vector<ir::OpKind>{ir::OpKind::Add});
  checkComputesSource(g, *folded, {2, 3});
  auto kept = lowerAll(g, {"fold-constants"});
  CHECK(kept->kinds() == std::vector<ir::OpKind>{ir::OpKind::Mul, ir::OpKind::Add});
  checkComputesSource(g, *kept, {2, 3});
}

TEST_CASE("pass fold-batchnorm folds BatchNormalization into Gemm (both B layouts) and Conv", "[codegen][passes]") {
  for (bool transB : {false, true}) {
    CAPTURE(transB);
    ir::Graph g = gemmBatchNormGraph(transB);
    auto l = lowerAll(g);
    CHECK(l->changed("fold-batchnorm"));
    CHECK(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Gemm});
    checkComputesSource(g, *l, {3, 4});
    auto unfolded = lowerAll(g, {"fold-batchnorm"});
    CHECK(!unfolded->changed("fold-constants"));
    CHECK(unfolded->kinds() == std::vector<ir::OpKind>{ir::OpKind::Gemm, ir::OpKind::BatchNormalization});
  }
  ir::Graph conv;
  conv.inputs = {floatValue("x", dims({1, 2, 5, 5}))};
  conv.outputs = {floatValue("y", dims({1, 3, 5, 5}))};
  conv.initializers = {floatInit("w", {3, 2, 3, 3}, -0.4f), floatInit("cb", {3}), floatInit("scale", {3}),
                       floatInit("bias", {3}), floatInit("mean", {3}), floatInit("var", {3}, 1.5f)};
  ir::Node c = node("Conv", {"x", "w", "cb"}, {"c"});
  c.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
  conv.nodes = {c, node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"y"})};
  auto l = lowerAll(conv);
  CHECK(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Conv});
  checkComputesSource(conv, *l, {1, 2, 5, 5});
}

TEST_CASE("pass fuse-matmul-add turns MatMul by a constant plus a bias into Gemm for any rank", "[codegen][passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2, 3, 2, 4}))};
  g.outputs = {floatValue("y", dims({2, 3, 2, 5}))};
  g.initializers = {floatInit("w", {4, 5}, -0.5f), floatInit("b", {5}, 0.25f)};
  g.nodes = {node("MatMul", {"x", "w"}, {"m"}), node("Add", {"m", "b"}, {"y"})};
  auto l = lowerAll(g);
  CHECK(l->changed("fuse-matmul-add"));
  CHECK(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Gemm, ir::OpKind::Reshape});  // the output leaves: a real copy
  checkComputesSource(g, *l, {2, 3, 2, 4});
  CHECK(!lowerAll(gemmBatchNormGraph(false))->changed("fuse-matmul-add"));
}

TEST_CASE("pass fuse-epilogue runs a following activation inside Gemm", "[codegen][passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({3, 4}))};
  g.outputs = {floatValue("y", dims({3, 5}))};
  g.initializers = {floatInit("b", {4, 5}, -0.6f)};
  ir::Node leaky = node("LeakyRelu", {"g"}, {"y"});
  leaky.attrs.set(ir::Attribute::makeFloat("alpha", 0.3f));
  g.nodes = {node("Gemm", {"x", "b"}, {"g"}), leaky};
  auto l = lowerAll(g);
  CHECK(l->changed("fuse-epilogue"));
  REQUIRE(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Gemm});
  REQUIRE(std::holds_alternative<ops::GemmAttrs>(l->partition.program.ops[0].typed));
  CHECK(std::get<ops::GemmAttrs>(l->partition.program.ops[0].typed).epilogue == ops::Epilogue{ops::Activation::LeakyRelu, 0.3f, 0});
  checkComputesSource(g, *l, {3, 4});
  CHECK(lowerAll(g, {"fuse-epilogue"})->kinds() == std::vector<ir::OpKind>{ir::OpKind::Gemm, ir::OpKind::LeakyRelu});
}

TEST_CASE("passes emit-program and plan-memory: views for reshapes, dead buffers reused", "[codegen][passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({4, 8}))};
  g.outputs = {floatValue("y", dims({32}))};
  std::vector<int64_t> flat = {32};
  g.initializers = {ir::Initializer{"shape", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, flat), std::nullopt}};
  g.nodes = {node("Relu", {"x"}, {"a"}), node("Sigmoid", {"a"}, {"b"}), node("Tanh", {"b"}, {"c"}),
             node("Exp", {"c"}, {"d"}), node("Reshape", {"d", "shape"}, {"e"}), node("Neg", {"e"}, {"y"})};
  auto l = lowerAll(g);
  CHECK(l->changed("emit-program"));
  CHECK(l->changed("plan-memory"));
  CHECK(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Relu, ir::OpKind::Sigmoid, ir::OpKind::Tanh, ir::OpKind::Exp,
                                              ir::OpKind::Neg});
  CHECK(std::any_of(l->partition.program.tensors.begin(), l->partition.program.tensors.end(),
                    [](const auto& t) { return t.kind == program::TensorKind::View; }));
  // Four 128-byte intermediates, at most two alive at once.
  CHECK(l->partition.program.arenaSize <= 2 * 128);
  checkComputesSource(g, *l, {4, 8});
}

TEST_CASE("dump-after and stop-after show the partition after the named pass", "[codegen][passes]") {
  ir::Graph g = gemmBatchNormGraph(false);
  auto facts = analysis::analyzeGraph(g, {});
  REQUIRE(facts);
  partitioner::Partition all{{0, 1}};
  weightshare::WeightPool pool;
  auto intern = [&](const ir::Tensor& t, const cpu::WeightLayout& l) { return pool.intern(t, l); };
  for (std::string_view pass : codegen::loweringPassNames()) {
    codegen::LowerOptions o;
    o.name = "p";
    o.stopAfter = std::string(pass);
    auto l = codegen::lowerPartition(g, *facts, all, outsideIds(*facts, {"y"}), intern, o);
    REQUIRE(l);
    CAPTURE(pass);
    CHECK(l->stopped);
    CHECK(l->passes.back().name == pass);
    CHECK(l->dump.find(fmt::format("(after {})", pass)) != std::string::npos);
    bool beforeFold =
        pass == "fuse-qdq" || pass == "fold-constants" || pass == "fuse-pad" || pass == "prune-conv-taps";
    CHECK((l->dump.find("BatchNormalization") != std::string::npos) == beforeFold);
  }
}

TEST_CASE("pass choose-layouts stores constant GEMM operands in panels, packed at compile time", "[codegen][passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({40, 20}))};
  g.outputs = {floatValue("y", dims({40, 40}))};
  // b: MatMul's B [20, 40]; t: Gemm's transposed B [40, 40]; shared: read by a MatMul and by an Add, so it stays
  // plain.
  g.initializers = {floatInit("b", {20, 40}, 0.3f), floatInit("t", {40, 40}, -0.2f), floatInit("shared", {40, 40}, 0.1f)};
  ir::Node gemm = node("Gemm", {"h", "t"}, {"g"});
  gemm.attrs.set(ir::Attribute::makeInt("transB", 1));
  g.nodes = {node("MatMul", {"x", "b"}, {"h"}), gemm, node("MatMul", {"g", "shared"}, {"m"}),
             node("Add", {"m", "shared"}, {"y"})};
  auto l = lowerAll(g);
  CHECK(l->changed("choose-layouts"));
  std::map<std::string, program::TensorDesc> weights = weightDescs(*l);
  REQUIRE(weights.count("b"));
  CHECK(weights["b"].layout == kPanels32);
  CHECK(program::toShape(weights["b"].shape) == ir::Shape{20, 40});
  // K x ceil(N / 32) x 32 floats: 20 x 2 x 32.
  CHECK(weights["b"].size == 20 * 64 * 4);
  CHECK(l->pool.weights()[weights["b"].index].shape == ir::Shape{20 * 64});
  CHECK(weights["t"].layout == cpu::WeightLayout{cpu::WeightLayoutKind::GemmPanelsTransposed, 32, 256});
  CHECK(weights["shared"].layout.plain());
  CHECK(weights["shared"].size == 40 * 40 * 4);
  checkComputesSource(g, *l, {40, 20});
  // Without the pass every weight is plain, and the program computes the same.
  auto plain = lowerAll(g, {"choose-layouts"});
  for (const auto& t : plain->partition.program.tensors) CHECK(t.layout.plain());
  checkComputesSource(g, *plain, {40, 20});
}

TEST_CASE("pass choose-layouts stores the weight of a Conv with few outputs in transposed panels", "[codegen][passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 8, 5, 5}))};
  g.outputs = {floatValue("y", dims({1, 4, 2, 2}))};
  // big: a 1x1 Conv onto 5x5 (25 positions) stays plain; small: a 3x3 Conv of stride 2 onto 2x2 runs as a GEMM on
  // its weight, which is stored as [4, 6 x 3 x 3] in transposed panels.
  g.initializers = {floatInit("big", {6, 8, 1, 1}, 0.3f), floatInit("small", {4, 6, 3, 3}, -0.2f)};
  ir::Node small = node("Conv", {"h", "small"}, {"y"});
  small.attrs.set(ir::Attribute::makeInts("kernel_shape", {3, 3}));
  small.attrs.set(ir::Attribute::makeInts("strides", {2, 2}));
  g.nodes = {node("Conv", {"x", "big"}, {"h"}), small};
  auto l = lowerAll(g);
  CHECK(l->changed("choose-layouts"));
  std::map<std::string, program::TensorDesc> weights = weightDescs(*l);
  REQUIRE(weights.count("small"));
  CHECK(weights["big"].layout.plain());
  CHECK(weights["small"].layout == cpu::WeightLayout{cpu::WeightLayoutKind::GemmPanelsTransposed, 32, 256});
  CHECK(program::toShape(weights["small"].shape) == ir::Shape{4, 6, 3, 3});
  // K = 54 rows of one 32-wide panel.
  CHECK(weights["small"].size == 54 * 32 * 4);
  CHECK(l->pool.weights()[weights["small"].index].shape == ir::Shape{54 * 32});
  checkComputesSource(g, *l, {1, 8, 5, 5});
}

namespace {

ir::Initializer valueInit(const std::string& name, ir::Shape shape, std::vector<float> values) {
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), values), {}};
}

}  // namespace

TEST_CASE("pass prune-conv-taps cuts the taps that never land inside the input, keeping every output", "[codegen][passes]") {
  // Height: dilation 6, pads 6 onto 5 rows: only the middle row of taps ever reads an input row (the others read
  // rows -6..-2 and 6..10). Width: dilation 1, pads 1: every tap is used. The weight has 2x3x3x3 distinct values.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 3, 5, 7}))};
  g.outputs = {floatValue("y", dims({1, 2, 5, 7}))};
  std::vector<float> w(54);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(i % 11) - 0.2f + 0.01f * static_cast<float>(i);
  g.initializers = {valueInit("w", {2, 3, 3, 3}, w), valueInit("b", {2}, {0.5f, -0.25f})};
  // Dilation 3, pads 3 onto 5 rows: every tap reads an input for some output; nothing is cut.
  for (int64_t d : {6, 3}) {
    ir::Node conv = node("Conv", {"x", "w", "b"}, {"y"});
    conv.attrs.set(ir::Attribute::makeInts("dilations", {d, 1}));
    conv.attrs.set(ir::Attribute::makeInts("pads", {d, 1, d, 1}));
    g.nodes = {conv};
    auto l = lowerAll(g);
    CAPTURE(d);
    CHECK(l->changed("prune-conv-taps") == (d == 6));
    checkComputesSource(g, *l, {1, 3, 5, 7});
  }
}

TEST_CASE("pass fuse-pad makes a zero spatial Pad before a Conv or AveragePool their pads, and leaves the rest",
          "[codegen][passes]") {
  auto int64s = [](const std::string& name, std::vector<int64_t> v) {
    const auto n = static_cast<int64_t>(v.size());
    return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Int64, {n}, v), std::nullopt};
  };
  std::vector<float> w(2 * 3 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.03f * static_cast<float>(i % 7) - 0.1f;
  struct Case {
    const char* name;
    const char* reader;
    std::vector<int64_t> pads;  // the Pad's, begin then end, NCHW
    float value;
    std::vector<ir::Attribute> attrs;
    ir::Shape out;
    bool fuses;
  };
  const std::vector<Case> cases{
      {"avgpool, no pads of its own", "AveragePool", {0, 0, 1, 2, 0, 0, 1, 0}, 0,
       {ir::Attribute::makeInts("kernel_shape", {3, 3})}, {1, 3, 5, 7}, true},
      {"avgpool counting its own pads", "AveragePool", {0, 0, 1, 1, 0, 0, 1, 1}, 0,
       {ir::Attribute::makeInts("kernel_shape", {3, 3}), ir::Attribute::makeInts("pads", {1, 0, 0, 1}),
        ir::Attribute::makeInt("count_include_pad", 1)},
       {1, 3, 6, 8}, true},
      {"conv with pads of its own", "Conv", {0, 0, 2, 0, 0, 0, 0, 1}, 0,
       {ir::Attribute::makeInts("pads", {1, 1, 1, 1})}, {1, 2, 7, 8}, true},
      // Kept: a non-zero pad value, a pool whose own pads are not counted, ceil mode, MaxPool, a padded channel axis.
      {"pad value 1", "Conv", {0, 0, 1, 1, 0, 0, 1, 1}, 1, {}, {1, 2, 5, 7}, false},
      {"avgpool not counting its own pads", "AveragePool", {0, 0, 1, 1, 0, 0, 1, 1}, 0,
       {ir::Attribute::makeInts("kernel_shape", {3, 3}), ir::Attribute::makeInts("pads", {1, 1, 1, 1})},
       {1, 3, 7, 9}, false},
      {"avgpool in ceil mode", "AveragePool", {0, 0, 1, 1, 0, 0, 1, 1}, 0,
       {ir::Attribute::makeInts("kernel_shape", {3, 3}), ir::Attribute::makeInts("strides", {2, 2}),
        ir::Attribute::makeInt("ceil_mode", 1)},
       {1, 3, 3, 4}, false},
      {"maxpool", "MaxPool", {0, 0, 1, 1, 0, 0, 1, 1}, 0, {ir::Attribute::makeInts("kernel_shape", {3, 3})},
       {1, 3, 5, 7}, false},
      {"channel pad", "AveragePool", {0, 1, 1, 1, 0, 0, 1, 1}, 0, {ir::Attribute::makeInts("kernel_shape", {3, 3})},
       {1, 4, 5, 7}, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    ir::Graph g;
    g.inputs = {floatValue("x", dims({1, 3, 5, 7}))};
    std::vector<ir::Dim> out;
    for (int64_t v : c.out) out.push_back(ir::Dim::known(v));
    g.outputs = {floatValue("y", out)};
    g.initializers = {int64s("pads", c.pads), valueInit("v", {}, {c.value}), valueInit("w", {2, 3, 3, 3}, w),
                      valueInit("b", {2}, {0.5f, -0.25f})};
    ir::Node reader = std::string(c.reader) == "Conv" ? node("Conv", {"p", "w", "b"}, {"y"})
                                                     : node(c.reader, {"p"}, {"y"});
    for (const ir::Attribute& a : c.attrs) reader.attrs.set(a);
    g.nodes = {node("Pad", {"x", "pads", "v"}, {"p"}), reader};
    auto l = lowerAll(g);
    CHECK(l->changed("fuse-pad") == c.fuses);
    CHECK((l->kinds().front() == ir::OpKind::Pad) == !c.fuses);
    checkComputesSource(g, *l, {1, 3, 5, 7});
  }
}

TEST_CASE("weightless: pruned taps and folded rearrangements of source weights are computed at load",
          "[codegen][passes]") {
  // A Conv whose taps prune-conv-taps cuts (dilation 6, pads 6 onto 5 rows: the middle row of taps only), then a 1x1
  // Conv whose weight the analysis folds from g: Unsqueeze(Concat(Slice(g, 0:48), Slice(g, 96:144), Slice(g, 48:96))).
  // Both source weights are over 4 KiB; a weightless lowering keeps them as they are and slices at load.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 16, 5, 7}))};
  g.outputs = {floatValue("y", dims({1, 144, 5, 7}))};
  std::vector<float> w(8 * 16 * 9), r(144 * 8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 23) - 0.1f;
  for (size_t i = 0; i < r.size(); ++i) r[i] = 0.02f * static_cast<float>(i % 17) - 0.15f;
  auto ints = [](const std::string& name, std::vector<int64_t> v) {
    const auto n = static_cast<int64_t>(v.size());
    return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Int64, {n}, v), {}};
  };
  g.initializers = {valueInit("w", {8, 16, 3, 3}, w), valueInit("g", {144, 8}, r), ints("s0", {0}), ints("e0", {48}),
                    ints("s1", {96}), ints("e1", {144}), ints("s2", {48}), ints("e2", {96}), ints("axis", {0}),
                    ints("axes23", {2, 3})};
  ir::Node conv = node("Conv", {"x", "w"}, {"c"});
  conv.attrs.set(ir::Attribute::makeInts("dilations", {6, 1}));
  conv.attrs.set(ir::Attribute::makeInts("pads", {6, 1, 6, 1}));
  ir::Node concat = node("Concat", {"g0", "g1", "g2"}, {"reordered"});
  concat.attrs.set(ir::Attribute::makeInt("axis", 0));
  g.nodes = {conv,
             node("Slice", {"g", "s0", "e0", "axis"}, {"g0"}),
             node("Slice", {"g", "s1", "e1", "axis"}, {"g1"}),
             node("Slice", {"g", "s2", "e2", "axis"}, {"g2"}),
             concat,
             node("Unsqueeze", {"reordered", "axes23"}, {"wr"}),
             node("Conv", {"c", "wr"}, {"y"})};
  for (bool weightless : {false, true}) {
    CAPTURE(weightless);
    auto l = lowerAll(g, {}, partitioner::Float16Compute::Float16, weightless);
    CHECK(l->changed("prune-conv-taps"));
    std::set<ir::Shape> stored;
    for (const auto& pooled : l->pool.weights()) stored.insert(pooled.tensor.shape());
    std::map<ir::OpKind, size_t> atLoad;
    for (const auto& op : l->partition.program.ops)
      if (program::isLoadTimeOp(l->partition.program, op)) ++atLoad[op.kind];
    // Weightless: the source weights are stored as they are, the cut and the reordered weight made at load.
    CHECK(stored.count({8, 16, 3, 3}) == (weightless ? 1u : 0u));
    CHECK(stored.count({144, 8}) == (weightless ? 1u : 0u));
    CHECK(stored.count({8, 16, 1, 3}) == (weightless ? 0u : 1u));
    CHECK(stored.count({144, 8, 1, 1}) == (weightless ? 0u : 1u));
    CHECK(atLoad[ir::OpKind::Slice] == (weightless ? 4u : 0u));
    CHECK(atLoad[ir::OpKind::Concat] == (weightless ? 1u : 0u));
    checkComputesSource(g, *l, {1, 16, 5, 7});
  }
}

TEST_CASE("pass fold-affine folds per-channel and scalar Mul/Add/Sub/Div into Conv and Gemm", "[codegen][passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 3, 6, 6}))};
  g.outputs = {floatValue("y", dims({1, 4, 6, 6}))};
  ir::Node conv = node("Conv", {"x", "w", "b"}, {"c"});
  conv.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
  // c * s[1,4,1,1] + t[4,1,1] - u[1] / v[scalar]: four ops, all folded.
  g.initializers = {floatInit("w", {4, 3, 3, 3}, 0.2f), floatInit("b", {4}, -0.1f),
                    valueInit("s", {1, 4, 1, 1}, {0.5f, -2.0f, 1.5f, 3.0f}), valueInit("t", {4, 1, 1}, {1, 2, 3, 4}),
                    valueInit("u", {1}, {0.25f}), valueInit("v", {}, {4.0f})};
  g.nodes = {conv, node("Mul", {"s", "c"}, {"m"}), node("Add", {"m", "t"}, {"a"}), node("Sub", {"a", "u"}, {"d"}),
             node("Div", {"d", "v"}, {"y"})};
  auto l = lowerAll(g);
  CHECK(l->changed("fold-affine"));
  CHECK(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Conv});
  checkComputesSource(g, *l, {1, 3, 6, 6});
  // A constant that broadcasts over more than the channels, and u - conv (conv as the subtrahend), stay.
  g.initializers.push_back(valueInit("row", {6}, {1, 2, 3, 4, 5, 6}));
  g.nodes = {conv, node("Mul", {"c", "row"}, {"m"}), node("Sub", {"u", "m"}, {"y"})};
  auto kept = lowerAll(g);
  CHECK_FALSE(kept->changed("fold-affine"));
  CHECK(kept->kinds() == std::vector<ir::OpKind>{ir::OpKind::Conv, ir::OpKind::Mul, ir::OpKind::Sub});
  checkComputesSource(g, *kept, {1, 3, 6, 6});

  // Gemm with transB and beta: its C and B's columns take the affine.
  ir::Graph gg;
  gg.inputs = {floatValue("x", dims({2, 5}))};
  gg.outputs = {floatValue("y", dims({2, 3}))};
  ir::Node gemm = node("Gemm", {"x", "bt", "cc"}, {"g"});
  gemm.attrs.set(ir::Attribute::makeInt("transB", 1));
  gemm.attrs.set(ir::Attribute::makeFloat("beta", 0.5f));
  gg.initializers = {floatInit("bt", {3, 5}, 0.1f), floatInit("cc", {3}, 0.3f), valueInit("k", {3}, {2, -1, 0.5f})};
  gg.nodes = {gemm, node("Mul", {"g", "k"}, {"y"})};
  auto lg = lowerAll(gg);
  CHECK(lg->changed("fold-affine"));
  CHECK(lg->kinds() == std::vector<ir::OpKind>{ir::OpKind::Gemm});
  checkComputesSource(gg, *lg, {2, 5});
}

TEST_CASE("pass match-activations turns x * Clip(x + 3, 0, 6) / 6 into HardSwish", "[codegen][passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2, 8}))};
  g.outputs = {floatValue("y", dims({2, 8}))};
  g.initializers = {valueInit("three", {}, {3}), valueInit("zero", {}, {0}), valueInit("six", {}, {6})};
  g.nodes = {node("Relu", {"x"}, {"r"}), node("Add", {"r", "three"}, {"t"}), node("Clip", {"t", "zero", "six"}, {"c"}),
             node("Mul", {"c", "r"}, {"m"}), node("Div", {"m", "six"}, {"y"})};
  auto l = lowerAll(g);
  CHECK(l->changed("match-activations"));
  CHECK(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Relu, ir::OpKind::HardSwish});
  checkComputesSource(g, *l, {2, 8});
  // Clip to another range is not HardSwish.
  g.initializers[2] = valueInit("six", {}, {5});
  CHECK_FALSE(lowerAll(g)->changed("match-activations"));
}

TEST_CASE("pass match-activations turns x * HardSigmoid(x) with alpha 1/6 and beta 1/2 into HardSwish",
          "[codegen][passes]") {
  // PyTorch's export of Hardswish before opset 14, after a Conv: the HardSwish it becomes fuses into the Conv.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 2, 5, 5}))};
  g.outputs = {floatValue("y", dims({1, 4, 5, 5}))};
  g.initializers = {floatInit("w", {4, 2, 3, 3}, -0.9f)};
  ir::Node conv = node("Conv", {"x", "w"}, {"c"});
  conv.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
  ir::Node hs = node("HardSigmoid", {"c"}, {"s"});
  hs.attrs.set(ir::Attribute::makeFloat("alpha", 1.0f / 6.0f));
  for (bool sigmoidFirst : {false, true}) {
    g.nodes = {conv, hs, sigmoidFirst ? node("Mul", {"s", "c"}, {"y"}) : node("Mul", {"c", "s"}, {"y"})};
    auto l = lowerAll(g);
    CHECK(l->changed("match-activations"));
    REQUIRE(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Conv});
    CHECK(std::get<ops::ConvAttrs>(l->partition.program.ops[0].typed).epilogue ==
          ops::Epilogue{ops::Activation::HardSwish, 0, 0});
    checkComputesSource(g, *l, {1, 2, 5, 5});
  }
  // HardSigmoid's default alpha (0.2) makes another function; a HardSigmoid of another value is a gate, not HardSwish.
  ir::Node other = node("HardSigmoid", {"c"}, {"s"});
  g.nodes = {conv, other, node("Mul", {"c", "s"}, {"y"})};
  CHECK_FALSE(lowerAll(g)->changed("match-activations"));
  g.inputs.push_back(floatValue("z", dims({1, 4, 5, 5})));
  ir::Node gate = node("HardSigmoid", {"z"}, {"s"});
  gate.attrs.set(ir::Attribute::makeFloat("alpha", 1.0f / 6.0f));
  g.nodes = {conv, gate, node("Mul", {"c", "s"}, {"y"})};
  CHECK_FALSE(lowerAll(g)->changed("match-activations"));
}

TEST_CASE("pass match-activations turns PyTorch's spelled-out GELU into Gelu, which fuse-epilogue folds into a Gemm",
          "[codegen][passes]") {
  // 0.5 x (1 + erf(x / sqrt 2)) after MatMul + bias, in the three orders exporters write the halving, the division
  // as Div by sqrt 2 or Mul by 1 / sqrt 2: one Gemm with a Gelu epilogue (fused through the Reshape after it),
  // computing the formula written out here.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({3, 6}))};
  g.outputs = {floatValue("y", dims({3, 5}))};
  const float root2 = static_cast<float>(std::sqrt(2.0)), half = static_cast<float>(std::sqrt(0.5));
  g.initializers = {floatInit("w", {6, 5}, -0.8f), floatInit("bias", {5}, -0.6f), valueInit("root2", {}, {root2}),
                    valueInit("rhalf", {}, {half}),  valueInit("one", {}, {1}),       valueInit("half", {}, {0.5f})};
  const std::vector<ir::Node> head = {node("MatMul", {"x", "w"}, {"mm"}), node("Add", {"mm", "bias"}, {"h"})};
  const std::vector<std::vector<ir::Node>> forms = {
      {node("Div", {"h", "root2"}, {"t"}), node("Erf", {"t"}, {"e"}), node("Add", {"e", "one"}, {"a"}),
       node("Mul", {"h", "a"}, {"m"}), node("Mul", {"m", "half"}, {"y"})},
      {node("Mul", {"h", "rhalf"}, {"t"}), node("Erf", {"t"}, {"e"}), node("Add", {"one", "e"}, {"a"}),
       node("Mul", {"h", "half"}, {"hh"}), node("Mul", {"hh", "a"}, {"y"})},
      {node("Div", {"h", "root2"}, {"t"}), node("Erf", {"t"}, {"e"}), node("Add", {"e", "one"}, {"a"}),
       node("Mul", {"a", "half"}, {"ah"}), node("Mul", {"h", "ah"}, {"y"})},
  };
  for (size_t f = 0; f < forms.size(); ++f) {
    INFO("form " << f);
    g.nodes = head;
    g.nodes.insert(g.nodes.end(), forms[f].begin(), forms[f].end());
    auto l = lowerAll(g);
    CHECK(l->run("match-activations").change.countOf("gelu_matched") == 1);
    // (fuse-matmul-add's Gemm sits between two Reshapes; the one after it leaves the partition, so it copies)
    REQUIRE(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Gemm, ir::OpKind::Reshape});
    CHECK(std::get<ops::GemmAttrs>(l->partition.program.ops[0].typed).epilogue ==
          ops::Epilogue{ops::Activation::Gelu, 0, 0});
    const ir::Tensor x = randomInput({3, 6}, 7);
    const ir::Tensor got = executeProgram(l->partition.program, l->pool, x);
    const float* xv = x.dataAs<float>();
    const ir::Tensor& w = g.initializers[0].tensor;
    const ir::Tensor& b = g.initializers[1].tensor;
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 5; ++c) {
        double h = b.dataAs<float>()[c];
        for (int64_t k = 0; k < 6; ++k) h += static_cast<double>(xv[r * 6 + k]) * w.dataAs<float>()[k * 5 + c];
        const double want = 0.5 * h * (1.0 + std::erf(h / std::sqrt(2.0)));
        CHECK(got.dataAs<float>()[r * 5 + c] == Approx(want).epsilon(1e-5).margin(1e-6));
      }
  }
  // Not GELU: another divisor, or 1 + erf read by something else too.
  g.nodes = head;
  g.nodes.insert(g.nodes.end(), forms[0].begin(), forms[0].end());
  g.initializers[2] = valueInit("root2", {}, {1.5f});
  CHECK(lowerAll(g)->run("match-activations").change.countOf("gelu_matched") == 0);
  g.initializers[2] = valueInit("root2", {}, {root2});
  CHECK(lowerAll(g)->run("match-activations").change.countOf("gelu_matched") == 1);
  g.nodes.push_back(node("Relu", {"a"}, {"ra"}));
  g.outputs.push_back(floatValue("ra", dims({3, 5})));
  CHECK(lowerAll(g)->run("match-activations").change.countOf("gelu_matched") == 0);
}

namespace {

// LayerNorm over x's last `norm` axes as PyTorch spells it before opset 17, with gamma and beta when given (as
// initializers "gamma" and "beta"); the ReduceMean axes as the attribute.
std::vector<ir::Node> layerNormNodes(std::vector<int64_t> axes, bool gamma, bool beta) {
  ir::Node mean = node("ReduceMean", {"x"}, {"mean"}, 13), var = node("ReduceMean", {"sq"}, {"var"}, 13);
  mean.attrs.set(ir::Attribute::makeInts("axes", axes));
  var.attrs.set(ir::Attribute::makeInts("axes", axes));
  std::vector<ir::Node> nodes = {mean,
                                 node("Sub", {"x", "mean"}, {"d"}),
                                 node("Pow", {"d", "two"}, {"sq"}),
                                 var,
                                 node("Add", {"var", "eps"}, {"ve"}),
                                 node("Sqrt", {"ve"}, {"s"}),
                                 node("Div", {"d", "s"}, {gamma || beta ? "n" : "y"})};
  if (gamma) nodes.push_back(node("Mul", {"n", "gamma"}, {beta ? "m" : "y"}));
  if (beta) nodes.push_back(node("Add", {"beta", gamma ? "m" : "n"}, {"y"}));
  return nodes;
}

}  // namespace

TEST_CASE("pass match-layer-norm turns PyTorch's spelled-out LayerNorm into LayerNormalization", "[codegen][passes]") {
  // Over the last axis with gamma and beta, without either, and over the last two axes with a gamma of [1, 4, 5]:
  // one LayerNormalization computing the formula written out here (mean and variance in double).
  struct Case {
    const char* name;
    std::vector<int64_t> axes;
    bool gamma, beta;
    ir::Shape gammaShape;
  };
  const std::vector<Case> cases = {{"last axis, gamma and beta", {-1}, true, true, {5}},
                                   {"no gamma, no beta", {2}, false, false, {}},
                                   {"last two axes, gamma [1, 4, 5], beta", {-2, -1}, true, true, {1, 4, 5}}};
  for (const Case& c : cases) {
    INFO(c.name);
    ir::Graph g;
    g.inputs = {floatValue("x", dims({3, 4, 5}))};
    g.outputs = {floatValue("y", dims({3, 4, 5}))};
    const int64_t inner = c.axes.size() == 2 ? 20 : 5;
    ir::Shape betaShape = c.axes.size() == 2 ? ir::Shape{4, 5} : ir::Shape{5};
    g.initializers = {valueInit("two", {}, {2}), valueInit("eps", {}, {1e-5f})};
    if (c.gamma) g.initializers.push_back(floatInit("gamma", c.gammaShape, 0.6f));
    if (c.beta) g.initializers.push_back(floatInit("beta", betaShape, -0.4f));
    g.nodes = layerNormNodes(c.axes, c.gamma, c.beta);
    auto l = lowerAll(g);
    CHECK(l->run("match-layer-norm").change.countOf("layer_norms_matched") == 1);
    REQUIRE(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::LayerNormalization});
    const ir::Tensor x = randomInput({3, 4, 5}, 11);
    const ir::Tensor got = executeProgram(l->partition.program, l->pool, x);
    const float* xv = x.dataAs<float>();
    for (int64_t r = 0; r < 60 / inner; ++r) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < inner; ++k) mean += xv[r * inner + k];
      mean /= static_cast<double>(inner);
      for (int64_t k = 0; k < inner; ++k) var += (xv[r * inner + k] - mean) * (xv[r * inner + k] - mean);
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(inner) + 1e-5);
      for (int64_t k = 0; k < inner; ++k) {
        const double gk = c.gamma ? 0.6 + 0.25 * static_cast<double>(k % 7) : 1.0;  // (floatInit's values)
        const double bk = c.beta ? -0.4 + 0.25 * static_cast<double>(k % 7) : 0.0;
        const double want = (xv[r * inner + k] - mean) * inv * gk + bk;
        CHECK(got.dataAs<float>()[r * inner + k] == Approx(want).epsilon(1e-5).margin(1e-5));
      }
    }
  }
  // Not a LayerNorm here: the mean over a leading axis, a power of 3, or d read by a third op.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({3, 4, 5}))};
  g.outputs = {floatValue("y", dims({3, 4, 5}))};
  g.initializers = {valueInit("two", {}, {2}), valueInit("eps", {}, {1e-5f})};
  g.nodes = layerNormNodes({1}, false, false);
  CHECK(lowerAll(g)->run("match-layer-norm").change.countOf("layer_norms_matched") == 0);
  g.nodes = layerNormNodes({-1}, false, false);
  g.initializers[0] = valueInit("two", {}, {3});
  CHECK(lowerAll(g)->run("match-layer-norm").change.countOf("layer_norms_matched") == 0);
  g.initializers[0] = valueInit("two", {}, {2});
  CHECK(lowerAll(g)->run("match-layer-norm").change.countOf("layer_norms_matched") == 1);
  g.nodes.push_back(node("Relu", {"d"}, {"rd"}));
  g.outputs.push_back(floatValue("rd", dims({3, 4, 5})));
  CHECK(lowerAll(g)->run("match-layer-norm").change.countOf("layer_norms_matched") == 0);
}

TEST_CASE("pass fuse-epilogue takes HardSwish and a following scalar scale and shift", "[codegen][passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 2, 5, 5}))};
  g.outputs = {floatValue("y", dims({1, 4, 5, 5}))};
  g.initializers = {floatInit("w", {4, 2, 1, 1}, -0.3f), valueInit("s", {1}, {1.5f}), valueInit("t", {1}, {-0.25f})};
  g.nodes = {node("Conv", {"x", "w"}, {"c"}), node("HardSwish", {"c"}, {"h"}), node("Mul", {"s", "h"}, {"m"}),
             node("Add", {"m", "t"}, {"y"})};
  auto l = lowerAll(g);
  CHECK(l->changed("fuse-epilogue"));
  REQUIRE(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Conv});
  CHECK(std::get<ops::ConvAttrs>(l->partition.program.ops[0].typed).epilogue ==
        ops::Epilogue{ops::Activation::HardSwish, 0, 0, 1.5f, -0.25f});
  checkComputesSource(g, *l, {1, 2, 5, 5});
}

TEST_CASE("pass fuse-epilogue takes x * Sigmoid(x) as a Swish epilogue", "[codegen][passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 2, 5, 5}))};
  g.outputs = {floatValue("y", dims({1, 4, 5, 5}))};
  g.initializers = {floatInit("w", {4, 2, 3, 3}, -0.3f), valueInit("s", {1}, {2.0f})};
  ir::Node conv = node("Conv", {"x", "w"}, {"c"});
  conv.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
  // SiLU as PyTorch exports it, the Mul's operands in either order, then a scalar scale that joins too.
  g.nodes = {conv, node("Sigmoid", {"c"}, {"g"}), node("Mul", {"g", "c"}, {"m"}), node("Mul", {"m", "s"}, {"y"})};
  auto l = lowerAll(g);
  CHECK(l->changed("fuse-epilogue"));
  REQUIRE(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Conv});
  CHECK(std::get<ops::ConvAttrs>(l->partition.program.ops[0].typed).epilogue ==
        ops::Epilogue{ops::Activation::Swish, 0, 0, 2.0f, 0});
  checkComputesSource(g, *l, {1, 2, 5, 5});
  // Sigmoid(x) times something else is a Sigmoid epilogue and a scale, not Swish.
  g.nodes = {conv, node("Sigmoid", {"c"}, {"g"}), node("Mul", {"g", "s"}, {"y"})};
  auto plain = lowerAll(g);
  REQUIRE(plain->kinds() == std::vector<ir::OpKind>{ir::OpKind::Conv});
  CHECK(std::get<ops::ConvAttrs>(plain->partition.program.ops[0].typed).epilogue ==
        ops::Epilogue{ops::Activation::Sigmoid, 0, 0, 2.0f, 0});
  checkComputesSource(g, *plain, {1, 2, 5, 5});
}

TEST_CASE("pass fuse-qdq turns QDQ Conv and MatMul groups into integer ops on 8-bit weights", "[codegen][passes]") {
  // x (float) -> Q -> DQ -> Conv(DQ(w int8, per channel), DQ(b int32)) -> Q -> DQ -> Flatten -> MatMul(DQ(w2 int8,
  // per column)) -> Q -> DQ -> y (float): the source graph evaluated node by node is the expectation.
  auto tensor = [](const char* name, ir::ElemType type, ir::Shape shape, auto values) {
    return ir::Initializer{name, ir::Tensor::fromVector(type, std::move(shape), values), {}};
  };
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 2, 4, 4}))};
  g.outputs = {floatValue("y", dims({1, 3}))};
  std::vector<int8_t> w(3 * 2 * 3 * 3), w2(48 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 17 % 255) - 127);
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = static_cast<int8_t>(static_cast<int>(i * 31 % 255) - 127);
  const float xs = 0.02f;
  const std::vector<float> ws{0.01f, 0.002f, 0.005f};
  g.initializers = {valueInit("xs", {}, {xs}), tensor("zp", ir::ElemType::Uint8, {}, std::vector<uint8_t>{128}),
                    tensor("w", ir::ElemType::Int8, {3, 2, 3, 3}, w), valueInit("ws", {3}, ws),
                    tensor("b", ir::ElemType::Int32, {3}, std::vector<int32_t>{100, -2000, 37}),
                    valueInit("bs", {3}, {xs * ws[0], xs * ws[1], xs * ws[2]}), valueInit("cs", {}, {0.05f}),
                    tensor("w2", ir::ElemType::Int8, {48, 3}, w2), valueInit("w2s", {3}, {0.003f, 0.004f, 0.001f}),
                    valueInit("ys", {}, {0.1f})};
  ir::Node wdq = node("DequantizeLinear", {"w", "ws"}, {"wf"});
  wdq.attrs.set(ir::Attribute::makeInt("axis", 0));
  ir::Node bdq = node("DequantizeLinear", {"b", "bs"}, {"bf"});
  bdq.attrs.set(ir::Attribute::makeInt("axis", 0));
  ir::Node conv = node("Conv", {"xf", "wf", "bf"}, {"c"});
  conv.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
  ir::Node w2dq = node("DequantizeLinear", {"w2", "w2s"}, {"w2f"});
  w2dq.attrs.set(ir::Attribute::makeInt("axis", 1));
  g.nodes = {node("QuantizeLinear", {"x", "xs", "zp"}, {"xq"}), node("DequantizeLinear", {"xq", "xs", "zp"}, {"xf"}),
             wdq, bdq, conv, node("QuantizeLinear", {"c", "cs", "zp"}, {"cq"}),
             node("DequantizeLinear", {"cq", "cs", "zp"}, {"cf"}), node("Flatten", {"cf"}, {"flat"}), w2dq,
             node("MatMul", {"flat", "w2f"}, {"m"}), node("QuantizeLinear", {"m", "ys", "zp"}, {"mq"}),
             node("DequantizeLinear", {"mq", "ys", "zp"}, {"y"})};
  auto l = lowerAll(g);
  CHECK(l->changed("fuse-qdq"));
  CHECK(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::QuantizeLinear, ir::OpKind::QLinearConv,
                                              ir::OpKind::QLinearMatMul, ir::OpKind::DequantizeLinear});
  // The weights stay 8-bit: no float32 weight in the program.
  for (const auto& t : l->partition.program.tensors)
    if (t.kind == program::TensorKind::Weight) CHECK((t.type != ir::ElemType::Float || t.shape.size() <= 1));
  checkComputesSource(g, *l, {1, 2, 4, 4});
  // A bias in other units than x_scale * w_scale is not QLinearConv's: the group stays as it is.
  g.initializers[5] = valueInit("bs", {3}, {0.1f, 0.1f, 0.1f});
  auto kept = lowerAll(g);
  const auto keptKinds = kept->kinds();
  CHECK(std::count(keptKinds.begin(), keptKinds.end(), ir::OpKind::QLinearConv) == 0);
  checkComputesSource(g, *kept, {1, 2, 4, 4});
}

TEST_CASE("pass fuse-qdq takes the forms other quantizers write: a float bias, Relu or Clip before the "
          "QuantizeLinear, Gemm with transB, MatMul + Add",
          "[codegen][passes]") {
  // x -> Q -> DQ -> (the product) -> [activation] -> Q -> DQ -> y, each form on its own; the source graph evaluated
  // node by node is the expectation, to one output step (a float bias is rounded to x_scale x w_scale units).
  auto tensor = [](const char* name, ir::ElemType type, ir::Shape shape, auto values) {
    return ir::Initializer{name, ir::Tensor::fromVector(type, std::move(shape), values), {}};
  };
  const float xs = 0.01f, ys = 0.02f;
  std::vector<int8_t> w(4 * 12);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 29 % 201) - 100);
  struct Form {
    const char* name;
    ir::OpKind fused;
  };
  for (const Form& form : {Form{"conv+float bias+relu", ir::OpKind::QLinearConv},
                           Form{"gemm transB+float bias+clip", ir::OpKind::QLinearMatMul},
                           Form{"matmul+add+relu", ir::OpKind::QLinearMatMul}}) {
    CAPTURE(form.name);
    const std::string name = form.name;
    const bool conv = name.rfind("conv", 0) == 0, gemm = name.rfind("gemm", 0) == 0;
    ir::Graph g;
    g.inputs = {floatValue("x", conv ? dims({1, 12, 3, 3}) : dims({3, 12}))};
    g.outputs = {floatValue("y", conv ? dims({1, 4, 3, 3}) : dims({3, 4}))};
    g.initializers = {valueInit("xs", {}, {xs}), tensor("zp", ir::ElemType::Uint8, {}, std::vector<uint8_t>{128}),
                      valueInit("ys", {}, {ys}), valueInit("ws", {4}, {0.004f, 0.002f, 0.003f, 0.001f}),
                      valueInit("b", {4}, {0.11f, -0.07f, 0.02f, 0.3f}), valueInit("lo", {}, {0.0f}),
                      valueInit("hi", {}, {0.5f})};
    // Conv's [4, 12, 1, 1] and Gemm's transposed [4, 12] are per output channel on axis 0, MatMul's [12, 4] on 1.
    g.initializers.push_back(conv   ? tensor("w", ir::ElemType::Int8, {4, 12, 1, 1}, w)
                             : gemm ? tensor("w", ir::ElemType::Int8, {4, 12}, w)
                                    : tensor("w", ir::ElemType::Int8, {12, 4}, w));
    ir::Node wdq = node("DequantizeLinear", {"w", "ws"}, {"wf"});
    wdq.attrs.set(ir::Attribute::makeInt("axis", conv || gemm ? 0 : 1));
    g.nodes = {node("QuantizeLinear", {"x", "xs", "zp"}, {"xq"}), node("DequantizeLinear", {"xq", "xs", "zp"}, {"xf"}),
               wdq};
    if (conv) {
      g.nodes.push_back(node("Conv", {"xf", "wf", "b"}, {"p"}));
      g.nodes.push_back(node("Relu", {"p"}, {"a"}));
    } else if (gemm) {
      ir::Node gm = node("Gemm", {"xf", "wf", "b"}, {"p"});
      gm.attrs.set(ir::Attribute::makeInt("transB", 1));
      g.nodes.push_back(gm);
      g.nodes.push_back(node("Clip", {"p", "lo", "hi"}, {"a"}));
    } else {
      g.nodes.push_back(node("MatMul", {"xf", "wf"}, {"m"}));
      g.nodes.push_back(node("Add", {"m", "b"}, {"p"}));
      g.nodes.push_back(node("Relu", {"p"}, {"a"}));
    }
    g.nodes.push_back(node("QuantizeLinear", {"a", "ys", "zp"}, {"aq"}));
    g.nodes.push_back(node("DequantizeLinear", {"aq", "ys", "zp"}, {"y"}));
    auto l = lowerAll(g);
    CHECK(l->changed("fuse-qdq"));
    CHECK(l->kinds() ==
          std::vector<ir::OpKind>{ir::OpKind::QuantizeLinear, form.fused, ir::OpKind::DequantizeLinear});
    ir::Tensor x = randomInput(conv ? ir::Shape{1, 12, 3, 3} : ir::Shape{3, 12}, 7);
    const ir::Tensor ours = executeProgram(l->partition.program, l->pool, x), source = evaluateGraph(g, x);
    REQUIRE(ours.shape() == source.shape());
    size_t differ = 0, clamped = 0;
    for (uint64_t i = 0; i < ours.elementCount(); ++i) {
      const float a = ours.dataAs<float>()[i], b = source.dataAs<float>()[i];
      INFO("element " << i << ": " << a << " vs " << b);
      REQUIRE(std::abs(a - b) <= ys * 1.01f);
      differ += a != b;
      clamped += b == 0.0f;
    }
    CHECK(differ <= ours.elementCount() / 10);
    CHECK(clamped > 0);  // the activation's lower bound is exercised
  }
}

TEST_CASE("a weight behind DequantizeLinear that no integer op takes stays quantized and is dequantized at load",
          "[codegen][passes]") {
  // x [3, 64] x DQ(w int8 [64, 40], per column) + bias, and x x Transpose(DQ(v uint8 [24, 64])): both products float.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({3, 64}))};
  g.outputs = {floatValue("y", dims({3, 40})), floatValue("z", dims({3, 24}))};
  std::vector<int8_t> w(64 * 40);
  std::vector<uint8_t> v(24 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 29 % 255) - 127);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 13 % 256);
  std::vector<float> ws(40), bias(40);
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = 0.002f + 0.0001f * static_cast<float>(i), bias[i] = 0.01f * i;
  g.initializers = {{"w", ir::Tensor::fromVector(ir::ElemType::Int8, {64, 40}, w), {}},
                    {"ws", ir::Tensor::fromVector(ir::ElemType::Float, {40}, ws), {}},
                    {"bias", ir::Tensor::fromVector(ir::ElemType::Float, {40}, bias), {}},
                    {"v", ir::Tensor::fromVector(ir::ElemType::Uint8, {24, 64}, v), {}},
                    {"vs", ir::Tensor::fromVector(ir::ElemType::Float, {}, std::vector<float>{0.01f}), {}},
                    {"vz", ir::Tensor::fromVector(ir::ElemType::Uint8, {}, std::vector<uint8_t>{128}), {}}};
  ir::Node wdq = node("DequantizeLinear", {"w", "ws"}, {"wf"});
  wdq.attrs.set(ir::Attribute::makeInt("axis", 1));
  g.nodes = {wdq,
             node("MatMul", {"x", "wf"}, {"m"}),
             node("Add", {"m", "bias"}, {"y"}),
             node("DequantizeLinear", {"v", "vs", "vz"}, {"vf"}),
             node("Transpose", {"vf"}, {"vt"}),
             node("MatMul", {"x", "vt"}, {"z"})};
  auto l = lowerAll(g);
  CHECK(l->run("fold-constants").change.countOf("load_time_ops") == 3);
  const program::Program& p = l->partition.program;
  CHECK(program::hasLoadTimeTensors(p));
  // The weights stored are the 8-bit codes (and small scales): no float32 weight of more than one dimension.
  for (const auto& t : p.tensors)
    if (t.kind == program::TensorKind::Weight) CHECK((t.type != ir::ElemType::Float || t.shape.size() <= 1));
  // The two B operands are load-time tensors in the target's panels, packed once computed; the ops that compute
  // them are load-time ops; the products (a Gemm for MatMul + Add) run on them.
  std::map<std::string, program::TensorDesc> loadTime;
  for (const auto& t : p.tensors)
    if (t.kind == program::TensorKind::LoadTime) loadTime[std::string(t.name)] = t;
  REQUIRE(loadTime.size() == 3);
  CHECK(loadTime.at("wf").layout == kPanels32);
  CHECK(loadTime.at("vf").layout.plain());  // read by the Transpose
  CHECK(loadTime.at("vt").layout == kPanels32);
  size_t atLoad = 0;
  for (const auto& op : p.ops) atLoad += program::isLoadTimeOp(p, op) ? 1 : 0;
  CHECK(atLoad == 3);
  const auto kinds = l->kinds();
  CHECK(std::count(kinds.begin(), kinds.end(), ir::OpKind::Gemm) == 1);
  CHECK(std::count(kinds.begin(), kinds.end(), ir::OpKind::MatMul) == 1);
  CHECK(program::validate(p, l->pool.weights().size()));
  // The program computes what the source graph does (both outputs).
  ir::Tensor x = randomInput({3, 64}, 9);
  auto expected = evaluateNodes(g, {{"x", x}});
  requireClose(executeProgram(p, l->pool, x), expected.at("y"));
}

namespace {

ir::ValueInfo halfValue(const std::string& name, std::vector<ir::Dim> shape) {
  ir::ValueInfo v = floatValue(name, std::move(shape));
  v.type = ir::ElemType::Float16;
  return v;
}

// A float16 tensor of the float16 values nearest to `values`.
ir::Tensor halfTensor(ir::Shape shape, const std::vector<float>& values) {
  std::vector<uint16_t> bits;
  for (float v : values) bits.push_back(cpu::floatToHalf(v));
  return ir::Tensor::fromVector(ir::ElemType::Float16, std::move(shape), bits);
}

ir::Tensor widenedTensor(const ir::Tensor& half) {
  std::vector<float> v;
  for (uint64_t i = 0; i < half.elementCount(); ++i) v.push_back(cpu::halfToFloat(half.dataAs<uint16_t>()[i]));
  return ir::Tensor::fromVector(ir::ElemType::Float, half.shape(), v);
}

ir::Node castTo(const std::string& in, const std::string& out, ir::ElemType to) {
  ir::Node n = node("Cast", {in}, {out});
  n.attrs.set(ir::Attribute::makeInt("to", static_cast<int64_t>(to)));
  return n;
}

// x [2, 3] float16 -> MatMul w -> Add b -> Relu -> Cast to float32 -> Softmax -> Cast to float16 (an explicit
// rounding) -> Mul scale -> y [2, 4] float16. With `widened`, the float32 graph a target computing float16 in float32
// must equal: float32 weights (the float16 values), rounding only at the explicit Cast and at the output.
ir::Graph halfGraph(bool widened) {
  const ir::Tensor w = halfTensor({3, 4}, {0.31f, -0.72f, 0.113f, 0.9f, -0.44f, 0.27f, 0.61f, -0.05f, 0.77f, -0.93f,
                                           0.018f, 0.52f});
  const ir::Tensor b = halfTensor({4}, {0.1f, -0.2f, 0.333f, 0.05f});
  const ir::Tensor scale = halfTensor({4}, {1.7f, -0.6f, 2.3f, 0.45f});
  auto init = [&](const std::string& name, const ir::Tensor& t) {
    return ir::Initializer{name, widened ? widenedTensor(t) : t, std::nullopt};
  };
  const auto f16 = ir::ElemType::Float16, f32 = ir::ElemType::Float;
  ir::Graph g;
  g.inputs = {widened ? floatValue("x", dims({2, 3})) : halfValue("x", dims({2, 3}))};
  g.outputs = {halfValue("y", dims({2, 4}))};
  g.initializers = {init("w", w), init("b", b), init("scale", scale)};
  g.nodes = {node("MatMul", {"x", "w"}, {"m"}), node("Add", {"m", "b"}, {"a"}), node("Relu", {"a"}, {"r"}),
             castTo("r", "cf", f32), node("Softmax", {"cf"}, {"s"}), castTo("s", "h", f16)};
  if (widened) {
    g.nodes.push_back(castTo("h", "hf", f32));
    g.nodes.push_back(node("Mul", {"hf", "scale"}, {"yf"}));
    g.nodes.push_back(castTo("yf", "y", f16));
  } else {
    g.nodes.push_back(node("Mul", {"h", "scale"}, {"y"}));
  }
  return g;
}

}  // namespace

TEST_CASE("pass widen-float16 computes float16 in float32 between ops, rounding at explicit Casts and outputs",
          "[codegen][passes]") {
  const ir::Graph g = halfGraph(false);
  auto l = lowerAll(g, {}, partitioner::Float16Compute::Float32);
  const ir::PassRun& run = l->run("widen-float16");
  CHECK(run.changed == 1);
  CHECK(run.change.countOf("weights_widened") == 3);  // w, b, scale
  CHECK(run.change.countOf("inputs_widened") == 2);   // x on entry, h after the explicit rounding
  CHECK(run.change.countOf("values_widened") == 3);   // m, a, r
  CHECK(run.change.countOf("outputs_rounded") == 1);  // y on exit
  CHECK(run.change.countOf("casts_removed") == 1);    // Cast(r) to float32
  // Later passes see float32: MatMul + Add became a Gemm.
  CHECK(l->changed("fuse-matmul-add"));
  const auto& program = l->partition.program;
  CHECK(program.tensors[program.inputs[0]].type == ir::ElemType::Float16);
  CHECK(program.tensors[program.outputs[0]].type == ir::ElemType::Float16);
  size_t casts = 0;
  for (const auto& op : program.ops) casts += op.kind == ir::OpKind::Cast;
  CHECK(casts == 4);  // x widened, the explicit rounding and its widening, y rounded
  // Weights: float32 tensors stored as their float16 initializers, byte for byte.
  const auto weights = weightDescs(*l);
  REQUIRE(weights.size() == 3);
  for (const auto& [name, d] : weights) {
    CAPTURE(name);
    CHECK(d.type == ir::ElemType::Float);
    CHECK(d.layout.kind == cpu::WeightLayoutKind::Float16Widened);
    const ir::Tensor& stored = l->pool.weights()[d.index].tensor;
    CHECK(stored.type() == ir::ElemType::Float16);
    CHECK(d.size == stored.elementCount() * 4);
  }
  CHECK(l->pool.weights().size() == 3);

  // The program computes what the float32 graph with roundings only at the explicit Cast and the output computes,
  // to one float16 step (the Gemm sums in another order than MatMul and Add).
  const ir::Tensor x = halfTensor({2, 3}, {0.5f, -1.25f, 0.8f, 1.1f, 0.02f, -0.6f});
  const ir::Tensor ours = executeProgram(program, l->pool, x);
  const ir::Graph twin = halfGraph(true);
  const ir::Tensor expected = evaluateNodes(twin, {{"x", widenedTensor(x)}}).at("y");
  REQUIRE(ours.type() == ir::ElemType::Float16);
  REQUIRE(ours.shape() == expected.shape());
  size_t equal = 0;
  for (uint64_t i = 0; i < ours.elementCount(); ++i) {
    const int a = ours.dataAs<uint16_t>()[i], e = expected.dataAs<uint16_t>()[i];
    INFO("element " << i << ": " << a << " vs " << e);
    CHECK(std::abs(a - e) <= 1);
    equal += a == e;
  }
  CHECK(equal >= ours.elementCount() - 1);

  // A target with float16 arithmetic: no change, every op rounds, weights float16 as they are.
  auto half = lowerAll(g);
  CHECK(!half->changed("widen-float16"));
  for (const auto& [name, d] : weightDescs(*half)) {
    CAPTURE(name);
    CHECK(d.type == ir::ElemType::Float16);
    CHECK(d.layout.plain());
  }
  // A float32 graph has nothing to widen.
  CHECK(!lowerAll(gemmBatchNormGraph(false), {}, partitioner::Float16Compute::Float32)->changed("widen-float16"));
}

TEST_CASE("pass widen-float16: a result leaving the partition is rounded there and read unrounded inside, and CastLike "
          "to float16 rounds",
          "[codegen][passes]") {
  // a = x + c leaves the partition and is read by b = a * a; l = CastLike(b, x) rounds b; z = Relu(l) leaves.
  ir::Graph g;
  g.inputs = {halfValue("x", dims({2, 3}))};
  g.outputs = {halfValue("a", dims({2, 3})), halfValue("z", dims({2, 3}))};
  g.initializers = {ir::Initializer{"c", halfTensor({3}, {0.3337f, -1.71f, 2.05f}), std::nullopt}};
  g.nodes = {node("Add", {"x", "c"}, {"a"}), node("Mul", {"a", "a"}, {"b"}), node("CastLike", {"b", "x"}, {"l"}),
             node("Relu", {"l"}, {"z"})};
  auto facts = analysis::analyzeGraph(g, {});
  REQUIRE(facts);
  partitioner::Partition all;
  for (size_t i : facts->order) all.nodes.push_back(i);
  weightshare::WeightPool pool;
  codegen::LowerOptions options;
  options.float16Compute = partitioner::Float16Compute::Float32;
  auto lowered = codegen::lowerPartition(
      g, *facts, all, outsideIds(*facts, {"a", "z"}), [&](const ir::Tensor& t, const cpu::WeightLayout& l) { return pool.intern(t, l); },
      options);
  INFO((lowered ? std::string() : lowered.error().message()));
  REQUIRE(lowered);
  const auto& run = *std::find_if(lowered->passes.begin(), lowered->passes.end(),
                                  [](const ir::PassRun& p) { return p.name == "widen-float16"; });
  CHECK(run.change.countOf("weights_widened") == 1);   // c
  CHECK(run.change.countOf("inputs_widened") == 2);    // x, and l after the rounding CastLike
  CHECK(run.change.countOf("values_widened") == 1);    // b
  CHECK(run.change.countOf("outputs_rounded") == 2);   // a and z on their way out
  const auto& p = lowered->program;
  REQUIRE(p.outputs.size() == 2);
  for (int32_t t : p.outputs) CHECK(p.tensors[t].type == ir::ElemType::Float16);

  // Run it: a is x + c rounded; b reads the unrounded sum; l and z are rounded.
  const std::vector<float> xs = {0.1f, -0.77f, 1.3f, 2.71f, -0.002f, 0.45f};
  const ir::Tensor x = halfTensor({2, 3}, xs);
  std::vector<ir::Tensor> bound(p.tensors.size());
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    const auto& d = p.tensors[t];
    if (d.kind == program::TensorKind::Input) bound[t] = x;
    if (d.kind == program::TensorKind::Weight) {
      REQUIRE(d.layout.kind == cpu::WeightLayoutKind::Float16Widened);
      bound[t] = widenedTensor(pool.weights()[d.index].tensor);
    }
    if (d.kind == program::TensorKind::Arena || d.kind == program::TensorKind::Output)
      bound[t] = ir::Tensor::allocate(d.type, program::toShape(d.shape)).value();
  }
  for (const auto& op : p.ops) {
    std::vector<const ir::Tensor*> ins;
    std::vector<ir::Tensor*> outs;
    for (int32_t i : op.inputs) ins.push_back(i < 0 ? nullptr : &bound[i]);
    for (int32_t o : op.outputs) outs.push_back(&bound[o]);
    const ir::Attributes none;
    REQUIRE(kernels::run(kernels::OpContext{op.kind, op.opset, none, op.name, nullptr, &op.typed}, ins, outs));
  }
  const float cs[3] = {cpu::halfToFloat(cpu::floatToHalf(0.3337f)), cpu::halfToFloat(cpu::floatToHalf(-1.71f)),
                       cpu::halfToFloat(cpu::floatToHalf(2.05f))};
  auto round = [](float v) { return cpu::floatToHalf(v); };
  for (size_t i = 0; i < xs.size(); ++i) {
    const float sum = cpu::halfToFloat(cpu::floatToHalf(xs[i])) + cs[i % 3];
    const uint16_t l = round(sum * sum);
    CHECK(bound[p.outputs[0]].dataAs<uint16_t>()[i] == round(sum));
    CHECK(bound[p.outputs[1]].dataAs<uint16_t>()[i] == round(std::max(cpu::halfToFloat(l), 0.0f)));
  }
}

TEST_CASE("ops touching a bounded value are emitted at the analysis' bounds, never as views, and left unfused",
          "[codegen][passes][bounded]") {
  // scores [6] > 0 -> NonZero [1, <=6] -> Squeeze -> rows [<=6] -> Gather(data [6, 4]) -> MatMul(w [4, 3]) -> Relu -> y.
  ir::Graph g;
  g.inputs = {floatValue("scores", dims({6})), floatValue("data", dims({6, 4}))};
  g.outputs = {floatValue("y", {})};
  g.initializers = {floatInit("zero", {}, 0.0f), floatInit("w", {4, 3}, -0.4f),
                    ir::Initializer{"axes", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, std::vector<int64_t>{0}),
                                    std::nullopt}};
  g.nodes = {node("Greater", {"scores", "zero"}, {"keep"}), node("NonZero", {"keep"}, {"nz"}),
             node("Squeeze", {"nz", "axes"}, {"rows"}),     node("Gather", {"data", "rows"}, {"picked"}),
             node("MatMul", {"picked", "w"}, {"mm"}),       node("Relu", {"mm"}, {"y"})};
  auto l = lowerAll(g);
  // Squeeze runs as an op (a view's base is exact), and Relu stays apart from the MatMul (no fusion on bounded ops).
  CHECK(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Greater, ir::OpKind::NonZero, ir::OpKind::Squeeze,
                                              ir::OpKind::Gather, ir::OpKind::MatMul, ir::OpKind::Relu});
  std::map<std::string, program::TensorDesc> byName;
  for (const auto& t : l->partition.program.tensors) {
    CHECK(t.kind != program::TensorKind::View);
    byName[std::string(t.name)] = t;
  }
  // Each at its bound, the mask on the dimensions a run computes; the planner gives each its bound's bytes.
  CHECK(byName["nz"].shape == program::toDims(std::vector<int64_t>{1, 6}));
  CHECK(byName["nz"].bounded == 0b10);
  CHECK(byName["nz"].size == 6 * 8);
  CHECK(byName["rows"].bounded == 0b1);
  CHECK(byName["picked"].shape == program::toDims(std::vector<int64_t>{6, 4}));
  CHECK(byName["picked"].bounded == 0b1);
  CHECK(byName["y"].kind == program::TensorKind::Output);
  CHECK(byName["y"].bounded == 0b1);
  CHECK(byName["keep"].bounded == 0);
  CHECK(program::hasBoundedTensors(l->partition.program));
}
