// The graph passes before partitioning (analysis/graph_passes.h), each on a graph built for it: an If on a
// constant becomes its branch, a constant chain folds, no-op chains go away; the rewritten graph is run with the
// kernels and compared with values computed here by hand.
#include "analysis/graph_passes.h"
#include "../common/graph_builder.h"

#include <catch2/catch.hpp>

#include <map>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

std::vector<float> floats(const ir::Tensor& t) { return {t.dataAs<float>(), t.dataAs<float>() + t.elementCount()}; }

ir::Initializer scalarInit(const std::string& name, ir::ElemType type, int64_t value) {
  if (type == ir::ElemType::Int64) return {name, ir::Tensor::fromVector(type, {}, std::vector<int64_t>{value}), std::nullopt};
  return {name, ir::Tensor::fromVector(type, {}, std::vector<float>{static_cast<float>(value)}), std::nullopt};
}

size_t count(const ir::Graph& g, ir::OpKind kind) {
  return static_cast<size_t>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const ir::Node& n) { return n.kind == kind; }));
}

const ir::PassRun& pass(const std::vector<ir::PassRun>& runs, const std::string& name) {
  auto it = std::find_if(runs.begin(), runs.end(), [&](const auto& r) { return r.name == name; });
  REQUIRE(it != runs.end());
  return *it;
}

// y = If(rate == 16000) then x * k + x else x (the else branch returns an outer value as it is); inside the then
// branch a nested If on a constant true picks Relu(t) over Neg(t), reading the branch's own value t.
ir::Graph ifGraph(int64_t rate) {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2, 3}))};
  g.outputs = {floatValue("y", dims({2, 3}))};
  // "pick/k" is taken already, so the then branch's k must get another name when it is inlined.
  g.initializers = {scalarInit("rate", ir::ElemType::Int64, rate), scalarInit("r16k", ir::ElemType::Int64, 16000),
                    floatInit("pick/k", {1})};
  g.nodes.push_back(node("Equal", {"rate", "r16k"}, {"is16k"}));

  auto nestedBranch = [](const std::string& op) {
    auto b = std::make_shared<ir::Graph>();
    b->nodes.push_back(node(op, {"t"}, {op + "_t"}));
    b->outputs = {floatValue(op + "_t", dims({2, 3}))};
    return b;
  };
  auto then = std::make_shared<ir::Graph>();
  then->initializers = {floatInit("k", {1}, -3.0f)};
  then->nodes.push_back(node("Mul", {"x", "k"}, {"t"}));
  then->nodes.push_back(node("Constant", {}, {"yes"}));
  then->nodes.back().attrs.set(
      ir::Attribute::makeTensor("value", ir::Tensor::fromVector(ir::ElemType::Bool, {}, std::vector<uint8_t>{1})));
  ir::Node nested = node("If", {"yes"}, {"relu_t"});
  nested.attrs.set(ir::Attribute::makeGraph("then_branch", nestedBranch("Relu")));
  nested.attrs.set(ir::Attribute::makeGraph("else_branch", nestedBranch("Neg")));
  then->nodes.push_back(nested);
  then->nodes.push_back(node("Add", {"relu_t", "x"}, {"sum"}));
  then->outputs = {floatValue("sum", dims({2, 3}))};
  auto otherwise = std::make_shared<ir::Graph>();
  otherwise->outputs = {floatValue("x", dims({2, 3}))};

  ir::Node branch = node("If", {"is16k"}, {"y"});
  branch.name = "pick";
  branch.attrs.set(ir::Attribute::makeGraph("then_branch", then));
  branch.attrs.set(ir::Attribute::makeGraph("else_branch", otherwise));
  g.nodes.push_back(branch);
  return g;
}

// y = If(cond) then `then` else x (x of `shape`).
// A branch holding initializer a = [1, 2, 3], a Constant node k = [10, 20, 30] and ak = Add(a, k).
std::shared_ptr<ir::Graph> branchAddingAK() {
  auto b = std::make_shared<ir::Graph>();
  b->initializers = {{"a", ir::Tensor::fromVector(ir::ElemType::Float, {3}, std::vector<float>{1, 2, 3}), std::nullopt}};
  b->nodes.push_back(node("Constant", {}, {"k"}));
  b->nodes.back().attrs.set(
      ir::Attribute::makeTensor("value", ir::Tensor::fromVector(ir::ElemType::Float, {3}, std::vector<float>{10, 20, 30})));
  b->nodes.push_back(node("Add", {"a", "k"}, {"ak"}));
  return b;
}

