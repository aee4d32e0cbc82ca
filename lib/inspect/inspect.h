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
  std::optional<uint64_t> bytes;
  bool exists = false;
  std::string problem;  // "missing", "path escapes the model folder", ...
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
};

struct ContextSummary {
  std::string path;
  format::CompatInfo compat;
  uint64_t fileBytes = 0;
  uint64_t alignment = 0;
  std::vector<GraphSummary> graphs;
  size_t weightCount = 0;
  uint64_t uniqueWeightBytes = 0;
  uint64_t referencedWeightBytes = 0;  // summed over graph references
  std::vector<WeightSharing> sharedWeights;  // weights used by more than one graph
  bool verified = false;
};

struct Report {
  std::vector<std::string> models;
  std::vector<EpContextNode> nodes;
  std::vector<DeploymentFile> files;
  std::vector<ContextSummary> contexts;
  std::vector<std::string> problems;  // anything that makes the exit code 1
};

struct Options {
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
