// Partitioning: no cycle through a fallback node, deterministic plans, target files parsed with named errors.
#include "analysis/analysis.h"
#include "../common/graph_builder.h"
#include "ops/node_attrs.h"
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

TEST_CASE("target constraints are checked on the node's typed attributes, absent ones as their defaults",
          "[partitioner]") {
  auto target = partitioner::parseTarget(R"({"name":"t","element_types":["float32"],"ops":[
      {"op":"Conv","constraints":{"auto_pad":["VALID"]}},
      {"op":"Gemm","constraints":{"trans_b":[0]}},
      {"op":"Softmax","constraints":{"axis":[-1]}}]})",
                                         "t.json");
  REQUIRE(target);
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 1, 4, 4})), floatValue("m", dims({2, 3}))};
  for (const char* out : {"valid", "implicit", "g", "s", "s1"})
    g.outputs.push_back(ir::ValueInfo{out, ir::ElemType::Float, std::nullopt, {}});  // rank left to analysis
  g.initializers = {floatInit("w", {1, 1, 3, 3}), floatInit("b", {3, 3})};
  ir::Node valid = node("Conv", {"x", "w"}, {"valid"});
  valid.attrs.set(ir::Attribute::makeString("auto_pad", "VALID"));
  ir::Node implicit = node("Conv", {"x", "w"}, {"implicit"});  // no auto_pad: NOTSET, which the target leaves out
  ir::Node gemm = node("Gemm", {"m", "b"}, {"g"});
  gemm.attrs.set(ir::Attribute::makeInt("transB", 1));  // the typed field trans_b is what the target names
  ir::Node softmax = node("Softmax", {"m"}, {"s"});      // axis defaults to -1 at opset 13+
  ir::Node softmax1 = node("Softmax", {"m"}, {"s1"});
  softmax1.attrs.set(ir::Attribute::makeInt("axis", 0));
  g.nodes = {valid, implicit, gemm, softmax, softmax1};
  for (ir::Node& n : g.nodes) ops::decodeNode(n);  // as a loader would
  auto facts = analysis::analyzeGraph(g, {});
  INFO((facts ? std::string() : facts.error().message()));
  REQUIRE(facts);
  auto plan = partitioner::partitionGraph(g, *facts, *target);
  CHECK(plan.nodes[0].reason.empty());
  CHECK_THAT(plan.nodes[1].reason, Catch::Contains("auto_pad is absent"));
  CHECK_THAT(plan.nodes[2].reason, Catch::Contains("trans_b=1"));
  CHECK(plan.nodes[3].reason.empty());
  CHECK_THAT(plan.nodes[4].reason, Catch::Contains("axis=0"));

  // A constraint on something the op's typed attributes do not have is refused when the target is read.
  auto onnxName = partitioner::parseTarget(R"({"name":"t","ops":[{"op":"Gemm","constraints":{"transB":[0]}}]})", "t.json");
  REQUIRE(!onnxName);
  CHECK_THAT(onnxName.error().message(), Catch::Contains("no attribute 'transB'"));
  CHECK_THAT(onnxName.error().message(), Catch::Contains("trans_b"));
}

TEST_CASE("a node whose attribute failed to decode at import keeps the decoder's message as its reason",
          "[partitioner]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 2, 4, 4}))};
  g.outputs = {floatValue("y", {})};
  ir::Node lrn = node("LRN", {"x"}, {"y"});
  lrn.attrs.set(ir::Attribute::makeInt("size", 0));  // LRN needs size >= 1
  ops::decodeNode(lrn);
  REQUIRE(lrn.typed);
  REQUIRE(!lrn.typed->attrs);
  g.nodes = {lrn};
  const uint64_t before = ops::lateDecodes();
  CHECK(partitioner::fallbackBlocker(g.nodes[0], analysis::GraphFacts{}).find(lrn.typed->attrs.error().message()) !=
        std::string::npos);
  CHECK(ops::lateDecodes() == before);  // read from the node, not decoded again
}

namespace {

// scores [6] > 0.5 -> NonZero -> [1, <=6] -> Squeeze -> rows [<=6]; Gather(data [6, 4], rows) -> picked [<=6, 4];
// MatMul(picked, w [4, 3]) -> y (row-independent); Exp(picked) (not on the target below) -> Relu (reads a bounded value
// a fallback node made); Transpose(picked) [4, <=6] -> MatMul(., v [6, 2]) (contracts over the bounded rows).
ir::Graph boundedRows() {
  ir::Graph g;
  g.name = "bounded_rows";
  g.inputs = {floatValue("scores", dims({6})), floatValue("data", dims({6, 4}))};
  g.initializers = {floatInit("half", {}), floatInit("w", {4, 3}), floatInit("v", {6, 2}),
                    ir::Initializer{"axes", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, std::vector<int64_t>{0}),
                                    std::nullopt}};
  g.outputs = {floatValue("y", {}), floatValue("r", {}), floatValue("z", {})};
  ir::Node transpose = node("Transpose", {"picked"}, {"cols"});
  transpose.attrs.set(ir::Attribute::makeInts("perm", {1, 0}));
  g.nodes = {node("Greater", {"scores", "half"}, {"mask"}),
             node("NonZero", {"mask"}, {"idx"}),
             node("Squeeze", {"idx", "axes"}, {"rows"}),
             node("Gather", {"data", "rows"}, {"picked"}),
             node("MatMul", {"picked", "w"}, {"y"}),
             node("Exp", {"picked"}, {"e"}),
             node("Relu", {"e"}, {"r"}),
             transpose,
             node("MatMul", {"cols", "v"}, {"z"})};
  for (ir::Node& n : g.nodes) ops::decodeNode(n);
  return g;
}

}  // namespace

