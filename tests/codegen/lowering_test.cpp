// Codegen: the memory plan and lowering folds.
#include "analysis/analysis.h"
#include "codegen/lower.h"
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
  auto lowered = codegen::lowerPartition(g, *facts, plan.partitions[0], {"y"}, [&](const ir::Tensor& t, const ops::WeightLayout& l) { return pool.intern(t, l); });
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
