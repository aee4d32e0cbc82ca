// End-to-end: what a hostile file can do to the tools (docs/bad-input.md). ctxrun never writes over its inputs or
// expected outputs; no tool reads anything but a regular file (a FIFO would hang it); a long model stem compiles; a
// plain model that ctxgen refuses for its structure is refused by ctxrun too.
#include "../common/graph_builder.h"
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>

using namespace ctxkit;
using ctxkit::testing::kSamples;
using ctxkit::testing::readText;
using ctxkit::testing::runTool;
using ctxkit::testing::sampleData;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

ino_t inodeOf(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_ino;
}

// tiny_cnn's test inputs in `dir`, and its output as .npy with every value wrong by a mile.
void writeWrongExpectations(const TempDir& scratch, const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(fs::path(sampleData("tiny_cnn")) / "input_0.pb", dir / "input_0.pb");
  const fs::path right = scratch / "right";
  auto r = runTool(CTXKIT_CTXRUN, {(kSamples / "tiny_cnn.onnx").string(), "--inputs", sampleData("tiny_cnn"),
                                   "--output-dir", right.string()});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  std::string npy = readText(right / "output_0.npy");
  REQUIRE(npy.size() > 128);
  for (size_t i = npy.size() - 16; i < npy.size(); ++i) npy[i] = '\x7f';  // the last floats become huge
  std::ofstream(dir / "output_0.npy", std::ios::binary) << npy;
}

}  // namespace

TEST_CASE("ctxrun never writes its outputs over its expected outputs or its inputs", "[e2e][inputs][ctxrun]") {
  TempDir dir("ctxrun_guard");
  const fs::path data = dir / "data";
  writeWrongExpectations(dir, data);
  const std::string model = (kSamples / "tiny_cnn.onnx").string();
  const std::string expectedBefore = readText(data / "output_0.npy");
  const ino_t expectedInode = inodeOf(data / "output_0.npy");

  // The wrong expectations are caught when nothing writes over them.
  auto honest = runTool(CTXKIT_CTXRUN, {model, "--inputs", data.string(), "--expected", data.string()});
  INFO(honest.out << honest.err);
  CHECK(honest.exitCode == 1);
  CHECK(honest.out.find("MISMATCH") != std::string::npos);

  SECTION("--output-dir on the --expected folder") {
    auto r = runTool(CTXKIT_CTXRUN,
                     {model, "--inputs", data.string(), "--expected", data.string(), "--output-dir", data.string()});
    INFO(r.out << r.err);
    CHECK(r.exitCode == 2);
    CHECK(r.err.find("never overwritten") != std::string::npos);
    CHECK(r.err.find("saved output 0 '" + (data / "output_0.npy").string()) != std::string::npos);
    CHECK(r.err.find("expected output 0 '" + (data / "output_0.npy").string()) != std::string::npos);
    CHECK(r.out.find("match") == std::string::npos);
  }
  SECTION("--save-pb writing over an output_0.pb the run reads") {
    const fs::path pbData = dir / "pbdata";
    fs::create_directories(pbData);
    for (const char* f : {"input_0.pb", "output_0.pb"})
      fs::copy_file(fs::path(sampleData("tiny_cnn")) / f, pbData / f);
    const std::string before = readText(pbData / "output_0.pb");
    const ino_t inode = inodeOf(pbData / "output_0.pb");
    auto r = runTool(CTXKIT_CTXRUN, {model, "--inputs", pbData.string(), "--expected", pbData.string(), "--output-dir",
                                     pbData.string(), "--save-pb"});
    INFO(r.out << r.err);
    CHECK(r.exitCode == 2);
    CHECK(r.err.find("output_0.pb") != std::string::npos);
    CHECK(readText(pbData / "output_0.pb") == before);
    CHECK(inodeOf(pbData / "output_0.pb") == inode);
    CHECK(!fs::exists(pbData / "output_0.npy"));  // refused before anything was written
  }
  SECTION("an output file that is a hard link to an expected output") {
    const fs::path out = dir / "out";
    fs::create_directories(out);
    fs::create_hard_link(data / "output_0.npy", out / "output_0.npy");
    auto r = runTool(CTXKIT_CTXRUN,
                     {model, "--inputs", data.string(), "--expected", data.string(), "--output-dir", out.string()});
    INFO(r.out << r.err);
    CHECK(r.exitCode == 2);
    CHECK(r.err.find("expected output 0") != std::string::npos);
  }
  SECTION("--save-inputs into the --inputs folder") {
    const fs::path npyInputs = dir / "npyinputs";
    auto save = runTool(CTXKIT_CTXRUN, {model, "--inputs", data.string(), "--save-inputs", npyInputs.string()});
    INFO(save.out << save.err);
    REQUIRE(save.exitCode == 0);
    const std::string before = readText(npyInputs / "input_0.npy");
    const ino_t inode = inodeOf(npyInputs / "input_0.npy");
    auto r = runTool(CTXKIT_CTXRUN, {model, "--inputs", npyInputs.string(), "--save-inputs", npyInputs.string()});
    INFO(r.out << r.err);
    CHECK(r.exitCode == 2);
    CHECK(r.err.find("saved input 0 '" + (npyInputs / "input_0.npy").string()) != std::string::npos);
    CHECK(r.err.find("would overwrite input 0 ('image') '" + (npyInputs / "input_0.npy").string()) != std::string::npos);
    CHECK(readText(npyInputs / "input_0.npy") == before);
    CHECK(inodeOf(npyInputs / "input_0.npy") == inode);
  }
  CHECK(readText(data / "output_0.npy") == expectedBefore);
  CHECK(inodeOf(data / "output_0.npy") == expectedInode);
}

