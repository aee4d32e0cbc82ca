// ONNX Runtime 1.30 opens a package ctxgen --package wrote (docs/package.md) through its experimental model-package
// API alone: it selects each component's variant by device and by ctxkit's ValidateCompiledModelCompatibilityInfo,
// creates the session from the manifest (the weights folder it resolves to the shared asset) and matches ORT's CPU EP
// on the source model.
#include <catch2/catch.hpp>

#include "../common/material.h"
#include "epcontext/contract.h"
#include "model_package_api.h"
#include "ort_harness.h"
#include "tool_runner.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

using namespace ctxkit;
using namespace ctxkit::ort_test;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// The variant ORT selects for `component` with ctxkit on `device` (or why none), and a session of it.
struct Selected {
  std::string variant;
  std::optional<Ort::Session> session;
};

Selected selectAndCreate(const ModelPackageApi& mp, const fs::path& pkg, const std::string& component,
                         OrtHardwareDeviceType device) {
  SessionConfig config;
  config.device = device;
  Ort::SessionOptions options = ctxkitOptions(config);
  OrtModelPackageOptions* packageOptions = nullptr;
  Ort::ThrowOnError(mp.createOptions(env(), options, &packageOptions));
  OrtModelPackageContext* context = nullptr;
  Ort::ThrowOnError(mp.createContext(pkg.c_str(), &context));
  OrtModelPackageComponentContext* chosen = nullptr;
  Selected out;
  if (OrtStatus* st = mp.select(context, component.c_str(), packageOptions, &chosen)) {
    out.variant = "error: " + Ort::Status(st).GetErrorMessage();
  } else {
    const char* name = nullptr;
    Ort::ThrowOnError(mp.selectedName(chosen, &name));
    out.variant = name;
    OrtSession* raw = nullptr;
    // The default path: the session options and the weights folder come from the manifest.
    Ort::ThrowOnError(mp.createSession(env(), chosen, nullptr, &raw));
    out.session.emplace(raw);
  }
  mp.releaseComponent(chosen);
  mp.releaseContext(context);
  mp.releaseOptions(packageOptions);
  return out;
}

}  // namespace

TEST_CASE("ORT opens a ctxgen package, selects each component's variant by device and verdict, and matches its CPU EP",
          "[package]") {
  ModelPackageApi mp;
  CTX_REQUIRE_MATERIAL(mp.complete(), "ONNX Runtime offers no experimental model-package API (OrtModelPackageApi_*)");
  TempDir dir("ort_ep_package");
  const fs::path pkg = dir / "pkg";
  const std::vector<std::string> stems = {"tiny_cnn", "tiny_prefill"};
  ctxkit::testing::runToolOk(CTXKIT_CTXGEN,
                             {sample(stems[0]), sample(stems[1]), "--target", "npu-sim,cpu", "--package", pkg.string()});
  for (const auto& stem : stems) {
    for (auto [device, expected] : {std::pair{OrtHardwareDeviceType_CPU, "cpu"}, {OrtHardwareDeviceType_NPU, "npu-sim"}}) {
      Selected s = selectAndCreate(mp, pkg, stem, device);
      INFO(stem << " on device " << static_cast<int>(device) << ": " << s.variant);
      CHECK(s.variant == expected);
      REQUIRE(s.session);
      Ort::Session reference = cpuSession(sample(stem));
      Feeds feeds = makeFeeds(*s.session, 5);
      Comparison c = compare(run(*s.session, feeds), run(reference, feeds));
      INFO(c.detail);
      CHECK(c.ok);
      std::cout << "ort_ep: package " << stem << ": ORT chose '" << s.variant << "', max |diff| " << c.maxAbsDiff << "\n";
    }
  }

  // The verdict decides between variants a device accepts alike: give both variants the NPU device, then make the
  // first (npu-sim) one to recompile (another target revision) or unsupported (another producer).
  nlohmann::ordered_json manifest = nlohmann::ordered_json::parse(ctxkit::testing::readText(pkg / "manifest.json"));
  auto& variants = manifest["components"]["tiny_cnn"]["variants"];
  variants["cpu"]["device"] = "npu";
  auto rewrite = [&](const std::string& compat) {
    variants["npu-sim"]["compatibility_string"] = compat;
    std::ofstream(pkg / "manifest.json", std::ios::trunc) << manifest.dump(2);
  };
  const std::string optimal = variants["npu-sim"]["compatibility_string"];
  auto parsed = epcontext::parseCompatibilityInfo(optimal);
  REQUIRE(parsed);
  rewrite(optimal);
  CHECK(selectAndCreate(mp, pkg, "tiny_cnn", OrtHardwareDeviceType_NPU).variant == "npu-sim");  // tie: manifest order
  parsed->targetRevision = "99";
  rewrite(epcontext::formatCompatibilityInfo(*parsed));
  CHECK(selectAndCreate(mp, pkg, "tiny_cnn", OrtHardwareDeviceType_NPU).variant == "cpu");
  parsed->targetRevision = optimal.substr(optimal.find("revision=") + 9);
  parsed->producer = "otherkit";
  rewrite(epcontext::formatCompatibilityInfo(*parsed));
  CHECK(selectAndCreate(mp, pkg, "tiny_cnn", OrtHardwareDeviceType_NPU).variant == "cpu");
}