ir::Node ifOrPassX(const std::string& cond, std::shared_ptr<ir::Graph> then, std::vector<ir::Dim> shape) {
  auto otherwise = std::make_shared<ir::Graph>();
  otherwise->outputs = {floatValue("x", std::move(shape))};
  ir::Node pick = node("If", {cond}, {"y"});
  pick.attrs.set(ir::Attribute::makeGraph("then_branch", std::move(then)));
  pick.attrs.set(ir::Attribute::makeGraph("else_branch", otherwise));
  return pick;
}

}  // namespace

TEST_CASE("inline-if replaces an If on a known condition by its branch, nested Ifs included", "[graph-passes]") {
  const ir::Tensor x = ir::Tensor::fromVector(ir::ElemType::Float, {2, 3}, std::vector<float>{-1, 0, 1, 2, -2, 0.5f});
  for (int64_t rate : {int64_t{16000}, int64_t{8000}}) {
    INFO("rate " << rate);
    ir::Graph g = ifGraph(rate);
    std::vector<ir::PassRun> runs;
    auto facts = analysis::runGraphPasses(g, {}, runs);
    INFO((facts ? std::string() : facts.error().message()));
    REQUIRE(facts);
    CHECK(count(g, ir::OpKind::If) == 0);
    CHECK(pass(runs, "inline-if").change.countOf("ifs_inlined") == (rate == 16000 ? 2u : 1u));
    CHECK(pass(runs, "inline-if").changed == 1);
    REQUIRE(g.outputs[0].name == "y");
    auto values = evaluateNodes(g, {{"x", x}});
    // x * -3 through Relu, plus x; or x itself.
    std::vector<float> expected;
    for (float v : floats(x)) expected.push_back(rate == 16000 ? std::max(v * -3.0f, 0.0f) + v : v);
    CHECK(floats(values.at("y")) == expected);
    // The branch's initializer k was renamed into the If's scope, past the name already taken.
    if (rate == 16000) {
      REQUIRE(g.findInitializer("pick/k_1") != nullptr);
      CHECK(g.findInitializer("pick/k_1")->tensor.dataAs<float>()[0] == -3.0f);
      CHECK(g.findInitializer("k") == nullptr);
    } else {
      // The else branch returns x itself: an Identity gives it the If's output name, and it stays (it writes y).
      REQUIRE(g.nodes.back().kind == ir::OpKind::Identity);
      CHECK(g.nodes.back().inputs[0] == "x");
    }
  }
}

TEST_CASE("inline-if names an inlined value apart from the graph's values and what its other subgraphs define",
          "[graph-passes]") {
  ir::Graph g = ifGraph(16000);
  // An If on a condition known only at run time whose then branch defines "pick/t": the name inlining "pick" gives its
  // t must differ (that branch would define a name of its outer scope, which ONNX forbids), as "pick/k" (an
  // initializer of the graph) makes k's differ.
  g.inputs.push_back(ir::ValueInfo{"c", ir::ElemType::Bool, std::vector<ir::Dim>{}, ""});
  auto then = std::make_shared<ir::Graph>();
  then->nodes.push_back(node("Neg", {"x"}, {"pick/t"}));
  then->outputs = {floatValue("pick/t", dims({2, 3}))};
  ir::Node keep = ifOrPassX("c", then, dims({2, 3}));
  keep.outputs = {"z"};
  g.nodes.push_back(keep);
  g.outputs.push_back(floatValue("z", dims({2, 3})));
  std::vector<ir::PassRun> runs;
  auto facts = analysis::runGraphPasses(g, {}, runs);
  INFO((facts ? std::string() : facts.error().message()));
  REQUIRE(facts);
  CHECK(count(g, ir::OpKind::If) == 1);
  auto mul = std::find_if(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.kind == ir::OpKind::Mul; });
  REQUIRE(mul != g.nodes.end());
  CHECK(mul->inputs == std::vector<std::string>{"x", "pick/k_1"});
  CHECK(mul->outputs[0] == "pick/t_1");
  // The nested If inlined on the next round reads the renamed t.
  auto relu = std::find_if(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.kind == ir::OpKind::Relu; });
  REQUIRE(relu != g.nodes.end());
  CHECK(relu->inputs[0] == "pick/t_1");
}

