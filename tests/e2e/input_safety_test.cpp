// End-to-end: ctxgen never overwrites an input and never writes two outputs to one file (docs/bad-input.md#outputs).
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <set>

using namespace ctxkit;
using ctxkit::testing::readText;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
using ctxkit::testing::kSamples;
using ctxkit::testing::sampleData;
namespace fs = std::filesystem;

namespace {

// A private copy of a sample model, so a test may try to destroy it.
fs::path copySample(const TempDir& dir, const std::string& stem, const std::string& as) {
  fs::path to = dir / (as + ".onnx");
  fs::copy_file(kSamples / (stem + ".onnx"), to, fs::copy_options::overwrite_existing);
  return to;
}

// A target without Gemm, so tiny_cnn keeps fallback nodes with initializers.
fs::path writeNoGemmTarget(const TempDir& dir) {
  fs::path p = dir / "nogemm.json";
  std::ofstream(p) << R"({"name":"nogemm","element_types":["float32"],"ops":[{"op":"Conv"},{"op":"BatchNormalization"},{"op":"Relu"},{"op":"MaxPool"}]})";
  return p;
}

// The refusal: usage exit code, both files named, the input byte-identical afterwards.
void requireRefused(const ctxkit::testing::ToolResult& r, const fs::path& input, const std::string& before,
                    const std::string& outputName) {
  INFO(r.out << r.err);
  CHECK(r.exitCode == 2);
  CHECK(r.err.find("never overwritten") != std::string::npos);
  CHECK(r.err.find(input.filename().string()) != std::string::npos);
  CHECK(r.err.find(outputName) != std::string::npos);
  CHECK(readText(input) == before);
}

}  // namespace

TEST_CASE("ep.context_file_path naming the input model is refused, even with --force", "[e2e][inputs]") {
  TempDir dir("in_ctxpath");
  fs::path m = copySample(dir, "tiny_cnn", "m");
  std::string before = readText(m);
  auto r = runTool(CTXKIT_CTXGEN, {m.string(), "-C", "ep.context_file_path=" + m.string(), "--force"});
  requireRefused(r, m, before, "output model");
  // Spelled differently (through ./ and ..), it is still the same file.
  std::string roundabout = (dir.path() / "." / ".." / dir.path().filename() / "m.onnx").string();
  auto r2 = runTool(CTXKIT_CTXGEN, {m.string(), "-C", "ep.context_file_path=" + roundabout, "--force"});
  requireRefused(r2, m, before, "output model");
}

TEST_CASE("an external initializers file naming the input model is refused", "[e2e][inputs]") {
  TempDir dir("in_extfile");
  fs::path m = copySample(dir, "tiny_cnn", "m");
  std::string before = readText(m);
  auto r = runTool(CTXKIT_CTXGEN, {m.string(), "-o", dir.path().string(), "--target", writeNoGemmTarget(dir).string(),
                                   "--external-initializers-file", "m.onnx", "--force"});
  requireRefused(r, m, before, "external initializers file");
  CHECK(!fs::exists(dir / "m_ctx.onnx"));
}

TEST_CASE("an output that is a hard link or symlink to an input is refused", "[e2e][inputs]") {
  TempDir dir("in_links");
  fs::path m = copySample(dir, "tiny_cnn", "m");
  std::string before = readText(m);
  SECTION("hard link under the output name") {
    fs::create_hard_link(m, dir / "m_ctx.onnx");
    auto r = runTool(CTXKIT_CTXGEN, {m.string(), "--force"});
    requireRefused(r, m, before, "m_ctx.onnx");
  }
  SECTION("symlink under the context binary's name") {
    fs::create_symlink(m, dir / "m_ctxkit.bin");
    auto r = runTool(CTXKIT_CTXGEN, {m.string(), "--force"});
    requireRefused(r, m, before, "context binary");
  }
}

TEST_CASE("the depfile and the JSON report never land on an input", "[e2e][inputs]") {
  TempDir dir("in_reports");
  fs::path m = copySample(dir, "tiny_cnn", "m");
  std::string before = readText(m);
  fs::path out = dir / "out";
  requireRefused(runTool(CTXKIT_CTXGEN, {m.string(), "-o", out.string(), "--depfile", m.string(), "--force"}), m, before,
                 "depfile");
  requireRefused(runTool(CTXKIT_CTXGEN, {m.string(), "-o", out.string(), "--json", m.string(), "--force"}), m, before,
                 "JSON report");
  CHECK(!fs::exists(out / "m_ctx.onnx"));
}