TEST_CASE("ctxrun still writes outputs and inputs beside other files", "[e2e][inputs][ctxrun]") {
  TempDir dir("ctxrun_guard_ok");
  const std::string model = (kSamples / "tiny_cnn.onnx").string();
  // The test data folder as output folder: output_0.npy is no file the run reads (it reads output_0.pb).
  const fs::path data = dir / "data";
  fs::copy(sampleData("tiny_cnn"), data);
  auto r = runTool(CTXKIT_CTXRUN, {model, "--inputs", data.string(), "--expected", data.string(), "--output-dir",
                                   data.string(), "--save-inputs", data.string()});
  INFO(r.out << r.err);
  CHECK(r.exitCode == 0);
  CHECK(fs::exists(data / "output_0.npy"));
  CHECK(fs::exists(data / "input_0.npy"));
}

namespace {

// A FIFO no one writes to: opening it for reading would wait forever.
fs::path makeFifo(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
  REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
  return path;
}

// Runs a tool under coreutils' timeout: a tool that blocks on a FIFO is killed after 30 s and fails the test (exit
// code 124) instead of hanging it.
constexpr int kTimedOut = 124;
testing::ToolResult runPatiently(const std::string& tool, std::vector<std::string> args) {
  args.insert(args.begin(), {"-k", "5", "30", tool});
  return runTool("timeout", args);
}

void requireNotRegular(const testing::ToolResult& r, const fs::path& fifo) {
  INFO(r.out << r.err);
  CHECK(r.exitCode != kTimedOut);
  CHECK(r.exitCode != 0);
  // ctxinspect lists the problem in its report (stdout); the other tools say it on stderr
  const std::string said = r.out + r.err;
  CHECK(said.find(fifo.filename().string() + "' is not a regular file") != std::string::npos);
}

// tiny_cnn compiled into `out` (m_ctx.onnx + m_ctxkit.bin), with `extra` ctxgen options.
void compileCnn(const fs::path& out, std::vector<std::string> extra = {}) {
  fs::create_directories(out);
  fs::copy_file(kSamples / "tiny_cnn.onnx", out / "m.onnx");
  std::vector<std::string> args{(out / "m.onnx").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  ctxkit::testing::runToolOk(CTXKIT_CTXGEN, args);
}

}  // namespace

TEST_CASE("a FIFO in any role is refused by name, never opened for reading", "[e2e][inputs][fifo]") {
  TempDir dir("fifo");
  const std::string cnn = (kSamples / "tiny_cnn.onnx").string();
  SECTION("the model, for each tool") {
    const fs::path fifo = makeFifo(dir / "m.onnx");
    requireNotRegular(runPatiently(CTXKIT_CTXGEN, {fifo.string(), "-o", (dir / "out").string()}), fifo);
    requireNotRegular(runPatiently(CTXKIT_CTXRUN, {fifo.string()}), fifo);
    requireNotRegular(runPatiently(CTXKIT_CTXINSPECT, {fifo.string()}), fifo);
  }
  SECTION("the target file") {
    const fs::path fifo = makeFifo(dir / "target.json");
    requireNotRegular(runPatiently(CTXKIT_CTXGEN, {cnn, "-o", (dir / "out").string(), "--target", fifo.string()}),
                      fifo);
  }
  SECTION("the context binary") {
    compileCnn(dir / "c");
    const fs::path fifo = makeFifo(dir / "c" / "m_ctxkit.bin");
    requireNotRegular(runPatiently(CTXKIT_CTXRUN, {(dir / "c" / "m_ctx.onnx").string()}), fifo);
    requireNotRegular(runPatiently(CTXKIT_CTXINSPECT, {(dir / "c" / "m_ctx.onnx").string(), "--verify"}), fifo);
  }
  SECTION("external data") {
    auto source = onnx_io::loadModel(cnn);
    REQUIRE(source);
    fs::create_directories(dir / "x");
    REQUIRE(onnx_io::saveModelWithExternalData(*source, dir / "x" / "m.onnx", "w.data", 0));
    const fs::path fifo = makeFifo(dir / "x" / "w.data");
    requireNotRegular(runPatiently(CTXKIT_CTXGEN, {(dir / "x" / "m.onnx").string(), "-o", (dir / "out").string()}),
                      fifo);
    requireNotRegular(runPatiently(CTXKIT_CTXRUN, {(dir / "x" / "m.onnx").string()}), fifo);
  }
  SECTION("an input and an expected output") {
    const fs::path data = dir / "data";
    fs::create_directories(data);
    const fs::path input = makeFifo(data / "input_0.npy");
    requireNotRegular(runPatiently(CTXKIT_CTXRUN, {cnn, "--inputs", data.string()}), input);
    const fs::path expected = makeFifo(data / "output_0.npy");
    requireNotRegular(runPatiently(CTXKIT_CTXRUN, {cnn, "--expected", data.string()}), expected);
    fs::remove(data / "output_0.npy");
    const fs::path expectedPb = makeFifo(data / "output_0.pb");
    requireNotRegular(runPatiently(CTXKIT_CTXRUN, {cnn, "--expected", data.string()}), expectedPb);
  }
  SECTION("the source model of a weightless context") {
    compileCnn(dir / "w", {"--weightless"});
    const fs::path fifo = makeFifo(dir / "source.onnx");
    requireNotRegular(
        runPatiently(CTXKIT_CTXRUN, {(dir / "w" / "m_ctx.onnx").string(), "--source-model", fifo.string()}),
        fifo);
    // and the one beside the model that the context names
    makeFifo(dir / "w" / "m.onnx");
    requireNotRegular(runPatiently(CTXKIT_CTXRUN, {(dir / "w" / "m_ctx.onnx").string()}), dir / "w" / "m.onnx");
  }
}

TEST_CASE("a model whose stem is 240 characters compiles, and its outputs load", "[e2e][inputs][names]") {
  TempDir dir("long_stem");
  const std::string stem(240, 's');
  fs::copy_file(kSamples / "tiny_cnn.onnx", dir / (stem + ".onnx"));
  auto r = runTool(CTXKIT_CTXGEN, {(dir / (stem + ".onnx")).string()});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  const fs::path compiled = dir / (stem + "_ctx.onnx");
  CHECK(fs::exists(compiled));
  auto run = runTool(CTXKIT_CTXRUN,
                     {compiled.string(), "--inputs", sampleData("tiny_cnn"), "--expected", sampleData("tiny_cnn")});
  INFO(run.out << run.err);
  CHECK(run.exitCode == 0);
  // A second compile replaces the outputs through temporaries of the same long names.
  auto again = runTool(CTXKIT_CTXGEN, {(dir / (stem + ".onnx")).string(), "--force"});
  INFO(again.out << again.err);
  CHECK(again.exitCode == 0);
}

namespace {

// x -> Relu -> y, then `extra` nodes; inputs x (and `moreInputs`), one initializer w.
fs::path writeStructureModel(const TempDir& dir, const std::string& stem, std::vector<ir::Node> extra,
                             std::vector<ir::ValueInfo> moreInputs = {}) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  m.graph.name = stem;
  m.graph.inputs = {testing::floatValue("x", testing::dims({1, 4}))};
  for (auto& v : moreInputs) m.graph.inputs.push_back(std::move(v));
  m.graph.initializers.push_back(testing::floatInit("w", {1, 4}));
  m.graph.nodes.push_back(testing::node("Relu", {"x"}, {"y"}));
  for (auto& n : extra) m.graph.nodes.push_back(std::move(n));
  m.graph.outputs = {testing::floatValue("y", testing::dims({1, 4}))};
  const fs::path p = dir / (stem + ".onnx");
  REQUIRE(onnx_io::saveModel(m, p));
  return p;
}

}  // namespace

