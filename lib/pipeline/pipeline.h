// The compile pipeline behind ctxgen: load -> analyze -> partition -> lower -> dedupe -> emit.
#pragma once

#include "analysis/analysis.h"
#include "ir/pass.h"
#include "support/status.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ctxkit::pipeline {

struct CompileOptions {
  std::vector<std::filesystem::path> models;
  bool share = false;
  std::optional<std::filesystem::path> outputDir;
  std::optional<std::filesystem::path> outputFile;  // one model only (ORT's ep.context_file_path)
  int embedMode = 0;
  std::string target = "npu-sim";
  analysis::Bindings bindings;  // applied to every model, before the arguments below
  // --dim [STEM:]SYM=V, --shape [STEM:]INPUT=AxB and --variant [NAME:]SYM=V[,...] as given (pipeline/bindings.h):
  // resolved against the loaded models and checked there. Each variant compiles every model once more.
  std::vector<std::string> dimArgs, shapeArgs, variantArgs;
  // --set [STEM:]INPUT=V[,V...] as given: the input becomes that constant, gone from the compiled model's inputs.
  std::vector<std::string> setArgs;
  std::string nodeNamePrefix;
  std::string externalInitializersFile;  // fallback initializers go to this file beside each _ctx.onnx
  // Fallback initializers of at least this many bytes are stored once in the .bin (a --share group's, or a model's
  // own when it has a compiled partition) and referenced as ONNX external data, unless embedFallbackInitializers
  // asks for them inside each model.
  uint64_t shareFallbackThreshold = 1024;
  bool embedFallbackInitializers = false;
  // Weightless contexts (docs/weight-sharing.md#weightless): weights byte-equal to a source initializer stay in the
  // source model; the .bin records where. Fallback initializers stay in each _ctx.onnx.
  bool weightless = false;
  // Only initializers stored as external data stay in the source model; those inside the .onnx file are stored
  // (ONNX Runtime's OrtWeightlessSupport_EXTERNAL_ONLY; docs/weight-sharing.md#scope-of-a-weightless-context).
  bool weightlessExternalOnly = false;
  bool force = false;
  bool errorIfNoNodesCompiled = false;
  bool dryRun = false;
  bool dumpPrograms = false;
  // A pass, graph or lowering: put every graph (or partition) as it is after that pass in programDump.
  std::string dumpAfter;
  // A pass, graph or lowering: stop after it, put the graphs (or partitions) in programDump, write nothing.
  std::string stopAfter;
  std::optional<std::filesystem::path> depfile;
  // The --json report file: written with the outputs (CompileReport::reportFileWritten); when the run stops before
  // writing (dry run, --stop-after) or fails, the caller writes it.
  std::optional<std::filesystem::path> reportFile;
  // --tune: each Conv's algorithm measured on this machine (docs/ctxgen.md#tuning), timings kept in the cache file
  // `tuneCache` (empty: defaultTuneCache()).
  bool tune = false;
  std::filesystem::path tuneCache;
};

// The timing cache --tune uses by default: $XDG_CACHE_HOME/ctxkit/tune-cache.tsv, else ~/.cache/ctxkit/...; an error
// when neither variable is set.
Expected<std::filesystem::path> defaultTuneCache();

struct FallbackNode {
  std::string name;
  std::string opType;
  std::string reason;
};

// A node whose output shape depends on values (NonZero, NonMaxSuppression, TopK with a computed k, a Reshape to a
// computed shape...) or has no shape rule, and the fallback nodes whose shapes are unknown because of it.
struct ValueDependentRoot {
  std::string name;
  std::string opType;
  std::optional<ir::Shape> bound;  // its first output's upper bound (analysis/bounds.h), when one is known
  size_t nodes = 0;                // fallback nodes behind it, itself included
  size_t boundedNodes = 0;         // of those, the ones whose every dynamic value has a bound
};

