// Collecting EPContext nodes, deployment files, external data references and context binary summaries.
#include "inspect/inspect.h"

#include "inspect/external_data.h"

#include "epcontext/contract.h"
#include "onnx_io/onnx_io.h"
#include "program/program.h"
#include "program/sharing.h"
#include "runtime/compatibility.h"
#include "runtime/session.h"
#include "support/checked.h"
#include "support/file_io.h"

#include <algorithm>
#include <map>
#include <set>

namespace ctxkit::inspect {

namespace fs = std::filesystem;

namespace {

ValueSummary summarizeValue(const ir::Graph& g, const std::string& name) {
  ValueSummary v{name, "?", "?"};
  if (const ir::ValueInfo* info = g.findValueInfo(name)) {
    v.type = std::string(ir::elemTypeName(info->type));
    v.shape = ir::dimsToString(info->shape);
  } else if (const ir::Initializer* init = g.findInitializer(name)) {
    v.type = std::string(ir::elemTypeName(init->tensor.type()));
    v.shape = ir::shapeToString(init->tensor.shape());
  }
  return v;
}

std::optional<uint64_t> fileSize(const fs::path& p) {
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec) return std::nullopt;
  return size;
}

using epcontext::isOurSource;
// DeploymentFile::format of a context binary we read and check.
constexpr const char* kOurFormat = epcontext::kProducer;

class Inspector {
public:
  explicit Inspector(const Options& options) : options_(options) {}

  Status addModel(const fs::path& path) {
    report_.models.push_back(path.string());
    addFile(path.string(), path, "model", "onnx", "");
    onnx_io::LoadOptions load;
    load.resolveExternalData = false;
    CTX_ASSIGN_OR_RETURN(auto model, onnx_io::loadModel(path, load));
    if (const std::string* info = model.findMetadata(epcontext::compatibilityMetadataKey())) {
      runtime::CompatibilityVerdict verdict = runtime::assessCompatibilityInfo(*info);
      report_.compatibility.push_back(
          {path.string(), *info, runtime::compatibilityName(verdict.level), std::move(verdict.reason)});
    }
    fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    size_t nodes = 0, ours = 0;
    for (const ir::Node& n : model.graph.nodes)
      if (n.opType == epcontext::kOpType) {
        addEpContextNode(path, dir, model.graph, n);
        ++nodes;
        ours += epcontext::isOurNode(n) ? 1 : 0;
      }
    // A model that also holds another EP's nodes runs only beside that EP (ONNX Runtime), never in ctxrun.
    if (ours > 0 && ours == nodes) ourModels_.push_back(path);
    // After the EPContext nodes, so a .bin that also holds shared fallback initializers is listed as a context.
    std::vector<ExternalInitializer> external;
    collectExternal(model.graph, "", external);
    for (const auto& e : external) addExternalData(path, dir, e);
    if (!external.empty()) modelsWithExternalData_.push_back(path);
    return Status::ok();
  }

