// ctxinspect's text and --json reports, pinned byte for byte on deployments our own ctxgen makes from the bundled
// samples: a shared prefill/decode pair (with and without --verify) and a deployment whose .bin is missing. Paths
// are printed relative to the test's folder. After an intended change to the report or to what ctxgen writes, run
// with CTXKIT_UPDATE_GOLDEN=1 to rewrite tests/inspect/golden/ and review the diff.
#include "e2e/tool_runner.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

using namespace ctxkit::testing;
namespace fs = std::filesystem;

namespace {

const fs::path kGoldenDir = CTXKIT_INSPECT_GOLDEN_DIR;

// Every occurrence of `from` in `text` replaced by `to`.
std::string replaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// ctxinspect ARGS (paths relative to `dir`), its exit code, stdout and stderr as one text with `dir` removed.
std::string inspect(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> full;
  for (const auto& a : args) full.push_back(a.rfind("--", 0) == 0 ? a : (dir / a).string());
  ToolResult r = runTool(CTXKIT_CTXINSPECT, full);
  std::string text = "$ ctxinspect";
  for (const auto& a : args) text += " " + a;
  text += "\n" + r.out + "[exit " + std::to_string(r.exitCode) + "]\n" + r.err;
  return replaceAll(text, dir.path().string() + "/", "");
}

void matchGolden(const std::string& name, const std::string& text) {
  const fs::path golden = kGoldenDir / name;
  const char* update = std::getenv("CTXKIT_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(golden, std::ios::binary) << text;
    WARN("rewrote " << golden.string());
    return;
  }
  INFO("golden file " << golden.string() << " (CTXKIT_UPDATE_GOLDEN=1 rewrites it after an intended change)");
  REQUIRE(fs::exists(golden));
  CHECK(text == readText(golden));
}

void ctxgen(const std::vector<std::string>& args) { runToolOk(CTXKIT_CTXGEN, args); }

}  // namespace

TEST_CASE("ctxinspect's report on a shared prefill/decode deployment is pinned, text and JSON", "[inspect][golden]") {
  TempDir dir("inspect_golden_shared");
  ctxgen({sample("tiny_prefill") + "," + sample("tiny_decode"), "--share", "-o", (dir / "out").string(), "-q"});
  matchGolden("shared.txt", inspect(dir, {"out/tiny_prefill_ctx.onnx", "out/tiny_decode_ctx.onnx"}));
  matchGolden("shared.json", inspect(dir, {"out/tiny_prefill_ctx.onnx", "out/tiny_decode_ctx.onnx", "--json"}));
  matchGolden("shared_verify.txt",
              inspect(dir, {"out/tiny_prefill_ctx.onnx", "out/tiny_decode_ctx.onnx", "--verify"}));
}

TEST_CASE("ctxinspect's report on a deployment missing its .bin is pinned, text and JSON", "[inspect][golden]") {
  TempDir dir("inspect_golden_missing");
  ctxgen({sample("tiny_cnn"), "--target", "cpu", "-o", (dir / "cnn").string(), "-q"});
  fs::remove(dir / "cnn/tiny_cnn_ctxkit.bin");
  matchGolden("missing_bin.txt", inspect(dir, {"cnn/tiny_cnn_ctx.onnx"}));
  matchGolden("missing_bin.json", inspect(dir, {"cnn/tiny_cnn_ctx.onnx", "--json"}));
}
