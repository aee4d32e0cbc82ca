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
