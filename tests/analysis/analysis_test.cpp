// Analysis: topological order, cycles, double producers, symbols and constant folding.
#include "analysis/analysis.h"
#include "../common/graph_builder.h"
#include "../common/test_target.h"
#include "partitioner/partitioner.h"

#include <catch2/catch.hpp>

using namespace ctxkit;
using namespace ctxkit::testing;

TEST_CASE("analysis rejects cycles, double producers and undefined inputs, naming the node", "[analysis]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2}))};
  g.nodes = {node("Relu", {"b"}, {"a"}), node("Relu", {"a"}, {"b"})};
  auto cyclic = analysis::analyzeGraph(g, {});
  REQUIRE(!cyclic);
  CHECK_THAT(cyclic.error().message(), Catch::Contains("cycle"));

  g.nodes = {node("Relu", {"x"}, {"a"}), node("Sigmoid", {"x"}, {"a"})};
  auto twice = analysis::analyzeGraph(g, {});
  REQUIRE(!twice);
  CHECK_THAT(twice.error().message(), Catch::Contains("'a' is produced twice"));

  g.nodes = {node("Relu", {"nowhere"}, {"a"})};
  auto undefined = analysis::analyzeGraph(g, {});
  REQUIRE(!undefined);
  CHECK_THAT(undefined.error().message(), Catch::Contains("'nowhere'"));
}

TEST_CASE("analysis sorts nodes, binds symbols and folds constants", "[analysis]") {
  ir::Graph g;
  g.inputs = {floatValue("x", {ir::Dim::named("batch"), ir::Dim::known(4)})};
  g.outputs = {floatValue("y", {ir::Dim::named("batch"), ir::Dim::known(4)})};
  g.initializers = {floatInit("c", {4})};
  // Listed out of order on purpose: the Add needs the folded Relu(c).
  g.nodes = {node("Add", {"x", "rc"}, {"y"}), node("Relu", {"c"}, {"rc"})};
  auto unbound = analysis::analyzeGraph(g, {});
  REQUIRE(unbound);
  CHECK(unbound->order == std::vector<size_t>{1, 0});
  CHECK(!unbound->find("y")->shape);
  CHECK_THAT(unbound->find("y")->blocker, Catch::Contains("'batch'"));
  CHECK(unbound->find("rc")->constant);

  analysis::Bindings b;
  b.dims["batch"] = 3;
  auto bound = analysis::analyzeGraph(g, b);
  REQUIRE(bound);
  CHECK(*bound->find("y")->shape == ir::Shape{3, 4});
}

TEST_CASE("Shape of a static value folds to a constant, so shape arithmetic compiles away", "[analysis]") {
  ir::Graph g;
  g.inputs = {floatValue("x", {ir::Dim::named("n"), ir::Dim::known(6)})};
  g.outputs = {floatValue("y", {ir::Dim::named("n"), ir::Dim::known(6)}), floatValue("last", dims({1}))};
  ir::Node lastDim = node("Shape", {"x"}, {"last"}, 15);
  lastDim.attrs.set(ir::Attribute::makeInt("start", -1));
  g.nodes = {node("Shape", {"x"}, {"s"}, 15), lastDim, node("Reshape", {"x", "s"}, {"r"}), node("Relu", {"r"}, {"y"})};
  analysis::Bindings b;
  b.dims["n"] = 2;
  auto facts = analysis::analyzeGraph(g, b);
  INFO((facts ? std::string() : facts.error().message()));
  REQUIRE(facts);
  const auto* s = facts->find("s");
  REQUIRE(s->constant);
  CHECK(s->constant->shape() == ir::Shape{2});
  CHECK(s->constant->dataAs<int64_t>()[0] == 2);
  const auto* last = facts->find("last");
  REQUIRE(last->constant);
  CHECK(last->constant->elementCount() == 1);
  CHECK(last->constant->dataAs<int64_t>()[0] == 6);
  CHECK(*facts->find("y")->shape == ir::Shape{2, 6});
  auto plan = partitioner::partitionGraph(g, *facts, targetWithout("none"));
  CHECK(plan.nodes[0].placement == partitioner::NodePlacement::Folded);
  CHECK(plan.nodes[2].placement == partitioner::NodePlacement::Compiled);
}
