// Collecting EPContext nodes, deployment files and context binary summaries.
#include "inspect/inspect.h"

#include "onnx_io/onnx_io.h"
#include "program/program.h"
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

std::string dotEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::optional<uint64_t> fileSize(const fs::path& p) {
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec) return std::nullopt;
  return size;
}

class Inspector {
public:
  explicit Inspector(const Options& options) : options_(options) {}

  Status addModel(const fs::path& path) {
    report_.models.push_back(path.string());
    addFile(path.string(), "model", path);
    onnx_io::LoadOptions load;
    load.resolveExternalData = false;
    CTX_ASSIGN_OR_RETURN(auto model, onnx_io::loadModel(path, load));
    fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    for (size_t i = 0; i < model.graph.nodes.size(); ++i) {
      const ir::Node& n = model.graph.nodes[i];
      if (n.opType != "EPContext") continue;
      EpContextNode e;
      e.model = path.string();
      e.name = n.name;
      e.source = n.attrs.getString("source");
      e.mainContext = n.attrs.getInt("main_context", 1);
      e.embedMode = n.attrs.getInt("embed_mode", 1);
      e.partitionName = n.attrs.getString("partition_name");
      e.sdkVersion = n.attrs.getString("ep_sdk_version");
      e.hardwareArchitecture = n.attrs.getString("hardware_architecture");
      e.onnxModelFilename = n.attrs.getString("onnx_model_filename");
      e.notes = n.attrs.getString("notes");
      if (const ir::Attribute* m = n.attrs.find("max_size"); m && m->type == ir::AttrType::Int) e.maxSize = m->i;
      for (const auto& in : n.inputs) e.inputs.push_back(summarizeValue(model.graph, in));
      for (const auto& out : n.outputs) e.outputs.push_back(summarizeValue(model.graph, out));
      const ir::Attribute* cache = n.attrs.find("ep_cache_context");
      std::string label = fmt::format("{}: EPContext node '{}'", path.string(), n.name);
      if (cache && cache->type == ir::AttrType::String) {
        if (e.embedMode == 1) {
          e.cacheContext = fmt::format("embedded, {} bytes", cache->s.size());
          if (isOurs(e.source)) {
            auto payload = std::make_shared<std::string>(cache->s);
            auto view = format::ContainerView::open(std::as_bytes(std::span(payload->data(), payload->size())), payload,
                                                    label + " (embedded context)");
            if (view) addContext(label + " (embedded)", std::move(view).value(), 0);
            else report_.problems.push_back(view.error().message());
          }
        } else {
          e.cacheContext = cache->s;
          addReferencedFile(dir, cache->s, "context binary", path, n.name);
        }
      } else if (e.mainContext == 1) {
        report_.problems.push_back(label + ": main_context=1 but no ep_cache_context");
      }
      if (!isOurs(e.source) && e.source.empty()) report_.problems.push_back(label + ": no source attribute");
      report_.nodes.push_back(std::move(e));
    }
    // After the EPContext nodes, so a .bin that also holds shared fallback initializers is listed as a context.
    for (const auto& init : model.graph.initializers)
      if (init.external) addReferencedFile(dir, init.external->location, "external data", path, init.name);
    return Status::ok();
  }

  Report finish() {
    // Every partition named by one of our nodes must be a graph in some context of that model.
    std::set<std::string> graphNames;
    for (const auto& c : report_.contexts)
      for (const auto& g : c.graphs) graphNames.insert(g.name);
    for (const auto& n : report_.nodes)
      if (isOurs(n.source) && !report_.contexts.empty() && !graphNames.count(n.partitionName))
        report_.problems.push_back(fmt::format("{}: EPContext node '{}': partition '{}' is in no context binary", n.model, n.name,
                                               n.partitionName));
    return std::move(report_);
  }

private:
  static bool isOurs(const std::string& source) {
    std::string s;
    for (char c : source) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s == "ctxkitexecutionprovider" || s == "ctxkit";
  }

  void addFile(const std::string& shown, const std::string& role, const fs::path& real) {
    if (seen_.count(shown)) return;
    seen_.insert(shown);
    DeploymentFile f;
    f.path = shown;
    f.role = role;
    f.bytes = fileSize(real);
    f.exists = f.bytes.has_value();
    if (!f.exists) {
      f.problem = "missing";
      report_.problems.push_back(fmt::format("{} '{}' is missing", role, shown));
    }
    report_.files.push_back(std::move(f));
  }

