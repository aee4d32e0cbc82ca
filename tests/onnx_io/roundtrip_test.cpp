// Models built in ir survive save and load unchanged: every attribute type, value info, tensor type and subgraphs.
#include "ir_compare.h"
#include "model_builder.h"
#include "test_helpers.h"

#include "onnx_io/onnx_io.h"

using namespace ctxkit;
using test::makeNode;
using test::makeValue;

namespace {

std::shared_ptr<ir::Graph> branch(const ir::Model& m, const std::string& name, float value) {
  auto g = std::make_shared<ir::Graph>();
  g->name = name;
  g->outputs.push_back(makeValue(name + "_out", ir::ElemType::Float, {ir::Dim::known(1)}));
  ir::Node c = makeNode(m, "Constant", {}, {name + "_out"});
  c.attrs.set(ir::Attribute::makeTensor("value", ir::Tensor::fromVector(ir::ElemType::Float, {1}, std::vector{value})));
  g->nodes.push_back(std::move(c));
  g->initializers.push_back({name + "_w", ir::Tensor::fromVector(ir::ElemType::Int32, {2}, std::vector<int32_t>{7, 8}), {}});
  return g;
}

ir::Model richModel() {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 13}, {"test.domain", 2}};
  m.producerName = "ctxkit-tests";
  m.producerVersion = "1.2.3";
  m.domain = "org.example";
  m.modelVersion = 42;
  m.docString = "a model with everything";
  m.metadata = {{"b_key", "second"}, {"a_key", "first"}};

  ir::Graph& g = m.graph;
  g.name = "rich";
  g.docString = "graph doc";
  g.inputs.push_back(makeValue("x", ir::ElemType::Float, {ir::Dim::named("batch"), ir::Dim::known(3)}));
  g.inputs.push_back(makeValue("unknown_dim", ir::ElemType::Int64, {ir::Dim{}, ir::Dim::known(0)}));
  ir::ValueInfo noShape;
  noShape.name = "unknown_rank";
  noShape.type = ir::ElemType::Float16;
  noShape.docString = "no shape at all";
  g.inputs.push_back(noShape);
  g.inputs.push_back(makeValue("cond", ir::ElemType::Bool, {}));
  g.outputs.push_back(makeValue("y", ir::ElemType::Float, {ir::Dim::named("batch"), ir::Dim::known(2)}));
  g.outputs.push_back(makeValue("z", ir::ElemType::Float, {ir::Dim::known(1)}));
  g.valueInfo.push_back(makeValue("mid", ir::ElemType::Float, {ir::Dim::named("batch"), ir::Dim::known(2)}));

  g.initializers.push_back({"W", ir::Tensor::fromVector(ir::ElemType::Float, {3, 2}, test::iota(6, 0.5f)), {}});
  g.initializers.push_back({"scalar", ir::Tensor::fromVector(ir::ElemType::Int64, {}, std::vector<int64_t>{-5}), {}});
  g.initializers.push_back({"names", ir::Tensor::strings({2}, {"alpha", std::string("b\0c", 3)}), {}});
  g.initializers.push_back(
      {"half", ir::Tensor::fromVector(ir::ElemType::Float16, {2}, std::vector<uint16_t>{0x3c00, 0xc000}), {}});
  g.initializers.push_back({"flags", ir::Tensor::fromVector(ir::ElemType::Bool, {3}, std::vector<uint8_t>{1, 0, 1}), {}});
  g.initializers.push_back(
      {"u32", ir::Tensor::fromVector(ir::ElemType::Uint32, {2}, std::vector<uint32_t>{0xffffffffu, 3}), {}});
  g.initializers.push_back({"nibbles", ir::Tensor::fromVector(ir::ElemType::Int4, {3}, std::vector<uint8_t>{0x21, 0x03}), {}});
  g.initializers.push_back({"f8", ir::Tensor::fromVector(ir::ElemType::Float8E4M3FN, {2}, std::vector<uint8_t>{0x38, 0xb8}), {}});
  g.initializers.push_back({"empty", ir::Tensor::fromVector(ir::ElemType::Float, {0, 3}, std::vector<float>{}), {}});
  g.initializers.push_back(
      {"c64", ir::Tensor::fromVector(ir::ElemType::Complex64, {1}, std::vector<float>{1.5f, -2.5f}), {}});

  ir::Node mm = makeNode(m, "MatMul", {"x", "W"}, {"mid"});
  mm.docString = "node doc";
  g.nodes.push_back(std::move(mm));

  ir::Node zoo = makeNode(m, "Zoo", {"mid", "", "scalar"}, {"y"}, "test.domain");
  zoo.attrs.set(ir::Attribute::makeFloat("f", 0.25f));
  zoo.attrs.set(ir::Attribute::makeInt("i", -7));
  zoo.attrs.set(ir::Attribute::makeString("s", std::string("bytes\0\xff", 7)));
  zoo.attrs.set(ir::Attribute::makeTensor("t", ir::Tensor::fromVector(ir::ElemType::Double, {2}, std::vector{1.0, 2.0})));
  zoo.attrs.set(ir::Attribute::makeFloats("floats", {1.f, -0.f, 3.5f}));
  zoo.attrs.set(ir::Attribute::makeInts("ints", {1, -2, 1LL << 40}));
  zoo.attrs.set(ir::Attribute::makeInts("no_ints", {}));
  ir::Attribute strings;
  strings.name = "strings";
  strings.type = ir::AttrType::Strings;
  strings.strings = {"a", "", "ccc"};
  zoo.attrs.set(strings);
  ir::Attribute tensors;
  tensors.name = "tensors";
  tensors.type = ir::AttrType::Tensors;
  tensors.tensors = {ir::Tensor::fromVector(ir::ElemType::Int8, {2}, std::vector<int8_t>{-1, 1}),
                     ir::Tensor::strings({}, {"only"})};
  zoo.attrs.set(tensors);
  ir::Attribute graphs;
  graphs.name = "graphs";
  graphs.type = ir::AttrType::Graphs;
  graphs.graphs = {branch(m, "g0", 1), branch(m, "g1", 2)};
  zoo.attrs.set(graphs);
  g.nodes.push_back(std::move(zoo));

  ir::Node ifNode = makeNode(m, "If", {"cond"}, {"z"});
  ifNode.attrs.set(ir::Attribute::makeGraph("then_branch", branch(m, "then", 1)));
  ifNode.attrs.set(ir::Attribute::makeGraph("else_branch", branch(m, "else", 2)));
  g.nodes.push_back(std::move(ifNode));
  return m;
}

}  // namespace