TEST_CASE("bounded shapes: a value whose bound is above 64 MiB stays on the fallback path with the nodes touching it",
          "[partitioner][bounded]") {
  // rows [<=6000] behind a NonZero; Gather of [6000, 4096] floats on them is bounded at 94 MiB (refused), of [6000,
  // 1024] at 23 MiB (compiled).
  ir::Graph g;
  g.name = "bounded_bytes";
  g.inputs = {floatValue("scores", dims({6000})), floatValue("wide", dims({6000, 4096})),
              floatValue("narrow", dims({6000, 1024}))};
  g.initializers = {floatInit("half", {}),
                    ir::Initializer{"axes", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, std::vector<int64_t>{0}),
                                    std::nullopt}};
  g.outputs = {floatValue("r", {}), floatValue("s", {})};
  g.nodes = {node("Greater", {"scores", "half"}, {"mask"}), node("NonZero", {"mask"}, {"idx"}),
             node("Squeeze", {"idx", "axes"}, {"rows"}),    node("Gather", {"wide", "rows"}, {"big"}),
             node("Relu", {"big"}, {"r"}),                  node("Gather", {"narrow", "rows"}, {"small"}),
             node("Relu", {"small"}, {"s"})};
  for (ir::Node& n : g.nodes) ops::decodeNode(n);
  auto facts = analysis::analyzeGraph(g, {});
  REQUIRE(facts);
  auto plan = partitioner::partitionGraph(g, *facts, *partitioner::loadTarget("cpu"));
  using partitioner::NodePlacement;
  for (size_t i : {0, 1, 2, 5, 6}) {
    INFO("node " << i << ": " << plan.nodes[i].reason);
    CHECK(plan.nodes[i].placement == NodePlacement::Compiled);
  }
  for (size_t i : {3, 4}) {
    CHECK(plan.nodes[i].placement == NodePlacement::Fallback);
    CHECK_THAT(plan.nodes[i].reason,
               Catch::Contains("'big' is bounded at float32 6000x4096 (93 MiB): above the 64 MiB a bounded value is "
                               "planned at"));
  }
}

TEST_CASE("bounded shapes: a target with bounded_shapes compiles what follows a root, and refuses a bound a node "
          "cannot take before lowering",
          "[partitioner][bounded]") {
  const ir::Graph g = boundedRows();
  auto facts = analysis::analyzeGraph(g, {});
  REQUIRE(facts);
  const std::string ops = R"("ops":[{"op":"Greater"},{"op":"NonZero"},{"op":"Squeeze"},{"op":"Gather"},{"op":"MatMul"},)"
                          R"({"op":"Transpose"},{"op":"Relu"}]})";
  auto target = partitioner::parseTarget(
      R"({"name":"t","bounded_shapes":true,"element_types":["float32","bool","int64"],)" + ops, "bounded target");
  REQUIRE(target);
  CHECK(target->boundedShapes);
  auto plan = partitioner::partitionGraph(g, *facts, *target);
  using partitioner::NodePlacement;
  // Greater, NonZero (a root: its bound from the analysis), Squeeze, Gather, MatMul over rows, Transpose: one partition.
  for (size_t i : {0, 1, 2, 3, 4, 7}) {
    INFO("node " << i << ": " << plan.nodes[i].reason);
    CHECK(plan.nodes[i].placement == NodePlacement::Compiled);
  }
  CHECK_THAT(plan.nodes[5].reason, Catch::Contains("Exp"));
  // Relu reads the bounded e that the fallback Exp makes: a bounded program input of a partition of its own (joining
  // the first would make a cycle through Exp).
  CHECK(plan.nodes[6].placement == NodePlacement::Compiled);
  CHECK(plan.nodes[6].partition == 1);
  CHECK(plan.partitions.size() == 2);
  // Contracting over a bounded dimension against a fixed weight holds at the bound only: refused here, not in lowering.
  CHECK(plan.nodes[8].placement == NodePlacement::Fallback);
  CHECK_THAT(plan.nodes[8].reason, Catch::Contains("a bounded dimension it reads must be exact"));

  // Without the flag (npu-sim's choice) every node behind the root stays on the fallback path, as before.
  auto without = partitioner::parseTarget(R"({"name":"t","element_types":["float32","bool","int64"],)" + ops, "t");
  REQUIRE(without);
  CHECK(!without->boundedShapes);
  auto staticPlan = partitioner::partitionGraph(g, *facts, *without);
  CHECK(staticPlan.nodes[0].placement == NodePlacement::Compiled);
  for (size_t i = 1; i < g.nodes.size(); ++i) CHECK(staticPlan.nodes[i].placement == NodePlacement::Fallback);
  CHECK_THAT(staticPlan.nodes[1].reason, Catch::Contains("shape rule cannot run at compile time"));

  // The built-in targets: cpu takes bounds, npu-sim keeps its programs static.
  CHECK(partitioner::loadTarget("cpu")->boundedShapes);
  CHECK(!partitioner::loadTarget("npu-sim")->boundedShapes);
  CHECK_THAT(partitioner::parseTarget(R"({"name":"t","bounded_shapes":1,"ops":[{"op":"Add"}]})", "t").error().message(),
             Catch::Contains("bounded_shapes: expected true or false"));
}