TEST_CASE("the trace says where each node of the rewritten graph came from, and the passes leave the nodes it keeps",
          "[graph-passes]") {
  ir::Graph g = ifGraph(16000);  // Equal (0), the If "pick" (1)
  g.outputs[0].name = "out";
  g.nodes.push_back(node("Identity", {"y"}, {"out"}));  // writes a graph output: stays
  g.nodes[1].outputs[0] = "y0";
  g.nodes.insert(g.nodes.begin() + 2, node("Identity", {"y0"}, {"y"}));  // a no-op (2); the Identity above is 3
  std::vector<ir::PassRun> runs;
  analysis::GraphPassTrace trace;
  REQUIRE(analysis::runGraphPasses(g, {}, runs, {}, nullptr, &trace));
  CHECK(trace.inlined == std::vector<size_t>{1});
  CHECK(trace.removed == std::vector<size_t>{2});
  // By id of the given graph: the no-op's output y is read as y0 (the If's output, the branch's value now).
  REQUIRE(trace.passedThrough.size() == trace.given.size());
  CHECK(trace.passedThrough[trace.given.id("y")] == trace.given.id("y0"));
  for (ir::ValueId v = 0; v < trace.given.size(); ++v)
    if (trace.given.name(v) != "y") CHECK(trace.passedThrough[v] == ir::kNoValue);
  REQUIRE(trace.origin.size() == g.nodes.size());
  CHECK(trace.origin.front() == 0);
  CHECK(trace.origin.back() == 3);
  for (size_t i = 1; i + 1 < g.nodes.size(); ++i) CHECK(trace.origin[i] == 1);  // the branch's nodes

  ir::Graph kept = ifGraph(16000);
  kept.outputs[0].name = "out";
  kept.nodes.push_back(node("Identity", {"y"}, {"out"}));
  kept.nodes[1].outputs[0] = "y0";
  kept.nodes.insert(kept.nodes.begin() + 2, node("Identity", {"y0"}, {"y"}));
  analysis::GraphPassTrace keep;
  keep.keep = {1, 2};
  REQUIRE(analysis::runGraphPasses(kept, {}, runs, {}, nullptr, &keep));
  CHECK(count(kept, ir::OpKind::If) == 1);
  CHECK(count(kept, ir::OpKind::Identity) == 2);
  CHECK(keep.inlined.empty());
  CHECK(keep.removed.empty());
  CHECK(keep.origin == std::vector<size_t>{0, 1, 2, 3});
}

TEST_CASE("inline-if leaves an If whose condition is only known at run time", "[graph-passes]") {
  ir::Graph g = ifGraph(16000);
  g.initializers.erase(g.initializers.begin());  // rate becomes an input
  g.inputs.push_back(ir::ValueInfo{"rate", ir::ElemType::Int64, std::vector<ir::Dim>{}, ""});
  std::vector<ir::PassRun> runs;
  REQUIRE(analysis::runGraphPasses(g, {}, runs));
  CHECK(count(g, ir::OpKind::If) == 1);
  CHECK(pass(runs, "inline-if").changed == 0);
  CHECK(pass(runs, "inline-if").change.summary() == "no change");
}

TEST_CASE("a constant chain is folded to its value", "[graph-passes]") {
  // c = (a + b) * a - 1, with a = [1 2 3] and b = [4 5 6]: y = x + c.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({3}))};
  g.outputs = {floatValue("y", dims({3}))};
  g.initializers = {{"a", ir::Tensor::fromVector(ir::ElemType::Float, {3}, std::vector<float>{1, 2, 3}), std::nullopt},
                    {"b", ir::Tensor::fromVector(ir::ElemType::Float, {3}, std::vector<float>{4, 5, 6}), std::nullopt},
                    scalarInit("one", ir::ElemType::Float, 1)};
  g.nodes = {node("Add", {"a", "b"}, {"s"}), node("Identity", {"s"}, {"s2"}), node("Mul", {"s2", "a"}, {"p"}),
             node("Sub", {"p", "one"}, {"c"}), node("Add", {"x", "c"}, {"y"})};
  std::vector<ir::PassRun> runs;
  auto facts = analysis::runGraphPasses(g, {}, runs);
  REQUIRE(facts);
  const analysis::ValueFacts* c = facts->find("c");
  REQUIRE(c);
  REQUIRE(c->constant);
  CHECK(floats(*c->constant) == std::vector<float>{4, 13, 26});
  CHECK(!facts->find("y")->constant);
  CHECK(pass(runs, "remove-noops").change.countOf("nodes_removed") == 1);
}

