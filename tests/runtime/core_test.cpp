// The runtime core on its own, as an ONNX Runtime EP links it: sessions from models built in memory, with no
// onnx_io and no protobuf in this test's link (see CMakeLists.txt).
#include "runtime/session.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

using namespace ctxkit;

namespace {

ir::ValueInfo floatValue(const std::string& name, ir::Shape shape) {
  std::vector<ir::Dim> dims;
  for (int64_t d : shape) dims.push_back(ir::Dim::known(d));
  return ir::ValueInfo{name, ir::ElemType::Float, dims, {}};
}

// A node of the default domain at opset 17.
ir::Node opNode(ir::OpKind kind, const std::string& opType, const std::string& name, std::vector<std::string> inputs,
                std::vector<std::string> outputs) {
  ir::Node n;
  n.name = name;
  n.opType = opType;
  n.kind = kind;
  n.opset = 17;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

// y = x + w, with w an initializer.
ir::Model addModel() {
  ir::Model m;
  m.irVersion = 8;
  m.opsets.push_back(ir::OpsetImport{"", 17});
  ir::Graph& g = m.graph;
  g.name = "add";
  g.inputs.push_back(floatValue("x", {2, 2}));
  g.outputs.push_back(floatValue("y", {2, 2}));
  g.initializers.push_back(ir::Initializer{"w", ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>{10, 20, 30, 40}), std::nullopt});
  g.nodes.push_back(opNode(ir::OpKind::Add, "Add", "add0", {"x", "w"}, {"y"}));
  return m;
}

// y = Reshape(x, shape), named reshape0.
ir::Node reshapeNode(const std::string& shape) {
  ir::Node reshape;
  reshape.name = "reshape0";
  reshape.opType = "Reshape";
  reshape.kind = ir::OpKind::Reshape;
  reshape.opset = 17;
  reshape.inputs = {"x", shape};
  reshape.outputs = {"y"};
  return reshape;
}

ir::Node epContextNode(const std::string& source, const std::string& cache) {
  ir::Node n;
  n.name = "ep0";
  n.opType = "EPContext";
  n.domain = "com.microsoft";
  n.kind = ir::OpKind::EPContext;
  n.opset = 1;
  n.inputs = {"x"};
  n.outputs = {"y"};
  n.attrs.set(ir::Attribute::makeInt("main_context", 1));
  n.attrs.set(ir::Attribute::makeInt("embed_mode", 0));
  n.attrs.set(ir::Attribute::makeString("ep_cache_context", cache));
  n.attrs.set(ir::Attribute::makeString("source", source));
  return n;
}

}  // namespace

TEST_CASE("a model built in memory loads and runs in the core, inputs and initializers bound", "[runtime][core]") {
  auto s = runtime::Session::load(addModel(), std::filesystem::temp_directory_path(), {}, "in-memory add");
  INFO((s ? std::string() : s.error().message()));
  REQUIRE(s);
  REQUIRE((*s)->inputs().size() == 1);
  CHECK((*s)->inputs()[0].name == "x");
  CHECK((*s)->stats().fallbackNodes == 1);
  CHECK((*s)->stats().compiledNodes == 0);
  CHECK((*s)->compatibility() == runtime::Compatibility::NotApplicable);
  auto out = (*s)->run({ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>{1, 2, 3, 4})});
  REQUIRE(out);
  REQUIRE(out->size() == 1);
  const float* y = (*out)[0].dataAs<float>();
  CHECK(std::vector<float>(y, y + 4) == std::vector<float>{11, 22, 33, 44});
  auto wrong = (*s)->run({});
  REQUIRE_FALSE(wrong);
  CHECK_THAT(wrong.error().message(), Catch::Contains("in-memory add takes 1 inputs but 0 were given"));
}

