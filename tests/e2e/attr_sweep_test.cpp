// The integer-extreme attribute sweep (issue 24 point 1): every integer attribute of every op the ONNX node tests
// hold, set to 0, -1, 2^31, 2^32, 2^62, INT64_MAX - 100, INT64_MAX and INT64_MIN, goes through what ctxgen does
// (pipeline::compileModels for the cpu target), what ctxrun does with the result and with the plain model
// (runtime::Session on the test's inputs), and, as a mutated compiled program, through the program reader and
// CompiledProgram. Every case must end in a clean error or a run: a crash, a hang (ctest's timeout) or a sanitizer
// report (the ASan + UBSan tree runs this test too, with -fno-sanitize-recover) fails it, and so does a compiled
// model that does not load back. The counts of each outcome are printed.
#include "../common/material.h"
#include "format/container.h"
#include "onnx_io/onnx_io.h"
#include "ops/op_schema.h"
#include "pipeline/pipeline.h"
#include "program/program.h"
#include "runtime/compiled_program.h"
#include "runtime/session.h"
#include "tooling/run_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <unistd.h>

using namespace ctxkit;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kExtremes[] = {0,
                                 -1,
                                 int64_t{1} << 31,
                                 int64_t{1} << 32,
                                 int64_t{1} << 62,
                                 std::numeric_limits<int64_t>::max() - 100,
                                 std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min()};

struct Counts {
  size_t cases = 0, refusedAtCompile = 0, refusedAtLoad = 0, refusedAtRun = 0, ran = 0;
  std::string text() const {
    return fmt::format("{} cases: {} refused by the compiler, {} at load, {} at run, {} ran", cases, refusedAtCompile,
                       refusedAtLoad, refusedAtRun, ran);
  }
};

// Every node test (but the function-expanded ones, graphs of the ops tested on their own) whose nodes hold an
// integer attribute.
std::vector<fs::path> sweepModels(const fs::path& nodeDir) {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(nodeDir))
    if (e.is_directory() && e.path().filename().string().find("_expanded") == std::string::npos)
      dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  std::vector<fs::path> chosen;
  for (const auto& dir : dirs) {
    auto model = onnx_io::loadModel(dir / "model.onnx");
    if (!model) continue;
    bool hasInt = false;
    for (const auto& node : model->graph.nodes)
      for (const auto& a : node.attrs.all())
        hasInt = hasInt || a.type == ir::AttrType::Int || a.type == ir::AttrType::Ints;
    if (hasInt) chosen.push_back(dir);
  }
  return chosen;
}

// The model with attribute `attr` of node `node` set to `value` (a list: every element, or only the first).
ir::Model mutated(const ir::Model& source, size_t node, size_t attr, int64_t value, bool firstOnly) {
  ir::Model m = source;
  ir::Attribute& a = m.graph.nodes[node].attrs.all()[attr];
  if (a.type == ir::AttrType::Int) {
    a.i = value;
  } else if (firstOnly) {
    a.ints[0] = value;
  } else {
    std::fill(a.ints.begin(), a.ints.end(), value);
  }
  return m;
}

std::vector<ir::Tensor> feedsFor(const runtime::Session& session, const fs::path& dataDir) {
  auto feeds = tooling::loadInputFolder(dataDir, session.inputs());
  return feeds ? std::move(feeds).value() : std::vector<ir::Tensor>{};
}

// Runs a loaded session on the test's inputs; counts the outcome.
void runSession(Expected<std::unique_ptr<runtime::Session>> session, const fs::path& dataDir, Counts& counts) {
  if (!session) {
    ++counts.refusedAtLoad;
    return;
  }
  auto out = (*session)->run(feedsFor(**session, dataDir));
  ++(out ? counts.ran : counts.refusedAtRun);
}

