// ctxinspect: lists EPContext nodes and deployment files of _ctx.onnx models and verifies ctxkit binaries.
#include "cli/cli_util.h"
#include "cli/log.h"
#include "epcontext/contract.h"
#include "inspect/inspect.h"
#include "inspect/lint.h"
#include "support/file_io.h"
#include "support/text.h"

#include <CLI/CLI.hpp>

#include <iostream>

using namespace ctxkit;

namespace {

// Shown after the options by --help, and in the man page help2man makes from it.
constexpr const char* kHelpFooter = R"(Examples:
  $ ctxinspect out/model_ctx.onnx
      list the EPContext nodes and the files to deploy, with sizes and whether each exists
  $ ctxinspect out/prefill_ctx.onnx out/decode_ctx.onnx --verify
      also check every weight hash and structural rule of the shared context binary
  $ ctxinspect out/model_ctx.onnx --json > report.json
      the same report for scripts (docs/ctxinspect-json.md)
  $ ctxinspect out/model_ctx.onnx --dot model.dot && dot -Tsvg model.dot > model.svg
      a picture of the partitioning: compiled partitions and fallback nodes
  $ ctxinspect deploy/*_ctx.onnx --lint --sarif > lint.sarif
      check any EP's deployment for the ways it breaks (rule ids in docs/ctxinspect.md#lint), as SARIF for CI

Exit codes:
  0  all good
  1  problems found (missing files, paths leaving the model folder, hash mismatches, ...; with --lint: an
     error-level finding) or a model that cannot be read
  2  usage error
)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ctxinspect: list EPContext nodes and deployment files, verify ctxkit context binaries"};
  std::vector<std::string> models;
  std::string dot;
  bool json = false, lint = false, sarif = false;
  inspect::Options options;
  cli::LogOptions logOptions;
  app.add_option("models", models, "_ctx.onnx files (from ctxkit or any other EP)")->required();
  app.add_flag("--verify", options.verify,
               "also check every weight hash and padding byte of ctxkit binaries and load every external initializer");
  app.add_flag("--json", json, "print the report as JSON (schema in docs/ctxinspect-json.md)");
  app.add_option("--dot", dot, "write a Graphviz picture of the partitioning to FILE");
  app.add_flag("--lint", lint,
               "check the models as one deployment of any EP against the lint rules (docs/ctxinspect.md#lint) and "
               "print the findings instead of the report");
  app.add_flag("--sarif", sarif, "with --lint: print the findings as SARIF 2.1.0")->needs("--lint")->excludes("--json");
  cli::addLogOptions(app, logOptions);
  app.footer(kHelpFooter);
  app.set_version_flag("--version", std::string("ctxinspect ") + epcontext::kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? cli::kExitOk : cli::kExitUsage;
  }
  if (auto usage = cli::initLogging("ctxinspect", logOptions)) {
    cli::logError("{}", *usage);
    return cli::kExitUsage;
  }
  std::vector<std::filesystem::path> paths;
  for (const auto& m : cli::splitModelList(models)) paths.emplace_back(m);
  if (lint) {
    auto findings = inspect::lintModels(paths);
    if (!findings) {
      cli::logError("{}", findings.error().message());
      return cli::kExitFailure;
    }
    std::cout << (sarif  ? inspect::lintSarif(*findings)
                  : json ? inspect::lintJson(*findings)
                         : inspect::lintText(*findings))
              << std::flush;
    return inspect::hasErrors(*findings) ? cli::kExitFailure : cli::kExitOk;
  }
  cli::logVerbose("inspecting {}{}", counted(paths.size(), "model"), options.verify ? ", verifying hashes" : "");
  auto report = inspect::inspectModels(paths, options);
  if (!report) {
    cli::logError("{}", report.error().message());
    return cli::kExitFailure;
  }
  if (!dot.empty()) {
    auto text = inspect::partitionDot(paths);
    Status s = text ? writeReportFile(dot, *text, "--dot file") : Status(text.error());
    if (!s) {
      cli::logError("{}", s.error().message());
      return cli::kExitFailure;
    }
  }
  std::cout << (json ? inspect::reportJson(*report) : inspect::reportText(*report)) << std::flush;
  if (!report->problems.empty()) {
    cli::logError("{} found (listed in the report)", counted(report->problems.size(), "problem"));
    return cli::kExitFailure;
  }
  return cli::kExitOk;
}