TEST_CASE("an output on the input's external data file is refused", "[e2e][inputs]") {
  TempDir dir("in_extdata");
  // A model whose weights live in `w.data` beside it.
  auto source = onnx_io::loadModel(kSamples / "tiny_cnn.onnx");
  REQUIRE(source);
  fs::path m = dir / "m.onnx";
  REQUIRE(onnx_io::saveModelWithExternalData(*source, m, "w.data", 0));
  REQUIRE(fs::exists(dir / "w.data"));
  std::string modelBefore = readText(m), dataBefore = readText(dir / "w.data");
  auto r = runTool(CTXKIT_CTXGEN, {m.string(), "--target", writeNoGemmTarget(dir).string(), "--external-initializers-file",
                                   "w.data", "--force"});
  requireRefused(r, dir / "w.data", dataBefore, "external data of");
  CHECK(readText(m) == modelBefore);
  // The same model still compiles with another name, and runs.
  auto ok = runTool(CTXKIT_CTXGEN, {m.string(), "--target", writeNoGemmTarget(dir).string(), "--external-initializers-file",
                                    "fallback.data"});
  INFO(ok.out << ok.err);
  REQUIRE(ok.exitCode == 0);
  auto run = runTool(CTXKIT_CTXRUN, {(dir / "m_ctx.onnx").string(), "--inputs", sampleData("tiny_cnn"), "--expected",
                                     sampleData("tiny_cnn")});
  INFO(run.out << run.err);
  CHECK(run.exitCode == 0);
  CHECK(readText(dir / "w.data") == dataBefore);
}

TEST_CASE("two models given one external initializers file name get one file each", "[e2e][inputs]") {
  TempDir dir("two_ext");
  fs::path a = copySample(dir, "tiny_cnn", "a");
  fs::path b = copySample(dir, "tiny_cnn", "b");
  fs::path target = writeNoGemmTarget(dir);
  for (bool share : {false, true}) {
    fs::path out = dir / (share ? "shared" : "separate");
    std::vector<std::string> args{a.string() + "," + b.string(), "--target", target.string(), "-o", out.string(),
                                  "--external-initializers-file", "w.data"};
    if (share) args.push_back("--share");
    auto r = runTool(CTXKIT_CTXGEN, args);
    INFO(r.out << r.err);
    REQUIRE(r.exitCode == 0);
    CHECK(fs::exists(out / "a_w.data"));
    CHECK(fs::exists(out / "b_w.data"));
    CHECK(!fs::exists(out / "w.data"));
    for (const char* stem : {"a", "b"}) {
      fs::path model = out / (std::string(stem) + "_ctx.onnx");
      auto loaded = onnx_io::loadModel(model);
      REQUIRE(loaded);
      auto run = runTool(CTXKIT_CTXRUN, {model.string(), "--inputs", sampleData("tiny_cnn"), "--expected",
                                         sampleData("tiny_cnn")});
      INFO(run.out << run.err);
      CHECK(run.exitCode == 0);
      auto inspect = runTool(CTXKIT_CTXINSPECT, {model.string(), "--verify"});
      INFO(inspect.out << inspect.err);
      CHECK(inspect.exitCode == 0);
      CHECK(inspect.out.find(std::string(stem) + "_w.data") != std::string::npos);
    }
  }
}

TEST_CASE("two models that would write one output are refused before anything is written", "[e2e][inputs]") {
  TempDir dir("same_stem");
  fs::create_directories(dir / "x");
  fs::create_directories(dir / "y");
  fs::copy_file(kSamples / "tiny_cnn.onnx", dir / "x" / "m.onnx");
  fs::copy_file(kSamples / "tiny_cnn.onnx", dir / "y" / "m.onnx");
  fs::path out = dir / "out";
  auto r = runTool(CTXKIT_CTXGEN, {(dir / "x" / "m.onnx").string(), (dir / "y" / "m.onnx").string(), "-o", out.string()});
  INFO(r.out << r.err);
  CHECK(r.exitCode == 2);
  CHECK(r.err.find("m_ctx.onnx") != std::string::npos);
  CHECK((!fs::exists(out) || fs::is_empty(out)));
}
