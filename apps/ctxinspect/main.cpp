// ctxinspect: lists EPContext nodes and deployment files of _ctx.onnx models and verifies ctxkit binaries.
#include "cli/cli_util.h"
#include "epcontext/contract.h"
#include "inspect/inspect.h"
#include "support/file_io.h"

#include <CLI/CLI.hpp>

#include <iostream>

using namespace ctxkit;

int main(int argc, char** argv) {
  CLI::App app{"ctxinspect: list EPContext nodes and deployment files, verify ctxkit context binaries"};
  std::vector<std::string> models;
  std::string dot;
  bool json = false;
  inspect::Options options;
  app.add_option("models", models, "_ctx.onnx files (from ctxkit or any other EP)")->required();
  app.add_flag("--verify", options.verify, "also check every weight hash and padding byte of ctxkit binaries and load every external initializer");
  app.add_flag("--json", json, "print the report as JSON (schema in docs/ctxinspect-json.md)");
  app.add_option("--dot", dot, "write a Graphviz picture of the partitioning to FILE");
  app.set_version_flag("--version", std::string("ctxinspect ") + epcontext::kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? cli::kExitOk : cli::kExitUsage;
  }
  std::vector<std::filesystem::path> paths;
  for (const auto& m : cli::splitModelList(models)) paths.emplace_back(m);
  auto report = inspect::inspectModels(paths, options);
  if (!report) {
    std::cerr << "ctxinspect: error: " << report.error().message() << "\n";
    return cli::kExitFailure;
  }
  if (!dot.empty()) {
    auto text = inspect::partitionDot(paths);
    Status s = text ? writeFileAtomically(dot, *text) : Status(text.error());
    if (!s) {
      std::cerr << "ctxinspect: error: " << s.error().message() << "\n";
      return cli::kExitFailure;
    }
  }
  std::cout << (json ? inspect::reportJson(*report) : inspect::reportText(*report));
  return report->problems.empty() ? cli::kExitOk : cli::kExitFailure;
}