  Report finish() {
    checkExternalRanges();
    if (options_.verify) loadExternalData();
    // Every partition named by one of our nodes must be a graph in some context of that model.
    std::set<std::string> graphNames;
    for (const auto& c : report_.contexts)
      for (const auto& g : c.graphs) graphNames.insert(g.name);
    for (const auto& n : report_.nodes)
      if (isOurSource(n.source) && !report_.contexts.empty() && !graphNames.count(n.partitionName))
        report_.problems.push_back(fmt::format("{}: EPContext node '{}': partition '{}' is in no context binary",
                                               n.model, n.name, n.partitionName));
    nameCompiledModels();
    if (options_.verify) loadAsRuntime();
    return std::move(report_);
  }

private:
  void addEpContextNode(const fs::path& path, const fs::path& dir, const ir::Graph& g, const ir::Node& n) {
    EpContextNode e;
    e.model = path.string();
    e.name = n.name;
    const epcontext::NodeAttributes a = epcontext::readNodeAttributes(n);
    e.source = a.source;
    e.mainContext = a.mainContext;
    e.embedMode = a.embedMode;
    e.partitionName = a.partitionName;
    e.sdkVersion = a.sdkVersion;
    e.hardwareArchitecture = a.hardwareArchitecture;
    e.onnxModelFilename = a.onnxModelFilename;
    e.notes = a.notes;
    e.maxSize = a.maxSize;
    for (const auto& in : n.inputs) e.inputs.push_back(summarizeValue(g, in));
    for (const auto& out : n.outputs) e.outputs.push_back(summarizeValue(g, out));
    std::string label = fmt::format("{}: EPContext node '{}'", path.string(), n.name);
    if (e.embedMode != 0 && e.embedMode != 1) {
      report_.problems.push_back(
          fmt::format("{}: {} is {}; expected 0 or 1", label, epcontext::attr::kEmbedMode, e.embedMode));
    } else if (a.cacheContext) {
      std::string_view cache = *a.cacheContext;
      if (e.embedMode == 1) {
        e.cacheContext = fmt::format("embedded, {} bytes", cache.size());
        // Another EP's payload is opaque: its size is all there is to say.
        if (isOurSource(e.source) && openEmbeddedContext(label, cache, e.model) && !e.onnxModelFilename.empty())
          addReferencedFile(dir, e.onnxModelFilename, "source model (weights of a weightless context)", "onnx", label);
      } else {
        e.cacheContext = cache;
        if (auto index = addReferencedFile(dir, e.cacheContext, "context binary", "raw", label)) {
          claimContextBinary(*index, e.source, e.model);
          // A weightless context's weights are in the source model: a deployment ships it (or points
          // ctxrun --source-model / ep.context_source_model_path at it).
          if (auto pins = weightlessContexts_.find(report_.files[*index].path);
              pins != weightlessContexts_.end() && !e.onnxModelFilename.empty())
            addSourceModelFiles(dir, e.onnxModelFilename, pins->second, label);
        }
      }
    } else if (e.mainContext == 1) {
      report_.problems.push_back(
          fmt::format("{}: {}=1 but no {}", label, epcontext::attr::kMainContext, epcontext::attr::kEpCacheContext));
    }
    if (e.source.empty())
      report_.problems.push_back(fmt::format("{}: no {} attribute", label, epcontext::attr::kSource));
    report_.nodes.push_back(std::move(e));
  }

  void addExternalData(const fs::path& model, const fs::path& dir, const ExternalInitializer& init) {
    ExternalDataRef ref;
    ref.model = model.string();
    ref.initializer = init.name;
    ref.location = init.where.location;
    ref.offset = init.where.offset;
    ref.length = init.where.length;
    std::string label = fmt::format("{}: initializer '{}'", ref.model, ref.initializer);
    auto index = addReferencedFile(dir, ref.location, "external data", "raw", label);
    if (index) ref.path = report_.files[*index].path;
    else ref.problem = "path refused";
    report_.externalData.push_back(std::move(ref));
  }

  // A context binary referenced by a node of `source`: ours is read and checked, another EP's stays opaque.
  // A file first listed as external data becomes a context binary once a node names it.
  void claimContextBinary(size_t index, const std::string& source, const std::string& model) {
    DeploymentFile& f = report_.files[index];
    if (isOurSource(source)) contextModels_[f.path].insert(model);
    if (f.format == kOurFormat) return;
    if (f.format == "opaque" && !isOurSource(source)) return;
    f.role = "context binary";
    f.format = isOurSource(source) ? kOurFormat : "opaque";
    f.ep = source;
    if (f.format != kOurFormat || !f.exists) return;
    std::string shown = f.path;
    uint64_t bytes = f.bytes.value_or(0);
    auto view = format::ContainerView::openFile(shown);
    if (!view) {
      report_.problems.push_back(view.error().message());
      return;
    }
    std::set<std::pair<uint64_t, uint64_t>>& ranges = containerWeights_[shown];
    for (const auto& w : view->weights())
      if (!w.inSource()) ranges.emplace(w.offset, w.size);
    if (view->weightless()) weightlessContexts_[shown] = view->sourcePins();
    addContext(shown, std::move(view).value(), bytes);
  }

  // Returns whether the context is weightless.
  bool openEmbeddedContext(const std::string& label, std::string_view bytes, const std::string& model) {
    contextModels_[label + " (embedded)"].insert(model);
    auto payload = std::make_shared<std::string>(bytes);
    auto view = format::ContainerView::open(std::as_bytes(std::span(payload->data(), payload->size())), payload,
                                            label + " (embedded context)");
    if (!view) {
      report_.problems.push_back(view.error().message());
      return false;
    }
    const bool weightless = view->weightless();
    addContext(label + " (embedded)", std::move(view).value(), 0);
    return weightless;
  }

