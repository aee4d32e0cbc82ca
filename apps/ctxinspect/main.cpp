// ctxinspect: lists EPContext nodes and deployment files of _ctx.onnx models and verifies ctxkit binaries.
#include "cli/cli_util.h"
#include "cli/log.h"
#include "epcontext/contract.h"
#include "inspect/inspect.h"
#include "inspect/lint.h"
#include "package/package.h"
#include "package_mode.h"
#include "runtime/compatibility.h"
#include "support/file_io.h"
#include "support/text.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

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
  $ ctxrun --print-device > device.json     (on the device)
  $ ctxinspect out/model_ctx.onnx --check --against device.json
      will that device run it? the verdict and each reason (field, found, expected, what to do), no session made
  $ ctxinspect deploy/*_ctx.onnx --lint --sarif > lint.sarif
      check any EP's deployment for the ways it breaks (rule ids in docs/ctxinspect.md#lint), as SARIF for CI

Exit codes:
  0  all good
  1  problems found (missing files, paths leaving the model folder, hash mismatches, ...; with --lint: an
     error-level finding; with --check: a verdict UNSUPPORTED) or a model that cannot be read
  2  usage error
)";

// --check: the verdict on each model's compatibility metadata and each ctxkit context binary's compatibility block,
// for this machine or the device profile `against`; exit 1 when one is UNSUPPORTED.
int checkCompatibility(const std::vector<std::filesystem::path>& paths, const std::string& against, bool json) {
  runtime::DeviceProfile device = runtime::thisDevice();
  if (!against.empty()) {
    auto text = readFile(against);
    auto parsed = text ? runtime::parseDeviceProfile(*text, against) : Expected<runtime::DeviceProfile>(text.error());
    if (!parsed) {
      cli::logError("{}", parsed.error().message());
      return cli::kExitFailure;
    }
    device = std::move(*parsed);
  }
  auto report = inspect::inspectModels(paths, {});
  if (!report) {
    cli::logError("{}", report.error().message());
    return cli::kExitFailure;
  }
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  std::string text;
  bool unsupported = false;
  auto add = [&](const std::string& what, const std::string& path, const runtime::CompatibilityVerdict& v) {
    const char* name = runtime::compatibilityName(v.level);
    unsupported = unsupported || v.level == runtime::Compatibility::Unsupported;
    nlohmann::ordered_json reasons = nlohmann::ordered_json::array();
    text += fmt::format("{} ({}): {}\n", path, what, name);
    for (const auto& r : v.reasons) {
      reasons.push_back(
          {{"code", r.code}, {"field", r.field}, {"found", r.found}, {"expected", r.expected}, {"action", r.action}});
      text += fmt::format("  {}: {} is '{}', the device expects '{}': {}\n", r.code, r.field, r.found, r.expected,
                          r.action);
    }
    checks.push_back({{"what", what}, {"path", path}, {"verdict", name}, {"reasons", reasons}});
  };
  for (const auto& m : report->compatibility)
    add("model metadata", m.model, runtime::assessCompatibilityInfo(m.info, device));
  for (const auto& c : report->contexts) add("context binary", c.path, runtime::assessCompatibility(c.compat, device));
  if (checks.empty()) text += "no ctxkit compatibility information in these models (not compiled by ctxgen?)\n";
  if (json) {
    nlohmann::ordered_json out;
    out["device"] = nlohmann::json::parse(runtime::deviceProfileJson(device));
    out["checks"] = checks;
    out["ok"] = !unsupported;
    std::cout << out.dump(2) << "\n" << std::flush;
  } else {
    std::cout << text << std::flush;
  }
  return unsupported ? cli::kExitFailure : cli::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ctxinspect: list EPContext nodes and deployment files, verify ctxkit context binaries"};
  std::vector<std::string> models;
  std::string dot;
  bool json = false, lint = false, sarif = false, check = false;
  std::string against;
  inspect::Options options;
  cli::LogOptions logOptions;
  app.add_option("models", models, "_ctx.onnx files (from ctxkit or any other EP), or one model package folder")
      ->required();
  app.add_flag("--verify", options.verify,
               "also check every weight hash and padding byte of ctxkit binaries and load every external initializer");
  app.add_flag("--json", json, "print the report as JSON (schema in docs/ctxinspect-json.md)");
  app.add_option("--dot", dot, "write a Graphviz picture of the partitioning to FILE");
  app.add_flag("--lint", lint,
               "check the models as one deployment of any EP against the lint rules (docs/ctxinspect.md#lint) and "
               "print the findings instead of the report");
  app.add_flag("--check", check,
               "give each compiled model's and context binary's compatibility verdict with its reasons (for this "
               "machine, or the device of --against) instead of the report");
  app.add_option("--against", against, "with --check: a device profile written by ctxrun --print-device on the device")
      ->needs("--check");
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
  if (paths.size() == 1 && package::isPackage(paths.front()) && !lint && !check && dot.empty())
    return ctxinspect::inspectPackage(paths.front(), options.verify, json);
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
  if (check) return checkCompatibility(paths, against, json);
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
