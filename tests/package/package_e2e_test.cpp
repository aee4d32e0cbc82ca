// ctxgen --package, ctxinspect DIR --verify and ctxrun DIR through the real tools (docs/package.md): one variant per
// target, the source model once as a content-addressed shared asset, outputs matching the samples' independent
// expected outputs on every variant; broken packages refused by file and key; a failed write leaves nothing behind.
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

using ctxkit::testing::kSamples;
using ctxkit::testing::runTool;
using ctxkit::testing::runToolOk;
using ctxkit::testing::sample;
using ctxkit::testing::sampleData;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

json readJson(const fs::path& p) { return json::parse(ctxkit::testing::readText(p)); }

uint64_t treeBytes(const fs::path& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) total += e.file_size();
  return total;
}

// How many files under `dir` hold exactly the bytes of `file`.
int copiesOf(const fs::path& file, const fs::path& dir) {
  const std::string want = ctxkit::testing::readText(file);
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.file_size() == want.size() && ctxkit::testing::readText(e.path()) == want) ++n;
  return n;
}

void expectMatch(const fs::path& pkg, const std::string& stem, const std::vector<std::string>& choose) {
  std::vector<std::string> args = {pkg.string(), "--component", stem, "--inputs", sampleData(stem), "--expected",
                                   sampleData(stem), "--verify"};
  args.insert(args.end(), choose.begin(), choose.end());
  auto r = runTool(CTXKIT_CTXRUN, args);
  INFO(r.out << r.err);
  CHECK(r.exitCode == 0);
  CHECK(r.out.find("match") != std::string::npos);
}

}  // namespace

TEST_CASE("ctxgen --package writes a variant per target and the source model once", "[package][e2e]") {
  TempDir dir("package_targets");
  const fs::path pkg = dir / "pkg";
  const std::vector<std::string> stems = {"tiny_cnn", "tiny_prefill"};
  auto r = runToolOk(CTXKIT_CTXGEN, {sample(stems[0]), sample(stems[1]), "--target", "npu-sim,cpu", "--package",
                                     pkg.string()});
  INFO(r.out << r.err);
  CHECK(r.out.find("bytes on disk") != std::string::npos);
  // No staging folder is left beside the package.
  for (const auto& e : fs::directory_iterator(dir.path())) CHECK(e.path().filename().string().find(".tmp") == std::string::npos);

  const json manifest = readJson(pkg / "manifest.json");
  CHECK(manifest["schema_version"] == "1.0");
  CHECK(manifest["layout"] == "portable");
  REQUIRE(manifest["components"].size() == 2);
  for (const auto& stem : stems) {
    const json& variants = manifest["components"][stem]["variants"];
    REQUIRE(variants.size() == 2);
    std::vector<std::string> names;
    for (const auto& [name, v] : variants.items()) {
      names.push_back(name);
      CHECK(v["ep"] == "CtxKitExecutionProvider");
      CHECK(v["device"] == (name == "cpu" ? "cpu" : "npu"));
      CHECK(v["compatibility_string"].get<std::string>().find("target=" + name) != std::string::npos);
      const json& ort = v["executor_info"]["ort"];
      CHECK(fs::is_regular_file(pkg / v["variant_directory"].get<std::string>() / ort["model_file"].get<std::string>()));
      const std::string asset = ort["session_options"]["session.model_external_initializers_file_folder_path"];
      REQUIRE(asset.starts_with("sha256:"));
      // The asset folder holds the source model, byte for byte.
      const fs::path held = pkg / "shared_assets" / ("sha256-" + asset.substr(7)) / (stem + ".onnx");
      CHECK(ctxkit::testing::readText(held) == ctxkit::testing::readText(sample(stem)));
    }
    CHECK(names == std::vector<std::string>{"npu-sim", "cpu"});  // in --target order: ONNX Runtime's tie-break
    // The source model's bytes are in the package once, in its shared asset.
    CHECK(copiesOf(sample(stem), pkg) == 1);
  }

  // Every variant matches the samples' expected outputs, chosen by name, by device, and automatically.
  for (const auto& stem : stems) {
    expectMatch(pkg, stem, {"--device", "cpu"});
    expectMatch(pkg, stem, {"--device", "npu-sim"});
    expectMatch(pkg, stem, {"--device", "npu"});
    expectMatch(pkg, stem, {});
  }
  auto v = runTool(CTXKIT_CTXINSPECT, {pkg.string(), "--verify"});
  INFO(v.out << v.err);
  CHECK(v.exitCode == 0);
  CHECK(v.out.find("verified") != std::string::npos);

  // The plain weights are not in any variant: each target's folder is smaller than an ordinary deployment of that
  // target, whose context binary stores them.
  for (const char* target : {"npu-sim", "cpu"}) {
    const fs::path plain = dir / (std::string("plain_") + target);
    runToolOk(CTXKIT_CTXGEN, {sample("tiny_prefill"), "--target", target, "-o", plain.string()});
    INFO(target);
    CHECK(treeBytes(pkg / "tiny_prefill" / target) < treeBytes(plain));
  }
}

