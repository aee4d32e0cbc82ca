// ctxinspect --lint (docs/ctxinspect.md#lint): one crafted deployment per rule, shaped as other EPs write them (QNN's
// shared contexts, embed mode 1, absolute and escaping cache paths, a compiled model still reading external data),
// each found with its rule id, level, model and node; real ctxgen output and a QNN-style shared pair lint clean; the
// JSON and SARIF forms carry the same findings.
#include "epcontext/contract.h"
#include "fixtures.h"

#include <set>

using namespace ctxkit;
using namespace ctxkit::test;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;

namespace {

struct Lint {
  ctxkit::testing::ToolResult run;
  nlohmann::json json;
};

Lint lintJson(std::vector<std::string> models) {
  models.insert(models.end(), {"--lint", "--json"});
  Lint r{runTool(CTXKIT_CTXINSPECT, models), {}};
  INFO(r.run.out << r.run.err);
  REQUIRE_NOTHROW(r.json = nlohmann::json::parse(r.run.out));
  return r;
}

// The rule ids found, once each.
std::set<std::string> rulesOf(const nlohmann::json& lint) {
  std::set<std::string> ids;
  for (const auto& f : lint["findings"]) ids.insert(f["rule"].get<std::string>());
  return ids;
}

const nlohmann::json* findingOf(const nlohmann::json& lint, const std::string& rule) {
  for (const auto& f : lint["findings"])
    if (f["rule"] == rule) return &f;
  return nullptr;
}

}  // namespace

TEST_CASE("lint: ctxgen's output and a QNN-style shared pair are clean", "[inspect][lint]") {
  TempDir dir("lint_clean");
  auto gen = runTool(CTXKIT_CTXGEN, {std::string(CTXKIT_SAMPLES_DIR) + "/tiny_prefill.onnx," +
                                         std::string(CTXKIT_SAMPLES_DIR) + "/tiny_decode.onnx",
                                     "--share", "-o", (dir / "out").string(), "-q"});
  INFO(gen.out << gen.err);
  REQUIRE(gen.exitCode == 0);
  auto ours = lintJson({(dir / "out" / "tiny_prefill_ctx.onnx").string(), (dir / "out" / "tiny_decode_ctx.onnx").string()});
  CHECK(ours.run.exitCode == 0);
  CHECK(ours.json["findings"].empty());
  CHECK(ours.json["ok"].get<bool>());
  auto text = runTool(CTXKIT_CTXINSPECT, {(dir / "out" / "tiny_decode_ctx.onnx").string(), "--lint"});
  CHECK(text.exitCode == 0);
  CHECK(text.out.find("lint: no findings") != std::string::npos);

  // QNN's weight sharing: main nodes name one .bin, secondary nodes (main_context=0) find their graphs in it.
  save(foreignModel({{"qnn_prefill_0", kQnn, 1, 0, "qnn/shared.bin"}, {"qnn_prefill_1", kQnn, 0, 0, std::nullopt}}),
       dir / "prefill_ctx.onnx");
  save(foreignModel({{"qnn_decode_0", kQnn, 1, 0, "qnn/shared.bin"}}), dir / "decode_ctx.onnx");
  writeBytes(dir / "qnn" / "shared.bin", 1024);
  auto qnn = lintJson({(dir / "prefill_ctx.onnx").string(), (dir / "decode_ctx.onnx").string()});
  INFO(qnn.run.out);
  CHECK(qnn.run.exitCode == 0);
  CHECK(qnn.json["findings"].empty());
}

