// Target JSON files are read strictly (docs/target-json.md): each rejection names the file and the JSON path; the
// built-in targets use only documented keys; ctxgen --list-targets and --print-target.
#include "partitioner/target.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kModel = (fs::path(CTXKIT_SAMPLES_DIR) / "tiny_cnn.onnx").string();

// Every key the schema file defines, at any depth ("properties" names), plus "op" entries' keys.
void collectSchemaKeys(const nlohmann::json& j, std::set<std::string>& keys) {
  if (j.is_object()) {
    if (j.contains("properties") && j["properties"].is_object())
      for (auto it = j["properties"].begin(); it != j["properties"].end(); ++it) keys.insert(it.key());
    for (const auto& v : j) collectSchemaKeys(v, keys);
  } else if (j.is_array()) {
    for (const auto& v : j) collectSchemaKeys(v, keys);
  }
}

// Keys the built-in target uses, skipping the attribute names under "constraints" (free-form by design).
void collectUsedKeys(const nlohmann::json& j, std::set<std::string>& keys) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      keys.insert(it.key());
      if (it.key() == "constraints") {
        if (it->contains("max_rank")) keys.insert("max_rank");
        continue;
      }
      collectUsedKeys(*it, keys);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) collectUsedKeys(v, keys);
  }
}

}  // namespace

TEST_CASE("a target JSON with an unknown key, op, bad opset range or wrong type is refused with its JSON path", "[e2e]") {
  TempDir dir("target_json");
  struct Case {
    std::string json, message;
  };
  const std::vector<Case> cases{
      {R"({"name":"t","ops":[{"op":"Add"}],"max_ranks":4})", "max_ranks: unknown key; expected one of: name,"},
      {R"({"name":"t","ops":[{"op":"Add"},{"op":"Relu","opset":[1,2]}]})", "ops[1].opset: unknown key; expected one of: op,"},
      {R"({"name":"t","preferred_layouts":{"gem":"panels-8"},"ops":[{"op":"Add"}]})", "preferred_layouts.gem: unknown key"},
      {R"({"name":"t","ops":[{"op":"Add"},{"op":"Sub"},{"op":"NoSuchOp"}]})", "ops[2].op: 'NoSuchOp' is not an ONNX op ctxkit knows"},
      {R"({"name":"t","ops":[{"op":"Add","domain":"com.example"}]})", "ops[0].op: 'Add' in domain 'com.example' is not an ONNX op"},
      {R"({"name":"t","ops":[{"op":"Add"},{"op":"Sub","opsets":[13,11]}]})", "ops[1].opsets: min 13 is greater than max 11"},
      {R"({"name":"t","ops":[{"op":"Add","opsets":[-1,11]}]})", "ops[0].opsets[0]: opset -1 is below 1"},
      {R"({"name":"t","ops":[{"op":"Add","opsets":[1]}]})", "ops[0].opsets: expected [min, max], two integers"},
      {R"({"name":"t","max_rank":"4","ops":[{"op":"Add"}]})", "max_rank: expected a non-negative integer"},
      {R"({"name":"t","static_shapes_only":1,"ops":[{"op":"Add"}]})", "static_shapes_only: expected true or false"},
      {R"({"name":"t","ops":[{"op":"Add","types":["float32",7]}]})", "ops[0].types[1]: expected an element type name"},
      {R"({"name":"t","ops":[{"op":"Conv","constraints":{"auto_pad":["VALID",1.5]}}]})",
       "ops[0].constraints.auto_pad[1]: expected a string or an integer"},
      {R"({"name":"t","preferred_layouts":{"gemm":4},"ops":[{"op":"Add"}]})", "preferred_layouts.gemm: expected a string"},
      {R"({"name":"t","ops":{"op":"Add"}})", "ops: expected an array of ops or \"all-kernels\""},
      {R"({"ops":[{"op":"Add"}]})", "name: required"},
      {R"({"name":"t","float16_compute":"fp32","ops":[{"op":"Add"}]})",
       "float16_compute: 'fp32'; expected float16 or float32"},
      {R"({"name":"t","float16_compute":32,"ops":[{"op":"Add"}]})",
       "float16_compute: expected a string: float16 or float32"}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const fs::path file = dir / fmt::format("bad{}.json", i);
    std::ofstream(file) << cases[i].json;
    const fs::path out = dir / fmt::format("out{}", i);
    auto r = runTool(CTXKIT_CTXGEN, {kModel, "--target", file.string(), "-o", out.string()});
    INFO(cases[i].json << "\n" << r.err);
    CHECK(r.exitCode == 2);
    CHECK(r.err.find(fmt::format("target '{}': {}", file.string(), cases[i].message)) != std::string::npos);
    CHECK_FALSE(fs::exists(out));
  }

  // The same format, written correctly, compiles.
  const fs::path good = dir / "good.json";
  std::ofstream(good) << R"({"name":"t","element_types":["float32"],"preferred_layouts":{"gemm":"row-major"},
    "float16_compute":"float32",
    "ops":[{"op":"Conv","opsets":[1,22],"constraints":{"max_rank":4}},{"op":"Relu","domain":"ai.onnx"},{"op":"Add"}]})";
  auto r = runTool(CTXKIT_CTXGEN, {kModel, "--target", good.string(), "-o", (dir / "good").string(), "-q"});
  INFO(r.err);
  CHECK(r.exitCode == 0);
}