TEST_CASE("shape variants are variants of their target, sharing its folder and context binary", "[package][e2e]") {
  TempDir dir("package_shapes");
  // tiny_prefill with a symbolic sequence length: x and y are [1, seq, 64] (tests/oracle/make_symbolic).
  const fs::path model = dir / "block.onnx";
  runToolOk(CTXKIT_MAKE_SYMBOLIC, {sample("tiny_prefill"), model.string()});
  const fs::path pkg = dir / "pkg";
  runToolOk(CTXKIT_CTXGEN, {model.string(), "--target", "cpu,npu-sim", "--variant", "s16:seq=16", "--variant",
                            "s3:seq=3", "--package", pkg.string()});
  const json manifest = readJson(pkg / "manifest.json");
  const json& variants = manifest["components"]["block"]["variants"];
  std::vector<std::string> names;
  for (const auto& [name, v] : variants.items()) {
    names.push_back(name);
    CHECK(v["variant_directory"] == "block/" + v["additional_metadata"]["ctxkit"]["target"].get<std::string>());
  }
  CHECK(names == std::vector<std::string>{"cpu-s16", "cpu-s3", "npu-sim-s16", "npu-sim-s3"});
  CHECK(variants["cpu-s3"]["executor_info"]["ort"]["model_file"] == "block_s3_ctx.onnx");
  CHECK(variants["cpu-s3"]["additional_metadata"]["ctxkit"]["shape_variant"] == "s3");
  // One context binary per target, whatever the number of shape variants.
  for (const char* target : {"cpu", "npu-sim"}) {
    int bins = 0;
    for (const auto& e : fs::directory_iterator(pkg / "block" / target)) bins += e.path().extension() == ".bin";
    CHECK(bins == 1);
  }
  // The seq=16 variant runs the sample's own inputs and matches its independent expected outputs.
  for (const char* variant : {"cpu-s16", "npu-sim-s16"}) {
    auto r = runTool(CTXKIT_CTXRUN, {pkg.string(), "--device", variant, "--inputs", sampleData("tiny_prefill"),
                                     "--expected", sampleData("tiny_prefill"), "--verify"});
    INFO(variant << "\n" << r.out << r.err);
    CHECK(r.exitCode == 0);
    CHECK(r.out.find("match") != std::string::npos);
  }
  auto v = runTool(CTXKIT_CTXINSPECT, {pkg.string(), "--verify"});
  INFO(v.out << v.err);
  CHECK(v.exitCode == 0);
}

