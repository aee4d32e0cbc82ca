// Upper bounds of value-dependent shapes: the roots (NonZero, NonMaxSuppression, TopK with a computed k) and what
// follows them, against the bounds the ONNX definitions of the ops give.
#include "analysis/analysis.h"
#include "../common/graph_builder.h"
#include "kernels/kernels.h"

#include <map>

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
             node("Reshape", {"x", "s"}, {"reshaped"}), node("Squeeze", {"nz"}, {"squeezed"}),
             node("Unsqueeze", {"t"}, {"t3"}), node("Squeeze", {"t3"}, {"t2"})};
  // Opset 11: the axes are attributes.
  g.nodes[8].opset = g.nodes[9].opset = 11;
  g.nodes[8].attrs.set(ir::Attribute::makeInts("axes", {2}));
  g.nodes[9].attrs.set(ir::Attribute::makeInts("axes", {2}));
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
  // Shape of a bounded value has a static length, and values in the bound's range: [2, 0..6]. A Reshape to them:
  // 2, and 0..6, where 0 would copy x's 3.
  REQUIRE(factsOf(*f, "count").bound);
  CHECK(*factsOf(*f, "count").bound == ir::Shape{1});
  REQUIRE(factsOf(*f, "s").range);
  CHECK(*factsOf(*f, "s").range == analysis::ValueRanges{{2, 2}, {0, 6}});
  REQUIRE(factsOf(*f, "reshaped").bound);
  CHECK(*factsOf(*f, "reshaped").bound == ir::Shape{2, 6});
  CHECK(*factsOf(*f, "reshaped").low == ir::Shape{2, 0});
  // Squeeze without axes drops the extents of 1 the values give: no bound; with axes as an attribute (opset 11) it
  // has one.
  CHECK(!factsOf(*f, "squeezed").bound);
  REQUIRE(factsOf(*f, "t2").bound);
  CHECK(*factsOf(*f, "t2").bound == ir::Shape{6, 2});
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

TEST_CASE("an If's outputs are bounded by the larger of its branches' bounds, at the same rank", "[analysis][bounds]") {
  // nz is [2, <=6]. then: (nz, x, nz); else: (nz ++ nz along 1, Transpose(nz), a 1-D row of nz).
  ir::Graph g;
  ir::ValueInfo cond;
  cond.name = "cond";
  cond.type = ir::ElemType::Bool;
  cond.shape = dims({});
  g.inputs = {floatValue("x", dims({2, 3})), cond};
  g.initializers = {floats("zero", {}, {0.0f}), ints("row", {}, {0})};
  g.nodes = {node("Greater", {"x", "zero"}, {"mask"}), node("NonZero", {"mask"}, {"nz"})};
  auto thenBranch = std::make_shared<ir::Graph>();
  thenBranch->nodes = {node("Identity", {"nz"}, {"t0"}), node("Identity", {"x"}, {"t1"}),
                       node("Identity", {"nz"}, {"t2"})};
  thenBranch->outputs = {ir::ValueInfo{"t0", ir::ElemType::Int64, std::nullopt, ""},
                         ir::ValueInfo{"t1", ir::ElemType::Float, std::nullopt, ""},
                         ir::ValueInfo{"t2", ir::ElemType::Int64, std::nullopt, ""}};
  auto elseBranch = std::make_shared<ir::Graph>();
  ir::Node transpose = node("Transpose", {"nz"}, {"e1"});
  transpose.attrs.set(ir::Attribute::makeInts("perm", {1, 0}));
  elseBranch->nodes = {withInt(node("Concat", {"nz", "nz"}, {"e0"}), "axis", 1), transpose,
                       withInt(node("Gather", {"nz", "row"}, {"e2"}), "axis", 0)};
  elseBranch->outputs = {ir::ValueInfo{"e0", ir::ElemType::Int64, std::nullopt, ""},
                         ir::ValueInfo{"e1", ir::ElemType::Int64, std::nullopt, ""},
                         ir::ValueInfo{"e2", ir::ElemType::Int64, std::nullopt, ""}};
  ir::Node branch = node("If", {"cond"}, {"y0", "y1", "y2"});
  branch.attrs.set(ir::Attribute::makeGraph("then_branch", thenBranch));
  branch.attrs.set(ir::Attribute::makeGraph("else_branch", elseBranch));
  g.nodes.push_back(branch);
  g.nodes.push_back(node("Relu", {"y1"}, {"after"}));
  auto f = analysis::analyzeGraph(g, {});
  REQUIRE(f);
  REQUIRE(factsOf(*f, "y0").bound);
  CHECK(*factsOf(*f, "y0").bound == ir::Shape{2, 12});
  // A static [2, 3] against [<=6, 2]: at most [6, 3]; what follows carries it.
  REQUIRE(factsOf(*f, "y1").bound);
  CHECK(*factsOf(*f, "y1").bound == ir::Shape{6, 3});
  REQUIRE(factsOf(*f, "after").bound);
  CHECK(*factsOf(*f, "after").bound == ir::Shape{6, 3});
  // Rank 2 against rank 1: no bound.
  CHECK(!factsOf(*f, "y2").bound);
}

