// What ctxinspect reports: EPContext nodes of any EP, the files a deployment needs, and ctxkit context binaries.
#pragma once

#include "format/container.h"
#include "support/status.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ctxkit::inspect {

struct ValueSummary {
  std::string name;
  std::string type;   // "float32"
  std::string shape;  // "1x16x64", "?" when unknown
};

struct EpContextNode {
  std::string model;  // the _ctx.onnx it is in
  std::string name;
  std::string source;
  int64_t mainContext = 0;
  int64_t embedMode = 0;
  std::string cacheContext;  // the path, or "embedded, N bytes"
  std::string partitionName;
  std::string sdkVersion;
  std::string hardwareArchitecture;
  std::string onnxModelFilename;
  std::optional<int64_t> maxSize;
  std::string notes;
  std::vector<ValueSummary> inputs;
  std::vector<ValueSummary> outputs;
};

struct DeploymentFile {
  std::string path;  // as a deployment would copy it
  std::string role;  // "model", "context binary", "external data"
  // What ctxinspect takes the file to be: "onnx", "ctxkit" (a ctxkit container, read and checked), "opaque"
  // (another EP's context binary: listed, never read) or "raw" (external data bytes).
  std::string format;
  std::string ep;  // context binaries: the source of the EPContext node that references it
  std::optional<uint64_t> bytes;
  bool exists = false;
  std::string problem;  // "missing", "path escapes the model folder", ...
};

// An initializer of a model whose bytes live in another file (ONNX external data): what a deployment reads.
struct ExternalDataRef {
  std::string model;
  std::string initializer;  // its name; "node 'If_0' > W" for one of a subgraph
  std::string location;     // as written in the model
  std::string path;         // resolved against the model's folder; empty when the location is refused
  uint64_t offset = 0;
  uint64_t length = 0;
  std::optional<uint64_t> fileBytes;  // the file's actual size; empty when it is missing or refused
  std::string problem;  // empty when the range lies inside the file (and is one weight of a ctxkit container)
};

struct GraphSummary {
  std::string name;
  std::string sourceModel;
  size_t opCount = 0;
  size_t weightRefs = 0;
  uint64_t arenaBytes = 0;
};

struct WeightSharing {
  uint32_t index = 0;
  uint64_t bytes = 0;
  std::vector<std::string> graphs;  // graphs that use it
  std::vector<std::string> models;  // source models those graphs came from
  // The inspected _ctx.onnx files whose EPContext nodes run those graphs: with shape variants, one per variant.
  std::vector<std::string> compiledModels;
};

// Weights used by exactly the same graphs, counted together: which variants and models use which weights.
struct WeightUsers {
  std::vector<std::string> graphs;
  std::vector<std::string> models;
  std::vector<std::string> compiledModels;
  size_t count = 0;
  uint64_t bytes = 0;
};

struct ContextSummary {
  std::string path;
  format::CompatInfo compat;
  uint64_t fileBytes = 0;
  uint64_t alignment = 0;
  std::vector<GraphSummary> graphs;
  size_t weightCount = 0;
  // program::sharingFigures of the binary, the definition ctxgen's report uses too.
  uint64_t uniqueWeightBytes = 0;      // each weight a program references, once
  uint64_t referencedWeightBytes = 0;  // summed over graph references
  uint64_t storedWeightBytes = 0;      // every stored weight, fallback initializers included
  double sharingRatio = 1.0;
  // Weightless contexts (docs/weight-sharing.md#weightless): weights whose bytes stay in source models (counted in the
  // figures above too).
  bool weightless = false;
  size_t sourceWeights = 0;
  uint64_t sourceWeightBytes = 0;
  std::vector<WeightSharing> sharedWeights;  // weights used by more than one graph
  std::vector<WeightUsers> weightUsers;      // every weight, grouped by the graphs that use it; most bytes first
  bool verified = false;
  // The runtime's verdict on the compatibility block (runtime::assessCompatibility): "SUPPORTED_OPTIMAL",
  // "PREFER_RECOMPILATION" or "UNSUPPORTED", and why when not optimal.
  std::string verdict;
  std::string verdictReason;
};

// A compiled model's `ep_compatibility_info.CtxKitExecutionProvider` metadata and the verdict on it: what ONNX
// Runtime's GetModelCompatibilityForEpDevices answers for ctxkit's devices.
struct ModelCompatibility {
  std::string model;
  std::string info;
  std::string verdict;
  std::string reason;
};

struct Report {
  std::vector<std::string> models;
  std::vector<EpContextNode> nodes;
  std::vector<DeploymentFile> files;
  std::vector<ExternalDataRef> externalData;
  std::vector<ContextSummary> contexts;
  std::vector<ModelCompatibility> compatibility;  // models that carry ctxkit's compatibility metadata
  std::vector<std::string> problems;              // anything that makes the exit code 1
};

struct Options {
  // Also recompute every ctxkit weight hash and load every external initializer as a runtime would.
  bool verify = false;
};

// Never fails on a broken deployment: problems are collected in the report. Fails only when a model file
// itself cannot be read as ONNX.
Expected<Report> inspectModels(const std::vector<std::filesystem::path>& models, const Options& options);

std::string reportText(const Report& report);
std::string reportJson(const Report& report);  // schema: docs/ctxinspect-json.md
// Graphviz picture of each model: compiled partitions (EPContext) vs fallback nodes.
Expected<std::string> partitionDot(const std::vector<std::filesystem::path>& models);

}  // namespace ctxkit::inspect