TEST_CASE("remove-noops removes Identity chains and ops that change nothing, never a graph output's writer",
          "[graph-passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2, 3}))};
  g.outputs = {floatValue("y", dims({2, 3})), floatValue("z", dims({3, 2}))};
  g.initializers = {{"same", ir::Tensor::fromVector(ir::ElemType::Int64, {2}, std::vector<int64_t>{2, 3}), std::nullopt},
                    {"other", ir::Tensor::fromVector(ir::ElemType::Int64, {2}, std::vector<int64_t>{3, 2}), std::nullopt}};
  ir::Node cast = node("Cast", {"i2"}, {"c"});
  cast.attrs.set(ir::Attribute::makeInt("to", static_cast<int64_t>(ir::ElemType::Float)));
  ir::Node castInt = node("Cast", {"x"}, {"xi"});  // a real conversion: stays
  castInt.attrs.set(ir::Attribute::makeInt("to", static_cast<int64_t>(ir::ElemType::Int32)));
  ir::Node castBack = node("Cast", {"xi"}, {"xf"});
  castBack.attrs.set(ir::Attribute::makeInt("to", static_cast<int64_t>(ir::ElemType::Float)));
  g.nodes = {node("Identity", {"x"}, {"i1"}),      node("Identity", {"i1"}, {"i2"}), cast,
             node("Dropout", {"c"}, {"d"}),        node("Reshape", {"d", "same"}, {"r"}),
             node("Relu", {"r"}, {"relu"}),        castInt, castBack,
             node("Add", {"relu", "xf"}, {"sum"}), node("Identity", {"sum"}, {"y"}),
             node("Reshape", {"sum", "other"}, {"z"})};
  std::vector<ir::PassRun> runs;
  REQUIRE(analysis::runGraphPasses(g, {}, runs));
  CHECK(pass(runs, "remove-noops").change.countOf("nodes_removed") == 5);
  CHECK(pass(runs, "remove-noops").change.summary() == "5 nodes removed");
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.opType);
  CHECK(ops == std::vector<std::string>{"Relu", "Cast", "Cast", "Add", "Identity", "Reshape"});
  CHECK(g.nodes[0].inputs[0] == "x");
  const ir::Tensor x = ir::Tensor::fromVector(ir::ElemType::Float, {2, 3}, std::vector<float>{-1.5f, 0, 1.25f, 2, -2, 3.5f});
  auto values = evaluateNodes(g, {{"x", x}});
  // relu(x) + trunc(x)
  CHECK(floats(values.at("y")) == std::vector<float>{-1, 0, 2.25f, 4, -2, 6.5f});
  CHECK(values.at("z").shape() == ir::Shape{3, 2});
}

TEST_CASE("remove-noops removes a training-mode Dropout of ratio 0, not one of another or no ratio",
          "[graph-passes]") {
  // Swin as torchvision exports it: Dropout(x, ratio 0, training_mode true), its mask named but unread. Ratio 0.1
  // drops elements, and without
  // a ratio training mode drops half: both stay (and would be refused at run time).
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2, 3}))};
  g.outputs = {floatValue("y", dims({2, 3})), floatValue("z", dims({2, 3})), floatValue("w", dims({2, 3}))};
  auto floatScalar = [](const std::string& name, float v) {
    return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Float, {}, std::vector<float>{v}), std::nullopt};
  };
  g.initializers = {floatScalar("zero", 0.0f), floatScalar("tenth", 0.1f),
                    {"train", ir::Tensor::fromVector(ir::ElemType::Bool, {}, std::vector<uint8_t>{1}), std::nullopt}};
  g.nodes = {node("Dropout", {"x", "zero", "train"}, {"d", "unread_mask"}), node("Relu", {"d"}, {"y"}),
             node("Dropout", {"x", "tenth", "train"}, {"z"}), node("Dropout", {"x", "", "train"}, {"w"})};
  std::vector<ir::PassRun> runs;
  REQUIRE(analysis::runGraphPasses(g, {}, runs));
  CHECK(pass(runs, "remove-noops").change.countOf("nodes_removed") == 1);
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.opType);
  CHECK(ops == std::vector<std::string>{"Relu", "Dropout", "Dropout"});
  CHECK(g.nodes[0].inputs[0] == "x");
}

