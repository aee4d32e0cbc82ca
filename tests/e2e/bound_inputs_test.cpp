// ctxgen --set binds an input's value at compile time: the input leaves the compiled model, an If on it becomes
// its branch and compiles, and the report names the binding. Every bad --set is a usage error naming model, input,
// what is declared and what was given.
#include "../common/graph_builder.h"
#include "ir/npy.h"
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

ir::ValueInfo value(const std::string& name, ir::ElemType type, std::vector<ir::Dim> dims) {
  return ir::ValueInfo{name, type, std::move(dims), ""};
}

std::shared_ptr<ir::Graph> branch(const std::string& op, float operand) {
  auto g = std::make_shared<ir::Graph>();
  g->initializers.push_back({op + "_k", ir::Tensor::fromVector(ir::ElemType::Float, {1}, std::vector<float>{operand}),
                             std::nullopt});
  g->nodes.push_back(testing::node(op, {"x", op + "_k"}, {op + "_y"}));
  g->outputs.push_back(value(op + "_y", ir::ElemType::Float, {ir::Dim::known(2), ir::Dim::known(3)}));
  return g;
}

// y = If(sr == 16000) then x * 2 else x + 1; w = Relu(z) with z of symbolic length n; f = Not(flag).
fs::path writeRateModel(const fs::path& dir) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  m.graph.name = "rate";
  const std::vector<ir::Dim> twoByThree{ir::Dim::known(2), ir::Dim::known(3)};
  m.graph.inputs = {value("x", ir::ElemType::Float, twoByThree), value("sr", ir::ElemType::Int64, {}),
                    value("flag", ir::ElemType::Bool, {ir::Dim::known(1)}),
                    value("z", ir::ElemType::Float, {ir::Dim::named("n")})};
  m.graph.outputs = {value("y", ir::ElemType::Float, twoByThree), value("w", ir::ElemType::Float, {ir::Dim::named("n")}),
                     value("f", ir::ElemType::Bool, {ir::Dim::known(1)})};
  m.graph.initializers.push_back(
      {"r16k", ir::Tensor::fromVector(ir::ElemType::Int64, {}, std::vector<int64_t>{16000}), std::nullopt});
  m.graph.nodes.push_back(testing::node("Equal", {"sr", "r16k"}, {"is16k"}));
  ir::Node pick = testing::node("If", {"is16k"}, {"y"});
  pick.attrs.set(ir::Attribute::makeGraph("then_branch", branch("Mul", 2)));
  pick.attrs.set(ir::Attribute::makeGraph("else_branch", branch("Add", 1)));
  m.graph.nodes.push_back(pick);
  m.graph.nodes.push_back(testing::node("Relu", {"z"}, {"w"}));
  m.graph.nodes.push_back(testing::node("Not", {"flag"}, {"f"}));
  const fs::path path = dir / "rate.onnx";
  REQUIRE(onnx_io::saveModel(m, path));
  return path;
}

}  // namespace

