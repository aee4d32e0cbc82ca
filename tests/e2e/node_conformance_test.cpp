// All ONNX backend node tests (../shared/onnx-node-tests/node) through `ctxgen --target T` and `ctxrun --expected`
// for both built-in targets, against committed lists of tests expected to pass (node_expected_pass.txt for cpu,
// node_expected_pass_npu_sim.txt for npu-sim, where unsupported nodes run on the fallback interpreter).
//
// Every test folder is attempted: a model or data set that does not load counts as a failure, never a skip.
// A listed test that fails is a regression and fails this test case; a passing test missing from the list is
// reported so that the list can grow (CTXKIT_WRITE_EXPECTED_PASS=1 rewrites the lists).
#include "../common/material.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// One test name per line; '#' starts a comment.
std::set<std::string> loadNames(const fs::path& path) {
  std::set<std::string> names;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line = line.substr(0, hash);
    auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    auto end = line.find_first_of(" \t", start);
    names.insert(line.substr(start, end == std::string::npos ? std::string::npos : end - start));
  }
  return names;
}

// The start of a failure whose compiled model does not even load: never an expected failure.
const std::string kDoesNotLoad = "ctxgen wrote a model that does not load: ";

// Empty when the test passes on every data set, else the first failure.
std::string runCase(const fs::path& dir, const fs::path& work, const std::string& target) {
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (!fs::exists(dir / "model.onnx") || sets.empty()) return "no model.onnx or no test_data_set_*";
  fs::path out = work / dir.filename().string();
  auto gen = runTool(CTXKIT_CTXGEN, {(dir / "model.onnx").string(), "--target", target, "-o", out.string(), "-q"});
  if (gen.exitCode != 0) return "ctxgen: " + gen.err;
  for (const fs::path& set : sets) {
    auto run = runTool(CTXKIT_CTXRUN,
                       {(out / "model_ctx.onnx").string(), "--inputs", set.string(), "--expected", set.string()});
    if (run.exitCode != 0) {
      // What ctxgen writes must load (docs/bad-input.md#what-ctxgen-writes-loads): a failure to load, not to match,
      // fails the test whatever the list.
      auto load = runTool(CTXKIT_CTXINSPECT, {(out / "model_ctx.onnx").string(), "--verify", "-q"});
      if (load.exitCode != 0) return kDoesNotLoad + load.out + load.err;
      return "ctxrun (" + set.filename().string() + "): " + run.out + run.err;
    }
  }
  std::error_code ec;
  fs::remove_all(out, ec);
  return {};
}

void checkConformance(const std::string& target, const fs::path& expectedPath) {
  const fs::path nodeDir = fs::path(CTXKIT_SHARED_DIR) / "onnx-node-tests" / "node";
  CTX_REQUIRE_MATERIAL(fs::is_directory(nodeDir), nodeDir.string() << " is absent (ONNX's node tests beside the project)");
  const std::set<std::string> expected = loadNames(expectedPath);
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(nodeDir))
    if (e.is_directory()) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());

  TempDir work("conformance_" + target);
  std::vector<std::string> failures(cases.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < cases.size(); i = next++) failures[i] = runCase(cases[i], work.path(), target);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back(worker);  // two tool processes at a time
  for (auto& t : threads) t.join();

  size_t passed = 0;
  std::vector<std::string> regressions, growth, passing;
  std::set<std::string> seen;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = cases[i].filename().string();
    seen.insert(name);
    if (failures[i].empty()) {
      ++passed;
      passing.push_back(name);
      if (!expected.count(name)) growth.push_back(name);
    } else if (expected.count(name) || failures[i].starts_with(kDoesNotLoad)) {
      regressions.push_back(name + ": " + failures[i].substr(0, 600));
    }
  }
  for (const auto& name : expected)
    if (!seen.count(name)) regressions.push_back(name + ": listed as passing but the test folder is missing");
  std::string summary = fmt::format("node tests, target {}: {} passed / {} attempted ({} listed as passing, {} "
                                    "regressions, {} newly passing)",
                                    target, passed, cases.size(), expected.size(), regressions.size(), growth.size());
  std::printf("%s\n", summary.c_str());
  for (const auto& r : regressions) std::printf("REGRESSION %s\n", r.c_str());
  for (const auto& g : growth)
    std::printf("passes but is not listed in %s: %s\n", expectedPath.filename().string().c_str(), g.c_str());
  if (std::getenv("CTXKIT_WRITE_EXPECTED_PASS")) {
    std::ofstream out(expectedPath);
    out << "# ONNX node tests that pass through ctxgen --target " << target
        << " and ctxrun --expected (all data sets).\n"
           "# tests/e2e/node_conformance_test.cpp fails when one of them fails; CTXKIT_WRITE_EXPECTED_PASS=1 rewrites\n"
           "# this list from a run.\n";
    for (const auto& p : passing) out << p << "\n";
  }
  INFO(summary);
  CHECK(cases.size() >= 1800);  // every test folder is attempted: the selection must not shrink
  CHECK(regressions.empty());
}

}  // namespace

TEST_CASE("every ONNX node test listed as passing passes through ctxgen --target cpu and ctxrun", "[conformance]") {
  checkConformance("cpu", CTXKIT_EXPECTED_PASS);
}

TEST_CASE("every ONNX node test listed as passing passes through ctxgen --target npu-sim and ctxrun", "[conformance]") {
  checkConformance("npu-sim", CTXKIT_EXPECTED_PASS_NPU_SIM);
}