namespace {

// t = Transpose(NonZero(x > 0)) is [0..6, 2]; n = its row count, 0..6; shapes computed from n.
ir::Graph shapeArithmeticGraph() {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2, 3}))};
  g.initializers = {floats("zero", {}, {0.0f}),     ints("i0", {}, {0}),          ints("i1", {}, {1}),
                    ints("axes0", {1}, {0}),         ints("minus1", {1}, {-1}),    ints("one", {1}, {1}),
                    ints("two", {1}, {2}),           ints("three", {1}, {3}),      ints("four", {1}, {4}),
                    ints("six", {1}, {6}),           floats("row", {1, 3}, {1, 2, 3}), ints("s0", {}, {0}),
                    ints("s1", {}, {1})};
  ir::Node transpose = node("Transpose", {"nz"}, {"t"});
  transpose.attrs.set(ir::Attribute::makeInts("perm", {1, 0}));
  g.nodes = {node("Greater", {"x", "zero"}, {"mask"}),
             node("NonZero", {"mask"}, {"nz"}),
             transpose,
             node("Shape", {"t"}, {"s"}),
             withInt(node("Gather", {"s", "i0"}, {"n"}), "axis", 0),
             node("Unsqueeze", {"n", "axes0"}, {"nn"}),
             withInt(node("Gather", {"s", "i1"}, {"cols"}), "axis", 0),
             node("Unsqueeze", {"cols", "axes0"}, {"cc"}),
             // [-1, 2]: the rows inferred, at most 12 / 2.
             withInt(node("Concat", {"minus1", "cc"}, {"shape_rows"}), "axis", 0),
             node("Reshape", {"t", "shape_rows"}, {"rows"}),
             // [2n, 3] of zeros.
             node("Mul", {"nn", "two"}, {"twice"}),
             withInt(node("Concat", {"twice", "three"}, {"zeros_shape"}), "axis", 0),
             node("ConstantOfShape", {"zeros_shape"}, {"zeros"}),
             // row [1, 3] expanded to [n, 3].
             withInt(node("Concat", {"nn", "three"}, {"expand_shape"}), "axis", 0),
             node("Expand", {"row", "expand_shape"}, {"expanded"}),
             // 0..n-1; n / 2; min(n, 4) as TopK's k on 6 values; n - 1 may be -1: no bound.
             node("Range", {"s0", "n", "s1"}, {"range"}),
             node("Div", {"nn", "two"}, {"half"}),
             node("Min", {"nn", "four"}, {"k"}),
             node("Reshape", {"x", "six"}, {"flat"}),
             node("TopK", {"flat", "k"}, {"top", "top_index"}),
             node("Sub", {"nn", "one"}, {"less"}),
             withInt(node("Concat", {"less", "minus1"}, {"unsure_shape"}), "axis", 0),
             node("Reshape", {"t", "unsure_shape"}, {"unsure"}),
             // PyTorch's expand: Where(shape == -1, 1, shape) as Expand's shape.
             node("Equal", {"expand_shape", "minus1"}, {"is_minus1"}),
             node("Where", {"is_minus1", "one", "expand_shape"}, {"torch_shape"}),
             node("Expand", {"row", "torch_shape"}, {"torch_expanded"})};
  return g;
}

// Runs g's nodes on x (a node that fails, as a Reshape to a shape it cannot take, ends nothing: what follows it is not
// checked) and checks every value the analysis bounds against what the kernels give: the same rank, each dimension
// between the lower and upper bound, each element of a value with a range within it. Returns how many were checked.
size_t checkBoundsHold(const ir::Graph& g, const analysis::GraphFacts& f, const ir::Tensor& x) {
  std::map<std::string, ir::Tensor> values{{"x", x}};
  for (const auto& init : g.initializers) values[init.name] = init.tensor;
  size_t checked = 0;
  for (const auto& n : g.nodes) {
    std::vector<const ir::Tensor*> ins;
    bool ready = true;
    for (const auto& in : n.inputs) {
      ready &= in.empty() || values.count(in) != 0;
      ins.push_back(in.empty() || !values.count(in) ? nullptr : &values.at(in));
    }
    if (!ready) continue;
    kernels::OpContext ctx{n.kind, n.opset, n.attrs, n.name};
    auto outs = kernels::evaluate(ctx, ins, n.outputs.size());
    if (!outs) continue;
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const ir::Tensor& t = (*outs)[o];
      const analysis::ValueFacts& v = factsOf(f, n.outputs[o].c_str());
      INFO(n.outputs[o] << " is " << ir::shapeToString(t.shape()));
      if (v.bound) {
        REQUIRE(v.low);
        REQUIRE(t.shape().size() == v.bound->size());
        for (size_t d = 0; d < v.bound->size(); ++d) {
          CHECK(t.shape()[d] <= (*v.bound)[d]);
          CHECK(t.shape()[d] >= (*v.low)[d]);
        }
        ++checked;
      }
      if (v.range) {
        REQUIRE(t.elementCount() == v.range->size());
        for (size_t e = 0; e < v.range->size(); ++e) {
          const int64_t value = t.type() == ir::ElemType::Int32 ? t.dataAs<int32_t>()[e] : t.dataAs<int64_t>()[e];
          CHECK(value >= (*v.range)[e].lo);
          CHECK(value <= (*v.range)[e].hi);
        }
        ++checked;
      }
      values[n.outputs[o]] = t;
    }
  }
  return checked;
}

}  // namespace

