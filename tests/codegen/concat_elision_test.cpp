// plan-memory's Concat elision (docs/compiler.md#concat-elision): which Concats go, where their inputs are placed,
// and that the program still computes what the source graph computes, run on its planned arena.
#include "../common/graph_builder.h"
#include "codegen/concat_groups.h"
#include "lower_helpers.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string_view>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

ir::Node concat(std::vector<std::string> inputs, const std::string& output, int64_t axis = 1) {
  ir::Node n = node("Concat", std::move(inputs), {output});
  n.attrs.set(ir::Attribute::makeInt("axis", axis));
  return n;
}

ir::Node conv(const std::string& in, const std::string& w, const std::string& out, int64_t pad) {
  ir::Node n = node("Conv", {in, w}, {out});
  n.attrs.set(ir::Attribute::makeInts("pads", {pad, pad, pad, pad}));
  return n;
}

const program::TensorDesc& tensorNamed(const Lowered& l, const std::string& name) {
  const auto& ts = l.partition.program.tensors;
  auto it = std::find_if(ts.begin(), ts.end(),
                         [&](const program::TensorDesc& t) { return std::string_view(t.name) == name; });
  if (it == ts.end()) FAIL("no tensor " << name);
  return *it;
}

size_t concatOps(const Lowered& l) {
  const auto kinds = l.kinds();
  return static_cast<size_t>(std::count(kinds.begin(), kinds.end(), ir::OpKind::Concat));
}

// Two Convs (one with a fused Relu) of a 1x3x8x8 image, 4 channels each (1 KiB), side by side, then `tail`.
ir::Graph fireGraph() {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 3, 8, 8}))};
  g.outputs = {floatValue("y", dims({1, 8, 8, 8}))};
  g.initializers = {floatInit("w1", {4, 3, 1, 1}, -0.4f), floatInit("w3", {4, 3, 3, 3}, -0.6f)};
  g.nodes = {conv("x", "w1", "a0", 0), node("Relu", {"a0"}, {"a"}), conv("x", "w3", "b", 1), concat({"a", "b"}, "c"),
             node("Sigmoid", {"c"}, {"y"})};
  return g;
}

}  // namespace

TEST_CASE("plan-memory elides a Concat of two Convs: each writes its slice of the output", "[codegen][concat]") {
  ir::Graph g = fireGraph();
  auto l = lowerAll(g);
  CHECK(l->run("plan-memory").change.countOf("concats_elided") == 1);
  CHECK(l->kinds() == std::vector<ir::OpKind>{ir::OpKind::Conv, ir::OpKind::Conv, ir::OpKind::Sigmoid});
  const auto& a = tensorNamed(*l, "a");
  const auto& b = tensorNamed(*l, "b");
  const auto& c = tensorNamed(*l, "c");
  CHECK(a.kind == program::TensorKind::Arena);
  CHECK(b.kind == program::TensorKind::Arena);
  CHECK(a.size == 4 * 8 * 8 * 4);
  CHECK(c.offset == a.offset);
  CHECK(b.offset == a.offset + 4 * 8 * 8 * 4);
  CHECK(c.size == 2 * 4 * 8 * 8 * 4);
  checkComputesSource(g, *l, {1, 3, 8, 8});
}