TEST_CASE("the core refuses another EP's node and names a missing context binary", "[runtime][core]") {
  ir::Model foreign = addModel();
  foreign.graph.nodes = {epContextNode("QNNExecutionProvider", "qnn.bin")};
  auto s = runtime::Session::load(std::move(foreign), std::filesystem::temp_directory_path(), {}, "m");
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().message(), Catch::Contains("'ep0'") && Catch::Contains("QNNExecutionProvider"));

  ir::Model ours = addModel();
  ours.graph.nodes = {epContextNode("CTXKIT", "no_such_ctxkit.bin")};
  auto missing = runtime::Session::load(std::move(ours), std::filesystem::temp_directory_path(), {}, "m");
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error().message(), Catch::Contains("'ep0'") && Catch::Contains("no_such_ctxkit.bin"));
}

TEST_CASE("a Constant node's value is made once and later runs get it unchanged", "[runtime][core]") {
  ir::Model m = addModel();
  ir::Graph& g = m.graph;
  g.initializers.clear();
  // w comes from a Constant node now, and a second Constant is a graph output of its own.
  for (const char* name : {"w", "k"}) {
    ir::Node c;
    c.name = std::string("const_") + name;
    c.opType = "Constant";
    c.kind = ir::OpKind::Constant;
    c.opset = 17;
    c.outputs = {name};
    c.attrs.set(ir::Attribute::makeTensor(
        "value", ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>{10, 20, 30, 40})));
    g.nodes.insert(g.nodes.begin(), c);
  }
  g.outputs.push_back(floatValue("k", {2, 2}));
  auto s = runtime::Session::load(std::move(m), std::filesystem::temp_directory_path(), {}, "constants");
  REQUIRE(s);
  auto x = ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>{1, 2, 3, 4});
  for (int run = 0; run < 3; ++run) {
    auto out = (*s)->run({x});
    REQUIRE(out);
    CHECK(std::vector<float>((*out)[0].dataAs<float>(), (*out)[0].dataAs<float>() + 4) == std::vector<float>{11, 22, 33, 44});
    // The graph output that is a Constant's value is the caller's own copy: writing it leaves later runs unchanged.
    CHECK(std::vector<float>((*out)[1].dataAs<float>(), (*out)[1].dataAs<float>() + 4) == std::vector<float>{10, 20, 30, 40});
    if (float* w = (*out)[1].mutableDataAs<float>()) w[0] = -1;
  }
}

TEST_CASE("runInto writes outputs of the right type and shape in place and replaces others", "[runtime][core]") {
  auto s = runtime::Session::load(addModel(), std::filesystem::temp_directory_path(), {}, "add");
  REQUIRE(s);
  auto x = ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>{1, 2, 3, 4});
  auto values = [](const ir::Tensor& t) { return std::vector<float>(t.dataAs<float>(), t.dataAs<float>() + 4); };
  // An empty output is replaced; passed back, the same buffer is written again.
  ir::Tensor y;
  ir::Tensor* outs[] = {&y};
  REQUIRE((*s)->runInto({x}, outs));
  CHECK(values(y) == std::vector<float>{11, 22, 33, 44});
  const std::byte* buffer = y.data();
  auto x2 = ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>{2, 3, 4, 5});
  REQUIRE((*s)->runInto({x2}, outs));
  CHECK(y.data() == buffer);
  CHECK(values(y) == std::vector<float>{12, 23, 34, 45});
  // A tensor of another shape is replaced.
  y = ir::Tensor::allocate(ir::ElemType::Float, {4}).value();
  REQUIRE((*s)->runInto({x}, outs));
  CHECK(y.shape() == ir::Shape{2, 2});
  CHECK(values(y) == std::vector<float>{11, 22, 33, 44});
  // An output sharing the feed's buffer (a state passed back) gets the right values: it is not written while read.
  ir::Tensor state = ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>{1, 2, 3, 4});
  ir::Tensor alias = state;
  ir::Tensor* aliasOuts[] = {&alias};
  REQUIRE((*s)->runInto({state}, aliasOuts));
  CHECK(values(alias) == std::vector<float>{11, 22, 33, 44});
  // Wrong counts and null outputs are refused.
  CHECK_FALSE((*s)->runInto({x}, std::span<ir::Tensor* const>{}));
  ir::Tensor* none[] = {nullptr};
  CHECK_FALSE((*s)->runInto({x}, none));
}