  // Lists a file once per path. `referrer` names who needs it, for the problem when it is missing.
  size_t addFile(const std::string& shown, const fs::path& real, const std::string& role, const std::string& fileFormat,
                 const std::string& referrer) {
    if (auto it = fileIndex_.find(shown); it != fileIndex_.end()) return it->second;
    DeploymentFile f;
    f.path = shown;
    f.role = role;
    f.format = fileFormat;
    std::error_code ec;
    auto status = fs::status(real, ec);
    if (ec || !fs::exists(status)) {
      f.problem = "missing";
      report_.problems.push_back(referrer.empty() ? fmt::format("{} '{}' is missing", role, shown)
                                                  : fmt::format("{}: {} '{}' is missing", referrer, role, shown));
    } else if (!fs::is_regular_file(status)) {
      f.problem = "not a regular file";
      report_.problems.push_back(fmt::format("{}: {} '{}' is not a regular file", referrer, role, shown));
    } else {
      f.bytes = fileSize(real);
      f.exists = f.bytes.has_value();
    }
    fileIndex_.emplace(shown, report_.files.size());
    report_.files.push_back(std::move(f));
    return report_.files.size() - 1;
  }

  // The file `relative` names, resolved against the model's folder; an absolute or escaping path is listed as
  // written, is a problem, and gives no index.
  // A weightless context's source model `model` (relative to `dir`) and the external data files of it the context
  // pins (relative to the model's folder): a deployment ships them all. A file whose size is not the pinned one is a
  // problem here already; its bytes are checked against the pinned hash when the context loads.
  void addSourceModelFiles(const fs::path& dir, const std::string& model, const std::vector<format::SourcePin>& pins,
                           const std::string& referrer) {
    auto checkSize = [&](std::optional<size_t> index, const format::SourcePin& pin) {
      if (!index) return;
      const DeploymentFile& f = report_.files[*index];
      if (f.exists && f.bytes && *f.bytes != pin.size)
        report_.problems.push_back(
            fmt::format("{}: {} '{}' is {} bytes; the context binary was compiled from one of {} "
                        "bytes (recompile, or ship the file it was compiled from)",
                        referrer, pin.file.empty() ? "source model" : "external data", f.path, *f.bytes, pin.size));
    };
    const auto modelIndex =
        addReferencedFile(dir, model, "source model (weights of a weightless context)", "onnx", referrer);
    for (const format::SourcePin& pin : pins) {
      if (pin.model != model) continue;
      if (pin.file.empty()) {
        checkSize(modelIndex, pin);
        continue;
      }
      const std::string data = (fs::path(model).parent_path() / pin.file).generic_string();
      checkSize(addReferencedFile(dir, data, "external data of a source model (weights of a weightless context)", "raw",
                                  referrer),
                pin);
    }
  }

  std::optional<size_t> addReferencedFile(const fs::path& dir, const std::string& relative, const std::string& role,
                                          const std::string& fileFormat, const std::string& referrer) {
    auto resolved = resolveInside(dir, relative);
    if (resolved) return addFile(resolved->string(), *resolved, role, fileFormat, referrer);
    std::string why = resolved.error().message();
    report_.problems.push_back(fmt::format("{}: {} path refused: {}", referrer, role, why));
    if (!fileIndex_.count(relative)) {
      DeploymentFile f;
      f.path = relative;
      f.role = role;
      f.format = fileFormat;
      f.problem = why;
      fileIndex_.emplace(relative, report_.files.size());
      report_.files.push_back(std::move(f));
    }
    return std::nullopt;
  }

