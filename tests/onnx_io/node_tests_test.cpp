// Loads real ONNX conformance models and TensorProto files (../shared/onnx-node-tests/node), skipping without them.
#include "ir_compare.h"
#include "test_helpers.h"

#include "ir/op_info.h"
#include "onnx_io/onnx_io.h"
#include "ops/node_attrs.h"

#include <filesystem>
#include <functional>
#include <map>
#include <set>

using namespace ctxkit;
using ctxkit::test::nodeTestsDir;

namespace {

const ir::Node* findNode(const ir::Graph& g, std::string_view opType) {
  for (const auto& n : g.nodes)
    if (n.opType == opType) return &n;
  return nullptr;
}

}  // namespace

TEST_CASE("test_add loads with its types, shapes and opset") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  auto model = onnx_io::loadModel(nodeTestsDir() / "test_add" / "model.onnx");
  REQUIRE(model.isOk());
  CHECK(model->irVersion > 0);
  CHECK(model->producerName == "backend-test");
  const ir::Graph& g = model->graph;
  REQUIRE(g.inputs.size() == 2);
  CHECK(g.inputs[0].name == "x");
  CHECK(g.inputs[1].name == "y");
  CHECK(g.inputs[0].type == ir::ElemType::Float);
  REQUIRE(g.inputs[0].staticShape().has_value());
  CHECK(*g.inputs[0].staticShape() == ir::Shape{3, 4, 5});
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.outputs[0].name == "sum");
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].kind == ir::OpKind::Add);
  CHECK(g.nodes[0].opset == model->opsetFor(""));
  CHECK(g.nodes[0].opset > 0);
  CHECK(g.nodes[0].inputs == std::vector<std::string>{"x", "y"});
}

TEST_CASE("test_add's TensorProto inputs and outputs load") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  auto dir = nodeTestsDir() / "test_add" / "test_data_set_0";
  std::string name;
  auto x = onnx_io::loadTensorFile(dir / "input_0.pb", &name);
  REQUIRE(x.isOk());
  CHECK(name == "x");
  CHECK(x->type() == ir::ElemType::Float);
  CHECK(x->shape() == ir::Shape{3, 4, 5});
  CHECK(x->byteSize() == 60 * sizeof(float));
  auto y = onnx_io::loadTensorFile(dir / "input_1.pb");
  auto sum = onnx_io::loadTensorFile(dir / "output_0.pb");
  REQUIRE(y.isOk());
  REQUIRE(sum.isOk());
  for (size_t i = 0; i < 60; ++i) CHECK(sum->dataAs<float>()[i] == x->dataAs<float>()[i] + y->dataAs<float>()[i]);
}

TEST_CASE("test_constant keeps its Constant node with the float_data tensor") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  auto model = onnx_io::loadModel(nodeTestsDir() / "test_constant" / "model.onnx");
  REQUIRE(model.isOk());
  REQUIRE(model->graph.nodes.size() == 1);
  const ir::Node& n = model->graph.nodes[0];
  CHECK(n.kind == ir::OpKind::Constant);
  const ir::Attribute* value = n.attrs.find("value");
  REQUIRE(value != nullptr);
  REQUIRE(value->type == ir::AttrType::Tensor);
  CHECK(value->t.type() == ir::ElemType::Float);
  CHECK(value->t.shape() == ir::Shape{5, 5});
  CHECK(value->t.dataAs<float>()[0] == Approx(1.76405239f));
  CHECK(value->t.dataAs<float>()[24] == Approx(2.26975465f));
}

TEST_CASE("test_if reads both branches as subgraphs") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  auto model = onnx_io::loadModel(nodeTestsDir() / "test_if" / "model.onnx");
  REQUIRE(model.isOk());
  const ir::Node* ifNode = findNode(model->graph, "If");
  REQUIRE(ifNode != nullptr);
  for (const char* branch : {"then_branch", "else_branch"}) {
    INFO(branch);
    const ir::Attribute* a = ifNode->attrs.find(branch);
    REQUIRE(a != nullptr);
    REQUIRE(a->type == ir::AttrType::Graph);
    REQUIRE(a->g != nullptr);
    REQUIRE(a->g->outputs.size() == 1);
    CHECK(a->g->outputs[0].type == ir::ElemType::Float);
    const ir::Node* constant = findNode(*a->g, "Constant");
    REQUIRE(constant != nullptr);
    CHECK(constant->opset == 11);
    CHECK(constant->attrs.find("value")->t.shape() == ir::Shape{5});
  }
}

TEST_CASE("test_loop11 reads the loop body and its typed constants") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  auto model = onnx_io::loadModel(nodeTestsDir() / "test_loop11" / "model.onnx");
  REQUIRE(model.isOk());
  const ir::Node* loop = findNode(model->graph, "Loop");
  REQUIRE(loop != nullptr);
  const ir::Attribute* body = loop->attrs.find("body");
  REQUIRE(body != nullptr);
  REQUIRE(body->g != nullptr);
  CHECK(body->g->name == "loop_body");
  CHECK(body->g->inputs.size() == 3);
  CHECK(body->g->inputs[0].shape == std::vector<ir::Dim>{});  // a scalar: known rank 0
  std::map<std::string, const ir::Tensor*> constants;
  for (const auto& n : body->g->nodes)
    if (n.kind == ir::OpKind::Constant) constants[n.outputs.at(0)] = &n.attrs.find("value")->t;
  REQUIRE(constants.count("x") == 1);
  REQUIRE(constants.count("one") == 1);
  CHECK(constants["x"]->type() == ir::ElemType::Float);
  CHECK(std::vector<float>(constants["x"]->dataAs<float>(), constants["x"]->dataAs<float>() + 5) ==
        std::vector<float>{1, 2, 3, 4, 5});
  CHECK(constants["one"]->type() == ir::ElemType::Int64);
  CHECK(constants["one"]->rank() == 0);
  CHECK(*constants["one"]->dataAs<int64_t>() == 1);
}

