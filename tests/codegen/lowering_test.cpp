// Codegen: the memory plan and lowering folds.
#include "analysis/analysis.h"
#include "codegen/lower.h"
#include "codegen/lowering_state.h"
#include "codegen/memory_plan.h"
#include "../common/graph_builder.h"
#include "partitioner/partitioner.h"
#include "weightshare/weight_pool.h"
#include "../common/test_target.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace ctxkit;
using namespace ctxkit::testing;

TEST_CASE("the memory plan reuses dead buffers and keeps live ones apart", "[codegen]") {
  std::vector<codegen::BufferRequest> reqs = {{100, 0, 1}, {200, 1, 2}, {100, 2, 3}, {50, 3, 3}};
  auto plan = codegen::planMemory(reqs, 64);
  auto overlaps = [&](size_t i, size_t j) {
    auto end = [&](size_t k) { return plan.offsets[k] + (reqs[k].size + 63) / 64 * 64; };
    return plan.offsets[i] < end(j) && plan.offsets[j] < end(i);
  };
  for (size_t i = 0; i < reqs.size(); ++i) {
    CHECK(plan.offsets[i] % 64 == 0);
    for (size_t j = i + 1; j < reqs.size(); ++j)
      if (reqs[i].firstUse <= reqs[j].lastUse && reqs[j].firstUse <= reqs[i].lastUse) CHECK(!overlaps(i, j));
  }
  // Buffers 0 and 2 never live together: the arena is smaller than the sum of all sizes.
  CHECK(plan.arenaSize < 128 + 256 + 128 + 64);
  CHECK(plan.arenaSize >= 256 + 128);
}

TEST_CASE("lowering folds BatchNormalization and Relu into Conv and turns Reshape into a view", "[codegen]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 2, 4, 4}))};
  g.outputs = {floatValue("y", dims({1, 32}))};
  g.initializers = {floatInit("w", {2, 2, 3, 3}), floatInit("scale", {2}), floatInit("bias", {2}), floatInit("mean", {2}),
                    floatInit("var", {2}, 1.0f)};
  std::vector<int64_t> target = {1, 32};
  g.initializers.push_back(ir::Initializer{"shape", ir::Tensor::fromVector(ir::ElemType::Int64, {2}, target), std::nullopt});
  ir::Node conv = node("Conv", {"x", "w"}, {"c"});
  conv.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
  g.nodes = {conv, node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"n"}), node("Relu", {"n"}, {"r"}),
             node("Reshape", {"r", "shape"}, {"flat"}), node("Sigmoid", {"flat"}, {"y"})};
  auto facts = analysis::analyzeGraph(g, {});
  REQUIRE(facts);
  auto plan = partitioner::partitionGraph(g, *facts, targetWithout("none"));
  REQUIRE(plan.partitions.size() == 1);
  weightshare::WeightPool pool;
  auto lowered = codegen::lowerPartition(g, *facts, plan.partitions[0], std::vector<ir::ValueId>{facts->table.id("y")}, [&](const ir::Tensor& t, const cpu::WeightLayout& l) { return pool.intern(t, l); });
  REQUIRE(lowered);
  std::vector<ir::OpKind> kinds;
  for (const auto& op : lowered->program.ops) kinds.push_back(op.kind);
  CHECK(kinds == std::vector<ir::OpKind>{ir::OpKind::Conv, ir::OpKind::Sigmoid});
  REQUIRE(std::holds_alternative<ops::ConvAttrs>(lowered->program.ops[0].typed));
  CHECK(std::get<ops::ConvAttrs>(lowered->program.ops[0].typed).epilogue.activation == ops::Activation::Relu);
  CHECK(lowered->inputs == std::vector<std::string>{"x"});
  CHECK(lowered->outputs == std::vector<std::string>{"y"});
  // The folded weight and bias are the only weights; the Reshape shape is not one.
  CHECK(pool.weights().size() == 2);
  bool hasView = std::any_of(lowered->program.tensors.begin(), lowered->program.tensors.end(),
                             [](const auto& t) { return t.kind == program::TensorKind::View; });
  CHECK(hasView);
  CHECK(lowered->program.arenaSize > 0);
}