TEST_CASE("ctxrun refuses a plain model's structure as ctxgen does", "[e2e][inputs][structure]") {
  TempDir dir("structure");
  struct Case {
    std::string stem;
    std::vector<ir::Node> extra;
    std::vector<ir::ValueInfo> moreInputs;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"twice", {testing::node("Sigmoid", {"x"}, {"y"})}, {}, "value 'y' is produced twice"},
      {"input_twice", {}, {testing::floatValue("x", testing::dims({1, 4}))}, "graph input 'x' is listed twice"},
      {"writes_input",
       {testing::node("Sigmoid", {"y"}, {"x"})},
       {},
       "writes 'x', which is already a graph input or initializer"},
      {"writes_initializer",
       {testing::node("Sigmoid", {"y"}, {"w"})},
       {},
       "writes 'w', which is already a graph input or initializer"},
  };
  for (const auto& c : cases) {
    INFO(c.stem);
    const fs::path m = writeStructureModel(dir, c.stem, c.extra, c.moreInputs);
    auto gen = runTool(CTXKIT_CTXGEN, {m.string(), "-o", (dir / "out").string()});
    INFO(gen.out << gen.err);
    CHECK(gen.exitCode == 1);
    CHECK(gen.err.find(c.message) != std::string::npos);
    auto run = runTool(CTXKIT_CTXRUN, {m.string()});
    INFO(run.out << run.err);
    CHECK(run.exitCode == 1);
    CHECK(run.err.find(c.message) != std::string::npos);
    CHECK(run.err.find(m.filename().string()) != std::string::npos);
  }
}