TEST_CASE("ctxrun --device auto takes the variant with the best verdict, then the first in the manifest",
          "[package][e2e]") {
  TempDir dir("package_auto");
  const fs::path pkg = dir / "pkg";
  runToolOk(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", "npu-sim,cpu", "--package", pkg.string()});
  auto chosen = [&] {
    auto r = runTool(CTXKIT_CTXRUN, {pkg.string(), "--json", "--inputs", sampleData("tiny_cnn"), "--expected",
                                     sampleData("tiny_cnn")});
    INFO(r.out << r.err);
    REQUIRE(r.exitCode == 0);
    return json::parse(r.out)["variant"].get<std::string>();
  };
  CHECK(chosen() == "npu-sim");  // both SUPPORTED_OPTIMAL: manifest order
  json m = readJson(pkg / "manifest.json");
  std::string compat = m["components"]["tiny_cnn"]["variants"]["npu-sim"]["compatibility_string"];
  const size_t at = compat.find("revision=");
  REQUIRE(at != std::string::npos);
  m["components"]["tiny_cnn"]["variants"]["npu-sim"]["compatibility_string"] = compat.substr(0, at) + "revision=99";
  std::ofstream(pkg / "manifest.json", std::ios::trunc) << m.dump(2);
  CHECK(chosen() == "cpu");  // PREFER_RECOMPILATION ranks below SUPPORTED_OPTIMAL
}

TEST_CASE("a package is written whole or not at all", "[package][e2e][bad-input]") {
  TempDir dir("package_atomic");
  const fs::path pkg = dir / "pkg";
  auto bad = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", "npu-sim,no-such-target", "--package", pkg.string()});
  CHECK(bad.exitCode != 0);
  CHECK(bad.err.find("no-such-target") != std::string::npos);
  CHECK_FALSE(fs::exists(pkg));
  CHECK(fs::is_empty(dir.path()));  // no staging folder left either

  runToolOk(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", "cpu", "--package", pkg.string()});
  const std::string before = ctxkit::testing::readText(pkg / "manifest.json");
  auto again = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", "npu-sim", "--package", pkg.string()});
  CHECK(again.exitCode != 0);
  CHECK(again.err.find("--force") != std::string::npos);
  CHECK(ctxkit::testing::readText(pkg / "manifest.json") == before);
  runToolOk(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", "npu-sim", "--package", pkg.string(), "--force"});
  CHECK(readJson(pkg / "manifest.json")["components"]["tiny_cnn"]["variants"].contains("npu-sim"));
  CHECK_FALSE(readJson(pkg / "manifest.json")["components"]["tiny_cnn"]["variants"].contains("cpu"));

  auto usage = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--package", pkg.string(), "-o", (dir / "o").string()});
  CHECK(usage.exitCode == 2);
}

TEST_CASE("broken packages are refused by ctxinspect and ctxrun, naming the file and the key", "[package][e2e][bad-input]") {
  TempDir dir("package_broken");
  const fs::path pkg = dir / "pkg";
  runToolOk(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", "npu-sim,cpu", "--package", pkg.string()});
  const json good = readJson(pkg / "manifest.json");
  auto writeManifest = [&](const json& m) { std::ofstream(pkg / "manifest.json") << m.dump(2); };
  auto expectRefused = [&](const std::string& what) {
    for (const char* tool : {CTXKIT_CTXINSPECT, CTXKIT_CTXRUN}) {
      auto r = runTool(tool, {pkg.string()});
      INFO(tool << "\n" << r.out << r.err);
      CHECK(r.exitCode == 1);
      CHECK(r.err.find(what) != std::string::npos);
    }
  };
  SECTION("a missing key") {
    json m = good;
    m["components"]["tiny_cnn"]["variants"]["cpu"]["executor_info"]["ort"].erase("model_file");
    writeManifest(m);
    expectRefused("manifest.json: components.tiny_cnn.variants.cpu.executor_info.ort.model_file: required key");
  }
  SECTION("a path escaping the package") {
    json m = good;
    m["components"]["tiny_cnn"]["variants"]["cpu"]["variant_directory"] = "../pkg/tiny_cnn/cpu";
    writeManifest(m);
    expectRefused("variant_directory: '../pkg/tiny_cnn/cpu' escapes the package");
  }
  SECTION("an absolute path") {
    json m = good;
    m["components"]["tiny_cnn"]["variants"]["cpu"]["executor_info"]["ort"]["model_file"] =
        fs::absolute(pkg / "tiny_cnn/cpu/tiny_cnn_ctx.onnx").string();
    writeManifest(m);
    expectRefused("is an absolute path");
  }
  SECTION("a missing file") {
    fs::remove(pkg / "tiny_cnn/npu-sim/tiny_cnn_ctx.onnx");
    expectRefused("components.tiny_cnn.variants.npu-sim.executor_info.ort.model_file: 'tiny_cnn_ctx.onnx'");
  }
  SECTION("a changed shared asset") {
    fs::path asset;
    for (const auto& e : fs::directory_iterator(pkg / "shared_assets")) asset = e.path();
    std::ofstream(asset / "tiny_cnn.onnx", std::ios::app) << "x";
    auto r = runTool(CTXKIT_CTXINSPECT, {pkg.string(), "--verify"});
    INFO(r.out << r.err);
    CHECK(r.exitCode == 1);
    CHECK(r.out.find(asset.filename().string()) != std::string::npos);
    CHECK(r.out.find("its name says") != std::string::npos);
  }
  SECTION("--device names no variant") {
    auto r = runTool(CTXKIT_CTXRUN, {pkg.string(), "--device", "gpu"});
    CHECK(r.exitCode == 2);
    CHECK(r.err.find("no variant or device 'gpu'") != std::string::npos);
  }
  SECTION("--device on a model that is not a package") {
    auto r = runTool(CTXKIT_CTXRUN, {(pkg / "tiny_cnn/cpu/tiny_cnn_ctx.onnx").string(), "--device", "cpu"});
    CHECK(r.exitCode == 2);
    CHECK(r.err.find("not one (no manifest.json)") != std::string::npos);
  }
}