TEST_CASE("ctxgen --set makes an input a constant: it leaves the model and an If on it compiles", "[e2e]") {
  TempDir dir("bound_inputs");
  const fs::path model = writeRateModel(dir.path());
  // The last case binds sr run-wide and again for model 'rate' only, which refines it.
  struct Case {
    std::string rate;
    std::vector<std::string> sets;
    std::vector<float> expected;
  };
  for (const auto& [rate, sets, expected] :
       {Case{"16000", {"--set", "sr=16000"}, {2, 4, 6, 8, 10, 12}}, Case{"8000", {"--set", "sr=8000"}, {2, 3, 4, 5, 6, 7}},
        Case{"16000", {"--set", "sr=8000", "--set", "rate:sr=16000"}, {2, 4, 6, 8, 10, 12}}}) {
    INFO(fmt::format("{}", fmt::join(sets, " ")));
    const fs::path out = dir.path() / fmt::format("{}", fmt::join(sets, "_"));
    std::vector<std::string> args{model.string(), "-o", out.string(), "--dim", "n=4", "--target", "cpu", "--json",
                                  (out / "report.json").string(), "-v"};
    args.insert(args.end(), sets.begin(), sets.end());
    auto r = runTool(CTXKIT_CTXGEN, args);
    INFO(r.out << r.err);
    REQUIRE(r.exitCode == 0);
    CHECK(r.out.find(fmt::format("  input sr bound to {}\n", rate)) != std::string::npos);
    std::ifstream reportFile(out / "report.json");
    auto report = nlohmann::json::parse(reportFile);
    const auto& m = report["models"][0];
    CHECK(m["bound_inputs"] == nlohmann::json{{"sr", rate}});
    CHECK(m["fallback_nodes"] == 0);
    auto ctx = onnx_io::loadModel(out / "rate_ctx.onnx");
    REQUIRE(ctx);
    std::vector<std::string> inputs;
    for (const auto& in : ctx->graph.inputs) inputs.push_back(in.name);
    CHECK(inputs == std::vector<std::string>{"x", "flag", "z"});
    auto run = runTool(CTXKIT_CTXRUN, {(out / "rate_ctx.onnx").string(), "--set", "x=1,2,3,4,5,6", "--set", "flag=1",
                                       "--set", "z=-1,2,-3,4", "--output-dir", (out / "results").string()});
    INFO(run.out << run.err);
    REQUIRE(run.exitCode == 0);
    auto y = ir::loadNpy(out / "results" / "output_0.npy");
    auto w = ir::loadNpy(out / "results" / "output_1.npy");
    auto f = ir::loadNpy(out / "results" / "output_2.npy");
    REQUIRE((y && w && f));
    CHECK(std::vector<float>(y->dataAs<float>(), y->dataAs<float>() + y->elementCount()) == expected);
    CHECK(std::vector<float>(w->dataAs<float>(), w->dataAs<float>() + w->elementCount()) == std::vector<float>{0, 2, 0, 4});
    CHECK(f->dataAs<uint8_t>()[0] == 0);
  }
}

TEST_CASE("ctxgen --set refuses values that do not fit the input, naming model, input, declared and given", "[e2e]") {
  TempDir dir("bound_inputs_bad");
  const fs::path model = writeRateModel(dir.path());
  const std::string inputs = "(inputs: rate: x 2x3, sr scalar, flag 1, z n)";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--set", "rate=1"}, "--set 'rate=1': no input 'rate' in any model " + inputs},
      {{"--set", "other:sr=1"}, "--set 'other:sr=1': no input 'other:sr' in any model " + inputs},
      {{"--set", "sr=fast"}, "--set 'sr=fast': expected NAME=NUMBER[,NUMBER...]"},
      {{"--set", "sr=1,"}, "--set 'sr=1,': expected NAME=NUMBER[,NUMBER...]"},
      {{"--set", "sr=16000.5"},
       "--set 'sr=16000.5': model 'rate' input 'sr' (declared int64 scalar) is int64, which does not hold the value 16000.5"},
      {{"--set", "rate:x=1,2"},
       "--set 'rate:x=1,2': model 'rate' input 'x' (declared float32 2x3) has shape 2x3 (6 elements), but 2 values are given"},
      {{"--set", "flag=2"}, "--set 'flag=2': model 'rate' input 'flag' (declared bool 1) is bool, which takes 0 or 1, not 2"},
      {{"--set", "z=1"},
       "--set 'z=1': model 'rate' input 'z' (declared float32 n): its shape is not static: dimension 'n' of 'z' is not "
       "bound (use --dim n=N)"},
      {{"--set", "sr=16000", "--set", "sr=8000"},
       "--set 'sr=8000' contradicts --set 'sr=16000': both bind input 'sr' of model 'rate'"},
      {{"--set", "z=1,2", "--dim", "n=3"},
       "--set 'z=1,2': model 'rate' input 'z' (declared float32 n) has shape 3 (3 elements), but 2 values are given"},
  };
  for (const auto& [args, error] : cases) {
    std::vector<std::string> argv{model.string(), "-o", (dir.path() / "out").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = runTool(CTXKIT_CTXGEN, argv);
    INFO(r.out << r.err);
    CHECK(r.exitCode == 2);
    CHECK(r.err == "ctxgen: error: " + error + "\n");
    CHECK(!fs::exists(dir.path() / "out" / "rate_ctx.onnx"));
  }
}
