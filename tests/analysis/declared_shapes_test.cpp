// Declared shapes in the analysis (issue 11 item 5): past an op without a shape rule (an unknown op, If/Loop/Scan)
// a fully static declaration keeps what follows compilable; where a rule gives the shape, a declaration that
// contradicts it is an error naming the value.
#include "analysis/analysis.h"
#include "../common/graph_builder.h"
#include "partitioner/partitioner.h"

#include <catch2/catch.hpp>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

partitioner::Target reluTarget() {
  auto t = partitioner::parseTarget(R"({"name":"test","element_types":["float32"],"ops":[{"op":"Relu"}]})", "test target");
  REQUIRE(t);
  return *t;
}

// x [2, 3] -> Relu -> a -> Relu -> y, with `a` declared as given.
ir::Graph reluChain(std::vector<ir::Dim> declaredA) {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2, 3}))};
  g.outputs = {floatValue("y", dims({2, 3}))};
  g.valueInfo = {floatValue("a", std::move(declaredA))};
  g.nodes = {node("Relu", {"x"}, {"a"}), node("Relu", {"a"}, {"y"})};
  return g;
}

// cond -> If (both branches Identity of x) -> b [declared] -> Relu -> y
ir::Graph ifThenRelu(std::optional<std::vector<ir::Dim>> declaredB) {
  auto branch = std::make_shared<ir::Graph>();
  branch->name = "branch";
  branch->outputs = {floatValue("x_out", dims({2, 3}))};
  branch->nodes = {node("Identity", {"x"}, {"x_out"})};
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2, 3})), ir::ValueInfo{"cond", ir::ElemType::Bool, std::vector<ir::Dim>{}, ""}};
  g.outputs = {floatValue("y", {ir::Dim::named("n"), ir::Dim::named("m")})};
  if (declaredB) g.valueInfo = {floatValue("b", *declaredB)};
  ir::Node ifNode = node("If", {"cond"}, {"b"});
  ifNode.attrs.set(ir::Attribute::makeGraph("then_branch", branch));
  ifNode.attrs.set(ir::Attribute::makeGraph("else_branch", branch));
  g.nodes = {ifNode, node("Relu", {"b"}, {"y"})};
  return g;
}

}  // namespace

TEST_CASE("a declared shape that contradicts the shape rule is an error naming the value", "[analysis]") {
  auto wrongSize = analysis::analyzeGraph(reluChain(dims({2, 4})), {});
  REQUIRE(!wrongSize);
  CHECK_THAT(wrongSize.error().message(), Catch::Contains("value 'a' is declared 2x4 in the model, but its inputs give 2x3"));
  CHECK_THAT(wrongSize.error().message(), Catch::Contains("node 'Relu_a' (Relu)"));

  auto wrongRank = analysis::analyzeGraph(reluChain(dims({6})), {});
  REQUIRE(!wrongRank);
  CHECK_THAT(wrongRank.error().message(), Catch::Contains("value 'a' is declared 6 in the model, but its inputs give 2x3"));

  // A graph output is a declaration too.
  ir::Graph g = reluChain(dims({2, 3}));
  g.outputs[0] = floatValue("y", dims({3, 2}));
  auto wrongOutput = analysis::analyzeGraph(g, {});
  REQUIRE(!wrongOutput);
  CHECK_THAT(wrongOutput.error().message(), Catch::Contains("value 'y' is declared 3x2"));

  // Symbolic dimensions agree with any size; a matching declaration is fine.
  CHECK(analysis::analyzeGraph(reluChain({ir::Dim::named("rows"), ir::Dim::known(3)}), {}));
  CHECK(analysis::analyzeGraph(reluChain(dims({2, 3})), {}));
}

TEST_CASE("past an If without a shape rule, a static declaration keeps the rest compilable", "[analysis]") {
  auto declared = analysis::analyzeGraph(ifThenRelu(dims({2, 3})), {});
  REQUIRE(declared);
  REQUIRE(declared->find("b")->shape);
  CHECK(*declared->find("b")->shape == ir::Shape{2, 3});
  CHECK(*declared->find("y")->shape == ir::Shape{2, 3});
  auto plan = partitioner::partitionGraph(ifThenRelu(dims({2, 3})), *declared, reluTarget());
  REQUIRE(plan.partitions.size() == 1);
  CHECK(plan.nodes[1].placement == partitioner::NodePlacement::Compiled);

  // A symbolic declaration is static once its symbols are bound.
  const std::vector<ir::Dim> symbolic{ir::Dim::named("n"), ir::Dim::known(3)};
  analysis::Bindings bindings;
  bindings.dims["n"] = 2;
  auto bound = analysis::analyzeGraph(ifThenRelu(symbolic), bindings);
  REQUIRE(bound);
  REQUIRE(bound->find("y")->shape);
  CHECK(*bound->find("y")->shape == ir::Shape{2, 3});

  // Without a declaration (or with an unbound symbol) nothing says what the If gives: the Relu stays dynamic.
  for (const auto& decl : {std::optional<std::vector<ir::Dim>>{}, std::optional(symbolic)}) {
    auto unknown = analysis::analyzeGraph(ifThenRelu(decl), {});
    REQUIRE(unknown);
    CHECK(!unknown->find("y")->shape);
    CHECK(partitioner::partitionGraph(ifThenRelu(decl), *unknown, reluTarget()).partitions.empty());
  }
}