TEST_CASE("plan-memory keeps a Concat that cannot be laid out in place as a copy", "[codegen][concat]") {
  SECTION("the dimensions before the axis multiply to more than 1") {
    ir::Graph g;
    g.inputs = {floatValue("x", dims({2, 4, 16}))};
    g.outputs = {floatValue("y", dims({2, 8, 16}))};
    g.nodes = {node("Relu", {"x"}, {"a"}), node("Sigmoid", {"x"}, {"b"}), concat({"a", "b"}, "c"),
               node("Neg", {"c"}, {"y"})};
    auto l = lowerAll(g);
    CHECK(l->run("plan-memory").change.countOf("concats_elided") == 0);
    CHECK(concatOps(*l) == 1);
    checkComputesSource(g, *l, {2, 4, 16});
  }
  SECTION("at axis 0 they multiply to 1: elided") {
    ir::Graph g;
    g.inputs = {floatValue("x", dims({2, 16}))};
    g.outputs = {floatValue("y", dims({4, 16}))};
    g.nodes = {node("Relu", {"x"}, {"a"}), node("Sigmoid", {"x"}, {"b"}), concat({"a", "b"}, "c", 0),
               node("Neg", {"c"}, {"y"})};
    auto l = lowerAll(g);
    CHECK(l->run("plan-memory").change.countOf("concats_elided") == 1);
    CHECK(concatOps(*l) == 0);
    CHECK(tensorNamed(*l, "b").offset == tensorNamed(*l, "a").offset + 2 * 16 * 4);
    checkComputesSource(g, *l, {2, 16});
  }
  SECTION("an input is the program's input, or a weight") {
    ir::Graph g;
    g.inputs = {floatValue("x", dims({1, 16}))};
    g.outputs = {floatValue("y", dims({1, 64}))};
    g.initializers = {floatInit("w", {1, 16})};
    g.nodes = {node("Relu", {"x"}, {"a"}), node("Relu", {"a"}, {"b"}), concat({"x", "a"}, "c"),
               concat({"b", "w"}, "d"),    concat({"c", "d"}, "e"),    node("Neg", {"e"}, {"y"})};
    auto l = lowerAll(g);
    // Only the outer Concat goes: c and d are placed side by side, their own Concats copy into them.
    CHECK(l->run("plan-memory").change.countOf("concats_elided") == 1);
    CHECK(concatOps(*l) == 2);
    CHECK(tensorNamed(*l, "d").offset == tensorNamed(*l, "c").offset + 2 * 16 * 4);
    checkComputesSource(g, *l, {1, 16});
  }
  SECTION("an input is also an output of the program") {
    ir::Graph g = fireGraph();
    g.outputs.push_back(floatValue("a", dims({1, 4, 8, 8})));
    auto l = lowerAll(g, {}, partitioner::Float16Compute::Float16, false, {"y", "a"});
    CHECK(tensorNamed(*l, "a").kind == program::TensorKind::Output);
    CHECK(l->run("plan-memory").change.countOf("concats_elided") == 0);
    CHECK(concatOps(*l) == 1);
  }
  SECTION("an input listed twice") {
    ir::Graph g;
    g.inputs = {floatValue("x", dims({1, 16}))};
    g.outputs = {floatValue("y", dims({1, 32}))};
    g.nodes = {node("Relu", {"x"}, {"a"}), concat({"a", "a"}, "c"), node("Neg", {"c"}, {"y"})};
    auto l = lowerAll(g);
    CHECK(l->run("plan-memory").change.countOf("concats_elided") == 0);
    CHECK(concatOps(*l) == 1);
    checkComputesSource(g, *l, {1, 16});
  }
  SECTION("an input before the last whose size is not a multiple of the arena alignment") {
    ir::Graph g;
    g.inputs = {floatValue("x", dims({1, 5}))};
    g.outputs = {floatValue("y", dims({1, 10}))};
    g.nodes = {node("Relu", {"x"}, {"a"}), node("Sigmoid", {"x"}, {"b"}), concat({"a", "b"}, "c"),
               node("Neg", {"c"}, {"y"})};
    auto l = lowerAll(g);
    CHECK(l->run("plan-memory").change.countOf("concats_elided") == 0);
    checkComputesSource(g, *l, {1, 5});
  }
}

