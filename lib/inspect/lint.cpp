// ctxinspect --lint (lint.h): structural rules on the models' EPContext nodes, the files they reference and their
// metadata, for any EP's deployment.
#include "inspect/lint.h"

#include "epcontext/contract.h"
#include "format/container.h"
#include "inspect/external_data.h"
#include "onnx_io/onnx_io.h"
#include "runtime/compatibility.h"
#include "support/file_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace ctxkit::inspect {

namespace fs = std::filesystem;

const std::vector<LintRule>& lintRules() {
  static const std::vector<LintRule> rules = {
      {"CTXL001", "embed-mode", Level::Error,
       "embed_mode must be 0 (context in a file beside the model) or 1 (inside "
       "the node)"},
      {"CTXL002", "missing-context", Level::Error,
       "a node with main_context=1 must carry ep_cache_context: with embed_mode 1 every partition's node holds its own "
       "payload (ONNX Runtime issue 31977 wrote it for the first partition only); recompile"},
      {"CTXL003", "orphan-node", Level::Error,
       "a node with main_context=0 finds its context in a main_context=1 node of the same EP: lint a shared group's "
       "models together, or ship the model that holds the context"},
      {"CTXL004", "absolute-context-path", Level::Error,
       "ep_cache_context must be relative to the model's folder, or the deployment works only on the machine that "
       "compiled it (ONNX Runtime issue 22131); recompile with a relative path or rewrite the attribute"},
      {"CTXL005", "escaping-context-path", Level::Error,
       "ep_cache_context must stay inside the model's folder: a deployment copies that folder"},
      {"CTXL006", "missing-context-file", Level::Error, "the context binary a node names must exist: ship it"},
      {"CTXL007", "external-data", Level::Warning,
       "the compiled model still reads weights from an external data file (often the source model's, ONNX Runtime "
       "issue 23358): ship that file too, or compile with the weights in the context"},
      {"CTXL008", "missing-external-data", Level::Error,
       "an external data file the compiled model reads is missing or outside its folder: ship it beside the model"},
      {"CTXL009", "no-compatibility-metadata", Level::Warning,
       "a model with ctxkit EPContext nodes carries ep_compatibility_info.CtxKitExecutionProvider so that ONNX "
       "Runtime can check it without creating a session; recompile with a current ctxgen"},
      {"CTXL010", "incompatible", Level::Error,
       "the compatibility metadata says this ctxkit cannot run the model: recompile with ctxgen for this target"},
      {"CTXL011", "duplicate-node-name", Level::Error,
       "node names must be unique within a graph: ONNX Runtime refuses "
       "a model whose nodes share one"},
      {"CTXL012", "duplicate-partition", Level::Error,
       "main-context nodes of one deployment must name different partitions: a shared context finds its graphs by "
       "partition name"},
      {"CTXL013", "no-source", Level::Error, "every EPContext node must name the EP that wrote it in `source`"},
      {"CTXL014", "no-sdk-version", Level::Note,
       "ep_sdk_version tells which SDK compiled the context; without it a version mismatch fails late"},
      {"CTXL015", "inconsistent-compatibility", Level::Error,
       "the model's compatibility metadata must describe the context binary it ships with (format, ctxkit version, "
       "target, revision): the two files come from different compiles; ship the pair one ctxgen run wrote"},
      {"CTXL016", "stale-context-binary", Level::Error,
       "a ctxkit context binary must open and be the one the model was written with (the model records its "
       "checksum): the loader refuses it; ship the binary from the same ctxgen run, or recompile"},
  };
  return rules;
}

namespace {

const LintRule& ruleOf(std::string_view id) {
  for (const LintRule& r : lintRules())
    if (id == r.id) return r;
  return lintRules().front();
}

const char* levelName(Level l) { return l == Level::Error ? "error" : l == Level::Warning ? "warning" : "note"; }

class Linter {
public:
  Status addModel(const fs::path& path) {
    onnx_io::LoadOptions load;
    load.resolveExternalData = false;
    CTX_ASSIGN_OR_RETURN(ir::Model model, onnx_io::loadModel(path, load));
    const std::string m = path.string();
    const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    std::map<std::string, size_t> names;
    size_t ours = 0;
    for (const ir::Node& n : model.graph.nodes) {
      if (!n.name.empty() && ++names[n.name] == 2)
        add("CTXL011", m, n.name, fmt::format("more than one node is named '{}'", n.name));
      if (n.opType != epcontext::kOpType) continue;
      ours += epcontext::isOurNode(n) ? 1 : 0;
      checkNode(m, dir, n);
    }
    std::vector<ExternalInitializer> external;
    collectExternal(model.graph, "", external);
    for (const ExternalInitializer& e : external) checkExternal(m, dir, e);
    const std::string* info = model.findMetadata(epcontext::compatibilityMetadataKey());
    for (const ir::Node& n : model.graph.nodes)
      if (n.opType == epcontext::kOpType && epcontext::isOurNode(n)) checkOurContext(m, dir, model, info, n);
    if (ours > 0 && !info) {
      add("CTXL009", m, "", fmt::format("no {} metadata", epcontext::compatibilityMetadataKey()));
    } else if (info) {
      runtime::CompatibilityVerdict v = runtime::assessCompatibilityInfo(*info);
      if (v.level == runtime::Compatibility::Unsupported)
        add("CTXL010", m, "", fmt::format("'{}': {}", *info, v.reason));
    }
    return Status::ok();
  }

