// Partitioning: no cycle through a fallback node, deterministic plans, target files parsed with named errors.
#include "analysis/analysis.h"
#include "../common/graph_builder.h"
#include "partitioner/partitioner.h"
#include "../common/test_target.h"

#include <catch2/catch.hpp>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

// x -> Relu -> a -> Exp(unsupported by the test target) -> b ; a and b -> Add -> y
ir::Graph diamondThroughUnsupported() {
  ir::Graph g;
  g.name = "diamond";
  g.inputs = {floatValue("x", dims({2, 3}))};
  g.outputs = {floatValue("y", dims({2, 3}))};
  g.nodes = {node("Relu", {"x"}, {"a"}), node("Exp", {"a"}, {"b"}), node("Add", {"a", "b"}, {"y"})};
  return g;
}

}  // namespace

TEST_CASE("partitions never create a cycle through a fallback node", "[partitioner]") {
  ir::Graph g = diamondThroughUnsupported();
  auto facts = analysis::analyzeGraph(g, {});
  REQUIRE(facts);
  auto plan = partitioner::partitionGraph(g, *facts, targetWithout("Exp"));
  // Relu and Add are both supported and connected, but Relu -> Exp -> Add forbids fusing them.
  REQUIRE(plan.partitions.size() == 2);
  CHECK(plan.nodes[1].placement == partitioner::NodePlacement::Fallback);
  CHECK_THAT(plan.nodes[1].reason, Catch::Contains("Exp"));
  CHECK(plan.nodes[0].partition != plan.nodes[2].partition);

  // With everything supported, one partition.
  auto all = partitioner::partitionGraph(g, *facts, targetWithout("none"));
  CHECK(all.partitions.size() == 1);
  CHECK(all.partitions[0].nodes.size() == 3);
}

TEST_CASE("partitioning is deterministic and names the symbol that blocks compilation", "[partitioner]") {
  ir::Graph g;
  g.inputs = {floatValue("x", {ir::Dim::named("seq"), ir::Dim::known(4)})};
  g.outputs = {floatValue("y", {})};
  g.nodes = {node("Relu", {"x"}, {"y"})};
  auto facts = analysis::analyzeGraph(g, {});
  REQUIRE(facts);
  auto plan = partitioner::partitionGraph(g, *facts, targetWithout("none"));
  CHECK(plan.partitions.empty());
  CHECK_THAT(plan.nodes[0].reason, Catch::Contains("'seq'"));
  CHECK_THAT(plan.nodes[0].reason, Catch::Contains("--dim seq="));
}

TEST_CASE("target files are parsed with errors that name the field", "[partitioner]") {
  CHECK(partitioner::loadTarget("npu-sim"));
  CHECK(partitioner::loadTarget("cpu"));
  auto unknown = partitioner::loadTarget("tpu");
  REQUIRE(!unknown);
  CHECK_THAT(unknown.error().message(), Catch::Contains("npu-sim"));
  auto badType = partitioner::parseTarget(R"({"name":"t","element_types":["float33"],"ops":[]})", "t.json");
  REQUIRE(!badType);
  CHECK_THAT(badType.error().message(), Catch::Contains("float33"));
  auto badAlign = partitioner::parseTarget(R"({"name":"t","weight_alignment":100,"ops":[]})", "t.json");
  REQUIRE(!badAlign);
  CHECK_THAT(badAlign.error().message(), Catch::Contains("weight_alignment"));
  auto notJson = partitioner::parseTarget("{", "t.json");
  REQUIRE(!notJson);
  CHECK_THAT(notJson.error().message(), Catch::Contains("t.json"));

  auto constrained = partitioner::parseTarget(
      R"({"name":"t","ops":[{"op":"Conv","constraints":{"auto_pad":["NOTSET"],"max_rank":4}}]})", "t.json");
  REQUIRE(constrained);
  REQUIRE(constrained->ops.size() == 1);
  CHECK(constrained->ops[0].maxRank == 4);
  CHECK(constrained->ops[0].attrs[0].allowedStrings == std::vector<std::string>{"NOTSET"});
}
