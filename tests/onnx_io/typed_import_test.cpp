// The loader decodes every node's attributes once, subgraph nodes included; a bad attribute stays with its node.
#include "model_builder.h"

#include "onnx_io/onnx_io.h"
#include "ops/node_attrs.h"
#include "ops/typed_attrs.h"

#include <catch2/catch.hpp>

using namespace ctxkit;
using test::makeNode;
using test::makeValue;

namespace {

ir::Model load(const ir::Model& m) {
  auto bytes = onnx_io::serializeModel(m);
  REQUIRE(bytes);
  auto loaded = onnx_io::loadModelFromBuffer(std::as_bytes(std::span(bytes->data(), bytes->size())), ".", "typed");
  INFO((loaded ? std::string() : loaded.error().message()));
  REQUIRE(loaded);
  return std::move(loaded).value();
}

}  // namespace

TEST_CASE("a loaded model's nodes carry their typed attributes, decoded for the model's opset", "[onnx_io]") {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 11}};
  m.graph.name = "typed";
  m.graph.inputs = {makeValue("x", ir::ElemType::Float, {ir::Dim::known(2), ir::Dim::known(3)}),
                    makeValue("c", ir::ElemType::Bool, {})};
  m.graph.outputs = {makeValue("y", ir::ElemType::Float, {}), makeValue("z", ir::ElemType::Float, {}),
                     makeValue("w", ir::ElemType::Float, {})};
  ir::Node softmax = makeNode(m, "Softmax", {"x"}, {"y"});
  softmax.attrs.set(ir::Attribute::makeInt("axis", 0));
  ir::Node lrn = makeNode(m, "LRN", {"x"}, {"z"});
  lrn.attrs.set(ir::Attribute::makeInt("size", 0));  // LRN needs size >= 1
  // An If whose branch holds a LeakyRelu: subgraph nodes are decoded too.
  auto branch = std::make_shared<ir::Graph>();
  branch->name = "then";
  branch->outputs = {makeValue("b", ir::ElemType::Float, {})};
  ir::Node leaky = makeNode(m, "LeakyRelu", {"x"}, {"b"});
  leaky.attrs.set(ir::Attribute::makeFloat("alpha", 0.5f));
  branch->nodes = {leaky};
  ir::Node iff = makeNode(m, "If", {"c"}, {"w"});
  iff.attrs.set(ir::Attribute::makeGraph("then_branch", branch));
  iff.attrs.set(ir::Attribute::makeGraph("else_branch", branch));
  m.graph.nodes = {softmax, lrn, iff};

  const uint64_t before = ops::lateDecodes();
  ir::Model loaded = load(m);
  REQUIRE(loaded.graph.nodes.size() == 3);
  for (const ir::Node& n : loaded.graph.nodes) CHECK(ops::isDecoded(n));

  const auto& s = loaded.graph.nodes[0].typed->attrs;
  REQUIRE(s);
  CHECK(std::get<ops::SoftmaxAttrs>(s.value()).axis == 0);
  CHECK(std::get<ops::SoftmaxAttrs>(s.value()).coerce2d);  // opset 11: the 2-D view, from the model's opset

  // The bad attribute did not fail the load: the node keeps the decoder's message for whoever reports it.
  const auto& bad = loaded.graph.nodes[1].typed->attrs;
  REQUIRE(!bad);
  CHECK_THAT(bad.error().message(), Catch::Contains("size"));
  CHECK(bad.error().message() == ops::decodeAttrs(ir::OpKind::LRN, 11, lrn.attrs).error().message());

  // Control flow keeps its ONNX attributes (the branches); the branch's node is decoded.
  const ir::Node& loadedIf = loaded.graph.nodes[2];
  CHECK(!ops::isTyped(loadedIf.typed->attrs.value()));
  const ir::Attribute* then = loadedIf.attrs.find("then_branch");
  REQUIRE((then && then->g && then->g->nodes.size() == 1));
  const ir::Node& inner = then->g->nodes[0];
  REQUIRE(ops::isDecoded(inner));
  CHECK(std::get<ops::UnaryAttrs>(inner.typed->attrs.value()).alpha == 0.5f);

  // Readers take what the loader decoded: nothing is decoded again.
  CHECK(ops::attrsOf(loaded.graph.nodes[0]) == loaded.graph.nodes[0].typed);
  CHECK(ops::lateDecodes() == before);
  // A node built by hand (never decoded) is decoded when read, and counted.
  CHECK(ops::attrsOf(softmax)->attrs);
  CHECK(ops::lateDecodes() == before + 1);
}
