// ctxgen --package: every model compiled for several targets (and shape variants) into one ONNX Runtime model
// package (docs/package.md): plain weights once in a content-addressed shared asset, each target's programs and
// derived weights in its own variant.
#pragma once

#include "pipeline/pipeline.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ctxkit::pipeline {

struct PackageVariantSummary {
  std::string component, name, target, device, compatibility;
  std::filesystem::path modelFile;  // relative to the package
  uint64_t bytes = 0;               // the variant's own files (its _ctx.onnx and context binary)
};

struct PackageReport {
  std::filesystem::path root;
  std::vector<PackageVariantSummary> variants;
  std::vector<CompileReport> runs;  // one per (model, target)
  uint64_t assetBytes = 0;          // shared assets: the source models, each once
  uint64_t sourceWeightBytes = 0;   // unique plain weight bytes the variants read from the assets
  uint64_t variantBytes = 0;        // every variant's files together
  uint64_t manifestBytes = 0;
  uint64_t totalBytes = 0;  // everything on disk under the package
};

// `options.target` is a comma-separated list (npu-sim,cpu or target files); every other option applies to each run.
// The package is built beside `root` under a temporary name and renamed into place when complete; an existing
// package is replaced only with options.force.
Expected<PackageReport> writePackage(const CompileOptions& options, const std::filesystem::path& root,
                                     const ProgressFn& progress = {});

std::string packageText(const PackageReport& report);

}  // namespace ctxkit::pipeline
