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

// ORT selects `expected` for `component` on `device`, and that session matches ORT's CPU EP on `source`.
void expectSelectedAndMatching(const ModelPackageApi& mp, const fs::path& pkg, const std::string& component,
                               const fs::path& source, OrtHardwareDeviceType device, const std::string& expected) {
  Selected s = selectAndCreate(mp, pkg, component, device);
  INFO(component << " on device " << static_cast<int>(device) << ": " << s.variant);
  CHECK(s.variant == expected);
  REQUIRE(s.session);
  Ort::Session reference = cpuSession(source);
  Feeds feeds = makeFeeds(*s.session, 5);
  Comparison c = compare(run(*s.session, feeds), run(reference, feeds));
  INFO(c.detail);
  CHECK(c.ok);
  std::cout << "ort_ep: package " << component << ": ORT chose '" << s.variant << "', max |diff| " << c.maxAbsDiff
            << "\n";
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
    expectSelectedAndMatching(mp, pkg, stem, sample(stem), OrtHardwareDeviceType_CPU, "cpu");
    expectSelectedAndMatching(mp, pkg, stem, sample(stem), OrtHardwareDeviceType_NPU, "npu-sim");
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

TEST_CASE("corpus models (PP-OCR det and rec) as one package: ORT selects per device and matches its CPU EP",
          "[package]") {
  const fs::path assets = CTXKIT_MODELS_DIR;
  const fs::path det = assets / "ch_PP-OCRv4_det_infer.onnx", rec = assets / "ch_PP-OCRv4_rec_infer.onnx";
  CTX_REQUIRE_MATERIAL(fs::exists(det) && fs::exists(rec),
                       "corpus models not in the cache (" << assets.string() << "): run scripts/fetch_test_assets.sh");
  ModelPackageApi mp;
  CTX_REQUIRE_MATERIAL(mp.complete(), "ONNX Runtime offers no experimental model-package API (OrtModelPackageApi_*)");
  TempDir dir("ort_ep_package_corpus");
  const fs::path pkg = dir / "pkg";
  auto r = ctxkit::testing::runToolOk(CTXKIT_CTXGEN, {det.string(), rec.string(), "--shape",
                                                      "ch_PP-OCRv4_det_infer:x=1x3x320x320", "--shape",
                                                      "ch_PP-OCRv4_rec_infer:x=1x3x48x320", "--target", "npu-sim,cpu",
                                                      "--package", pkg.string()});
  std::cout << "ort_ep: " << r.out;
  for (const fs::path& model : {det, rec}) {
    expectSelectedAndMatching(mp, pkg, model.stem().string(), model, OrtHardwareDeviceType_CPU, "cpu");
    expectSelectedAndMatching(mp, pkg, model.stem().string(), model, OrtHardwareDeviceType_NPU, "npu-sim");
  }
}