  // Every external data range must lie inside its file; one inside a ctxkit container must be exactly one of its
  // weights (so the container's hashes cover the bytes, and no header or program is read as a tensor).
  void checkExternalRanges() {
    for (ExternalDataRef& ref : report_.externalData) {
      if (ref.path.empty()) continue;  // refused: already a problem
      const DeploymentFile& file = report_.files[fileIndex_.at(ref.path)];
      ref.fileBytes = file.bytes;
      if (!file.exists) {
        ref.problem = file.problem;  // reported once for the file
        continue;
      }
      std::string where =
          fmt::format("{}: initializer '{}': external data '{}'", ref.model, ref.initializer, ref.location);
      if (!rangeFits(ref.offset, ref.length, *file.bytes)) {
        ref.problem = fmt::format("offset {} + length {} exceeds file size {}", ref.offset, ref.length, *file.bytes);
        report_.problems.push_back(fmt::format("{}: offset {} + length {} exceeds file size {} of '{}'", where,
                                               ref.offset, ref.length, *file.bytes, ref.path));
        continue;
      }
      auto container = containerWeights_.find(ref.path);
      if (container != containerWeights_.end() && !container->second.count({ref.offset, ref.length})) {
        ref.problem = "not one weight of the ctxkit context binary";
        report_.problems.push_back(fmt::format("{}: offset {} length {} is not one weight of ctxkit context binary "
                                               "'{}'; expected the exact range of one of its {} weights",
                                               where, ref.offset, ref.length, ref.path, container->second.size()));
      }
    }
  }

  // --verify: load each model's external initializers as a runtime does, which also checks what the listing cannot
  // (a length that disagrees with the tensor's type and shape, offsets that are not decimal numbers). Models with a
  // problem already reported are skipped so that one fault is reported once.
  void loadExternalData() {
    for (const auto& model : modelsWithExternalData_) {
      bool reported =
          std::any_of(report_.externalData.begin(), report_.externalData.end(),
                      [&](const ExternalDataRef& r) { return r.model == model.string() && !r.problem.empty(); });
      if (reported) continue;
      if (auto full = onnx_io::loadModel(model); !full) report_.problems.push_back(full.error().message());
    }
  }

  // --verify: load each model whose EPContext nodes are all ctxkit's exactly as ctxrun does (runtime::Session, every
  // weight hash checked), so verify refuses whatever a load refuses, with the load's own message: one implementation of
  // the load checks. A model with a problem already listed (about it or a context binary it loads) is not loaded again,
  // so that one fault is reported once.
  void loadAsRuntime() {
    for (const fs::path& model : ourModels_) {
      std::vector<std::string> names{model.string()};
      for (const auto& [context, models] : contextModels_)
        if (models.count(model.string())) names.push_back(context);
      bool reported = std::any_of(report_.problems.begin(), report_.problems.end(), [&](const std::string& problem) {
        return std::any_of(names.begin(), names.end(),
                           [&](const std::string& name) { return problem.find(name) != std::string::npos; });
      });
      if (reported) continue;
      // Weights the listing hashed already (ContainerView::verify, which a load with verifyWeights runs too) are
      // not hashed twice; a weightless context's weights are hashed by the load, where it resolves them.
      bool hashed = true;
      for (const ContextSummary& c : report_.contexts)
        if (std::find(names.begin(), names.end(), c.path) != names.end())
          hashed = hashed && c.verified && !c.weightless;
      runtime::SessionOptions load;
      load.verifyWeights = !hashed;
      load.shareContexts = false;
      if (auto session = runtime::Session::loadFile(model, load); !session)
        report_.problems.push_back(session.error().message());
    }
  }