TEST_CASE("declared input shapes too large to exist load without arithmetic overflow", "[runtime][core]") {
  // Found by fuzz_session: nodes are prepared at load from declared shapes, and a file can declare anything;
  // Reshape's element count overflowed (undefined behaviour, reported by UBSan).
  ir::Model m = addModel();
  ir::Graph& g = m.graph;
  const int64_t huge = int64_t{1} << 40;
  g.inputs[0] = floatValue("x", {huge, huge});
  g.outputs[0] = floatValue("y", {huge, huge});
  g.initializers.push_back(ir::Initializer{"flat", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, std::vector<int64_t>{-1}), std::nullopt});
  g.nodes = {reshapeNode("flat")};
  auto s = runtime::Session::load(std::move(m), std::filesystem::temp_directory_path(), {}, "huge");
  REQUIRE(s);
  CHECK((*s)->preparedFallbackOps() == 0);  // nothing could be prepared for a shape that cannot exist
}

TEST_CASE("a fallback node's failure names the node once", "[runtime][core]") {
  ir::Model m = addModel();
  ir::Graph& g = m.graph;
  g.inputs.push_back(ir::ValueInfo{"shape", ir::ElemType::Int64, std::vector<ir::Dim>{ir::Dim::known(2)}, {}});
  g.outputs[0] = floatValue("y", {2, 2});
  g.nodes = {reshapeNode("shape")};
  auto s = runtime::Session::load(std::move(m), std::filesystem::temp_directory_path(), {}, "reshaping");
  REQUIRE(s);
  std::vector<ir::Tensor> feeds;
  feeds.push_back(ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>{1, 2, 3, 4}));
  feeds.push_back(ir::Tensor::fromVector(ir::ElemType::Int64, {2}, std::vector<int64_t>{3, 3}));  // 9 elements of 4
  auto out = (*s)->run(feeds);
  REQUIRE(!out);
  const std::string& message = out.error().message();
  INFO(message);
  const std::string label = "node 'reshape0' (Reshape)";
  CHECK(message.find(label) != std::string::npos);
  CHECK(message.find(label) == message.rfind(label));
}

namespace {

ir::Node makeNode(std::string op, ir::OpKind kind, std::vector<std::string> ins, std::vector<std::string> outs) {
  ir::Node n;
  n.name = outs.front() + "_node";
  n.opType = std::move(op);
  n.kind = kind;
  n.opset = 17;
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  return n;
}

ir::ValueInfo int64Value(const std::string& name) { return ir::ValueInfo{name, ir::ElemType::Int64, std::nullopt, {}}; }

// A branch graph with no inputs and output `out` made by `nodes`.
std::shared_ptr<ir::Graph> branch(const std::string& name, std::vector<ir::Node> nodes, const std::string& out) {
  auto g = std::make_shared<ir::Graph>();
  g->name = name;
  g->nodes = std::move(nodes);
  g->outputs.push_back(int64Value(out));
  return g;
}

// nz = NonZero(x); r = If(c) then (If(c) then Identity(nz) else Neg(nz)) else Neg(nz) + k, k a branch initializer:
// value-dependent shapes and Ifs reading values of the graphs around them (two levels up).
ir::Model nonZeroIfModel() {
  ir::Model m;
  m.irVersion = 8;
  m.opsets.push_back(ir::OpsetImport{"", 17});
  ir::Graph& g = m.graph;
  g.name = "nonzero_if";
  g.inputs.push_back(floatValue("x", {6}));
  g.inputs.push_back(ir::ValueInfo{"c", ir::ElemType::Bool, std::vector<ir::Dim>{}, {}});
  g.outputs.push_back(int64Value("r"));
  g.nodes.push_back(makeNode("NonZero", ir::OpKind::NonZero, {"x"}, {"nz"}));
  ir::Node inner = makeNode("If", ir::OpKind::If, {"c"}, {"inner_r"});
  inner.attrs.set(ir::Attribute::makeGraph(
      "then_branch", branch("inner_then", {makeNode("Identity", ir::OpKind::Identity, {"nz"}, {"same"})}, "same")));
  inner.attrs.set(ir::Attribute::makeGraph(
      "else_branch", branch("inner_else", {makeNode("Neg", ir::OpKind::Neg, {"nz"}, {"negated"})}, "negated")));
  auto elseBranch = branch("outer_else",
                           {makeNode("Neg", ir::OpKind::Neg, {"nz"}, {"neg"}),
                            makeNode("Add", ir::OpKind::Add, {"neg", "k"}, {"shifted"})},
                           "shifted");
  elseBranch->initializers.push_back(
      ir::Initializer{"k", ir::Tensor::fromVector(ir::ElemType::Int64, {}, std::vector<int64_t>{100}), std::nullopt});
  ir::Node outer = makeNode("If", ir::OpKind::If, {"c"}, {"r"});
  outer.attrs.set(ir::Attribute::makeGraph("then_branch", branch("outer_then", {std::move(inner)}, "inner_r")));
  outer.attrs.set(ir::Attribute::makeGraph("else_branch", elseBranch));
  g.nodes.push_back(std::move(outer));
  return m;
}

}  // namespace