  std::vector<Finding> finish() {
    // Secondary nodes and the main nodes they need, across the deployment.
    for (const auto& [model, node, source] : secondaries_)
      if (!mainSources_.count(source))
        add("CTXL003", model, node,
            fmt::format("main_context=0, and no node of source '{}' in the linted models has main_context=1", source));
    std::stable_sort(findings_.begin(), findings_.end(),
                     [](const Finding& a, const Finding& b) { return a.level < b.level; });
    return std::move(findings_);
  }

private:
  void add(const char* rule, const std::string& model, const std::string& node, std::string message) {
    findings_.push_back({rule, ruleOf(rule).level, model, node, std::move(message)});
  }

  void checkNode(const std::string& m, const fs::path& dir, const ir::Node& n) {
    const epcontext::NodeAttributes a = epcontext::readNodeAttributes(n);
    if (a.source.empty()) add("CTXL013", m, n.name, "no source attribute");
    if (a.sdkVersion.empty()) add("CTXL014", m, n.name, "no ep_sdk_version attribute");
    if (a.embedMode != 0 && a.embedMode != 1) {
      add("CTXL001", m, n.name, fmt::format("embed_mode is {}", a.embedMode));
      return;
    }
    if (a.mainContext == 0) {
      secondaries_.push_back({m, n.name, a.source});
      return;
    }
    mainSources_.insert(a.source);
    const std::string partition = epcontext::contextGraphName(n);
    if (auto [it, fresh] = partitions_.emplace(partition, m + ": '" + n.name + "'"); !fresh)
      add("CTXL012", m, n.name, fmt::format("partition '{}' is also named by {}", partition, it->second));
    if (!a.cacheContext || a.cacheContext->empty()) {
      add("CTXL002", m, n.name, fmt::format("main_context=1 and embed_mode={} but no ep_cache_context", a.embedMode));
      return;
    }
    if (a.embedMode == 1) return;
    const std::string path(*a.cacheContext);
    if (fs::path(path).is_absolute()) {
      add("CTXL004", m, n.name, fmt::format("ep_cache_context is the absolute path '{}'", path));
      return;
    }
    auto inside = resolveInside(dir, path);
    if (!inside) {
      add("CTXL005", m, n.name, fmt::format("ep_cache_context '{}': {}", path, inside.error().message()));
      return;
    }
    std::error_code ec;
    if (!fs::is_regular_file(*inside, ec))
      add("CTXL006", m, n.name, fmt::format("context binary '{}' does not exist", inside->string()));
  }

  void checkExternal(const std::string& m, const fs::path& dir, const ExternalInitializer& init) {
    const std::string& location = init.where.location;
    auto inside = resolveInside(dir, location);
    std::error_code ec;
    if (!inside || !fs::is_regular_file(*inside, ec)) {
      add("CTXL008", m, "",
          fmt::format("initializer '{}' reads '{}', which is {}", init.name, location,
                      inside ? "missing" : "outside the model's folder: " + inside.error().message()));
      return;
    }
    if (externalFiles_.insert({m, location}).second)
      add("CTXL007", m, "", fmt::format("initializers are read from '{}' (first: '{}')", location, init.name));
  }

