// ctxgen: compiles ONNX models into EPContext models plus a (shared) context binary.
#include "analysis/graph_passes.h"
#include "cli/cli_util.h"
#include "cli/log.h"
#include "codegen/lower.h"
#include "epcontext/contract.h"
#include "partitioner/target.h"
#include "pipeline/package.h"
#include "pipeline/pipeline.h"
#include "session_options.h"
#include "support/file_io.h"

#include <CLI/CLI.hpp>
#include <fmt/ranges.h>

#include <chrono>
#include <iostream>

using namespace ctxkit;

namespace {

// A failed run may have failed because FILE is one of its inputs: only a new file or an earlier report is replaced.
bool mayHoldReport(const std::string& path) {
  if (auto how = reportTarget(path, "JSON report"); how && *how == ReportTarget::WriteThrough) return true;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return !ec;
  auto bytes = readFile(path);
  return bytes && bytes->starts_with("{\n  \"schema_version\"");
}

// Shown after the options by --help, and in the man page help2man makes from it.
constexpr const char* kHelpFooter = R"(Examples:
  $ ctxgen model.onnx
      compile one model: model_ctx.onnx and its context binary model_ctxkit.bin, beside the model
  $ ctxgen prefill.onnx,decode.onnx --share -o out
      one context binary for both models, every identical weight stored once
  $ ctxgen block.onnx --variant s1:seq=1 --variant s128:seq=128 -o out
      one compiled model per sequence length (block_s1_ctx.onnx, ...), all in one context binary
  $ ctxgen --print-target npu-sim > my-npu.json; ctxgen model.onnx --target my-npu.json
      start a target file from a built-in target, then compile for it (docs/target-json.md)
  $ ctxgen model.onnx --target npu-sim,cpu --package pkg
      an ONNX Runtime model package: a variant per target, the plain weights once in a shared asset (docs/package.md)
  $ ctxgen model.onnx --dry-run
      show how the model would be partitioned; write nothing
  $ ctxgen model.onnx -o out --force --json report.json --depfile model.d
      for build scripts: replace earlier outputs, a JSON report and Makefile dependencies

Exit codes:
  0  success
  1  compile failure: a model, file or target that cannot be read or compiled (the message names it)
  2  usage error: an unknown, malformed or contradictory option
)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ctxgen: compile ONNX models to EPContext models and a context binary"};
  pipeline::CompileOptions o;
  std::vector<std::string> models, configs;
  std::string outputDir, jsonPath, depfile;
  bool verbose = false, quiet = false;
  std::string logLevel;
  std::string printTarget;
  bool listTargets = false;
  app.add_option("models", models, "MODEL[,MODEL...] (comma-separated or separate arguments)");
  app.add_flag("--list-targets", listTargets, "list the built-in targets (name, id and revision, op count) and exit");
  app.add_option("--print-target", printTarget,
                 "print a built-in target's JSON (the format in docs/target-json.md, a start for your own) and exit");
  app.add_flag("--share", o.share, "one context binary for all models, every identical weight stored once");
  app.add_option("-o,--output-dir", outputDir, "write all outputs to DIR (created if missing)");
  app.add_option("--embed-mode", o.embedMode, "0: context in a .bin file (default); 1: inside the _ctx.onnx")
      ->check(CLI::Range(0, 1));
  app.add_option("--target", o.target,
                 "npu-sim (default), cpu, or a target JSON file (docs/target-json.md); with --package a "
                 "comma-separated list, a variant each");
  std::string packageDir;
  auto* packageOption = app.add_option(
      "--package", packageDir,
      "write an ONNX Runtime model package to DIR (docs/package.md): a component per model, a variant per target "
      "and --variant, the source models once as content-addressed shared assets");
  app.add_option("--dim", o.dimArgs, "bind a symbolic dimension: [STEM:]SYM=V (STEM: that model only)");
  app.add_option("--shape", o.shapeArgs, "bind an input shape: [STEM:]INPUT=AxBxC (STEM: that model only)");
  app.add_option("--set", o.setArgs,
                 "bind an input's value at compile time (e.g. a sample rate); one value fills every element: "
                 "[STEM:]INPUT=V[,V...] (the compiled model no longer takes INPUT)");
  app.add_option("--variant", o.variantArgs,
                 "compile every model once more for these bindings: [NAME:]SYM=V[,SYM=V|INPUT=AxB...]; outputs "
                 "<stem>_<NAME>_ctx.onnx, all variants in one context binary (repeatable)");
  app.add_option("--node-name-prefix", o.nodeNamePrefix, "prefix for EPContext node names");
  app.add_option("--external-initializers-file", o.externalInitializersFile,
                 "put fallback initializers in this file beside each _ctx.onnx");
  app.add_flag("--embed-fallback-initializers", o.embedFallbackInitializers,
               "keep fallback initializers inside each _ctx.onnx instead of the .bin");
  app.add_option(
      "-C,--config", configs,
      "ONNX Runtime session option KEY=VALUE, or ONNX Runtime's \"KEY|VALUE KEY|VALUE\"; keys: " +
          ctxgen::knownConfigKeys() +
          " (ep.stop_share_ep_contexts is accepted and changes nothing: sharing ends with the run; "
          "ep.enable_weightless=1 is --weightless; ep.context_source_model_path is refused: it is a load-time option)");
  app.add_flag("--weightless", o.weightless,
               "weightless context (docs/weight-sharing.md): weights stay in the source models, the .bin records "
               "where (ctxrun --source-model, ORT's ep.context_source_model_path); weights the compiler derives "
               "are stored");
  std::string weightlessScope = "all";
  app.add_option("--weightless-scope", weightlessScope,
                 "with --weightless (or --package): which source initializers stay in the source model: all, or "
                 "external-only (those stored as external data; ONNX Runtime's OrtWeightlessSupport_EXTERNAL_ONLY)")
      ->check(CLI::IsMember({"all", "external-only"}));
  app.add_flag("--force", o.force, "overwrite existing outputs");
  std::string memoryLimit;
  app.add_option("--memory-limit", memoryLimit,
                 "refuse a model any of whose tensors or planned arenas needs more than SIZE bytes (K, M, G, T; "
                 "default 16G)");
  app.add_flag("--error-if-no-nodes-compiled", o.errorIfNoNodesCompiled, "fail when no node can be compiled");
  app.add_option(
      "--json", jsonPath,
      "write a JSON report to FILE, or - for stdout (schema in docs/ctxgen-json.md; written on failure too)");
  app.add_flag("--dry-run", o.dryRun, "print the partition report and write nothing");
  app.add_flag("--dump", o.dumpPrograms, "print the compiled programs as text");
  app.add_option(
      "--dump-after", o.dumpAfter,
      fmt::format("print every graph as it is after this graph pass ({}), or every partition after this lowering "
                  "pass ({})",
                  fmt::join(analysis::graphPassNames(), ", "), fmt::join(codegen::loweringPassNames(), ", ")));
  app.add_option("--stop-after", o.stopAfter,
                 "stop after this pass (graph or lowering), print the graphs or partitions, write nothing");
  app.add_flag(
      "--tune", o.tune,
      "time each Conv's algorithms on this machine and record the fastest in the program (docs/ctxgen.md#tuning); "
      "timings are kept in a cache reused by later runs");
  std::string tuneCache;
  app.add_option("--tune-cache", tuneCache,
                 "the --tune timing cache file (default $XDG_CACHE_HOME/ctxkit/tune-cache.tsv or "
                 "~/.cache/ctxkit/tune-cache.tsv)");
  app.add_option("--depfile", depfile, "write Makefile-style dependencies to FILE");
  app.add_flag("-v,--verbose", verbose, "per-partition, per-stage and per-pass detail");
  app.add_flag("-q,--quiet", quiet, "print errors only");
  app.add_option("--log-level", logLevel, fmt::format("diagnostics from this severity on: {}", cli::kSeverityNames));
  for (const char* other : {"--output-dir", "--embed-mode", "--external-initializers-file", "--dry-run", "--stop-after",
                            "--share", "--json", "--depfile", "--weightless"})
    packageOption->excludes(app.get_option(other));
  app.footer(kHelpFooter);
  app.set_version_flag("--version", std::string("ctxgen ") + epcontext::kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? cli::kExitOk : cli::kExitUsage;
  }
  if (auto usage = cli::initLogging("ctxgen", {verbose, quiet, logLevel})) {
    cli::logError("{}", *usage);
    return cli::kExitUsage;
  }
  verbose = cli::logEnabled(cli::Severity::Verbose);
  quiet = !cli::logEnabled(cli::Severity::Info);

  if (listTargets) {
    std::cout << partitioner::listBuiltinTargets();
    return cli::kExitOk;
  }
  if (!printTarget.empty()) {
    auto json = partitioner::builtinTargetJson(printTarget);
    if (!json) {
      cli::logError("--print-target: unknown built-in target '{}'; built-in: {}", printTarget,
                    fmt::join(partitioner::builtinTargetNames(), ", "));
      return cli::kExitUsage;
    }
    std::cout << *json << "\n";
    return cli::kExitOk;
  }
  if (models.empty()) {
    cli::logError("no MODEL given");
    std::cerr << app.help();
    return cli::kExitUsage;
  }

  // The tool's own options first, then -C: an ONNX Runtime key that contradicts one of them is a usage error.
  ctxgen::SettingSources sources;
  Status status;
  if (app.count("--embed-mode"))
    status = sources.claim("embed mode", fmt::format("--embed-mode {}", o.embedMode), std::to_string(o.embedMode));
  if (status.isOk() && app.count("--node-name-prefix"))
    status = sources.claim("node name prefix", "--node-name-prefix " + o.nodeNamePrefix, o.nodeNamePrefix);
  if (status.isOk() && app.count("--external-initializers-file"))
    status = sources.claim("external initializers file", "--external-initializers-file " + o.externalInitializersFile,
                           o.externalInitializersFile);
  if (status.isOk() && o.share) status = sources.claim("context sharing", "--share", "1");
  if (status.isOk() && o.weightless) status = sources.claim("weightless mode", "--weightless", "1");
  if (status.isOk() && !outputDir.empty())
    status = sources.claim("output folder", "-o " + outputDir,
                           (std::filesystem::path(outputDir) / "").lexically_normal().string());
  for (const auto& c : configs)
    if (status.isOk()) status = ctxgen::applyConfig(c, o, sources);
  // A failed run still writes its --json report, so a build log or CI step can read why.
  auto fail = [&](const std::string& message, int exitCode) {
    cli::logError("{}", message);
    if (jsonPath == "-") std::cout << pipeline::failureReportJson(message);
    else if (!jsonPath.empty() && mayHoldReport(jsonPath))
      (void)writeReportFile(jsonPath, pipeline::failureReportJson(message), "JSON report");
    return exitCode;
  };
  if (!status) return fail(status.error().message(), cli::kExitUsage);
  if (app.count("--weightless-scope") && !o.weightless && !app.count("--package"))
    return fail("--weightless-scope needs --weightless (or -C ep.enable_weightless=1) or --package", cli::kExitUsage);
  o.weightlessExternalOnly = weightlessScope == "external-only";
  if (!memoryLimit.empty()) {
    auto bytes = cli::parseByteCount(memoryLimit);
    if (!bytes) return fail("--memory-limit: " + bytes.error().message(), cli::kExitUsage);
    ir::setMemoryLimit(*bytes);
  }
  for (const auto& m : cli::splitModelList(models)) o.models.emplace_back(m);
  if (!outputDir.empty()) o.outputDir = outputDir;
  if (!depfile.empty()) o.depfile = depfile;
  if (!jsonPath.empty() && jsonPath != "-") o.reportFile = jsonPath;
  o.tuneCache = tuneCache;
  if (!tuneCache.empty() && !o.tune) {
    cli::logError("--tune-cache is for --tune");
    return cli::kExitUsage;
  }

  if (!packageDir.empty()) {
    auto written = pipeline::writePackage(o, packageDir, [&](const pipeline::Progress& p) {
      if (verbose) cli::logVerbose("{}", p.message);
    });
    if (!written) return fail(written.error().message(), cli::exitCodeFor(written.error()));
    if (!quiet) std::cout << pipeline::packageText(*written) << std::flush;
    return cli::kExitOk;
  }

  // On a terminal a status line follows the run; in a log (or with -v) it is one line at the end.
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto progress = [&](const pipeline::Progress& p) {
    if (verbose) cli::logVerbose("{}", p.message);
    else cli::setStatusLine(pipeline::progressLine(p, seconds()));
  };
  auto report = pipeline::compileModels(o, progress);
  cli::clearStatusLine();
  if (!report) return fail(report.error().message(), cli::exitCodeFor(report.error()));
  for (const auto& m : report->models)
    for (const auto& w : m.warnings) cli::logWarning("'{}': {}", m.source.string(), w);
  if (!jsonPath.empty() && !report->reportFileWritten) {
    std::string json = pipeline::reportJson(*report);
    if (jsonPath == "-") {
      std::cout << json;
    } else if (auto s = writeReportFile(jsonPath, json, "JSON report"); !s) {
      cli::logError("{}", s.error().message());
      return cli::kExitFailure;
    }
  }
  if (o.dumpPrograms || !o.dumpAfter.empty() || report->stopped) std::cout << report->programDump;
  if (report->stopped) return cli::kExitOk;
  if (!quiet && jsonPath != "-") std::cout << pipeline::reportText(*report, verbose);
  std::cout << std::flush;
  cli::logInfo("{}", pipeline::summaryLine(*report, seconds()));
  return cli::kExitOk;
}