// ctxgen then ctxrun on one mutated model; a compiled model that does not load is a failure (returned).
std::string compileAndRun(const ir::Model& model, const fs::path& dataDir, const fs::path& work, Counts& compiled,
                          Counts& plain) {
  fs::remove_all(work);
  fs::create_directories(work);
  const fs::path source = work / "model.onnx";
  if (auto s = onnx_io::saveModel(model, source); !s) return "cannot save the mutated model: " + s.error().message();
  runtime::SessionOptions options;
  options.shareContexts = false;
  ++plain.cases;
  runSession(runtime::Session::loadFile(source, options), dataDir, plain);

  pipeline::CompileOptions compile;
  compile.models = {source};
  compile.outputDir = work / "out";
  compile.target = "cpu";
  ++compiled.cases;
  auto report = pipeline::compileModels(compile);
  if (!report) {
    ++compiled.refusedAtCompile;
    return {};
  }
  auto session = runtime::Session::loadFile(work / "out" / "model_ctx.onnx", options);
  if (!session) return "compiled, but the output does not load: " + session.error().message();
  runSession(std::move(session), dataDir, compiled);
  return {};
}

// Calls `f(values)` for every integer field of typed attributes (a single value or a list).
template <class T, class F> void forEachIntField(T& value, F&& f) {
  if constexpr (requires { value.fields([](std::string_view, auto&) {}); }) {
    value.fields([&](std::string_view, auto& member) { forEachIntField(member, f); });
  } else if constexpr (std::is_same_v<T, int64_t>) {
    f(std::span<int64_t>(&value, 1));
  } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
    if (value) f(std::span<int64_t>(&*value, 1));
  } else if constexpr (std::is_same_v<T, ops::IntList>) {
    if (!value.empty()) f(std::span<int64_t>(value.data(), value.size()));
  } else if constexpr (std::is_same_v<T, std::optional<ops::IntList>>) {
    if (value && !value->empty()) f(std::span<int64_t>(value->data(), value->size()));
  }
}

size_t intFieldCount(ops::OpAttrs& attrs) {
  size_t n = 0;
  std::visit([&](auto& a) { forEachIntField(a, [&](std::span<int64_t>) { ++n; }); }, attrs);
  return n;
}

// Sets integer field `field` of `attrs` (every element, or the first) to `value`.
void setIntField(ops::OpAttrs& attrs, size_t field, int64_t value, bool firstOnly) {
  size_t n = 0;
  std::visit(
      [&](auto& a) {
        forEachIntField(a, [&](std::span<int64_t> values) {
          if (n++ != field) return;
          if (firstOnly) values[0] = value;
          else std::fill(values.begin(), values.end(), value);
        });
      },
      attrs);
}

// Every program of a compiled deployment with each integer field of each op's typed attributes set to each extreme
// value, encoded, read back (the reader checks attribute values) and created and run on zero inputs.
void sweepPrograms(const fs::path& binPath, Counts& counts) {
  auto view = format::ContainerView::openFile(binPath);
  REQUIRE(view.isOk());
  auto container = std::make_shared<const format::ContainerView>(std::move(view).value());
  for (size_t g = 0; g < container->graphs().size(); ++g) {
    auto original = program::deserialize(container->programBytes(g), container->weights().size(), "sweep");
    REQUIRE(original.isOk());
    for (size_t o = 0; o < original->ops.size(); ++o) {
      const size_t fields = intFieldCount(original->ops[o].typed);
      for (size_t field = 0; field < fields; ++field)
        for (int64_t value : kExtremes)
          for (bool firstOnly : {false, true}) {
            program::Program p = *original;
            setIntField(p.ops[o].typed, field, value, firstOnly);
            ++counts.cases;
            auto again = program::deserialize(program::serialize(p), container->weights().size(), "sweep");
            if (!again) {
              ++counts.refusedAtLoad;
              continue;
            }
            auto compiled = runtime::CompiledProgram::create(std::move(again).value(), container, "sweep");
            if (!compiled) {
              ++counts.refusedAtLoad;
              continue;
            }
            std::vector<ir::Tensor> inputs;
            std::vector<const ir::Tensor*> pointers;
            bool made = true;
            for (size_t i = 0; i < (*compiled)->inputCount() && made; ++i) {
              const auto& desc = (*compiled)->inputDesc(i);
              auto t = ir::Tensor::allocate(desc.type, program::toShape(desc.shape));
              if (!t) made = false;
              else inputs.push_back(std::move(t).value());
            }
            if (!made) {
              ++counts.refusedAtRun;
              continue;
            }
            for (const auto& t : inputs) pointers.push_back(&t);
            auto out = (*compiled)->run(pointers, nullptr);
            ++(out ? counts.ran : counts.refusedAtRun);
          }
    }
  }
}

}  // namespace

