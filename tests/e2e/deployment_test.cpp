// End-to-end: a deployment is one unit (issue 24): concurrent runs never mix their files, a failed --force run leaves
// the earlier deployment, reports never replace devices or links, and ctxinspect --verify refuses what ctxrun refuses.
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <thread>

using namespace ctxkit;
using ctxkit::testing::readText;
using ctxkit::testing::runTool;
using ctxkit::testing::sampleData;
using ctxkit::testing::TempDir;
using ctxkit::testing::ToolResult;
using ctxkit::testing::kSamples;
namespace fs = std::filesystem;

namespace {

// Two different models with one stem, `m`: tiny_cnn in dir/a, tiny_prefill in dir/b.
struct TwoModels {
  fs::path a, b;
  std::string dataA = sampleData("tiny_cnn"), dataB = sampleData("tiny_prefill");
};

TwoModels twoModelsOneStem(const TempDir& dir) {
  TwoModels t;
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  t.a = dir / "a" / "m.onnx";
  t.b = dir / "b" / "m.onnx";
  fs::copy_file(kSamples / "tiny_cnn.onnx", t.a);
  fs::copy_file(kSamples / "tiny_prefill.onnx", t.b);
  return t;
}

ToolResult compile(const fs::path& model, const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{model.string(), "-o", out.string(), "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  return runTool(CTXKIT_CTXGEN, args);
}

ToolResult runWith(const fs::path& model, const std::string& data) {
  return runTool(CTXKIT_CTXRUN, {model.string(), "--inputs", data, "--expected", data});
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The message a tool printed as its error (ctxrun) or as a problem of its report (ctxinspect): `phrase` is in both,
// and ctxinspect lists the very message ctxrun printed.
void requireSameRefusal(const fs::path& model, const std::string& phrase) {
  auto run = runTool(CTXKIT_CTXRUN, {model.string()});
  auto verify = runTool(CTXKIT_CTXINSPECT, {model.string(), "--verify"});
  INFO("ctxrun: " << run.out << run.err);
  INFO("ctxinspect: " << verify.out << verify.err);
  CHECK(run.exitCode == 1);
  CHECK(verify.exitCode == 1);
  CHECK(run.err.find(phrase) != std::string::npos);
  CHECK(verify.out.find(phrase) != std::string::npos);
  const std::string prefix = "error: ";
  auto at = run.err.find(prefix);
  REQUIRE(at != std::string::npos);
  std::string message = run.err.substr(at + prefix.size());
  message = message.substr(0, message.find('\n'));
  CHECK(verify.out.find(message) != std::string::npos);
}

// Loads `from`, lets `edit` change it and writes it to `to`.
template <typename Edit> void editModel(const fs::path& from, const fs::path& to, Edit&& edit) {
  auto model = onnx_io::loadModel(from);
  REQUIRE(model);
  edit(*model);
  REQUIRE(onnx_io::saveModel(*model, to));
}
template <typename Edit> void editModel(const fs::path& path, Edit&& edit) { editModel(path, path, edit); }

ir::Node& firstEpContext(ir::Model& m) {
  for (auto& n : m.graph.nodes)
    if (n.opType == "EPContext") return n;
  FAIL("no EPContext node");
  throw;
}

}  // namespace

TEST_CASE("concurrent ctxgen runs into one folder leave exactly one run's whole deployment", "[e2e][deployment]") {
  TempDir dir("concurrent");
  TwoModels t = twoModelsOneStem(dir);
  // Each run's deployment, made alone (outputs are deterministic).
  REQUIRE(compile(t.a, dir / "refA").exitCode == 0);
  REQUIRE(compile(t.b, dir / "refB").exitCode == 0);
  const std::string modelA = readText(dir / "refA" / "m_ctx.onnx"), binA = readText(dir / "refA" / "m_ctxkit.bin");
  const std::string modelB = readText(dir / "refB" / "m_ctx.onnx"), binB = readText(dir / "refB" / "m_ctxkit.bin");
  REQUIRE(binA != binB);
  const std::vector<std::string> expected{"m_ctx.onnx", "m_ctxkit.bin"};
  for (bool force : {true, false})
    for (int pair = 0; pair < 12; ++pair) {
      fs::path out = dir / fmt::format("out_{}_{}", force, pair);
      fs::create_directories(out);
      std::vector<std::string> extra;
      if (force) extra.push_back("--force");
      ToolResult ra, rb;
      std::thread first([&] { ra = compile(t.a, out, extra); });
      std::thread second([&] { rb = compile(t.b, out, extra); });
      first.join();
      second.join();
      INFO("pair " << pair << (force ? " with --force" : "") << "\nA: " << ra.err << "\nB: " << rb.err);
      if (force) {
        CHECK(ra.exitCode == 0);
        CHECK(rb.exitCode == 0);
      } else {
        // One run wins; the other finds the outputs there and writes nothing.
        CHECK(((ra.exitCode == 0) != (rb.exitCode == 0)));
        CHECK((ra.exitCode == 0 || ra.err.find("already exists") != std::string::npos));
        CHECK((rb.exitCode == 0 || rb.err.find("already exists") != std::string::npos));
      }
      CHECK(listing(out) == expected);  // no temporary file left behind either
      const std::string model = readText(out / "m_ctx.onnx"), bin = readText(out / "m_ctxkit.bin");
      const bool isA = model == modelA && bin == binA, isB = model == modelB && bin == binB;
      REQUIRE((isA || isB));
      if (!force) CHECK(isA == (ra.exitCode == 0));
      auto run = runWith(out / "m_ctx.onnx", isA ? t.dataA : t.dataB);
      INFO(run.out << run.err);
      CHECK(run.exitCode == 0);
    }
}

TEST_CASE("a folder mixed from two runs is refused by ctxrun and ctxinspect --verify, naming both files",
          "[e2e][deployment]") {
  TempDir dir("mixed");
  TwoModels t = twoModelsOneStem(dir);
  REQUIRE(compile(t.a, dir / "mixed").exitCode == 0);
  REQUIRE(compile(t.b, dir / "refB").exitCode == 0);
  fs::copy_file(dir / "refB" / "m_ctxkit.bin", dir / "mixed" / "m_ctxkit.bin", fs::copy_options::overwrite_existing);
  requireSameRefusal(dir / "mixed" / "m_ctx.onnx", "is not the one this model was written with");
  auto run = runTool(CTXKIT_CTXRUN, {(dir / "mixed" / "m_ctx.onnx").string()});
  CHECK(run.err.find("m_ctx.onnx") != std::string::npos);
  CHECK(run.err.find("m_ctxkit.bin") != std::string::npos);
}

TEST_CASE("a failing --force run leaves the deployment it would have replaced", "[e2e][deployment]") {
  TempDir dir("force_fails");
  TwoModels t = twoModelsOneStem(dir);
  fs::path out = dir / "out";
  REQUIRE(compile(t.a, out).exitCode == 0);
  const std::string model = readText(out / "m_ctx.onnx"), bin = readText(out / "m_ctxkit.bin");
  auto unchanged = [&] {
    CHECK(listing(out) == std::vector<std::string>{"m_ctx.onnx", "m_ctxkit.bin"});
    CHECK(readText(out / "m_ctx.onnx") == model);
    CHECK(readText(out / "m_ctxkit.bin") == bin);
    auto run = runWith(out / "m_ctx.onnx", t.dataA);
    INFO(run.out << run.err);
    CHECK(run.exitCode == 0);
  };
  SECTION("a depfile that cannot be written") {
    auto r = compile(t.b, out, {"--force", "--depfile", (dir / "no such folder" / "m.d").string()});
    INFO(r.err);
    CHECK(r.exitCode == 1);
    CHECK(r.err.find("no such folder") != std::string::npos);
    unchanged();
  }
  SECTION("an external initializers folder that cannot be made") {
    std::ofstream(out / "sub") << "a file where the folder would go";
    auto nogemm = dir / "nogemm.json";
    std::ofstream(nogemm) << R"({"name":"nogemm","element_types":["float32"],"ops":[{"op":"Conv"},{"op":"BatchNormalization"},{"op":"Relu"},{"op":"MaxPool"}]})";
    // A run that writes a .bin (its Conv part) and has fallback initializers (its Gemm) for the folder it cannot make.
    auto r = compile(t.a, out, {"--force", "--target", nogemm.string(), "--external-initializers-file", "sub/w.data"});
    INFO(r.err);
    CHECK(r.exitCode == 1);
    CHECK(r.err.find("sub") != std::string::npos);
    fs::remove(out / "sub");
    unchanged();
  }
}

TEST_CASE("reports go into devices without replacing them, and links are refused and left alone", "[e2e][deployment]") {
  TempDir dir("special");
  fs::path m = dir / "m.onnx";
  fs::copy_file(kSamples / "tiny_cnn.onnx", m);
  auto isCharDevice = [](const fs::path& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
  };
  SECTION("a character device: our own null device first, then /dev/null itself") {
    fs::path null = dir / "null";
    if (::geteuid() == 0) {
      REQUIRE(::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
      auto r = compile(m, dir / "out1", {"--depfile", null.string(), "--json", null.string()});
      INFO(r.err);
      CHECK(r.exitCode == 0);
      REQUIRE(isCharDevice(null));
    }
    auto r = compile(m, dir / "out2", {"--depfile", "/dev/null", "--json", "/dev/null"});
    INFO(r.err);
    CHECK(r.exitCode == 0);
    CHECK(isCharDevice("/dev/null"));
    CHECK(fs::exists(dir / "out2" / "m_ctx.onnx"));
    // A failing run writes its failure report there too, and leaves the device a device.
    auto failed = runTool(CTXKIT_CTXGEN, {(dir / "missing.onnx").string(), "--json", "/dev/null"});
    CHECK(failed.exitCode == 1);
    CHECK(isCharDevice("/dev/null"));
  }
  SECTION("a symbolic link as depfile, JSON report or ep.context_file_path") {
    fs::path real = dir / "real.txt";
    std::ofstream(real) << "keep";
    for (std::string option : {"--depfile", "--json", "-C"}) {
      fs::path link = dir / "link_ctx.onnx";
      fs::create_symlink(real, link);
      std::vector<std::string> args{m.string(), option};
      if (option == "-C") {
        args.push_back("ep.context_file_path=" + link.string());
      } else {
        args.insert(args.end(), {link.string(), "-o", (dir / "out").string()});
      }
      auto r = runTool(CTXKIT_CTXGEN, args);
      INFO(option << ": " << r.err);
      CHECK(r.exitCode != 0);
      CHECK(r.err.find("symbolic link") != std::string::npos);
      CHECK(fs::is_symlink(link));
      CHECK(fs::read_symlink(link) == real);
      CHECK(readText(real) == "keep");
      CHECK(!fs::exists(dir / "out" / "m_ctx.onnx"));
      CHECK(!fs::exists(dir / "link_ctx_ctxkit.bin"));
      fs::remove(link);
    }
  }
  SECTION("a device as ep.context_file_path is refused") {
    // As root, a null device of our own, so that a broken ctxgen could only replace that one.
    fs::path null = "/dev/null";
    if (::geteuid() == 0) {
      null = dir / "null";
      REQUIRE(::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
    }
    auto r = runTool(CTXKIT_CTXGEN, {m.string(), "-C", "ep.context_file_path=" + null.string()});
    INFO(r.err);
    CHECK(r.exitCode != 0);
    CHECK(r.err.find("not a regular file") != std::string::npos);
    CHECK(isCharDevice(null));
    CHECK(!fs::exists(null.string() + "_ctxkit.bin"));
  }
}

TEST_CASE("ctxinspect --verify refuses what ctxrun refuses, for the same reason", "[e2e][deployment][verify]") {
  TempDir dir("verify_as_load");
  fs::path m = dir / "m.onnx";
  fs::copy_file(kSamples / "tiny_cnn.onnx", m);
  fs::path out = dir / "out";
  REQUIRE(compile(m, out).exitCode == 0);
  fs::path model = out / "m_ctx.onnx";
  SECTION("no main_context=1 node") {
    editModel(model, [](ir::Model& mm) { firstEpContext(mm).attrs.set(ir::Attribute::makeInt("main_context", 0)); });
    requireSameRefusal(model, "none has main_context=1");
  }
  SECTION("hardware_architecture other than the context's target") {
    editModel(model, [](ir::Model& mm) {
      firstEpContext(mm).attrs.set(ir::Attribute::makeString("hardware_architecture", "cpu"));
    });
    requireSameRefusal(model, "but the context was compiled for 'npu-sim'");
  }
  SECTION("one graph in two context binaries") {
    fs::copy_file(out / "m_ctxkit.bin", out / "copy_ctxkit.bin");
    editModel(model, [](ir::Model& mm) {
      ir::Node copy = firstEpContext(mm);
      copy.name += "_copy";
      for (auto& o : copy.outputs) o += "_copy";
      copy.attrs.set(ir::Attribute::makeString("ep_cache_context", "copy_ctxkit.bin"));
      mm.graph.nodes.push_back(copy);
    });
    requireSameRefusal(model, "is in both");
  }
}

TEST_CASE("ctxinspect --verify refuses a node that runs another model's graph of a shared binary",
          "[e2e][deployment][verify]") {
  TempDir dir("verify_foreign_graph");
  fs::path a = dir / "a.onnx", b = dir / "b.onnx";
  fs::copy_file(kSamples / "tiny_cnn.onnx", a);
  fs::copy_file(kSamples / "tiny_prefill.onnx", b);
  fs::path out = dir / "out";
  auto r = runTool(CTXKIT_CTXGEN, {a.string() + "," + b.string(), "--share", "-o", out.string()});
  REQUIRE(r.exitCode == 0);
  fs::path model = out / "a_ctx.onnx";
  editModel(model, [](ir::Model& mm) {
    firstEpContext(mm).attrs.set(ir::Attribute::makeString("partition_name", "b_ctxkit_0"));
  });
  requireSameRefusal(model, "b_ctxkit_0");
}

TEST_CASE("what ctxgen cannot write loadably is refused at compile, named", "[e2e][deployment]") {
  TempDir dir("loadable");
  fs::path m = dir / "m.onnx";
  SECTION("a node name longer than a compiled program holds") {
    editModel(kSamples / "tiny_cnn.onnx", m, [](ir::Model& mm) { mm.graph.nodes.front().name = std::string(65537, 'n'); });
    auto r = compile(m, dir / "out");
    INFO(r.err);
    CHECK(r.exitCode == 1);
    CHECK(r.err.find("node 'nnnnnnnn") != std::string::npos);
    CHECK(r.err.find("65537 bytes") != std::string::npos);
    CHECK(!fs::exists(dir / "out" / "m_ctx.onnx"));
  }
  SECTION("a graph output that no node produces") {
    editModel(kSamples / "tiny_cnn.onnx", m, [](ir::Model& mm) {
      ir::ValueInfo ghost = mm.graph.outputs.front();
      ghost.name = "ghost";
      mm.graph.outputs.push_back(ghost);
    });
    auto r = compile(m, dir / "out");
    INFO(r.err);
    CHECK(r.exitCode == 1);
    CHECK(r.err.find("graph output 'ghost' is produced by no node") != std::string::npos);
    CHECK(!fs::exists(dir / "out" / "m_ctx.onnx"));
  }
}