TEST_CASE("a model built in ir survives save and load unchanged") {
  test::TempDir dir;
  ir::Model original = richModel();
  REQUIRE(onnx_io::saveModel(original, dir / "rich.onnx").isOk());
  auto loaded = onnx_io::loadModel(dir / "rich.onnx");
  REQUIRE(loaded.isOk());
  CHECK(test::diffModels(original, *loaded) == "");
  CHECK(loaded->graph.nodes[1].opset == 2);
  CHECK(loaded->graph.nodes[0].kind == ir::OpKind::MatMul);
  // Embedded initializers are views of the parsed message, not copies.
  CHECK_FALSE(loaded->graph.initializers[0].tensor.isWritable());
  // Serializing is deterministic.
  auto a = onnx_io::serializeModel(original);
  auto b = onnx_io::serializeModel(*loaded);
  REQUIRE(a.isOk());
  REQUIRE(b.isOk());
  CHECK(*a == *b);
  CHECK(*a == test::readFile(dir / "rich.onnx"));
}

TEST_CASE("saving leaves no temporary files behind and replaces an existing file") {
  test::TempDir dir;
  test::writeFile(dir / "m.onnx", "old contents");
  REQUIRE(onnx_io::saveModel(test::addModel(), dir / "m.onnx").isOk());
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  CHECK(files == 1);
  CHECK(onnx_io::loadModel(dir / "m.onnx").isOk());
}