TEST_CASE("remove-noops removes a Pad of zero pads and an Expand or Tile to the input's own shape, not a real Pad",
          "[graph-passes]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 2, 2, 2}))};
  g.outputs = {floatValue("y", dims({1, 2, 4, 2}))};
  auto ints = [](std::vector<int64_t> v) {
    return ir::Tensor::fromVector(ir::ElemType::Int64, {static_cast<int64_t>(v.size())}, v);
  };
  g.initializers = {{"zeros", ints({0, 0, 0, 0, 0, 0, 0, 0}), std::nullopt},
                    {"rows", ints({0, 0, 1, 0, 0, 0, 1, 0}), std::nullopt},
                    {"shape", ints({1, 2, 2, 2}), std::nullopt},
                    {"once", ints({1, 1, 1, 1}), std::nullopt}};
  g.nodes = {node("Pad", {"x", "zeros"}, {"p"}), node("Expand", {"p", "shape"}, {"e"}),
             node("Tile", {"e", "once"}, {"t"}), node("Relu", {"t"}, {"r"}), node("Pad", {"r", "rows"}, {"y"})};
  std::vector<ir::PassRun> runs;
  REQUIRE(analysis::runGraphPasses(g, {}, runs));
  CHECK(pass(runs, "remove-noops").change.countOf("nodes_removed") == 3);
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.opType);
  CHECK(ops == std::vector<std::string>{"Relu", "Pad"});
  const ir::Tensor x =
      ir::Tensor::fromVector(ir::ElemType::Float, {1, 2, 2, 2}, std::vector<float>{-1, 2, 3, -4, 5, -6, 7, 8});
  auto values = evaluateNodes(g, {{"x", x}});
  // relu(x), one zero row above and below each channel's 2x2 plane
  CHECK(floats(values.at("y")) == std::vector<float>{0, 0, 0, 2, 3, 0, 0, 0, 0, 0, 5, 0, 7, 8, 0, 0});
}

TEST_CASE("a constant far larger than its inputs is left to run time, a small one is folded", "[graph-passes]") {
  // y = x + ConstantOfShape(shape) * 2: 16 bytes of shape describe 4 MiB at 1024x1024, 1 KiB at 16x16.
  for (int64_t side : {int64_t{1024}, int64_t{16}}) {
    INFO("side " << side);
    ir::Graph g;
    g.inputs = {floatValue("x", dims({side, side}))};
    g.outputs = {floatValue("y", dims({side, side}))};
    g.initializers = {{"shape", ir::Tensor::fromVector(ir::ElemType::Int64, {2}, std::vector<int64_t>{side, side}), std::nullopt},
                      scalarInit("two", ir::ElemType::Float, 2)};
    g.nodes = {node("ConstantOfShape", {"shape"}, {"ones"}), node("Mul", {"ones", "two"}, {"twos"}),
               node("Add", {"x", "twos"}, {"y"})};
    g.nodes[0].attrs.set(ir::Attribute::makeTensor("value", ir::Tensor::fromVector(ir::ElemType::Float, {1}, std::vector<float>{1})));
    std::vector<ir::PassRun> runs;
    auto facts = analysis::runGraphPasses(g, {}, runs);
    REQUIRE(facts);
    CHECK(facts->find("ones")->constant.has_value() == (side == 16));
    CHECK(facts->find("twos")->constant.has_value() == (side == 16));
    CHECK(facts->find("twos")->shape == ir::Shape{side, side});
    if (side == 16) CHECK(floats(*facts->find("twos")->constant) == std::vector<float>(256, 2.0f));
  }
}

