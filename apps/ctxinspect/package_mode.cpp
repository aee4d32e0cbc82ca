// ctxinspect on a model package (docs/package.md): the manifest read as ctxrun reads it, then each variant's models
// inspected as one deployment whose source model lives in a shared asset.
#include "package_mode.h"

#include "cli/cli_util.h"
#include "cli/log.h"
#include "epcontext/contract.h"
#include "inspect/inspect.h"
#include "package/judge.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

namespace ctxkit::ctxinspect {

int inspectPackage(const std::filesystem::path& root, bool verify, bool json) {
  auto opened = package::open(root);
  if (!opened) {
    cli::logError("{}", opened.error().message());
    return cli::kExitFailure;
  }
  std::vector<std::string> problems;
  if (verify)
    if (auto s = package::verifyAssets(*opened); !s) problems.push_back(s.error().message());
  nlohmann::ordered_json out;
  out["package"] = root.string();
  out["schema_version"] = opened->schemaVersion;
  std::string text = fmt::format("{}: model package, schema {}\n", root.string(), opened->schemaVersion);
  for (const auto& a : opened->assets) {
    out["shared_assets"].push_back({{"uri", a.uri}, {"folder", a.directory.string()}});
    text += fmt::format("  shared asset {}\n", a.uri);
  }
  for (const auto& c : opened->components) {
    nlohmann::ordered_json variants = nlohmann::ordered_json::array();
    text += fmt::format("  component {}\n", c.name);
    for (const auto& v : c.variants) {
      package::Suitability here = package::judgeHere(v);
      text += fmt::format("    {}: {} on {} ({}), here {}\n", v.name, v.modelFile.string(), v.device, v.compatibility,
                          here.verdict);
      variants.push_back({{"name", v.name},
                          {"ep", v.ep},
                          {"device", v.device},
                          {"compatibility", v.compatibility},
                          {"model_file", v.modelFile.string()},
                          {"verdict_here", here.verdict}});
      if (v.ep != epcontext::kEpName) continue;  // another EP's variant: its files are its own business
      auto report = inspect::inspectModels({v.modelFile}, {verify});
      if (!report) {
        problems.push_back(report.error().message());
        continue;
      }
      // The source model of a weightless context sits in the shared asset, not beside the model: the package
      // supplies it through the variant's weights folder (package::open checked it is there).
      std::vector<std::string> supplied;
      for (const auto& f : report->files)
        if (!f.exists && v.weightsFolder && std::filesystem::path(f.path).filename() == v.sourceModel)
          supplied.push_back(f.path);
      for (const auto& p : report->problems)
        if (std::none_of(supplied.begin(), supplied.end(),
                         [&](const std::string& s) { return p.find(s) != std::string::npos; }))
          problems.push_back(fmt::format("{}/{}: {}", c.name, v.name, p));
    }
    out["components"].push_back({{"name", c.name}, {"variants", variants}});
  }
  out["problems"] = problems;
  out["ok"] = problems.empty();
  for (const auto& p : problems) text += "problem: " + p + "\n";
  if (problems.empty() && verify) text += "verified: every shared asset matches its address, every variant checks\n";
  std::cout << (json ? out.dump(2) + "\n" : text) << std::flush;
  return problems.empty() ? cli::kExitOk : cli::kExitFailure;
}

}  // namespace ctxkit::ctxinspect