TEST_CASE("plan-memory elides DenseNet's nested Concats: each layer's input is a slice of the block's",
          "[codegen][concat]") {
  // x0 = Conv(x); layer j reads Relu(Concat(x0..x_{j-1})) and writes x_j = Conv of it; the block is Concat(x0..x3);
  // a transition (Relu, 1x1 Conv, AveragePool) starts a second block of one layer. 4 channels of 8x8: 1 KiB each.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 3, 8, 8}))};
  g.outputs = {floatValue("y", dims({1, 8, 4, 4}))};
  g.initializers = {floatInit("w0", {4, 3, 3, 3}, -0.5f),  floatInit("w1", {4, 4, 3, 3}, -0.4f),
                    floatInit("w2", {4, 8, 3, 3}, -0.6f),  floatInit("w3", {4, 12, 3, 3}, -0.7f),
                    floatInit("wt", {4, 16, 1, 1}, -0.3f), floatInit("wn", {4, 4, 3, 3}, -0.5f)};
  g.nodes = {conv("x", "w0", "x0", 1)};
  std::vector<std::string> feats = {"x0"};
  for (int j = 1; j <= 3; ++j) {
    const std::string n = std::to_string(j);
    g.nodes.push_back(concat(feats, "cat" + n));
    g.nodes.push_back(node("Relu", {"cat" + n}, {"r" + n}));
    g.nodes.push_back(conv("r" + n, "w" + n, "x" + n, 1));
    feats.push_back("x" + n);
  }
  g.nodes.push_back(concat(feats, "block"));
  g.nodes.push_back(node("Relu", {"block"}, {"rt"}));
  g.nodes.push_back(conv("rt", "wt", "t", 0));
  ir::Node pool = node("AveragePool", {"t"}, {"p"});
  pool.attrs.set(ir::Attribute::makeInts("kernel_shape", {2, 2}));
  pool.attrs.set(ir::Attribute::makeInts("strides", {2, 2}));
  g.nodes.push_back(pool);
  g.nodes.push_back(concat({"p"}, "catn"));
  g.nodes.push_back(node("Relu", {"catn"}, {"rn"}));
  g.nodes.push_back(conv("rn", "wn", "xn", 1));
  g.nodes.push_back(concat({"p", "xn"}, "y0"));
  g.nodes.push_back(node("Sigmoid", {"y0"}, {"y"}));
  auto l = lowerAll(g);
  CHECK(l->run("plan-memory").change.countOf("concats_elided") == 6);
  CHECK(concatOps(*l) == 0);
  const uint64_t slice = 4 * 8 * 8 * 4;
  const uint64_t base = tensorNamed(*l, "block").offset;
  for (int j = 0; j <= 3; ++j) CHECK(tensorNamed(*l, "x" + std::to_string(j)).offset == base + j * slice);
  for (int j = 1; j <= 3; ++j) {
    CHECK(tensorNamed(*l, "cat" + std::to_string(j)).offset == base);  // the bytes of x0..x_{j-1}
    CHECK(tensorNamed(*l, "cat" + std::to_string(j)).size == j * slice);
  }
  CHECK(tensorNamed(*l, "catn").offset == tensorNamed(*l, "p").offset);
  CHECK(tensorNamed(*l, "xn").offset == tensorNamed(*l, "p").offset + slice / 4);
  // Buffers live at once keep apart: the Relu of a layer's input never lands on the block.
  const auto& r3 = tensorNamed(*l, "r3");
  CHECK((r3.offset >= base + 4 * slice || r3.offset + r3.size <= base));
  checkComputesSource(g, *l, {1, 3, 8, 8});
}

TEST_CASE("groupConcats leaves inputs already placed elsewhere where they are", "[codegen][concat]") {
  // c1 = Concat(a, b) and, later, c2 = Concat(b, d): b goes into c2's group, c1 (b in a group, a not) stays a copy.
  program::Program p;
  auto arena = [&](uint64_t bytes) {
    p.tensors.push_back(program::TensorDesc{program::TensorKind::Arena,
                                            ir::ElemType::Float,
                                            program::toDims(std::vector<int64_t>{1, static_cast<int64_t>(bytes / 4)}),
                                            0,
                                            0,
                                            bytes,
                                            program::Name("t"),
                                            {}});
    return static_cast<int32_t>(p.tensors.size() - 1);
  };
  const int32_t a = arena(64), b = arena(64), d = arena(64), c1 = arena(128), c2 = arena(128);
  auto cat = [&](std::vector<int32_t> ins, int32_t out) {
    program::Op op;
    op.kind = ir::OpKind::Concat;
    op.typed = ops::AxisAttrs{1};
    op.inputs = program::Indices(ins.begin(), ins.end());
    op.outputs = program::Indices{out};
    p.ops.push_back(std::move(op));
  };
  cat({a, b}, c1);
  cat({b, d}, c2);
  const codegen::ConcatGroups groups = codegen::groupConcats(p, 64);
  CHECK(groups.elided == std::vector<size_t>{1});
  CHECK(groups.root[b] == c2);
  CHECK(groups.offset[b] == 0);
  CHECK(groups.root[d] == c2);
  CHECK(groups.offset[d] == 64);
  CHECK(groups.root[a] == -1);
  CHECK(groups.root[c1] == -1);
}
