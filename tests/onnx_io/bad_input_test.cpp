// Broken model files are refused with a clear message: truncation, garbage, runaway nesting, duplicates.
#include "model_builder.h"
#include "proto_bytes.h"
#include "test_helpers.h"

#include "onnx_io/onnx_io.h"

#include <random>

using namespace ctxkit;
using test::ProtoBytes;
namespace field = test::field;

namespace {

Error loadBytesError(std::string_view bytes) {
  auto m = onnx_io::loadModelFromBuffer(test::asBytes(bytes), ".", "bad.onnx");
  REQUIRE_FALSE(m.isOk());
  return m.error();
}

// A model whose graph nests `depth` If nodes, each holding the next graph in its then_branch.
std::string nestedModel(int depth) {
  ProtoBytes graph;
  graph.bytes(field::kGraphName, "leaf");
  for (int i = 0; i < depth; ++i) {
    ProtoBytes attr;
    attr.bytes(field::kAttrName, "then_branch").message(field::kAttrG, graph).varint(field::kAttrType, 5);
    ProtoBytes node;
    node.bytes(field::kNodeOpType, "If").message(field::kNodeAttribute, attr);
    ProtoBytes outer;
    outer.message(field::kGraphNode, node);
    graph = outer;
  }
  ProtoBytes opset;
  opset.bytes(field::kOpsetDomain, "").varint(field::kOpsetVersion, 13);
  ProtoBytes model;
  model.varint(field::kModelIrVersion, 8).message(field::kModelGraph, graph).message(field::kModelOpset, opset);
  return model.str();
}

}  // namespace

TEST_CASE("a truncated model is refused as malformed or truncated") {
  test::TempDir dir;
  REQUIRE(onnx_io::saveModel(test::addModel(1000), dir / "full.onnx").isOk());
  std::string full = test::readFile(dir / "full.onnx");
  test::writeFile(dir / "half.onnx", full.substr(0, full.size() / 2));
  auto m = onnx_io::loadModel(dir / "half.onnx");
  REQUIRE_FALSE(m.isOk());
  CHECK(m.error().code() == ErrorCode::InvalidGraph);
  // The message says where the data ends: inside which field, at which byte.
  CHECK_THAT(m.error().message(),
             Catch::StartsWith(
                 fmt::format("loading '{}': malformed or truncated ONNX protobuf: ", (dir / "half.onnx").string())) &&
                 Catch::Contains("bytes long but only") && Catch::Contains("remain"));
  // Cuts inside a message are caught, one byte short included (a cut between top-level fields cannot be seen).
  for (size_t cut : {full.size() - 1, full.size() / 3, size_t(40), size_t(3)}) {
    INFO(cut);
    auto r = onnx_io::loadModelFromBuffer(test::asBytes(std::string_view(full).substr(0, cut)), ".", "cut.onnx");
    CHECK_FALSE(r.isOk());
  }
}

TEST_CASE("a real node test model cut in half is refused") {
  CTX_SKIP_WITHOUT_NODE_TESTS();
  test::TempDir dir;
  for (const char* name : {"test_add", "test_loop11", "test_constant"}) {
    INFO(name);
    std::string full = test::readFile(test::nodeTestsDir() / name / "model.onnx");
    REQUIRE(full.size() > 20);
    test::writeFile(dir / "half.onnx", full.substr(0, full.size() / 2));
    auto m = onnx_io::loadModel(dir / "half.onnx");
    REQUIRE_FALSE(m.isOk());
    CHECK(test::contains(m.error().message(), "half.onnx"));
  }
}

TEST_CASE("garbage bytes are refused without crashing") {
  CHECK(test::contains(loadBytesError("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff").message(),
                       "loading 'bad.onnx': malformed or truncated ONNX protobuf"));
  CHECK(loadBytesError("").message() == "loading 'bad.onnx': model has no graph");
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    std::string bytes(1 + rng() % 512, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    auto m = onnx_io::loadModelFromBuffer(test::asBytes(bytes), ".", "random.onnx");
    if (!m.isOk()) CHECK(test::contains(m.error().message(), "loading 'random.onnx'"));
  }
}

TEST_CASE("a missing model file is a not-found error naming it") {
  auto m = onnx_io::loadModel("/nonexistent/ctxkit/model.onnx");
  REQUIRE_FALSE(m.isOk());
  CHECK(m.error().code() == ErrorCode::NotFound);
  CHECK(test::contains(m.error().message(), "loading '/nonexistent/ctxkit/model.onnx'"));
}

TEST_CASE("subgraph nesting is bounded") {
  auto ok = onnx_io::loadModelFromBuffer(test::asBytes(nestedModel(64)), ".", "deep.onnx");
  REQUIRE(ok.isOk());
  CHECK(ok->graph.nodes.size() == 1);

  Error tooDeep = loadBytesError(nestedModel(65));
  CHECK(tooDeep.code() == ErrorCode::InvalidGraph);
  CHECK(test::contains(tooDeep.message(), "subgraphs are nested more than 64 levels deep"));
  CHECK(test::contains(tooDeep.message(), "loading 'bad.onnx': node #0 (If): attribute 'then_branch'"));

  // Far deeper input stops at protobuf's recursion limit, long before the stack runs out, and says so: it is not
  // taken for a truncated file.
  for (int depth : {400, 5000}) {
    INFO(depth);
    const std::string message = loadBytesError(nestedModel(depth)).message();
    CHECK_THAT(message, Catch::StartsWith("loading 'bad.onnx': ONNX protobuf: messages are nested more than 288 "
                                          "levels deep (at byte ") &&
                            Catch::EndsWith("a model may nest subgraphs (If, Loop, Scan bodies) at most 64 levels deep"));
    CHECK_FALSE(test::contains(message, "truncated"));
  }
}