  void addReferencedFile(const fs::path& dir, const std::string& relative, const std::string& role, const fs::path& model,
                         const std::string& what) {
    auto resolved = resolveInside(dir, relative);
    if (!resolved) {
      std::string shown = relative;
      if (seen_.insert(shown).second) {
        DeploymentFile f{shown, role, std::nullopt, false, resolved.error().message()};
        report_.files.push_back(std::move(f));
      }
      report_.problems.push_back(fmt::format("{}: '{}': {}", model.string(), what, resolved.error().message()));
      return;
    }
    std::string shown = resolved->string();
    bool fresh = !seen_.count(shown);
    addFile(shown, role, *resolved);
    if (fresh && role == "context binary" && fileSize(*resolved)) {
      auto view = format::ContainerView::openFile(*resolved);
      if (!view) {
        report_.problems.push_back(view.error().message());
        return;
      }
      addContext(shown, std::move(view).value(), fileSize(*resolved).value_or(0));
    }
  }

  void addContext(const std::string& shown, format::ContainerView view, uint64_t fileBytes) {
    ContextSummary c;
    c.path = shown;
    c.compat = view.compat();
    c.fileBytes = fileBytes ? fileBytes : view.fileSize();
    c.alignment = view.alignment();
    c.weightCount = view.weights().size();
    for (const auto& w : view.weights()) c.uniqueWeightBytes += w.size;
    std::map<uint32_t, WeightSharing> users;
    for (size_t g = 0; g < view.graphs().size(); ++g) {
      const format::GraphInfo& gi = view.graphs()[g];
      GraphSummary gs{gi.name, gi.sourceModel, 0, 0, 0};
      auto prog = program::deserialize(view.programBytes(g), view.weights().size(), fmt::format("{}: graph '{}'", shown, gi.name));
      if (!prog) {
        report_.problems.push_back(prog.error().message());
      } else {
        gs.opCount = prog->ops.size();
        gs.arenaBytes = prog->arenaSize;
        for (const auto& t : prog->tensors) {
          if (t.kind != program::TensorKind::Weight) continue;
          ++gs.weightRefs;
          c.referencedWeightBytes += t.size;
          WeightSharing& ws = users[t.index];
          ws.index = t.index;
          ws.bytes = view.weights()[t.index].size;
          if (ws.graphs.empty() || ws.graphs.back() != gi.name) ws.graphs.push_back(gi.name);
          if (std::find(ws.models.begin(), ws.models.end(), gi.sourceModel) == ws.models.end()) ws.models.push_back(gi.sourceModel);
        }
      }
      c.graphs.push_back(std::move(gs));
    }
    for (auto& [index, ws] : users)
      if (ws.graphs.size() > 1) c.sharedWeights.push_back(std::move(ws));
    if (options_.verify) {
      if (auto s = view.verify(); !s) report_.problems.push_back(s.error().message());
      else c.verified = true;
    }
    report_.contexts.push_back(std::move(c));
  }

  Options options_;
  Report report_;
  std::set<std::string> seen_;
};

}  // namespace

Expected<Report> inspectModels(const std::vector<fs::path>& models, const Options& options) {
  Inspector inspector(options);
  for (const auto& m : models) CTX_RETURN_IF_ERROR(inspector.addModel(m));
  return inspector.finish();
}

Expected<std::string> partitionDot(const std::vector<fs::path>& models) {
  std::string out = "digraph ctxkit {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  for (size_t m = 0; m < models.size(); ++m) {
    onnx_io::LoadOptions load;
    load.resolveExternalData = false;
    CTX_ASSIGN_OR_RETURN(auto model, onnx_io::loadModel(models[m], load));
    const ir::Graph& g = model.graph;
    out += fmt::format("  subgraph cluster_{} {{\n    label=\"{}\";\n", m, dotEscape(models[m].filename().string()));
    std::map<std::string, std::string> producer;
    auto id = [&](size_t i) { return fmt::format("m{}n{}", m, i); };
    for (const auto& in : g.inputs) {
      if (g.isInitializer(in.name)) continue;
      std::string nid = fmt::format("m{}in_{}", m, producer.size());
      producer[in.name] = nid;
      out += fmt::format("    {} [shape=plaintext, label=\"{}\"];\n", nid, dotEscape(in.name));
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      bool ep = n.opType == "EPContext";
      std::string label = ep ? fmt::format("{}\\nEPContext ({})", dotEscape(n.name), dotEscape(n.attrs.getString("source")))
                             : dotEscape(n.opType);
      out += fmt::format("    {} [shape={}, style=filled, fillcolor=\"{}\", label=\"{}\"];\n", id(i), ep ? "box" : "ellipse",
                         ep ? "#9fd39f" : "#f2c59b", label);
      for (const auto& in : n.inputs)
        if (auto it = producer.find(in); it != producer.end()) out += fmt::format("    {} -> {};\n", it->second, id(i));
      for (const auto& o : n.outputs) producer[o] = id(i);
    }
    out += "  }\n";
  }
  out += "}\n";
  return out;
}

}  // namespace ctxkit::inspect