  void addContext(const std::string& shown, format::ContainerView view, uint64_t fileBytes) {
    ContextSummary c;
    c.path = shown;
    c.compat = view.compat();
    runtime::CompatibilityVerdict verdict = runtime::assessCompatibility(c.compat);
    c.verdict = runtime::compatibilityName(verdict.level);
    c.verdictReason = std::move(verdict.reason);
    c.fileBytes = fileBytes ? fileBytes : view.fileSize();
    c.alignment = view.alignment();
    c.weightCount = view.weights().size();
    c.weightless = view.weightless();
    std::vector<uint64_t> weightBytes;
    for (const auto& w : view.weights()) {
      weightBytes.push_back(w.size);
      if (w.inSource()) {
        ++c.sourceWeights;
        c.sourceWeightBytes += w.size;
      }
    }
    std::vector<program::Program> programs;
    programs.reserve(view.graphs().size());
    std::map<uint32_t, WeightSharing> users;
    for (size_t g = 0; g < view.graphs().size(); ++g) {
      const format::GraphInfo& gi = view.graphs()[g];
      GraphSummary gs{gi.name, gi.sourceModel, 0, 0, 0};
      auto prog = program::deserialize(view.programBytes(g), view.weights().size(),
                                       fmt::format("{}: graph '{}'", shown, gi.name));
      if (!prog) {
        report_.problems.push_back(prog.error().message());
      } else if (program::hasLoadTimeTensors(*prog) && !view.loadTimeTensors()) {
        report_.problems.push_back(fmt::format("{}: graph '{}' holds load-time tensors but the container does not "
                                               "declare them (flag bit 3)",
                                               shown, gi.name));
      } else {
        gs.opCount = prog->ops.size();
        gs.arenaBytes = prog->arenaSize;
        for (const auto& t : prog->tensors) {
          if (t.kind != program::TensorKind::Weight) continue;
          ++gs.weightRefs;
          WeightSharing& ws = users[t.index];
          ws.index = t.index;
          ws.bytes = view.weights()[t.index].size;
          if (ws.graphs.empty() || ws.graphs.back() != gi.name) ws.graphs.push_back(gi.name);
          if (std::find(ws.models.begin(), ws.models.end(), gi.sourceModel) == ws.models.end())
            ws.models.push_back(gi.sourceModel);
        }
      }
      c.graphs.push_back(std::move(gs));
      if (prog) programs.push_back(std::move(*prog));
    }
    std::vector<const program::Program*> programRefs;
    for (const auto& p : programs) programRefs.push_back(&p);
    const program::SharingFigures figures = program::sharingFigures(weightBytes, programRefs);
    c.uniqueWeightBytes = figures.uniqueBytes;
    c.referencedWeightBytes = figures.referencedBytes;
    c.storedWeightBytes = figures.storedBytes;
    c.sharingRatio = figures.ratio();
    std::map<std::vector<std::string>, WeightUsers> groups;
    for (auto& [index, ws] : users) {
      WeightUsers& group = groups[ws.graphs];
      if (group.graphs.empty()) {
        group.graphs = ws.graphs;
        group.models = ws.models;
      }
      ++group.count;
      group.bytes += ws.bytes;
      if (ws.graphs.size() > 1) c.sharedWeights.push_back(std::move(ws));
    }
    for (auto& [graphs, group] : groups) c.weightUsers.push_back(std::move(group));
    std::stable_sort(c.weightUsers.begin(), c.weightUsers.end(),
                     [](const WeightUsers& a, const WeightUsers& b) { return a.bytes > b.bytes; });
    if (options_.verify) {
      if (auto s = view.verify(); !s) report_.problems.push_back(s.error().message());
      else c.verified = true;
    }
    report_.contexts.push_back(std::move(c));
  }

  // Which inspected _ctx.onnx files run each graph: models that load the context and have a node naming the graph.
  void nameCompiledModels() {
    for (ContextSummary& c : report_.contexts) {
      const std::set<std::string>& loaders = contextModels_[c.path];
      std::map<std::string, std::vector<std::string>> runners;  // graph -> models, in inspection order
      for (const auto& n : report_.nodes) {
        if (!isOurSource(n.source) || !loaders.count(n.model)) continue;
        auto& models = runners[n.partitionName];
        if (std::find(models.begin(), models.end(), n.model) == models.end()) models.push_back(n.model);
      }
      auto fill = [&](const std::vector<std::string>& graphs, std::vector<std::string>& out) {
        for (const auto& g : graphs)
          for (const auto& m : runners[g])
            if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
      };
      for (auto& w : c.sharedWeights) fill(w.graphs, w.compiledModels);
      for (auto& u : c.weightUsers) fill(u.graphs, u.compiledModels);
    }
  }

  Options options_;
  Report report_;
  std::map<std::string, std::set<std::string>> contextModels_;  // context (as shown) -> _ctx.onnx files loading it
  std::map<std::string, size_t> fileIndex_;                     // deployment file path -> index in report_.files
  // Context binaries (as shown) whose weights are in source models, with the source files they pin.
  std::map<std::string, std::vector<format::SourcePin>> weightlessContexts_;
  std::map<std::string, std::set<std::pair<uint64_t, uint64_t>>> containerWeights_;  // ctxkit .bin -> weight ranges
  std::vector<fs::path> modelsWithExternalData_;
  std::vector<fs::path> ourModels_;  // models whose EPContext nodes are all ctxkit's: --verify loads them as ctxrun
};

}  // namespace

Expected<Report> inspectModels(const std::vector<fs::path>& models, const Options& options) {
  Inspector inspector(options);
  for (const auto& m : models) CTX_RETURN_IF_ERROR(inspector.addModel(m));
  return inspector.finish();
}

}  // namespace ctxkit::inspect
