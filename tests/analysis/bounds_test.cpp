// Upper bounds of value-dependent shapes: the roots (NonZero, NonMaxSuppression, TopK with a computed k) and what
// follows them, against the bounds the ONNX definitions of the ops give.
#include "analysis/analysis.h"
#include "../common/graph_builder.h"

#include <catch2/catch.hpp>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

ir::Initializer ints(const std::string& name, ir::Shape shape, std::vector<int64_t> v) {
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Int64, std::move(shape), v), std::nullopt};
}
ir::Initializer floats(const std::string& name, ir::Shape shape, std::vector<float> v) {
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), v), std::nullopt};
}
ir::Node withInt(ir::Node n, const char* name, int64_t v) {
  n.attrs.set(ir::Attribute::makeInt(name, v));
  return n;
}

const analysis::ValueFacts& factsOf(const analysis::GraphFacts& f, const char* name) {
  const analysis::ValueFacts* v = f.find(name);
  REQUIRE(v);
  return *v;
}

}  // namespace

TEST_CASE("NonZero is bounded by rank x elements, and shape rules carry the bound", "[analysis][bounds]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2, 3}))};
  g.initializers = {floats("zero", {}, {0.0f}), ints("one", {1}, {1}), ints("two", {1}, {2})};
  ir::Node transpose = node("Transpose", {"nz"}, {"t"});
  transpose.attrs.set(ir::Attribute::makeInts("perm", {1, 0}));
  g.nodes = {node("Greater", {"x", "zero"}, {"mask"}), node("NonZero", {"mask"}, {"nz"}), transpose,
             node("Cast", {"t"}, {"tf"}), node("Shape", {"nz"}, {"s"}), node("Slice", {"s", "one", "two"}, {"count"}),
             node("Reshape", {"x", "s"}, {"reshaped"}), node("Squeeze", {"nz"}, {"squeezed"})};
  g.nodes[3].attrs.set(ir::Attribute::makeInt("to", static_cast<int64_t>(ir::ElemType::Float)));
  auto f = analysis::analyzeGraph(g, {});
  REQUIRE(f);
  const auto& nz = factsOf(*f, "nz");
  CHECK(!nz.shape);
  REQUIRE(nz.bound);
  CHECK(*nz.bound == ir::Shape{2, 6});
  CHECK(nz.blockerNode == 1);
  REQUIRE(factsOf(*f, "t").bound);
  CHECK(*factsOf(*f, "t").bound == ir::Shape{6, 2});
  CHECK(factsOf(*f, "t").blockerNode == 1);
  REQUIRE(factsOf(*f, "tf").bound);
  CHECK(*factsOf(*f, "tf").bound == ir::Shape{6, 2});
  // Shape of a bounded value has a static length; its values stay unknown, so a Reshape to them has no bound.
  REQUIRE(factsOf(*f, "count").bound);
  CHECK(*factsOf(*f, "count").bound == ir::Shape{1});
  CHECK(!factsOf(*f, "reshaped").bound);
  CHECK(factsOf(*f, "reshaped").blockerNode == 1);
  // Squeeze without axes drops the extents of 1 the values give: no bound.
  CHECK(!factsOf(*f, "squeezed").bound);
}

TEST_CASE("NonMaxSuppression is bounded by batch x classes x min(max boxes per class, boxes)", "[analysis][bounds]") {
  struct Case {
    const char* what;
    std::vector<std::string> extraInputs;
    int64_t rows;
  };
  const Case cases[] = {{"4 per class", {"max4"}, 12},
                        {"100 per class, 10 boxes", {"max100"}, 30},
                        {"no count: ONNX's 0", {}, 0},
                        {"a count computed at run time", {"runtime_max"}, 30},
                        {"a count with thresholds", {"max4", "iou", "thr"}, 12}};
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.what) {
      ir::Graph g;
      ir::ValueInfo runtimeMax;
      runtimeMax.name = "runtime_max";
      runtimeMax.type = ir::ElemType::Int64;
      runtimeMax.shape = dims({1});
      g.inputs = {floatValue("boxes", dims({1, 10, 4})), floatValue("scores", dims({1, 3, 10})), runtimeMax};
      g.initializers = {ints("max4", {1}, {4}), ints("max100", {1}, {100}), floats("iou", {1}, {0.5f}),
                        floats("thr", {1}, {0.1f}), ints("col", {}, {2}), ints("rows_shape", {2}, {10, 4})};
      std::vector<std::string> inputs{"boxes", "scores"};
      inputs.insert(inputs.end(), c.extraInputs.begin(), c.extraInputs.end());
      g.nodes = {node("NonMaxSuppression", inputs, {"selected"}),
                 withInt(node("Gather", {"selected", "col"}, {"index"}), "axis", 1),
                 node("Reshape", {"boxes", "rows_shape"}, {"rows"}),
                 withInt(node("Gather", {"rows", "index"}, {"picked"}), "axis", 0)};
      auto f = analysis::analyzeGraph(g, {});
      REQUIRE(f);
      REQUIRE(factsOf(*f, "selected").bound);
      CHECK(*factsOf(*f, "selected").bound == ir::Shape{c.rows, 3});
      REQUIRE(factsOf(*f, "picked").bound);
      CHECK(*factsOf(*f, "picked").bound == ir::Shape{c.rows, 4});
      CHECK(factsOf(*f, "picked").blockerNode == 0);
    }
  }
}

TEST_CASE("TopK with a computed k is bounded by its input, with a constant k it keeps k", "[analysis][bounds]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({4, 12}))};
  g.initializers = {floats("zero", {}, {0.0f}), ints("one", {1}, {1}), ints("two", {1}, {2}), ints("k3", {1}, {3})};
  g.nodes = {node("Greater", {"x", "zero"}, {"mask"}),
             node("NonZero", {"mask"}, {"nz"}),
             node("Shape", {"nz"}, {"s"}),
             node("Slice", {"s", "one", "two"}, {"k"}),
             node("TopK", {"x", "k"}, {"values", "indices"}),
             withInt(node("TopK", {"nz", "k3"}, {"v3", "i3"}), "axis", 1)};
  auto f = analysis::analyzeGraph(g, {});
  REQUIRE(f);
  REQUIRE(factsOf(*f, "values").bound);
  CHECK(*factsOf(*f, "values").bound == ir::Shape{4, 12});
  REQUIRE(factsOf(*f, "indices").bound);
  CHECK(*factsOf(*f, "indices").bound == ir::Shape{4, 12});
  CHECK(factsOf(*f, "values").blockerNode == 4);
  // A constant k on a bounded input: k exactly, the other dimension bounded.
  REQUIRE(factsOf(*f, "v3").bound);
  CHECK(*factsOf(*f, "v3").bound == ir::Shape{2, 3});
}

TEST_CASE("an unbound input's values have no bound and no blocking node", "[analysis][bounds]") {
  ir::Graph g;
  g.inputs = {floatValue("x", {ir::Dim::named("n"), ir::Dim::known(4)})};
  g.nodes = {node("Relu", {"x"}, {"y"})};
  auto f = analysis::analyzeGraph(g, {});
  REQUIRE(f);
  CHECK(!factsOf(*f, "y").bound);
  CHECK(factsOf(*f, "y").blockerNode == analysis::kNoNode);
}