TEST_CASE("fold-subgraphs folds constants inside the bodies of Ifs that stay, from outer constants too", "[graph-passes]") {
  // y = If(cond) then x * ((a + k) * s) else x, with a and k the branch's own (an initializer and a Constant node)
  // and s an outer constant; cond is only known at run time.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({3})), ir::ValueInfo{"cond", ir::ElemType::Bool, std::vector<ir::Dim>{}, ""}};
  g.outputs = {floatValue("y", dims({3}))};
  g.initializers = {{"s", ir::Tensor::fromVector(ir::ElemType::Float, {3}, std::vector<float>{1, 2, -1}), std::nullopt}};
  auto then = branchAddingAK();
  then->nodes.push_back(node("Mul", {"ak", "s"}, {"scale"}));
  then->nodes.push_back(node("Mul", {"x", "scale"}, {"then_y"}));
  then->outputs = {floatValue("then_y", dims({3}))};
  g.nodes = {ifOrPassX("cond", then, dims({3}))};

  std::vector<ir::PassRun> runs;
  REQUIRE(analysis::runGraphPasses(g, {}, runs));
  CHECK(pass(runs, "fold-subgraphs").change.countOf("subgraph_nodes_folded") == 3);
  const ir::Graph& body = *g.nodes[0].attrs.find("then_branch")->g;
  REQUIRE(body.nodes.size() == 1);
  CHECK(body.nodes[0].inputs == std::vector<std::string>{"x", "scale"});
  const ir::Initializer* scale = body.findInitializer("scale");
  REQUIRE(scale);
  CHECK(floats(scale->tensor) == std::vector<float>{11, 44, -33});
  CHECK(!body.findInitializer("ak"));  // read by nothing once scale is known
  CHECK(then->nodes.size() == 4);       // the model's own copy of the body is untouched
}

TEST_CASE("fold-subgraphs keeps a folded value that only a nested branch reads", "[graph-passes]") {
  // y = If(outer) then If(inner) then ak * x else ak + x else x, with ak = a + k folded in the outer branch: no node
  // of that branch reads ak once its Add is gone, but the nested branches still do, so it stays an initializer.
  ir::Graph g;
  g.inputs = {floatValue("x", dims({3})), ir::ValueInfo{"outer", ir::ElemType::Bool, std::vector<ir::Dim>{}, ""},
              ir::ValueInfo{"inner", ir::ElemType::Bool, std::vector<ir::Dim>{}, ""}};
  g.outputs = {floatValue("y", dims({3}))};
  auto then = branchAddingAK();
  auto nestedBranch = [](const std::string& op) {
    auto b = std::make_shared<ir::Graph>();
    b->nodes.push_back(node(op, {"ak", "x"}, {op + "_y"}));
    b->outputs = {floatValue(op + "_y", dims({3}))};
    return b;
  };
  ir::Node nested = node("If", {"inner"}, {"then_y"});
  nested.attrs.set(ir::Attribute::makeGraph("then_branch", nestedBranch("Mul")));
  nested.attrs.set(ir::Attribute::makeGraph("else_branch", nestedBranch("Add")));
  then->nodes.push_back(nested);
  then->outputs = {floatValue("then_y", dims({3}))};
  g.nodes = {ifOrPassX("outer", then, dims({3}))};

  std::vector<ir::PassRun> runs;
  REQUIRE(analysis::runGraphPasses(g, {}, runs));
  const ir::Graph& body = *g.nodes[0].attrs.find("then_branch")->g;
  REQUIRE(body.nodes.size() == 1);  // the nested If
  const ir::Initializer* ak = body.findInitializer("ak");
  REQUIRE(ak);
  CHECK(floats(ak->tensor) == std::vector<float>{11, 22, 33});
  CHECK(body.nodes[0].attrs.find("then_branch")->g->nodes[0].inputs == std::vector<std::string>{"ak", "x"});
}