TEST_CASE("a saved model passes the onnx checker") {
  test::TempDir dir;
  REQUIRE(onnx_io::saveModel(test::addModel(), dir / "add.onnx").isOk());
  Status s = onnx_io::checkModelFile(dir / "add.onnx");
  INFO((s.isOk() ? std::string() : s.error().message()));
  CHECK(s.isOk());
}

TEST_CASE("the checker's complaint reaches the caller") {
  test::TempDir dir;
  ir::Model m = test::addModel();
  m.graph.nodes[0].inputs = {"x", "not_defined"};
  REQUIRE(onnx_io::saveModel(m, dir / "bad.onnx").isOk());
  Status s = onnx_io::checkModelFile(dir / "bad.onnx");
  REQUIRE_FALSE(s.isOk());
  CHECK(test::contains(s.error().message(), "bad.onnx"));
  CHECK(test::contains(s.error().message(), "not_defined"));
}

TEST_CASE("nodes resolve their opset by domain, with ai.onnx the same as the default domain") {
  ir::Model m = test::addModel();
  m.opsets = {{"ai.onnx", 17}, {"com.microsoft", 1}};
  m.graph.nodes[0].domain = "ai.onnx";
  ir::Node ep = makeNode(m, "EPContext", {"y"}, {"w"}, "com.microsoft");
  m.graph.nodes.push_back(ep);
  auto bytes = onnx_io::serializeModel(m);
  REQUIRE(bytes.isOk());
  auto loaded = onnx_io::loadModelFromBuffer(test::asBytes(*bytes), ".", "buffer");
  REQUIRE(loaded.isOk());
  CHECK(loaded->opsets[0].domain == "ai.onnx");
  CHECK(loaded->graph.nodes[0].domain == "");
  CHECK(loaded->graph.nodes[0].opset == 17);
  CHECK(loaded->graph.nodes[0].kind == ir::OpKind::Add);
  CHECK(loaded->graph.nodes[1].opset == 1);
  CHECK(loaded->graph.nodes[1].domain == "com.microsoft");
}

TEST_CASE("a node built from its kind alone is written with the kind's op type") {
  ir::Model m = test::addModel();
  m.graph.nodes[0].opType.clear();
  auto bytes = onnx_io::serializeModel(m);
  REQUIRE(bytes.isOk());
  auto loaded = onnx_io::loadModelFromBuffer(test::asBytes(*bytes), ".", "buffer");
  REQUIRE(loaded.isOk());
  CHECK(loaded->graph.nodes[0].opType == "Add");

  m.graph.nodes[0].kind = ir::OpKind::Unknown;
  auto refused = onnx_io::serializeModel(m);
  REQUIRE_FALSE(refused.isOk());
  CHECK(test::contains(refused.error().message(), "no op type"));
}

TEST_CASE("writers refuse what they cannot express") {
  ir::Model m = test::addModel();
  SECTION("a tensor without an element type") {
    m.graph.initializers.push_back({"hollow", ir::Tensor(), {}});
    auto r = onnx_io::serializeModel(m);
    REQUIRE_FALSE(r.isOk());
    CHECK(test::contains(r.error().message(), "initializer 'hollow'"));
  }
  SECTION("a graph attribute without a graph") {
    m.graph.nodes[0].attrs.set(ir::Attribute::makeGraph("body", nullptr));
    auto r = onnx_io::serializeModel(m);
    REQUIRE_FALSE(r.isOk());
    CHECK(test::contains(r.error().message(), "attribute 'body'"));
  }
  SECTION("subgraphs nested deeper than the loader accepts") {
    auto inner = std::make_shared<ir::Graph>();
    for (int i = 0; i < 70; ++i) {
      auto outer = std::make_shared<ir::Graph>();
      ir::Node n = makeNode(m, "If", {"c"}, {"o"});
      n.attrs.set(ir::Attribute::makeGraph("then_branch", inner));
      outer->nodes.push_back(std::move(n));
      inner = outer;
    }
    m.graph = *inner;
    auto r = onnx_io::serializeModel(m);
    REQUIRE_FALSE(r.isOk());
    CHECK(test::contains(r.error().message(), "nested more than 64 levels"));
  }
}