TEST_CASE("a malformed model says what is wrong and where") {
  // A field tag whose varint never ends, a field number 0, a wire type protobuf does not have, a length past the end.
  CHECK(loadBytesError("\x08\x80\x80").message() ==
        "loading 'bad.onnx': malformed or truncated ONNX protobuf: the data ends inside the value of "
        "onnx.ModelProto.ir_version at byte 1");
  CHECK(loadBytesError(std::string("\x00\x01", 2)).message() ==
        "loading 'bad.onnx': malformed or truncated ONNX protobuf: field number 0 at byte 0 is not a valid field "
        "number");
  CHECK(loadBytesError("\x0f\x01").message() ==
        "loading 'bad.onnx': malformed or truncated ONNX protobuf: field 1 at byte 0 has wire type 7, which protobuf "
        "does not have");
  CHECK(loadBytesError("\x3a\x05\x0a\x01").message() ==
        "loading 'bad.onnx': malformed or truncated ONNX protobuf: onnx.ModelProto.graph at byte 0 is 5 bytes long "
        "but only 2 remain");
  // Inside a nested message, the field is named with its message.
  CHECK(loadBytesError("\x3a\x02\x0a\x05").message() ==
        "loading 'bad.onnx': malformed or truncated ONNX protobuf: onnx.GraphProto.node at byte 2 is 5 bytes long but "
        "only 0 remain");
}

TEST_CASE("names that are not valid UTF-8 are not taken for a malformed file") {
  // ONNX's proto2 strings are bytes to protobuf: such a model parses, and its names are kept as they are.
  ProtoBytes node;
  node.bytes(3, "n\xfe").bytes(field::kNodeOpType, "Relu");
  ProtoBytes graph;
  graph.bytes(field::kGraphName, "g\xff").message(field::kGraphNode, node);
  ProtoBytes opset;
  opset.bytes(field::kOpsetDomain, "").varint(field::kOpsetVersion, 13);
  ProtoBytes model;
  model.varint(field::kModelIrVersion, 8).message(field::kModelGraph, graph).message(field::kModelOpset, opset);
  auto m = onnx_io::loadModelFromBuffer(test::asBytes(model.str()), ".", "names.onnx");
  REQUIRE(m.isOk());
  CHECK(m->graph.name == "g\xff");
  CHECK(m->graph.nodes.at(0).name == "n\xfe");
}

TEST_CASE("duplicate names and keys are refused") {
  SECTION("initializers") {
    ir::Model m = test::addModel();
    m.graph.initializers.push_back(m.graph.initializers[0]);
    auto bytes = onnx_io::serializeModel(m);
    REQUIRE(bytes.isOk());
    CHECK(loadBytesError(*bytes).message() == "loading 'bad.onnx': initializer 'W' appears twice");
  }
  SECTION("opset imports") {
    ir::Model m = test::addModel();
    m.opsets.push_back({"ai.onnx", 11});
    auto bytes = onnx_io::serializeModel(m);
    REQUIRE(bytes.isOk());
    CHECK(test::contains(loadBytesError(*bytes).message(), "opset_import lists domain 'ai.onnx' twice"));
  }
  SECTION("metadata") {
    ir::Model m = test::addModel();
    m.metadata = {{"k", "1"}, {"k", "2"}};
    auto bytes = onnx_io::serializeModel(m);
    REQUIRE(bytes.isOk());
    CHECK(test::contains(loadBytesError(*bytes).message(), "metadata key 'k' appears twice"));
  }
  SECTION("node attributes") {
    ir::Model m = test::addModel();
    m.graph.nodes[0].attrs.all().push_back(ir::Attribute::makeInt("axis", 1));
    m.graph.nodes[0].attrs.all().push_back(ir::Attribute::makeInt("axis", 2));
    auto bytes = onnx_io::serializeModel(m);
    REQUIRE(bytes.isOk());
    CHECK(test::contains(loadBytesError(*bytes).message(), "node 'Add_y' (Add): attribute 'axis' appears twice"));
  }
}

TEST_CASE("a bad initializer is named with the reason") {
  ProtoBytes tensor;
  tensor.packedVarints(field::kTensorDims, {2, 3}).varint(field::kTensorDataType, 1)
      .bytes(field::kTensorName, "W").bytes(field::kTensorRawData, std::string(20, '\0'));
  ProtoBytes graph;
  graph.message(field::kGraphInitializer, tensor);
  ProtoBytes model;
  model.varint(field::kModelIrVersion, 8).message(field::kModelGraph, graph);
  CHECK(loadBytesError(model.str()).message() ==
        "loading 'bad.onnx': initializer 'W': raw_data: float32 tensor of shape 2x3 needs 24 bytes but 20 are present");
}