TEST_CASE("lint: each way a deployment breaks is found with its rule, level, model and node", "[inspect][lint]") {
  TempDir dir("lint_rules");
  writeBytes(dir / "ctx.bin", 512);
  struct Case {
    const char* rule;
    const char* level;
    std::vector<EpNodeSpec> nodes;
    std::string sdk = "2.31.0";
    const char* node = "";  // the node the finding names
    const char* says = "";  // part of its message
  };
  const std::string absolute = (dir / "ctx.bin").string();
  const std::vector<Case> cases = {
      {"CTXL001", "error", {{"n0", kOpenVino, 1, 2, "ctx.bin"}}, "2.31.0", "n0", "embed_mode is 2"},
      // ONNX Runtime issue 31977: with embed mode 1, only the first partition's node got its payload.
      {"CTXL002", "error", {{"p0", kQnn, 1, 1, "payload"}, {"p1", kQnn, 1, 1, std::nullopt}}, "2.31.0", "p1",
       "no ep_cache_context"},
      {"CTXL003", "error", {{"s0", kQnn, 0, 0, std::nullopt}}, "2.31.0", "s0", "main_context=0"},
      // ONNX Runtime issue 22131: an absolute cache path works only where it was compiled.
      {"CTXL004", "error", {{"a0", kOpenVino, 1, 0, absolute}}, "2.31.0", "a0", "absolute path"},
      {"CTXL005", "error", {{"e0", kQnn, 1, 0, "../elsewhere/ctx.bin"}}, "2.31.0", "e0", "../elsewhere/ctx.bin"},
      {"CTXL006", "error", {{"m0", kQnn, 1, 0, "gone.bin"}}, "2.31.0", "m0", "gone.bin"},
      {"CTXL011", "error", {{"d0", kQnn, 1, 0, "ctx.bin"}, {"d0", kQnn, 0, 0, std::nullopt}}, "2.31.0", "d0",
       "more than one node is named 'd0'"},
      {"CTXL013", "error", {{"u0", "", 1, 0, "ctx.bin"}}, "2.31.0", "u0", "no source"},
      {"CTXL014", "note", {{"v0", kQnn, 1, 0, "ctx.bin"}}, "", "v0", "no ep_sdk_version"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.rule) {
      const fs::path model = dir / (std::string(c.rule) + "_ctx.onnx");
      save(foreignModel(c.nodes, c.sdk), model);
      auto r = lintJson({model.string()});
      INFO(r.run.out);
      const nlohmann::json* f = findingOf(r.json, c.rule);
      REQUIRE(f != nullptr);
      CHECK((*f)["level"] == c.level);
      CHECK((*f)["model"] == model.string());
      CHECK((*f)["node"] == c.node);
      CHECK((*f)["message"].get<std::string>().find(c.says) != std::string::npos);
      CHECK_FALSE((*f)["help"].get<std::string>().empty());
      CHECK(r.run.exitCode == (std::string(c.level) == "error" ? 1 : 0));
    }
  }
}

TEST_CASE("lint: duplicate partitions across models, external data, ctxkit metadata", "[inspect][lint]") {
  TempDir dir("lint_more");
  writeBytes(dir / "ctx.bin", 512);
  // Two models whose main nodes name the same partition: a shared context would find one graph for both.
  save(foreignModel({{"same", kQnn, 1, 0, "ctx.bin"}}), dir / "a_ctx.onnx");
  save(foreignModel({{"same", kQnn, 1, 0, "ctx.bin"}}), dir / "b_ctx.onnx");
  auto dup = lintJson({(dir / "a_ctx.onnx").string(), (dir / "b_ctx.onnx").string()});
  CHECK(rulesOf(dup.json) == std::set<std::string>{"CTXL012"});
  CHECK(dup.run.exitCode == 1);

  // ONNX Runtime issue 23358: a compiled model that still reads weights from an external data file.
  ir::Model m = foreignModel({{"w0", kQnn, 1, 0, "ctx.bin"}});
  m.graph.initializers.push_back(
      {"W", ir::Tensor::fromVector(ir::ElemType::Float, {2}, std::vector<float>{1, 2}), ir::ExternalLocation{"src.data", 0, 8}});
  writeBytes(dir / "src.data", 8);
  save(m, dir / "ext_ctx.onnx");
  auto ext = lintJson({(dir / "ext_ctx.onnx").string()});
  CHECK(rulesOf(ext.json) == std::set<std::string>{"CTXL007"});
  CHECK(ext.run.exitCode == 0);  // a warning
  fs::remove(dir / "src.data");
  auto gone = lintJson({(dir / "ext_ctx.onnx").string()});
  CHECK(rulesOf(gone.json) == std::set<std::string>{"CTXL008"});
  CHECK(gone.run.exitCode == 1);

  // A ctxkit node without the compatibility metadata, then with metadata this ctxkit cannot run (its ctx.bin is not a
  // ctxkit container either: CTXL016 beside each).
  ir::Model ours = foreignModel({{"k0", epcontext::kEpName, 1, 0, "ctx.bin"}}, epcontext::kVersion);
  save(ours, dir / "k_ctx.onnx");
  auto bare = lintJson({(dir / "k_ctx.onnx").string()});
  CHECK(rulesOf(bare.json) == std::set<std::string>{"CTXL009", "CTXL016"});
  ours.setMetadata(epcontext::compatibilityMetadataKey(), "ctxkit;format=99.0;version=0.0.1;target=npu-sim;revision=1");
  save(ours, dir / "k_ctx.onnx");
  auto future = lintJson({(dir / "k_ctx.onnx").string()});
  CHECK(rulesOf(future.json) == std::set<std::string>{"CTXL010", "CTXL016"});
  CHECK(future.run.exitCode == 1);

  // The same findings as SARIF 2.1.0: every rule described, each result with its rule, level and file.
  auto sarifRun = runTool(CTXKIT_CTXINSPECT, {(dir / "a_ctx.onnx").string(), (dir / "b_ctx.onnx").string(), "--lint",
                                              "--sarif"});
  CHECK(sarifRun.exitCode == 1);
  nlohmann::json sarif;
  REQUIRE_NOTHROW(sarif = nlohmann::json::parse(sarifRun.out));
  CHECK(sarif["version"] == "2.1.0");
  const auto& run = sarif["runs"][0];
  CHECK(run["tool"]["driver"]["name"] == "ctxinspect");
  CHECK(run["tool"]["driver"]["rules"].size() == 16);
  REQUIRE(run["results"].size() == 1);
  CHECK(run["results"][0]["ruleId"] == "CTXL012");
  CHECK(run["results"][0]["level"] == "error");
  CHECK(run["tool"]["driver"]["rules"][run["results"][0]["ruleIndex"].get<size_t>()]["id"] == "CTXL012");
  CHECK(run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (dir / "b_ctx.onnx").string());
}