TEST_CASE("the lowering state's use lists follow the ops as passes erase, insert and edit them", "[codegen]") {
  using ir::OpKind;
  // A graph with the values the ops below read and write, y its output: what the state's boundary knows of them.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({4}))};
  g.outputs = {floatValue("y", dims({4}))};
  g.nodes = {node("Relu", {"x"}, {"r"}), node("Relu", {"r"}, {"s"}), node("Relu", {"s"}, {"y"})};
  analysis::GraphFacts facts;
  facts.table = ir::ValueTable(g);
  facts.values.resize(facts.table.size());
  const std::vector<ir::ValueId> usedOutside{facts.table.id("y")};
  const codegen::WeightInterner intern = [](const ir::Tensor&, const cpu::WeightLayout&) -> Expected<uint32_t> {
    return uint32_t{0};
  };
  const codegen::LowerOptions options;
  codegen::LoweringState state(facts, usedOutside, intern, options);
  auto v = [&](const std::string& name) { return state.value(name); };
  for (const char* name : {"x", "r", "s", "y"}) v(name);  // ids in this order
  state.ops.push_back(codegen::madeOp(OpKind::Relu, 14, "a", {v("x")}, {v("r")}));
  state.ops.push_back(codegen::madeOp(OpKind::Sigmoid, 13, "b", {v("r")}, {v("s")}));
  state.ops.push_back(codegen::madeOp(OpKind::Mul, 14, "c", {v("r"), v("s")}, {v("y")}));
  // Ids are dense, in the order values are first named; a name keeps its id.
  CHECK(v("x") == 0);
  CHECK(v("y") == 3);
  CHECK(state.nameOf(v("s")) == "s");
  CHECK(state.nameOf(codegen::kNoValue).empty());
  CHECK(!state.findValue("nothing"));
  CHECK(state.leaves(v("y")));
  CHECK(!state.leaves(v("r")));
  CHECK(state.readers(v("r")) == 2);
  CHECK(state.readersOf(v("r")) == std::vector<size_t>{1, 2});
  CHECK(state.readers(v("nothing")) == 0);
  CHECK(state.readers(codegen::kNoValue) == 0);
  CHECK(!state.soleReader(0));
  CHECK(state.soleReader(1) == std::optional<size_t>(2));
  CHECK(!state.soleReader(2));  // y leaves the partition
  CHECK(state.producerOf(v("s"), OpKind::Sigmoid) == std::optional<size_t>(1));
  CHECK(!state.producerOf(v("s"), OpKind::Relu));

  state.eraseOp(1);
  CHECK(state.readersOf(v("r")) == std::vector<size_t>{1});
  CHECK(state.soleReader(0) == std::optional<size_t>(1));
  CHECK(!state.producerOf(v("s"), OpKind::Sigmoid));
  state.insertOp(0, codegen::madeOp(OpKind::Relu, 14, "w", {v("v")}, {v("x")}));
  CHECK(state.producerOf(v("r"), OpKind::Relu) == std::optional<size_t>(1));
  CHECK(state.soleReader(0) == std::optional<size_t>(1));
  state.replaceOp(1, codegen::madeOp(OpKind::Sigmoid, 13, "a", {v("x")}, {v("r")}));
  CHECK(!state.producerOf(v("r"), OpKind::Relu));
  CHECK(state.producerOf(v("r"), OpKind::Sigmoid) == std::optional<size_t>(1));
  state.ops[2].inputs = {v("x"), v("x")};  // an edit in place, announced
  state.opsChanged();
  CHECK(state.readers(v("r")) == 0);
  CHECK(state.readersOf(v("x")) == std::vector<size_t>{1, 2, 2});
  state.setOutputs(2, {v("z")});  // a value named after the use lists were built
  state.setInputs(1, {v("v"), codegen::kNoValue});
  CHECK(state.producerOf(v("z"), OpKind::Mul) == std::optional<size_t>(2));
  CHECK(!state.producerOf(v("y"), OpKind::Mul));
  CHECK(state.readersOf(v("x")) == std::vector<size_t>{2, 2});
  CHECK(state.readersOf(v("v")) == std::vector<size_t>{0, 1});

  // Constants the lowering makes live in the value's record.
  const auto c = state.addConstant("c", ir::Tensor::fromVector(ir::ElemType::Float, {}, std::vector<float>{2.5f}));
  CHECK(state.scalarOf(c) == std::optional<float>(2.5f));
  CHECK(state.typeOf(c) == ir::ElemType::Float);
  CHECK(state.shapeOf(c) == std::optional<ir::Shape>(ir::Shape{}));
  CHECK(!state.constantOf(v("x")));
}