TEST_CASE("fold-subgraphs keeps one copy of a weight that nested branches folded alike", "[graph-passes]") {
  // y = If(outer) then If(inner) then Unsqueeze(w) * x else Unsqueeze(w) + x else x, with w a Constant node of the
  // outer branch (as silero_vad keeps its LSTM weights): both nested branches fold their Unsqueeze(w); the outer
  // branch must not keep w beside them, and a folded weight of 1 KiB or more both hold goes to the outer branch once.
  const int64_t width = GENERATE(int64_t{3}, int64_t{300});
  CAPTURE(width);
  std::vector<float> values(static_cast<size_t>(width));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) + 1;
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, width})), ir::ValueInfo{"outer", ir::ElemType::Bool, std::vector<ir::Dim>{}, ""},
              ir::ValueInfo{"inner", ir::ElemType::Bool, std::vector<ir::Dim>{}, ""}};
  g.outputs = {floatValue("y", dims({1, width}))};
  g.initializers = {{"axes", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, std::vector<int64_t>{0}), std::nullopt}};
  auto nestedBranch = [&](const std::string& op) {
    auto b = std::make_shared<ir::Graph>();
    b->nodes.push_back(node("Unsqueeze", {"w", "axes"}, {op + "_w"}));
    b->nodes.push_back(node(op, {op + "_w", "x"}, {op + "_y"}));
    b->outputs = {floatValue(op + "_y", dims({1, width}))};
    return b;
  };
  auto then = std::make_shared<ir::Graph>();
  then->nodes.push_back(node("Constant", {}, {"w"}));
  then->nodes.back().attrs.set(ir::Attribute::makeTensor("value", ir::Tensor::fromVector(ir::ElemType::Float, {width}, values)));
  ir::Node nested = node("If", {"inner"}, {"then_y"});
  nested.attrs.set(ir::Attribute::makeGraph("then_branch", nestedBranch("Mul")));
  nested.attrs.set(ir::Attribute::makeGraph("else_branch", nestedBranch("Add")));
  then->nodes.push_back(nested);
  then->outputs = {floatValue("then_y", dims({1, width}))};
  g.nodes = {ifOrPassX("outer", then, dims({1, width}))};

  std::vector<ir::PassRun> runs;
  REQUIRE(analysis::runGraphPasses(g, {}, runs));
  const ir::Graph& body = *g.nodes[0].attrs.find("then_branch")->g;
  REQUIRE(body.nodes.size() == 1);  // the nested If
  const bool shared = width == 300;
  REQUIRE(body.initializers.size() == (shared ? 1u : 0u));  // never w itself
  for (const char* branch : {"then_branch", "else_branch"}) {
    INFO(branch);
    const ir::Graph& inner = *body.nodes[0].attrs.find(branch)->g;
    REQUIRE(inner.nodes.size() == 1);
    REQUIRE(inner.initializers.size() == (shared ? 0u : 1u));
    const ir::Initializer& folded = shared ? body.initializers[0] : inner.initializers[0];
    CHECK(inner.nodes[0].inputs[0] == folded.name);
    CHECK(folded.tensor.shape() == ir::Shape{1, width});
    CHECK(floats(folded.tensor) == values);
  }
}

TEST_CASE("fold-subgraphs warns of a branch that cannot run with the bound shapes", "[graph-passes]") {
  // y = If(cond) then Squeeze(x, [1]) else x: with x bound to 1x3 the then branch squeezes a dimension of 3, which
  // ONNX Runtime's load-time shape inference refuses; with 3x1 it is fine.
  for (int64_t rows : {int64_t{1}, int64_t{3}}) {
    const int64_t cols = rows == 1 ? 3 : 1;
    INFO("x is " << rows << "x" << cols);
    ir::Graph g;
    g.inputs = {floatValue("x", dims({rows, cols})), ir::ValueInfo{"cond", ir::ElemType::Bool, std::vector<ir::Dim>{}, ""}};
    g.outputs = {ir::ValueInfo{"y", ir::ElemType::Float, std::nullopt, ""}};
    g.initializers = {{"one", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, std::vector<int64_t>{1}), std::nullopt}};
    auto then = std::make_shared<ir::Graph>();
    then->nodes.push_back(node("Squeeze", {"x", "one"}, {"squeezed"}));
    then->nodes.back().name = "squeeze0";
    then->outputs = {ir::ValueInfo{"squeezed", ir::ElemType::Float, std::nullopt, ""}};
    g.nodes = {ifOrPassX("cond", then, dims({rows, cols}))};
    g.nodes[0].name = "pick";
    std::vector<ir::PassRun> runs;
    std::vector<std::string> warnings;
    auto facts = analysis::runGraphPasses(g, {}, runs, {}, &warnings);
    REQUIRE(facts);
    if (rows == 3) {
      CHECK(warnings.empty());
      CHECK(facts->unrunnableSubgraphs.empty());
      continue;
    }
    // The If is named by its index: the compiled model leaves what it reads open (pipeline::buildContextModel).
    CHECK(facts->unrunnableSubgraphs == std::vector<size_t>{0});
    CHECK(g.nodes[0].attrs.find("then_branch")->g == then);  // left as the source wrote it
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("'pick' (If) then_branch") && Catch::Contains("squeeze0") &&
                                Catch::Contains("ONNX Runtime refuses"));
  }
}