TEST_CASE("lint: a ctxkit model and binary from different compiles, subgraph external data", "[inspect][lint]") {
  TempDir dir("lint_pair");
  auto gen = runTool(CTXKIT_CTXGEN, {std::string(CTXKIT_SAMPLES_DIR) + "/tiny_cnn.onnx", "-o", (dir / "out").string(),
                                     "-q"});
  INFO(gen.out << gen.err);
  REQUIRE(gen.exitCode == 0);
  const fs::path model = dir / "out" / "tiny_cnn_ctx.onnx", bin = dir / "out" / "tiny_cnn_ctxkit.bin";
  CHECK(lintJson({model.string()}).json["findings"].empty());
  ir::Model m = onnx_io::loadModel(model).value();
  const ir::Model original = m;
  const std::string key = epcontext::compatibilityMetadataKey();
  const std::string info = *m.findMetadata(key);
  REQUIRE(info.find("target=npu-sim;revision=1") != std::string::npos);

  // Metadata rewritten for another (runnable) target: it no longer describes the binary.
  std::string other = info;
  other.replace(other.find("target=npu-sim;revision=1"), 25, "target=cpu;revision=2");
  m.setMetadata(key, other);
  save(m, model);
  auto moved = lintJson({model.string()});
  CHECK(rulesOf(moved.json) == std::set<std::string>{"CTXL015"});
  CHECK((*findingOf(moved.json, "CTXL015"))["message"].get<std::string>().find("target cpu revision 2") !=
        std::string::npos);
  CHECK(moved.run.exitCode == 1);

  // The binary from another compile: the checksum the model recorded does not match; then bytes that do not open.
  m = original;
  for (const auto& [k, v] : original.metadata)
    if (k.rfind("ctxkit.context_checksum:", 0) == 0) m.setMetadata(k, std::string(32, '0'));
  save(m, model);
  auto stale = lintJson({model.string()});
  CHECK(rulesOf(stale.json) == std::set<std::string>{"CTXL016"});
  CHECK((*findingOf(stale.json, "CTXL016"))["message"].get<std::string>().find(std::string(32, '0')) !=
        std::string::npos);
  save(original, model);
  writeBytes(bin, 300);
  auto broken = lintJson({model.string()});
  CHECK(rulesOf(broken.json) == std::set<std::string>{"CTXL016"});
  CHECK((*findingOf(broken.json, "CTXL016"))["message"].get<std::string>().find("cannot be read") != std::string::npos);

  // External data read inside a subgraph (an If's branch) is found as at the top level.
  ir::Model sub = foreignModel({{"w0", kQnn, 1, 0, "ctx.bin"}});
  writeBytes(dir / "ctx.bin", 64);
  auto branch = std::make_shared<ir::Graph>();
  branch->name = "then";
  branch->initializers.push_back({"W", ir::Tensor::fromVector(ir::ElemType::Float, {2}, std::vector<float>{1, 2}),
                                  ir::ExternalLocation{"branch.data", 0, 8}});
  branch->outputs.push_back(makeValue("W", ir::ElemType::Float, {ir::Dim::known(2)}));
  ir::Node cond = makeNode(sub, "If", {"x"}, {"z"});
  cond.name = "If_0";
  cond.attrs.set(ir::Attribute::makeGraph("then_branch", branch));
  cond.attrs.set(ir::Attribute::makeGraph("else_branch", branch));
  sub.graph.nodes.push_back(std::move(cond));
  save(sub, dir / "sub_ctx.onnx");
  auto missing = lintJson({(dir / "sub_ctx.onnx").string()});
  REQUIRE(findingOf(missing.json, "CTXL008") != nullptr);
  CHECK((*findingOf(missing.json, "CTXL008"))["message"].get<std::string>().find("If_0/then_branch/W") !=
        std::string::npos);
  writeBytes(dir / "branch.data", 8);
  auto shipped = lintJson({(dir / "sub_ctx.onnx").string()});
  CHECK(rulesOf(shipped.json) == std::set<std::string>{"CTXL007"});
}

