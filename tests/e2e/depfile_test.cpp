// End-to-end: ctxgen --depfile names every file the outputs depend on (models, external data, target file).
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <set>

using namespace ctxkit;
using ctxkit::testing::readText;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kSamples = CTXKIT_SAMPLES_DIR;

struct Depfile {
  std::string firstTarget;
  std::set<std::string> targets;
  std::set<std::string> deps;
};

// Reads one Make rule the way Ninja and Make do: `\ `, `\#`, `\\` and `$$` are escapes, and a path is compared in
// its canonical form, since ctxgen may name external data by its resolved path.
Depfile parseDepfile(const std::string& text) {
  Depfile d;
  bool afterColon = false;
  std::string word;
  auto flush = [&] {
    if (word.empty()) return;
    std::string path = fs::weakly_canonical(word).string();
    if (!afterColon && d.targets.empty()) d.firstTarget = path;
    (afterColon ? d.deps : d.targets).insert(path);
    word.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == ' ' || text[i + 1] == '#' || text[i + 1] == '\\')) {
      word += text[++i];
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      word += text[++i];
    } else if (c == ':' && !afterColon && (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\n')) {
      flush();
      afterColon = true;
    } else if (c == ' ' || c == '\n') {
      flush();
    } else {
      word += c;
    }
  }
  flush();
  return d;
}

std::string canon(const fs::path& p) { return fs::weakly_canonical(p).string(); }

}  // namespace

TEST_CASE("the depfile lists every model, its external data and the target file, and every file written", "[e2e][depfile]") {
  TempDir dir("depfile");
  // Paths with a space and a '#', so the escapes are exercised too.
  fs::path models = dir / "models with space#1";
  fs::create_directories(models);
  auto cnn = onnx_io::loadModel(kSamples / "tiny_cnn.onnx");
  REQUIRE(cnn);
  fs::path m = models / "cnn.onnx";
  REQUIRE(onnx_io::saveModelWithExternalData(*cnn, m, "cnn weights.data", 0));
  REQUIRE(fs::exists(models / "cnn weights.data"));
  fs::path other = models / "prefill.onnx";
  fs::copy_file(kSamples / "tiny_prefill.onnx", other);
  fs::path target = dir / "my target.json";
  std::ofstream(target) << R"({"name":"nogemm","element_types":["float32"],"ops":[{"op":"Conv"},{"op":"BatchNormalization"},{"op":"Relu"},{"op":"MaxPool"}]})";

  fs::path out = dir / "out";
  fs::path depfile = dir / "deps.d";
  auto r = runTool(CTXKIT_CTXGEN, {m.string(), other.string(), "--share", "--target", target.string(), "-o", out.string(),
                                   "--depfile", depfile.string()});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  auto text = readText(depfile);
  INFO(text);
  auto d = parseDepfile(text);
  CHECK(d.deps == std::set<std::string>{canon(m), canon(models / "cnn weights.data"), canon(other), canon(target)});
  std::set<std::string> written;
  for (const auto& e : fs::directory_iterator(out)) written.insert(canon(e.path()));
  CHECK(written.size() == 3);  // two _ctx.onnx and one shared .bin
  CHECK(d.targets == written);
  // Ninja checks the first target against the build edge's first output: ctxkit_compile declares this one first.
  CHECK(d.firstTarget == canon(out / "cnn_ctx.onnx"));
}

TEST_CASE("a built-in target is no file dependency, even beside a file of that name", "[e2e][depfile]") {
  TempDir dir("depfile_builtin");
  fs::path m = dir / "cnn.onnx";
  fs::copy_file(kSamples / "tiny_cnn.onnx", m);
  // loadTarget prefers the built-in, so a file called `cpu` is not read and must not be listed.
  std::ofstream(dir / "cpu") << "not json";
  fs::path depfile = dir / "deps.d";
  fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  auto r = runTool(CTXKIT_CTXGEN, {m.string(), "--target", "cpu", "-o", (dir / "out").string(), "--depfile", depfile.string()});
  fs::current_path(cwd);
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  auto d = parseDepfile(readText(depfile));
  CHECK(d.deps == std::set<std::string>{canon(m)});
  CHECK(d.targets == std::set<std::string>{canon(dir / "out" / "cnn_ctx.onnx"), canon(dir / "out" / "cnn_ctxkit.bin")});
}
