// Weights inside If/Loop/Scan bodies are weights like the rest (docs/weight-sharing.md#scope): in a --share group, the
// large initializers of fallback nodes' subgraphs are stored once in the group's .bin and referenced as ONNX external
// data, and the compiled models still compute what the source computes.
#include "ir/npy.h"
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kWidth = 64;  // a 64x64 float32 weight: 16 KiB, above the sharing threshold

ir::ValueInfo floatValue(const std::string& name, std::vector<int64_t> shape) {
  std::vector<ir::Dim> dims;
  for (int64_t d : shape) dims.push_back(ir::Dim::known(d));
  return ir::ValueInfo{name, ir::ElemType::Float, dims, ""};
}

ir::Node makeNode(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs) {
  ir::Node n;
  n.name = op + "_" + outputs[0];
  n.opType = op;
  n.kind = ir::opKindFromName("", op);
  n.opset = 17;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

// y = If(cond) then x @ (2 I) else x @ (3 I): both bodies hold an initializer named `weight` (W unless told), with
// different bytes.
std::shared_ptr<ir::Graph> scaleBranch(const std::string& name, float scale, const std::string& weight = "W") {
  std::vector<float> w(static_cast<size_t>(kWidth * kWidth), 0.0f);
  for (int64_t i = 0; i < kWidth; ++i) w[static_cast<size_t>(i * kWidth + i)] = scale;
  auto g = std::make_shared<ir::Graph>();
  g->name = name;
  g->initializers.push_back({weight, ir::Tensor::fromVector(ir::ElemType::Float, {kWidth, kWidth}, w), std::nullopt});
  g->nodes.push_back(makeNode("MatMul", {"x", weight}, {name + "_y"}));
  g->outputs.push_back(floatValue(name + "_y", {4, kWidth}));
  return g;
}

fs::path writeIfModel(const fs::path& dir, const std::string& stem, const std::string& thenWeight = "W",
                      const std::string& elseWeight = "W") {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  m.graph.name = stem;
  m.graph.inputs = {floatValue("x", {4, kWidth}), ir::ValueInfo{"cond", ir::ElemType::Bool, std::vector<ir::Dim>{}, ""}};
  m.graph.outputs = {floatValue("y", {4, kWidth})};
  ir::Node branch = makeNode("If", {"cond"}, {"y"});
  branch.attrs.set(ir::Attribute::makeGraph("then_branch", scaleBranch("then", 2.0f, thenWeight)));
  branch.attrs.set(ir::Attribute::makeGraph("else_branch", scaleBranch("else", 3.0f, elseWeight)));
  m.graph.nodes.push_back(branch);
  const fs::path path = dir / (stem + ".onnx");
  REQUIRE(onnx_io::saveModel(m, path));
  return path;
}

// The subgraph initializers of `model` that reference external data, as (location, length).
std::vector<std::pair<std::string, uint64_t>> externalSubgraphWeights(const fs::path& model) {
  onnx_io::LoadOptions options;
  options.resolveExternalData = false;
  auto m = onnx_io::loadModel(model, options);
  REQUIRE(m);
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& n : m->graph.nodes)
    for (const auto& a : n.attrs.all())
      if (a.g)
        for (const auto& init : a.g->initializers)
          if (init.external) out.emplace_back(init.external->location, init.external->length);
  return out;
}

}  // namespace