TEST_CASE("the graph passes are objects run in order, and dump-after and stop-after show the graph after one",
          "[graph-passes]") {
  std::vector<std::string_view> names;
  for (const analysis::GraphPass* p : analysis::graphPasses()) {
    names.push_back(p->name());
    CHECK(!p->required());
  }
  CHECK(names == std::vector<std::string_view>{"inline-if", "remove-noops", "fold-subgraphs"});
  CHECK(analysis::graphPassNames() == names);

  ir::Graph g = ifGraph(16000);
  std::vector<ir::PassRun> runs;
  analysis::GraphPassDump dump;
  dump.name = "m";
  dump.stopAfter = "inline-if";
  REQUIRE(analysis::runGraphPasses(g, {}, runs, {}, nullptr, nullptr, &dump));
  CHECK(dump.stopped);
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].name == "inline-if");
  CHECK(runs[0].kind == ir::PassKind::Graph);
  INFO(dump.text);
  CHECK(dump.text.rfind("graph m (after inline-if): ", 0) == 0);
  CHECK(dump.text.find("= If(") == std::string::npos);  // inlined
  CHECK(dump.text.find("= Relu(") != std::string::npos);

  ir::Graph all = ifGraph(16000);
  analysis::GraphPassDump after;
  after.name = "m";
  after.dumpAfter = "fold-subgraphs";
  after.stopAfter = "plan-memory";  // a lowering pass: matches nothing here
  REQUIRE(analysis::runGraphPasses(all, {}, runs, {}, nullptr, nullptr, &after));
  CHECK(!after.stopped);
  CHECK(runs.size() == 3);
  CHECK(after.text.find("(after fold-subgraphs)") != std::string::npos);
  CHECK(after.text.find("(after inline-if)") == std::string::npos);
}

TEST_CASE("fold-subgraphs hoists a weight both branches hold and the facts number it", "[analysis]") {
  // y = If(cond) then x + w else x - w, each branch holding its own copy of the same 1 KiB weight.
  ir::Graph g;
  g.inputs = {ir::ValueInfo{"cond", ir::ElemType::Bool, std::vector<ir::Dim>{}, ""}, floatValue("x", dims({256}))};
  g.outputs = {floatValue("y", dims({256}))};
  auto branch = [](const std::string& op, const std::string& weight) {
    auto b = std::make_shared<ir::Graph>();
    b->initializers = {floatInit(weight, {256}, 0.5f)};
    b->nodes.push_back(node(op, {"x", weight}, {op + "_y"}));
    b->outputs = {floatValue(op + "_y", dims({256}))};
    return b;
  };
  ir::Node pick = node("If", {"cond"}, {"y"});
  pick.attrs.set(ir::Attribute::makeGraph("then_branch", branch("Add", "w_then")));
  pick.attrs.set(ir::Attribute::makeGraph("else_branch", branch("Sub", "w_else")));
  g.nodes = {pick};
  std::vector<ir::PassRun> runs;
  auto facts = analysis::runGraphPasses(g, {}, runs);
  REQUIRE(facts);
  CHECK(pass(runs, "fold-subgraphs").change.countOf("shared_initializers_hoisted") == 1);
  REQUIRE(g.initializers.size() == 1);
  const std::string& hoisted = g.initializers[0].name;
  // The facts are those of the graph as the pass left it: the hoisted weight has an id, a constant and a reader.
  CHECK(facts->table.size() == ir::ValueTable(g).size());
  const ir::ValueId w = facts->table.find(hoisted);
  REQUIRE(w != ir::kNoValue);
  CHECK(facts->table[w].isInitializer);
  REQUIRE((*facts)[w].constant);
  CHECK(floats(*(*facts)[w].constant) == floats(floatInit("w", {256}, 0.5f).tensor));
  CHECK(facts->table[w].uses == std::vector<ir::ValueUse>{{0, ir::ValueUse::kSubgraphSlot}});
  CHECK((*facts)[facts->table.id("x")].shape == ir::Shape{256});
}