TEST_CASE("If branches and value-dependent outputs run on kept slots as the values change size", "[runtime][core]") {
  auto s = runtime::Session::load(nonZeroIfModel(), std::filesystem::path("."));
  INFO((s ? std::string() : s.error().message()));
  REQUIRE(s);
  ir::Tensor r;
  ir::Tensor* outs[] = {&r};
  struct Step {
    std::vector<float> x;
    bool c;
    std::vector<int64_t> expected;  // NonZero's indices, through the branch c selects
  };
  // Growing, shrinking, empty and growing past every earlier size again; both branches in turn.
  const std::vector<Step> steps = {
      {{0, 1, 0, 2, 0, 3}, true, {1, 3, 5}},
      {{1, 1, 1, 1, 1, 0}, true, {0, 1, 2, 3, 4}},
      {{0, 0, -0.0f, 0, 7, 0}, false, {96}},
      {{0, 0, 0, 0, 0, 0}, true, {}},
      {{1, 2, 3, 4, 5, 6}, false, {100, 99, 98, 97, 96, 95}},
      {{0, 1, 0, 2, 0, 3}, true, {1, 3, 5}},
  };
  for (const Step& step : steps) {
    const std::vector<ir::Tensor> feeds = {ir::Tensor::fromVector(ir::ElemType::Float, {6}, step.x),
                                           ir::Tensor::fromVector(ir::ElemType::Bool, {}, std::vector<uint8_t>{step.c})};
    auto st = (*s)->runInto(feeds, outs);
    INFO((st ? std::string() : st.error().message()));
    REQUIRE(st);
    REQUIRE(r.type() == ir::ElemType::Int64);
    CHECK(r.shape() == ir::Shape{1, static_cast<int64_t>(step.expected.size())});
    CHECK(std::vector<int64_t>(r.dataAs<int64_t>(), r.dataAs<int64_t>() + r.elementCount()) == step.expected);
  }
}