TEST_CASE("every node test model loads, and survives a serialize and load round trip") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  size_t loaded = 0, unsupported = 0;
  for (const auto& entry : std::filesystem::directory_iterator(nodeTestsDir())) {
    auto path = entry.path() / "model.onnx";
    if (!std::filesystem::exists(path)) continue;
    INFO(path.string());
    auto model = onnx_io::loadModel(path);
    if (!model) {
      // Only inputs the ir cannot represent may be refused, and by name.
      INFO(model.error().message());
      CHECK(model.error().code() == ErrorCode::Unsupported);
      ++unsupported;
      continue;
    }
    ++loaded;
    auto bytes = onnx_io::serializeModel(*model);
    REQUIRE(bytes.isOk());
    auto again = onnx_io::loadModelFromBuffer(test::asBytes(*bytes), entry.path(), "round trip");
    REQUIRE(again.isOk());
    CHECK(test::diffModels(*model, *again) == "");
  }
  CHECK(loaded > 1000);
  CHECK(unsupported < 20);
  WARN(fmt::format("{} node test models loaded, {} refused as unsupported", loaded, unsupported));
}

TEST_CASE("every node test TensorProto file parses or is refused cleanly") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  size_t parsed = 0, refused = 0;
  for (const auto& entry : std::filesystem::directory_iterator(nodeTestsDir())) {
    auto dir = entry.path() / "test_data_set_0";
    if (!std::filesystem::is_directory(dir)) continue;
    for (const auto& file : std::filesystem::directory_iterator(dir)) {
      if (file.path().extension() != ".pb") continue;
      // Sequence, map and optional values are other messages; they may parse as odd tensors or fail, never crash.
      auto t = onnx_io::loadTensorFile(file.path());
      if (t) {
        ++parsed;
      } else {
        CHECK(test::contains(t.error().message(), file.path().string()));
        ++refused;
      }
    }
  }
  CHECK(parsed > 3000);
  WARN(fmt::format("{} TensorProto files parsed, {} refused", parsed, refused));
}

TEST_CASE("the onnx checker accepts a node test and reports what it rejects") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  CHECK(onnx_io::checkModelFile(nodeTestsDir() / "test_add" / "model.onnx").isOk());
  test::TempDir dir;
  test::writeFile(dir / "junk.onnx", "this is not a model");
  Status s = onnx_io::checkModelFile(dir / "junk.onnx");
  REQUIRE_FALSE(s.isOk());
  CHECK(test::contains(s.error().message(), "junk.onnx"));
  CHECK(test::contains(s.error().message(), "onnx checker"));
}

TEST_CASE("every node of ONNX's conformance models is within its kind's arity in ops.def") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  // ONNX's own test models are the independent expectation: a node that the arity columns refuse here would be a
  // wrong column, not a bad model.
  size_t checked = 0;
  std::set<ir::OpKind> kinds;
  std::function<void(const ir::Graph&, const std::string&)> walk = [&](const ir::Graph& g, const std::string& where) {
    for (const ir::Node& n : g.nodes) {
      for (const ir::Attribute& a : n.attrs.all()) {
        if (a.g) walk(*a.g, where);
        for (const auto& sub : a.graphs)
          if (sub) walk(*sub, where);
      }
      if (n.kind == ir::OpKind::Unknown) continue;
      INFO(where << ": node '" << n.name << "' (" << n.opType << ")");
      auto problem = ir::arityProblem(n.kind, n.inputs.size(), n.outputs.size());
      CHECK(problem.value_or("") == "");
      ++checked;
      kinds.insert(n.kind);
    }
  };
  for (const auto& dir : std::filesystem::directory_iterator(nodeTestsDir())) {
    auto model = onnx_io::loadModel(dir.path() / "model.onnx");
    if (!model) continue;  // the loader's own refusals are tested elsewhere
    walk(model->graph, dir.path().filename().string());
  }
  CHECK(checked > 1500);
  CHECK(kinds.size() > 150);
}

TEST_CASE("a node listing more inputs than its kind takes keeps the arity error as its typed attributes") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  auto model = onnx_io::loadModel(nodeTestsDir() / "test_add" / "model.onnx");
  REQUIRE(model.isOk());
  CHECK(model->graph.nodes[0].typed->attrs);
  CHECK(ir::arityProblem(ir::OpKind::Add, 3, 1) == "Add takes 2 inputs; the node has 3");
  CHECK(ir::arityProblem(ir::OpKind::Conv, 4, 1) == "Conv takes 2 to 3 inputs; the node has 4");
  CHECK(ir::arityProblem(ir::OpKind::Concat, 0, 1) == "Concat takes 1 or more inputs; the node has 0");
  CHECK(ir::arityProblem(ir::OpKind::TopK, 2, 1) == "TopK makes 2 outputs; the node has 1");
  CHECK(!ir::arityProblem(ir::OpKind::Unknown, 99, 99));
  CHECK(!ir::arityProblem(ir::OpKind::Concat, 40, 1));
  ir::Node add = model->graph.nodes[0];
  add.inputs.push_back(add.inputs[0]);
  ops::decodeNode(add);
  REQUIRE(!add.typed->attrs);
  CHECK(add.typed->attrs.error().message() == "Add takes 2 inputs; the node has 3");
}