TEST_CASE("check against a device profile gives each verdict with its reasons", "[inspect][compat]") {
  TempDir dir("check_device");
  auto gen = runTool(CTXKIT_CTXGEN, {std::string(CTXKIT_SAMPLES_DIR) + "/tiny_cnn.onnx", "-o", (dir / "out").string(), "-q"});
  REQUIRE(gen.exitCode == 0);
  const std::string model = (dir / "out" / "tiny_cnn_ctx.onnx").string();
  // This machine's profile, as ctxrun writes it on a device.
  auto printed = runTool(CTXKIT_CTXRUN, {"--print-device"});
  REQUIRE(printed.exitCode == 0);
  nlohmann::json device;
  REQUIRE_NOTHROW(device = nlohmann::json::parse(printed.out));
  CHECK(device["targets"]["npu-sim"].is_string());
  std::ofstream(dir / "here.json") << printed.out;
  auto here = inspectJson({model, "--check", "--against", (dir / "here.json").string()});
  CHECK(here.run.exitCode == 0);
  REQUIRE(here.json["checks"].size() == 2);  // the model's metadata and its context binary
  for (const auto& c : here.json["checks"]) {
    CHECK(c["verdict"] == "SUPPORTED_OPTIMAL");
    CHECK(c["reasons"].empty());
  }
  // A device whose npu-sim is at another revision: recompile, and why.
  device["targets"]["npu-sim"] = "9";
  std::ofstream(dir / "newer.json") << device.dump();
  auto newer = inspectJson({model, "--check", "--against", (dir / "newer.json").string()});
  CHECK(newer.run.exitCode == 0);
  for (const auto& c : newer.json["checks"]) {
    CHECK(c["verdict"] == "PREFER_RECOMPILATION");
    REQUIRE(c["reasons"].size() == 1);
    CHECK(c["reasons"][0]["code"] == "COMPAT_TARGET_REVISION");
    CHECK(c["reasons"][0]["expected"] == "npu-sim revision 9");
    CHECK(c["reasons"][0]["action"] == "recompile with ctxgen --target npu-sim");
  }
  // A device that reads another format major: unsupported, exit 1, in text too.
  device["format"] = "2.0";
  std::ofstream(dir / "major.json") << device.dump();
  auto text = runTool(CTXKIT_CTXINSPECT, {model, "--check", "--against", (dir / "major.json").string()});
  CHECK(text.exitCode == 1);
  CHECK(text.out.find("UNSUPPORTED") != std::string::npos);
  CHECK(text.out.find("COMPAT_FORMAT_MAJOR") != std::string::npos);
  // A profile that is not one names the file and the field.
  std::ofstream(dir / "bad.json") << R"({"ctxkit_version":"0.1.0","format":"x"})";
  auto bad = runTool(CTXKIT_CTXINSPECT, {model, "--check", "--against", (dir / "bad.json").string()});
  CHECK(bad.exitCode == 1);
  CHECK(bad.err.find("bad.json") != std::string::npos);
  CHECK(bad.err.find("'format'") != std::string::npos);
}