namespace {

// y = Gemm(x, w, transB) and z = MatMul(x, v): constant weights read at whatever row count x has.
ir::Model gemmMatMulModel(int64_t k, int64_t n, int64_t m) {
  ir::Model model;
  model.irVersion = 8;
  model.opsets.push_back(ir::OpsetImport{"", 17});
  ir::Graph& g = model.graph;
  g.name = "rows";
  g.inputs.push_back(ir::ValueInfo{"x", ir::ElemType::Float, std::vector<ir::Dim>{ir::Dim::named("rows"), ir::Dim::known(k)}, {}});
  g.outputs.push_back(ir::ValueInfo{"y", ir::ElemType::Float, std::vector<ir::Dim>{ir::Dim::named("rows"), ir::Dim::known(n)}, {}});
  g.outputs.push_back(ir::ValueInfo{"z", ir::ElemType::Float, std::vector<ir::Dim>{ir::Dim::named("rows"), ir::Dim::known(m)}, {}});
  auto values = [](size_t count, float scale) {
    std::vector<float> out(count);
    for (size_t i = 0; i < count; ++i) out[i] = scale * static_cast<float>(static_cast<int>((i * 37 + 11) % 23) - 11);
    return out;
  };
  g.initializers.push_back(ir::Initializer{"w", ir::Tensor::fromVector(ir::ElemType::Float, {n, k}, values(static_cast<size_t>(n * k), 0.03f)), std::nullopt});
  g.initializers.push_back(ir::Initializer{"v", ir::Tensor::fromVector(ir::ElemType::Float, {k, m}, values(static_cast<size_t>(k * m), 0.05f)), std::nullopt});
  ir::Node gemm = opNode(ir::OpKind::Gemm, "Gemm", "gemm0", {"x", "w"}, {"y"});
  gemm.attrs.set(ir::Attribute::makeInt("transB", 1));
  g.nodes.push_back(std::move(gemm));
  g.nodes.push_back(opNode(ir::OpKind::MatMul, "MatMul", "matmul0", {"x", "v"}, {"z"}));
  return model;
}

}  // namespace

TEST_CASE("a fallback Gemm and MatMul with constant weights pack each weight once for every row count",
          "[runtime][core]") {
  // Odd sizes: panels with a ragged last one, and more row counts than a node keeps prepared ops for.
  const int64_t k = 67, n = 45, m = 19;
  ir::Model model = gemmMatMulModel(k, n, m);
  const std::vector<float> w(model.graph.initializers[0].tensor.dataAs<float>(),
                             model.graph.initializers[0].tensor.dataAs<float>() + n * k);
  const std::vector<float> v(model.graph.initializers[1].tensor.dataAs<float>(),
                             model.graph.initializers[1].tensor.dataAs<float>() + k * m);
  auto s = runtime::Session::load(std::move(model), std::filesystem::temp_directory_path(), {}, "rows");
  INFO((s ? std::string() : s.error().message()));
  REQUIRE(s);
  // The row count is known only when a run comes, so nothing is prepared at load, but the weights are packed then.
  CHECK((*s)->preparedFallbackOps() == 0);
  CHECK((*s)->fallbackPanelPacks() == 2);
  for (int64_t rows : {1, 5, 17, 2, 33, 64, 3, 9, 100, 7, 11, 1, 17}) {
    CAPTURE(rows);
    std::vector<float> x(static_cast<size_t>(rows * k));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>((i * 13 + 5) % 17) - 8) / 8.0f;
    auto out = (*s)->run({ir::Tensor::fromVector(ir::ElemType::Float, {rows, k}, x)});
    INFO((out ? std::string() : out.error().message()));
    REQUIRE(out);
    REQUIRE(out->size() == 2);
    REQUIRE((*out)[0].shape() == ir::Shape{rows, n});
    REQUIRE((*out)[1].shape() == ir::Shape{rows, m});
    // The sums in double from the weights as given (w as [n, k], transposed by the Gemm; v as [k, m]).
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t i = 0; i < k; ++i) sum += double(x[r * k + i]) * w[j * k + i];
        worst = std::max(worst, std::abs(double((*out)[0].dataAs<float>()[r * n + j]) - sum));
      }
      for (int64_t j = 0; j < m; ++j) {
        double sum = 0;
        for (int64_t i = 0; i < k; ++i) sum += double(x[r * k + i]) * v[i * m + j];
        worst = std::max(worst, std::abs(double((*out)[1].dataAs<float>()[r * m + j]) - sum));
      }
    }
    CHECK(worst < 1e-4);
    // However many row counts came, each weight was packed into panels once.
    CHECK((*s)->fallbackPanelPacks() == 2);
  }
}