TEST_CASE("shapes computed from a bounded value's shape are bounded where the arithmetic allows", "[analysis][bounds]") {
  const ir::Graph g = shapeArithmeticGraph();
  auto f = analysis::analyzeGraph(g, {});
  REQUIRE(f);
  REQUIRE(factsOf(*f, "n").range);
  CHECK(*factsOf(*f, "n").range == analysis::ValueRanges{{0, 6}});
  // t's column count is exact: [-1, 2] is known at compile time, a constant, and the Reshape's own rule bounds it.
  REQUIRE(factsOf(*f, "shape_rows").constant);
  CHECK(factsOf(*f, "shape_rows").constant->shape() == ir::Shape{2});
  CHECK(factsOf(*f, "shape_rows").constant->dataAs<int64_t>()[1] == 2);
  CHECK(!factsOf(*f, "shape_rows").range);
  REQUIRE(factsOf(*f, "rows").bound);
  CHECK(*factsOf(*f, "rows").bound == ir::Shape{6, 2});
  CHECK(*factsOf(*f, "rows").low == ir::Shape{0, 2});
  REQUIRE(factsOf(*f, "zeros").bound);
  CHECK(*factsOf(*f, "zeros").bound == ir::Shape{12, 3});
  CHECK(factsOf(*f, "zeros").type == ir::ElemType::Float);
  REQUIRE(factsOf(*f, "expanded").bound);
  CHECK(*factsOf(*f, "expanded").bound == ir::Shape{6, 3});
  REQUIRE(factsOf(*f, "range").bound);
  CHECK(*factsOf(*f, "range").bound == ir::Shape{6});
  REQUIRE(factsOf(*f, "half").range);
  CHECK(*factsOf(*f, "half").range == analysis::ValueRanges{{0, 3}});
  REQUIRE(factsOf(*f, "top").bound);
  CHECK(*factsOf(*f, "top").bound == ir::Shape{4});
  REQUIRE(factsOf(*f, "less").range);
  CHECK(*factsOf(*f, "less").range == analysis::ValueRanges{{-1, 5}});
  CHECK(!factsOf(*f, "unsure").bound);
  // shape == -1 is known false (n's range [0, 6] and the 3 hold no -1): a constant, and Where takes the shape's side.
  REQUIRE(factsOf(*f, "is_minus1").constant);
  CHECK(factsOf(*f, "is_minus1").constant->dataAs<uint8_t>()[0] == 0);
  CHECK(factsOf(*f, "is_minus1").constant->dataAs<uint8_t>()[1] == 0);
  REQUIRE(factsOf(*f, "torch_shape").range);
  CHECK(*factsOf(*f, "torch_shape").range == analysis::ValueRanges{{0, 6}, {3, 3}});
  REQUIRE(factsOf(*f, "torch_expanded").bound);
  CHECK(*factsOf(*f, "torch_expanded").bound == ir::Shape{6, 3});
  // The columns are exact: the row's 3 and the shape's 3 (a 0 row count may pair with the row's 1).
  CHECK(*factsOf(*f, "torch_expanded").low == ir::Shape{0, 3});
  CHECK(*factsOf(*f, "expanded").low == ir::Shape{0, 3});
}

TEST_CASE("the bounds and ranges hold for what the kernels compute with 0, some and all rows", "[analysis][bounds]") {
  const ir::Graph g = shapeArithmeticGraph();
  auto f = analysis::analyzeGraph(g, {});
  REQUIRE(f);
  const std::vector<float> inputs[] = {{-1, -2, -3, 0, -1, -2}, {1, -2, 3, 0, 5, -2}, {1, 2, 3, 4, 5, 6}};
  for (const auto& x : inputs) {
    const size_t checked = checkBoundsHold(g, *f, ir::Tensor::fromVector(ir::ElemType::Float, {2, 3}, x));
    CHECK(checked >= 20);
  }
}