TEST_CASE("every integer attribute at extreme values is refused or runs, through the compiler, the runtime and "
          "a mutated program",
          "[sweep]") {
  const fs::path nodeDir = fs::path(CTXKIT_SHARED_DIR) / "onnx-node-tests" / "node";
  CTX_REQUIRE_MATERIAL(fs::is_directory(nodeDir), nodeDir.string() << " is absent (ONNX's node tests beside the project)");
  // The node tests' tensors are small: a mutated attribute that asks for more than this is refused as it would be
  // above the default limit, without the sweep touching gigabytes of memory.
  ir::setMemoryLimit(uint64_t{64} << 20);
  std::vector<fs::path> models = sweepModels(nodeDir);
  if (const char* only = std::getenv("CTXKIT_SWEEP_ONLY"))  // a substring of the test names to sweep, for debugging
    std::erase_if(models, [&](const fs::path& m) { return m.filename().string().find(only) == std::string::npos; });
  // On a memory file system where there is one: every case writes a deployment, and fsync there costs nothing.
  std::unique_ptr<TempDir> scratch;
  fs::path workDir;
  if (fs::is_directory("/dev/shm")) {
    workDir = fs::path("/dev/shm") / fmt::format("ctxkit_attr_sweep_{}", ::getpid());
    fs::create_directories(workDir);
  } else {
    scratch = std::make_unique<TempDir>("attr_sweep");
    workDir = scratch->path();
  }
  struct Cleanup {
    fs::path dir;
    bool own;
    ~Cleanup() {
      std::error_code ec;
      if (own) fs::remove_all(dir, ec);
    }
  } cleanup{workDir, scratch == nullptr};
  Counts compiled, plain, programs;
  std::vector<std::string> failures;
  size_t attributes = 0;
  for (const fs::path& dir : models) {
    std::printf("%s\n", dir.filename().string().c_str());  // so that a hang shows where
    std::fflush(stdout);
    auto model = onnx_io::loadModel(dir / "model.onnx");
    REQUIRE(model.isOk());
    const fs::path data = dir / "test_data_set_0";
    for (size_t n = 0; n < model->graph.nodes.size(); ++n) {
      const auto& attrs = model->graph.nodes[n].attrs.all();
      for (size_t a = 0; a < attrs.size(); ++a) {
        const ir::Attribute& attr = attrs[a];
        const bool isList = attr.type == ir::AttrType::Ints && !attr.ints.empty();
        if (attr.type != ir::AttrType::Int && !isList) continue;
        ++attributes;
        for (int64_t value : kExtremes)
          for (bool firstOnly : {false, true}) {
            if (firstOnly && !(isList && attr.ints.size() > 1)) continue;
            std::string failure = compileAndRun(mutated(*model, n, a, value, firstOnly), data,
                                                workDir / "case", compiled, plain);
            if (!failure.empty())
              failures.push_back(fmt::format("{}: node {} attribute {} = {}{}: {}", dir.filename().string(), n,
                                             attr.name, value, firstOnly ? " (first element)" : "", failure));
          }
      }
    }
    // The unmutated model compiled, its programs mutated.
    pipeline::CompileOptions compile;
    compile.models = {dir / "model.onnx"};
    compile.outputDir = workDir / "programs";
    compile.target = "cpu";
    compile.force = true;
    if (pipeline::compileModels(compile).isOk() && fs::exists(workDir / "programs" / "model_ctxkit.bin"))
      sweepPrograms(workDir / "programs" / "model_ctxkit.bin", programs);
    fs::remove_all(workDir / "programs");
  }
  std::printf("attribute sweep: %zu models, %zu integer attributes\n  compiled: %s\n  plain model: %s\n"
              "  mutated programs: %s\n",
              models.size(), attributes, compiled.text().c_str(), plain.text().c_str(), programs.text().c_str());
  for (const auto& f : failures) std::printf("FAILURE %s\n", f.c_str());
  CHECK(models.size() >= 640);  // the node tests with integer attributes: the selection must not shrink
  CHECK(failures.empty());
}
