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
  auto lowered = codegen::lowerPartition(g, *facts, plan.partitions[0], {"y"}, [&](const ir::Tensor& t, const cpu::WeightLayout& l) { return pool.intern(t, l); });
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

TEST_CASE("the lowering state's use index follows the ops as passes erase, insert and edit them", "[codegen]") {
  using ir::OpKind;
  const analysis::GraphFacts facts;
  const std::set<std::string> usedOutside{"y"};
  const codegen::WeightInterner intern = [](const ir::Tensor&, const cpu::WeightLayout&) -> Expected<uint32_t> {
    return uint32_t{0};
  };
  const codegen::LowerOptions options;
  codegen::LoweringState state(facts, usedOutside, intern, options);
  state.ops.push_back(codegen::madeOp(OpKind::Relu, 14, "a", {"x"}, {"r"}));
  state.ops.push_back(codegen::madeOp(OpKind::Sigmoid, 13, "b", {"r"}, {"s"}));
  state.ops.push_back(codegen::madeOp(OpKind::Mul, 14, "c", {"r", "s"}, {"y"}));
  CHECK(state.readers("r") == 2);
  CHECK(state.readersOf("r") == std::vector<size_t>{1, 2});
  CHECK(state.readers("nothing") == 0);
  CHECK(!state.soleReader(0));
  CHECK(state.soleReader(1) == std::optional<size_t>(2));
  CHECK(!state.soleReader(2));  // y leaves the partition
  CHECK(state.producerOf("s", OpKind::Sigmoid) == std::optional<size_t>(1));
  CHECK(!state.producerOf("s", OpKind::Relu));

  state.eraseOp(1);
  CHECK(state.readersOf("r") == std::vector<size_t>{1});
  CHECK(state.soleReader(0) == std::optional<size_t>(1));
  CHECK(!state.producerOf("s", OpKind::Sigmoid));
  state.insertOp(0, codegen::madeOp(OpKind::Relu, 14, "w", {"v"}, {"x"}));
  CHECK(state.producerOf("r", OpKind::Relu) == std::optional<size_t>(1));
  CHECK(state.soleReader(0) == std::optional<size_t>(1));
  state.replaceOp(1, codegen::madeOp(OpKind::Sigmoid, 13, "a", {"x"}, {"r"}));
  CHECK(!state.producerOf("r", OpKind::Relu));
  CHECK(state.producerOf("r", OpKind::Sigmoid) == std::optional<size_t>(1));
  state.ops[2].inputs = {"x", "x"};  // an edit in place, announced
  state.opsChanged();
  CHECK(state.readers("r") == 0);
  CHECK(state.readersOf("x") == std::vector<size_t>{1, 2, 2});
  state.setOutputs(2, {"z"});
  state.setInputs(1, {"v"});
  CHECK(state.producerOf("z", OpKind::Mul) == std::optional<size_t>(2));
  CHECK(!state.producerOf("y", OpKind::Mul));
  CHECK(state.readersOf("x") == std::vector<size_t>{2, 2});
  CHECK(state.readersOf("v") == std::vector<size_t>{0, 1});
}