  // A ctxkit main node's context binary (in its file or embedded), opened and checked against the model that names
  // it: its compatibility block against the model's metadata, its checksum against the one the model recorded.
  // Nodes whose file is missing or misplaced have their finding already.
  void checkOurContext(const std::string& m, const fs::path& dir, const ir::Model& model, const std::string* info,
                       const ir::Node& n) {
    const epcontext::NodeAttributes a = epcontext::readNodeAttributes(n);
    if (a.mainContext != 1 || !a.cacheContext || a.cacheContext->empty()) return;
    Expected<format::ContainerView> view = makeError(ErrorCode::Internal, "no context read");
    std::string where;
    if (a.embedMode == 1) {
      auto bytes = std::make_shared<const std::string>(*a.cacheContext);
      const std::span<const std::byte> span(reinterpret_cast<const std::byte*>(bytes->data()), bytes->size());
      where = fmt::format("the context embedded in '{}'", n.name);
      view = format::ContainerView::open(span, bytes, where);
    } else if (a.embedMode == 0) {
      auto inside = resolveInside(dir, std::string(*a.cacheContext));
      std::error_code ec;
      if (fs::path(*a.cacheContext).is_absolute() || !inside || !fs::is_regular_file(*inside, ec)) return;
      where = fmt::format("context binary '{}'", inside->string());
      view = format::ContainerView::openFile(*inside);
    } else {
      return;
    }
    if (!view) {
      add("CTXL016", m, n.name, fmt::format("{} cannot be read: {}", where, view.error().message()));
      return;
    }
    const format::CompatInfo& c = view->compat();
    if (info) {
      if (auto said = epcontext::parseCompatibilityInfo(*info);
          said && (said->formatMajor != c.formatMajor || said->formatMinor != c.formatMinor ||
                   said->version != c.producerVersion || said->targetId != c.targetId ||
                   said->targetRevision != c.targetRevision))
        add("CTXL015", m, n.name,
            fmt::format("the metadata says format {}.{}, ctxkit {}, target {} revision {}; {} was written as format "
                        "{}.{}, ctxkit {}, target {} revision {}",
                        said->formatMajor, said->formatMinor, said->version, said->targetId, said->targetRevision,
                        where, c.formatMajor, c.formatMinor, c.producerVersion, c.targetId, c.targetRevision));
    }
    if (a.embedMode != 0) return;
    const std::string* recorded = model.findMetadata(epcontext::contextChecksumKey(*a.cacheContext));
    if (recorded && *recorded != view->checksum().toHex())
      add("CTXL016", m, n.name,
          fmt::format("the model was written with a binary of checksum {}, but {} has {}", *recorded, where,
                      view->checksum().toHex()));
  }

  std::vector<Finding> findings_;
  std::vector<std::tuple<std::string, std::string, std::string>> secondaries_;  // model, node, source
  std::set<std::string> mainSources_;
  std::map<std::string, std::string> partitions_;  // partition name -> who named it first
  std::set<std::pair<std::string, std::string>> externalFiles_;
};

}  // namespace

Expected<std::vector<Finding>> lintModels(const std::vector<fs::path>& models) {
  Linter linter;
  for (const fs::path& m : models) CTX_RETURN_IF_ERROR(linter.addModel(m));
  return linter.finish();
}

bool hasErrors(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.level == Level::Error; });
}

std::string lintText(const std::vector<Finding>& findings) {
  std::string out;
  size_t errors = 0;
  for (const Finding& f : findings) {
    const LintRule& r = ruleOf(f.rule);
    errors += f.level == Level::Error ? 1 : 0;
    out += fmt::format("{}: {}{} {} {}: {}\n  fix: {}\n", f.model,
                       f.node.empty() ? "" : "node '" + f.node + "': ", levelName(f.level), f.rule, r.name, f.message,
                       r.help);
  }
  out += findings.empty() ? "lint: no findings\n"
                          : fmt::format("lint: {} finding(s), {} error(s)\n", findings.size(), errors);
  return out;
}

std::string lintJson(const std::vector<Finding>& findings) {
  nlohmann::json j;
  j["findings"] = nlohmann::json::array();
  size_t errors = 0, warnings = 0;
  for (const Finding& f : findings) {
    errors += f.level == Level::Error ? 1 : 0;
    warnings += f.level == Level::Warning ? 1 : 0;
    j["findings"].push_back({{"rule", f.rule},
                             {"name", ruleOf(f.rule).name},
                             {"level", levelName(f.level)},
                             {"model", f.model},
                             {"node", f.node},
                             {"message", f.message},
                             {"help", ruleOf(f.rule).help}});
  }
  j["errors"] = errors;
  j["warnings"] = warnings;
  j["ok"] = errors == 0;
  return j.dump(2) + "\n";
}

std::string lintSarif(const std::vector<Finding>& findings) {
  nlohmann::json rules = nlohmann::json::array();
  for (const LintRule& r : lintRules())
    rules.push_back({{"id", r.id},
                     {"name", r.name},
                     {"shortDescription", {{"text", r.name}}},
                     {"help", {{"text", r.help}}},
                     {"defaultConfiguration", {{"level", levelName(r.level)}}}});
  nlohmann::json results = nlohmann::json::array();
  for (const Finding& f : findings) {
    size_t index = 0;
    while (index < lintRules().size() && f.rule != lintRules()[index].id) ++index;
    nlohmann::json location = {{"physicalLocation", {{"artifactLocation", {{"uri", f.model}}}}}};
    if (!f.node.empty()) location["logicalLocations"] = {{{"name", f.node}, {"kind", "EPContext node"}}};
    results.push_back({{"ruleId", f.rule},
                       {"ruleIndex", index},
                       {"level", levelName(f.level)},
                       {"message", {{"text", f.node.empty() ? f.message : "node '" + f.node + "': " + f.message}}},
                       {"locations", {location}}});
  }
  nlohmann::json sarif = {
      {"version", "2.1.0"},
      {"runs",
       {{{"tool", {{"driver", {{"name", "ctxinspect"}, {"version", epcontext::kVersion}, {"rules", rules}}}}},
         {"results", results}}}}};
  return sarif.dump(2) + "\n";
}

}  // namespace ctxkit::inspect