struct PartitionSummary {
  std::string name;  // partition_name
  size_t nodeCount = 0;
  size_t opCount = 0;  // ops in the lowered program (after fusion and views)
  size_t inputCount = 0;
  size_t outputCount = 0;
  uint64_t arenaBytes = 0;
  std::vector<std::string> opTypes;  // source op types, in order
};

struct ModelSummary {
  std::filesystem::path source;
  std::filesystem::path output;
  std::string variant;                              // --variant NAME this output was compiled for ("" for none)
  std::vector<std::filesystem::path> externalData;  // files the source model's external data came from
  size_t nodeCount = 0;
  size_t compiledNodes = 0;
  size_t fallbackNodes = 0;
  size_t foldedNodes = 0;
  std::vector<std::pair<std::string, std::string>> boundInputs;  // --set: (input, values as given)
  std::vector<PartitionSummary> partitions;
  std::vector<FallbackNode> fallback;
  std::vector<ValueDependentRoot> valueDependent;  // in topological order of the roots
  std::vector<std::string> warnings;  // what may keep the compiled model from loading or running (ctxgen prints them)
};

struct FileWritten {
  std::filesystem::path path;
  uint64_t bytes = 0;
};

struct StageTime {
  std::string stage;
  double milliseconds = 0;
};

// One Conv --tune chose for (codegen::KernelTuner::Choice).
struct TunedConv {
  std::string partition, node, key, heuristic, chosen;
  double heuristicMs = 0, chosenMs = 0;
  bool cacheHit = false;
};

struct TuneSummary {
  std::filesystem::path cache;
  std::string cpuFeatures;
  size_t hits = 0, misses = 0;
  std::vector<TunedConv> convs;
};

struct CompileReport {
  std::string target;
  // The target's float16_compute: the precision compiled programs compute float16 values in ("float16" or "float32").
  std::string float16Compute = "float16";
  // The ep_compatibility_info value every compiled model of the run carries (docs/runtime.md#compatibility).
  std::string compatibility;
  std::vector<ModelSummary> models;
  std::vector<FileWritten> files;
  uint64_t referencedWeightBytes = 0;
  uint64_t uniqueWeightBytes = 0;
  uint64_t storedWeightBytes = 0;
  size_t uniqueWeights = 0;
  bool weightless = false;
  uint64_t sourceWeightBytes = 0;  // weightless: unique bytes left in the source models (not in any .bin)
  size_t sourceWeights = 0;
  uint64_t hashedBytes = 0;  // weight bytes hashed: to tell look-alike weights apart, and while written
  std::vector<StageTime> stages;
  // Each pass summed over the run (changed: the graphs or partitions it changed), graph passes first, in run order.
  std::vector<ir::PassRun> passes;
  std::string programDump;          // with dumpPrograms
  std::optional<TuneSummary> tune;  // with CompileOptions::tune
  bool dryRun = false;
  bool stopped = false;            // stopAfter ended the run before anything was written
  bool reportFileWritten = false;  // CompileOptions::reportFile was written with the outputs
};

// What happens as it happens (per model and stage), for progress displays and -v.
struct Progress {
  std::string message;
  uint64_t bytesHashed = 0;   // so far in the run
  uint64_t bytesWritten = 0;  // so far in the run
};
using ProgressFn = std::function<void(const Progress& progress)>;

Expected<CompileReport> compileModels(const CompileOptions& options, const ProgressFn& progress = {});

std::string reportText(const CompileReport& report, bool verbose);
// One line for a build log: models, nodes, files and bytes written, bytes hashed, the run's time.
std::string summaryLine(const CompileReport& report, double seconds);
// A progress display's line: the current step, bytes hashed and written so far and their rate.
std::string progressLine(const Progress& progress, double seconds);
// The --json report (docs/ctxgen-json.md); kReportSchemaVersion changes when a field changes meaning or goes away.
inline constexpr int kReportSchemaVersion = 1;
std::string reportJson(const CompileReport& report);
// The --json report of a run that failed: schema version, "ok": false and the error message.
std::string failureReportJson(const std::string& error);

}  // namespace ctxkit::pipeline