TEST_CASE("with --share, weights inside fallback If bodies are stored once in the shared .bin", "[e2e]") {
  TempDir dir("subgraph_weights");
  const fs::path a = writeIfModel(dir.path(), "a"), b = writeIfModel(dir.path(), "b");
  const fs::path out = dir.path() / "out";
  auto r = runTool(CTXKIT_CTXGEN, {a.string() + "," + b.string(), "--share", "-o", out.string(), "--json", "-"});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  // Two distinct 16 KiB weights (2 I and 3 I, both named W), each used by both models.
  const uint64_t weightBytes = kWidth * kWidth * 4;
  auto report = nlohmann::json::parse(r.out);
  // Stored once in the .bin; no compiled program uses them, so the sharing figures (ctxinspect's definition) leave
  // them out: their sharing shows in the external data checked below.
  CHECK(report["weights"]["stored_bytes"].get<uint64_t>() == 2 * weightBytes);
  CHECK(report["weights"]["unique_bytes"].get<uint64_t>() == 0);
  CHECK(report["weights"]["referenced_bytes"].get<uint64_t>() == 0);
  for (const char* stem : {"a", "b"}) {
    const fs::path ctx = out / fmt::format("{}_ctx.onnx", stem);
    INFO(ctx.string());
    CHECK(fs::file_size(ctx) < weightBytes);
    CHECK(externalSubgraphWeights(ctx) ==
          std::vector<std::pair<std::string, uint64_t>>{{"a_ctxkit.bin", weightBytes}, {"a_ctxkit.bin", weightBytes}});
    CHECK(onnx_io::checkModelFile(ctx));
    // x = 1 everywhere: the then branch gives 2, the else branch 3, as x @ (scale I) does.
    for (auto [cond, expected] : {std::pair{"1", 2.0f}, std::pair{"0", 3.0f}}) {
      const fs::path results = dir.path() / fmt::format("{}_{}", stem, cond);
      auto run = runTool(CTXKIT_CTXRUN, {ctx.string(), "--set", "x=1", "--set", fmt::format("cond={}", cond),
                                         "--output-dir", results.string()});
      INFO(run.out << run.err);
      REQUIRE(run.exitCode == 0);
      auto y = ir::loadNpy(results / "output_0.npy");
      REQUIRE(y);
      REQUIRE(y->elementCount() == static_cast<uint64_t>(4 * kWidth));
      for (uint64_t i = 0; i < y->elementCount(); ++i) REQUIRE(y->dataAs<float>()[i] == expected);
    }
  }
  auto inspected = runTool(CTXKIT_CTXINSPECT, {(out / "a_ctx.onnx").string(), (out / "b_ctx.onnx").string(), "--verify"});
  INFO(inspected.out << inspected.err);
  CHECK(inspected.exitCode == 0);
}

TEST_CASE("weightless: weights of an If body that compiles stay in the source model when their name is unique",
          "[e2e][weightless]") {
  // --set cond binds the condition: the If becomes its branch and compiles, its weight a program's weight, which the
  // runtime finds in the source model's body by name (docs/weight-sharing.md#weightless).
  TempDir dir("subgraph_weightless");
  const uint64_t weightBytes = kWidth * kWidth * 4;
  struct Case {
    std::string thenWeight, elseWeight, cond;
    float expected;
    size_t inSource;  // weights left in the source model
  };
  for (const Case& c : {Case{"W_then", "W_else", "1", 2.0f, 1}, Case{"W_then", "W_else", "0", 3.0f, 1},
                        Case{"W", "W", "1", 2.0f, 0}}) {  // a name both bodies define is not found by name: stored
    const fs::path folder = dir.path() / (c.thenWeight + c.cond);
    fs::create_directories(folder);
    const fs::path model = writeIfModel(folder, "m", c.thenWeight, c.elseWeight);
    auto r = runTool(CTXKIT_CTXGEN, {model.string(), "--weightless", "--set", "cond=" + c.cond, "-o", folder.string(),
                                     "--json", "-"});
    INFO(folder.string() << "\n" << r.out << r.err);
    REQUIRE(r.exitCode == 0);
    auto weights = nlohmann::json::parse(r.out)["weights"];
    CHECK(weights["source_count"].get<size_t>() == c.inSource);
    CHECK(weights["source_bytes"].get<uint64_t>() == c.inSource * weightBytes);
    if (c.inSource) CHECK(fs::file_size(folder / "m_ctxkit.bin") < weightBytes);
    else CHECK(fs::file_size(folder / "m_ctxkit.bin") > weightBytes);
    const fs::path results = folder / "results";
    auto run = runTool(CTXKIT_CTXRUN, {(folder / "m_ctx.onnx").string(), "--set", "x=1", "--verify", "--output-dir",
                                       results.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exitCode == 0);
    auto y = ir::loadNpy(results / "output_0.npy");
    REQUIRE(y);
    REQUIRE(y->elementCount() == static_cast<uint64_t>(4 * kWidth));
    for (uint64_t i = 0; i < y->elementCount(); ++i) REQUIRE(y->dataAs<float>()[i] == c.expected);
  }
}