TEST_CASE("the built-in targets use only keys documented in docs/target.schema.json and load cleanly", "[e2e]") {
  std::ifstream in(fs::path(CTXKIT_DOCS_DIR) / "target.schema.json");
  REQUIRE(in);
  const auto schema = nlohmann::json::parse(in);
  std::set<std::string> documented;
  collectSchemaKeys(schema, documented);
  const auto names = partitioner::builtinTargetNames();
  REQUIRE(names.size() >= 2);
  for (const auto& name : names) {
    INFO(name);
    auto text = partitioner::builtinTargetJson(name);
    REQUIRE(text);
    std::set<std::string> used;
    collectUsedKeys(nlohmann::json::parse(*text), used);
    for (const auto& key : used) {
      INFO(key);
      CHECK(documented.count(key) == 1);
    }
    CHECK(partitioner::loadTarget(name));
  }
  // The collector finds what a target uses: a key the schema lacks would be caught.
  std::set<std::string> used;
  collectUsedKeys(nlohmann::json::parse(R"({"undocumented":1,"ops":[{"op":"Conv","constraints":{"auto_pad":[]}}]})"), used);
  CHECK(used == std::set<std::string>{"undocumented", "ops", "op", "constraints"});
  CHECK(documented.count("undocumented") == 0);
}

TEST_CASE("ctxgen --list-targets and --print-target show the built-in targets", "[e2e]") {
  auto list = runTool(CTXKIT_CTXGEN, {"--list-targets"});
  INFO(list.err);
  REQUIRE(list.exitCode == 0);
  CHECK(list.out.find("npu-sim  id npu-sim revision 1  115 ops\n") != std::string::npos);
  CHECK(list.out.find("cpu  id cpu revision 2  ") != std::string::npos);
  CHECK(std::count(list.out.begin(), list.out.end(), '\n') == static_cast<long>(partitioner::builtinTargetNames().size()));

  for (const auto& name : partitioner::builtinTargetNames()) {
    auto printed = runTool(CTXKIT_CTXGEN, {"--print-target", name});
    INFO(name << printed.err);
    REQUIRE(printed.exitCode == 0);
    CHECK(printed.out == *partitioner::builtinTargetJson(name) + "\n");
    // What it prints is a target file ctxgen accepts.
    TempDir dir("print_target");
    const fs::path file = dir / (name + ".json");
    std::ofstream(file) << printed.out;
    auto parsed = partitioner::loadTarget(file.string());
    INFO((parsed ? std::string() : parsed.error().message()));
    CHECK(parsed);
  }
  auto unknown = runTool(CTXKIT_CTXGEN, {"--print-target", "nope"});
  CHECK(unknown.exitCode == 2);
  CHECK(unknown.err.find("unknown built-in target 'nope'; built-in: npu-sim, cpu") != std::string::npos);
  auto none = runTool(CTXKIT_CTXGEN, {});
  CHECK(none.exitCode == 2);
  CHECK(none.err.find("no MODEL given") != std::string::npos);
}
