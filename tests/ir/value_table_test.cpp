// The value table: dense ids, producers, use lists and flags, on a sample model and on graphs with odd cases.
#include "ir/value_table.h"
#include "../common/graph_builder.h"
#include "samples/sample_models.h"

#include <catch2/catch.hpp>

#include <set>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

// Every value the graph names, counted the slow way.
std::set<std::string> allNames(const ir::Graph& g) {
  std::set<std::string> names;
  for (const auto& v : g.inputs) names.insert(v.name);
  for (const auto& v : g.outputs) names.insert(v.name);
  for (const auto& i : g.initializers) names.insert(i.name);
  for (const auto& n : g.nodes) {
    for (const auto& s : n.inputs)
      if (!s.empty()) names.insert(s);
    for (const auto& s : n.outputs)
      if (!s.empty()) names.insert(s);
  }
  return names;
}

}  // namespace

TEST_CASE("the value table of a sample model agrees with its nodes", "[ir]") {
  const samples::Sample cnn = samples::makeTinyCnn(1);
  const ir::Graph& g = cnn.model.graph;
  const ir::ValueTable table(g);
  REQUIRE(table.size() == allNames(g).size());
  for (ir::ValueId v = 0; v < table.size(); ++v) CHECK(table.find(table.name(v)) == v);
  CHECK(table.find("no such value") == ir::kNoValue);

  // Graph inputs come first, in order.
  CHECK(table.id(g.inputs[0].name) == 0);
  CHECK(table[0].isGraphInput);
  CHECK(table[table.id(g.outputs[0].name)].isGraphOutput);
  for (const auto& init : g.initializers) {
    const ir::ValueEntry& e = table[table.id(init.name)];
    CHECK(e.isInitializer);
    CHECK_FALSE(e.hasProducer());
  }

  size_t uses = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    REQUIRE(table.inputsOf(n).size() == node.inputs.size());
    REQUIRE(table.outputsOf(n).size() == node.outputs.size());
    for (size_t s = 0; s < node.outputs.size(); ++s) {
      const ir::ValueEntry& e = table[table.outputsOf(n)[s]];
      CHECK(e.name == node.outputs[s]);
      CHECK(e.producer == n);
      CHECK(e.producerSlot == s);
    }
    for (size_t s = 0; s < node.inputs.size(); ++s) {
      const ir::ValueEntry& e = table[table.inputsOf(n)[s]];
      CHECK(e.name == node.inputs[s]);
      const ir::ValueUse use{static_cast<uint32_t>(n), static_cast<uint32_t>(s)};
      CHECK(std::count(e.uses.begin(), e.uses.end(), use) == 1);
      ++uses;
    }
  }
  size_t listed = 0;
  for (ir::ValueId v = 0; v < table.size(); ++v) listed += table[v].uses.size();
  CHECK(listed == uses);
}

TEST_CASE("the value table handles omitted inputs, repeated reads, pass-through outputs and outer names", "[ir]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2})), floatValue("w", dims({2}))};
  g.initializers = {floatInit("w", {2}), floatInit("b", {2})};
  g.outputs = {floatValue("x", dims({2})), floatValue("sq", dims({2})), floatValue("dangling", dims({2}))};
  // Clip with its min omitted, reading x; Mul reading `a` twice; an Add reading `outer`, which no node defines.
  g.nodes = {node("Clip", {"x", "", "b"}, {"a"}), node("Mul", {"a", "a"}, {"sq"}), node("Add", {"sq", "outer"}, {"y"})};
  auto branch = std::make_shared<ir::Graph>();
  branch->nodes = {node("Relu", {"sq"}, {"inner"}), node("Neg", {"inner"}, {"inner2"})};
  ir::Node ifNode = node("If", {"cond"}, {"", "z"});
  ifNode.attrs.set(ir::Attribute::makeGraph("then_branch", branch));
  g.nodes.push_back(ifNode);
  const ir::ValueTable table(g);

  // x, w (an input with an initializer default), b, then a, sq, outer, y, cond, z, then the output no one writes.
  const std::vector<std::string> expected = {"x", "w", "b", "a", "sq", "outer", "y", "cond", "z", "dangling"};
  REQUIRE(table.size() == expected.size());
  for (ir::ValueId v = 0; v < table.size(); ++v) CHECK(table.name(v) == expected[v]);
  CHECK(table.find("") == ir::kNoValue);
  CHECK(table.find("inner") == ir::kNoValue);  // the subgraph's own values are its table's

  const ir::ValueEntry& x = table[table.id("x")];
  CHECK(x.isGraphInput);
  CHECK(x.isGraphOutput);
  CHECK_FALSE(x.isOuter());
  CHECK(x.uses == std::vector<ir::ValueUse>{{0, 0}});
  CHECK(table[table.id("w")].isGraphInput);
  CHECK(table[table.id("w")].isInitializer);
  CHECK(table[table.id("w")].uses.empty());

  CHECK(table.inputsOf(0)[1] == ir::kNoValue);
  CHECK(table.outputsOf(3)[0] == ir::kNoValue);
  CHECK(table.outputsOf(3)[1] == table.id("z"));

  const ir::ValueEntry& a = table[table.id("a")];
  CHECK(a.producer == 0);
  CHECK(a.uses == std::vector<ir::ValueUse>{{1, 0}, {1, 1}});

  // sq: read by Add and, from the outer scope, by the If's branch.
  const ir::ValueEntry& sq = table[table.id("sq")];
  CHECK(sq.producer == 1);
  CHECK(sq.isGraphOutput);
  CHECK(sq.uses == std::vector<ir::ValueUse>{{2, 0}, {3, ir::ValueUse::kSubgraphSlot}});
  // What each node's subgraphs read of this graph: only the If's branch reads from it.
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const auto reads = table.subgraphReadsOf(n);
    CAPTURE(n);
    if (n == 3) CHECK(std::vector<ir::ValueId>(reads.begin(), reads.end()) == std::vector<ir::ValueId>{table.id("sq")});
    else CHECK(reads.empty());
  }

  CHECK(table[table.id("outer")].isOuter());
  CHECK(table[table.id("dangling")].isOuter());
  CHECK(table[table.id("dangling")].isGraphOutput);
  CHECK(table[table.id("y")].uses.empty());
}

TEST_CASE("a subgraph read of a value defined later in the file is a use, in node order", "[ir]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2}))};
  auto branch = std::make_shared<ir::Graph>();
  branch->nodes = {node("Relu", {"late"}, {"r"})};
  ir::Node ifNode = node("If", {"x"}, {"z"});
  ifNode.attrs.set(ir::Attribute::makeGraph("else_branch", branch));
  g.nodes = {ifNode, node("Relu", {"x"}, {"late"}), node("Neg", {"late"}, {"n"})};
  const ir::ValueTable table(g);
  const ir::ValueEntry& late = table[table.id("late")];
  CHECK(late.producer == 1);
  CHECK(late.uses == std::vector<ir::ValueUse>{{0, ir::ValueUse::kSubgraphSlot}, {2, 0}});
  CHECK(std::vector<ir::ValueId>(table.subgraphReadsOf(0).begin(), table.subgraphReadsOf(0).end()) ==
        std::vector<ir::ValueId>{table.id("late")});
}
