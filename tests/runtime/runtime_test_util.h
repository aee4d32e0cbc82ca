// Shared helpers for runtime tests: a temporary folder, compiling samples with the library, and checking a
// session's first output against a sample's test data.
#pragma once

#include "partitioner/target.h"
#include "pipeline/pipeline.h"
#include "runtime/session.h"
#include "tooling/run_io.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace ctxkit::runtime::testing {

inline const std::filesystem::path kSamples = CTXKIT_SAMPLES_DIR;

struct Workspace {
  std::filesystem::path dir;
  explicit Workspace(const std::string& name) {
    std::random_device rd;
    dir = std::filesystem::temp_directory_path() / ("ctxkit_session_" + name + std::to_string(rd()));
    std::filesystem::create_directories(dir);
  }
  ~Workspace() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// Compiles samples `<stem>.onnx` into `out` (one .bin each, or one shared .bin).
inline void compile(const std::vector<std::string>& stems, const std::filesystem::path& out, bool share,
                    const std::string& target = "npu-sim") {
  pipeline::CompileOptions o;
  for (const auto& s : stems) o.models.push_back(kSamples / (s + ".onnx"));
  o.share = share;
  o.outputDir = out;
  o.target = target;
  auto r = pipeline::compileModels(o);
  INFO((r ? std::string() : r.error().message()));
  REQUIRE(r);
}

// The session's warnings, less the one about GEMM weights packed for another CPU's kernel width: the built-in targets
// pack 32-wide panels, so on a CPU whose kernel is 16 wide (AVX2 without AVX-512) every compiled sample carries it.
inline std::vector<std::string> warningsBesidesPanels(const Session& s) {
  std::vector<std::string> out;
  for (const auto& w : s.warnings())
    if (w.find("-wide panels; this CPU's GEMM kernel is") == std::string::npos) out.push_back(w);
  return out;
}

// npu-sim with its GEMM weights left row-major (written into `dir`): what it compiles is optimal on any CPU, where the
// built-in target's 32-wide panels are not on one whose kernel is 16 wide.
inline std::string rowMajorNpuSim(const std::filesystem::path& dir) {
  auto json = partitioner::builtinTargetJson("npu-sim");
  REQUIRE(json);
  const std::string packed = "\"panels-32\"";
  REQUIRE(json->find(packed) != std::string::npos);
  json->replace(json->find(packed), packed.size(), "\"row-major\"");
  const auto path = dir / "npu_sim_row_major.json";
  std::ofstream(path) << *json;
  return path.string();
}

// Runs the session on the sample's test_data_set_0 and compares its first output.
inline void expectMatch(const Session& s, const std::string& stem) {
  std::filesystem::path data = kSamples / stem / "test_data_set_0";
  auto feeds = tooling::loadInputFolder(data, s.inputs());
  REQUIRE(feeds);
  auto outs = s.run(*feeds);
  INFO((outs ? std::string() : outs.error().message()));
  REQUIRE(outs);
  auto expected = tooling::loadExpectedFolder(data, outs->size());
  REQUIRE(expected);
  auto c = tooling::compareTensors((*outs)[0], (*expected)[0], 1e-3, 1e-5);
  INFO(c.message);
  CHECK(c.match);
}

}  // namespace ctxkit::runtime::testing
