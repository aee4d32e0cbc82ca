// Orchestrates the compile stages for a group of models and writes the outputs atomically.
#include "pipeline/pipeline.h"

#include "analysis/graph_passes.h"
#include "codegen/lower.h"
#include "codegen/passes/passes.h"
#include "driver/driver.h"
#include "epcontext/contract.h"
#include "format/container.h"
#include "onnx_io/onnx_io.h"
#include "partitioner/partitioner.h"
#include "partitioner/target.h"
#include "pipeline/bindings.h"
#include "pipeline/emit.h"
#include "pipeline/staged_outputs.h"
#include "program/program.h"
#include "program/sharing.h"
#include "runtime/source_model.h"
#include "runtime/source_pins.h"
#include "support/file_io.h"
#include "support/output_guard.h"
#include "support/text.h"
#include "weightshare/source_weights.h"
#include "weightshare/weight_pool.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

namespace ctxkit::pipeline {

namespace fs = std::filesystem;

namespace {

struct ModelWork {
  fs::path source;
  std::string stem;
  size_t sourceIndex = 0;  // which of options.models
  std::string variant;     // "" without --variant
  analysis::Bindings bindings;
  std::vector<BoundInput> boundInputs;  // --set
  fs::path output;
  std::string externalDataName;  // location of fallback initializers relative to `output`, if any
  size_t container = 0;
  ir::Model model;
  analysis::GraphFacts facts;
  partitioner::PartitionPlan plan;
  std::vector<codegen::LoweredPartition> lowered;
  // Per partition, the weights its program's indices name: plain tensor and the layout to store it in.
  std::vector<std::vector<std::pair<ir::Tensor, cpu::WeightLayout>>> partitionWeights;
  std::vector<std::string> partitionNames;
  std::vector<uint64_t> arenaSizes;
  // With --share, large fallback initializers stored in the group's .bin: (initializer name, weight index).
  std::vector<std::pair<std::string, uint32_t>> sharedInitializers;
  // The same for initializers inside fallback nodes' subgraphs, by forEachSubgraphInitializer key.
  std::vector<std::pair<std::string, uint32_t>> sharedSubgraphInitializers;
  std::vector<std::string> warnings;  // from the graph passes
};

struct ContainerWork {
  fs::path path;  // where the .bin goes (embed mode 0)
  weightshare::WeightPool pool;
  std::vector<driver::ContextGraph> graphs;
  std::set<std::string> graphNames;
  // Weightless: where each pooled weight lives in the source models (empty: it is stored in the .bin).
  weightshare::WeightSources sources;
  std::vector<format::SourcePin> pins;  // weightless: the source models' files (docs/weight-sharing.md#pins)
};

class StageClock {
public:
  explicit StageClock(CompileReport& report) : report_(report) {}
  template <typename F> auto time(const std::string& stage, F&& body) {
    auto start = std::chrono::steady_clock::now();
    auto result = body();
    add(stage, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    return result;
  }
  void add(const std::string& stage, double ms) {
    for (auto& s : report_.stages)
      if (s.stage == stage) {
        s.milliseconds += ms;
        return;
      }
    report_.stages.push_back(StageTime{stage, ms});
  }

  void addPasses(const std::vector<ir::PassRun>& runs) {
    for (const auto& run : runs) {
      auto it =
          std::find_if(report_.passes.begin(), report_.passes.end(), [&](const auto& p) { return p.name == run.name; });
      if (it == report_.passes.end())
        it = report_.passes.insert(report_.passes.end(), ir::PassRun{run.name, run.kind, 0, 0, {}});
      it->add(run);
    }
  }
  void addDump(const std::string& text) { report_.programDump += text; }

private:
  CompileReport& report_;
};

// Passes each step on to the caller's progress function with the bytes hashed and written so far.
class ProgressReporter {
public:
  explicit ProgressReporter(const ProgressFn& fn) : fn_(fn) {}
  void say(std::string message) {
    if (fn_) fn_(Progress{std::move(message), hashed_, written_});
  }
  void setHashed(uint64_t bytes) { hashed_ = bytes; }
  void addWritten(uint64_t bytes) { written_ += bytes; }

private:
  const ProgressFn& fn_;
  uint64_t hashed_ = 0;
  uint64_t written_ = 0;
};

std::string stemOf(const fs::path& p) { return p.stem().string(); }

Status planOutputs(const CompileOptions& options, const std::vector<VariantSpec>& variants,
                   std::vector<ModelWork>& work, std::vector<ContainerWork>& containers) {
  if (options.models.empty()) return makeError(ErrorCode::InvalidArgument, "no input models given");
  std::vector<std::string_view> passNames = analysis::graphPassNames();
  for (std::string_view name : codegen::loweringPassNames()) passNames.push_back(name);
  for (const std::string* pass : {&options.dumpAfter, &options.stopAfter})
    if (!pass->empty() && std::find(passNames.begin(), passNames.end(), *pass) == passNames.end())
      return makeError(ErrorCode::InvalidArgument, "--{} '{}': no such pass; the passes are {}",
                       pass == &options.dumpAfter ? "dump-after" : "stop-after", *pass, fmt::join(passNames, ", "));
  if (options.embedMode != 0 && options.embedMode != 1)
    return makeError(ErrorCode::InvalidArgument, "--embed-mode must be 0 or 1, got {}", options.embedMode);
  if (options.share && options.embedMode == 1)
    return makeError(ErrorCode::InvalidArgument, "--share needs embed mode 0: a shared context must be a file");
  if (options.outputFile && options.models.size() != 1)
    return makeError(ErrorCode::InvalidArgument, "an output file path ({}) needs exactly one model, got {}",
                     epcontext::option::kContextFilePath, options.models.size());
  if (options.outputFile && variants.size() > 1)
    return makeError(ErrorCode::InvalidArgument, "an output file path ({}) gives one output, but {} variants make {}",
                     epcontext::option::kContextFilePath, variants.size(), variants.size());
  std::vector<const VariantSpec*> runs;  // each model is compiled once per variant, or once without variants
  for (const auto& spec : variants) runs.push_back(&spec);
  if (runs.empty()) runs.push_back(nullptr);
  std::set<fs::path> seenOutputs;
  for (size_t mi = 0; mi < options.models.size(); ++mi)
    for (const VariantSpec* variant : runs) {
      const fs::path& m = options.models[mi];
      ModelWork w;
      w.source = m;
      w.stem = stemOf(m);
      w.sourceIndex = mi;
      w.variant = variant ? variant->name : "";
      w.container = options.share ? 0 : mi;
      const std::string outStem = w.variant.empty() ? w.stem : w.stem + "_" + w.variant;
      fs::path dir = options.outputDir ? *options.outputDir : m.parent_path();
      w.output = options.outputFile ? *options.outputFile : dir / (outStem + "_ctx.onnx");
      if (!seenOutputs.insert(w.output.lexically_normal()).second)
        return makeError(ErrorCode::InvalidArgument, "two inputs would both write '{}'; give models distinct names",
                         w.output.string());
      if (!options.externalInitializersFile.empty()) {
        // One model keeps the exact name (as ONNX Runtime does); in a group each model gets `<stem>_<NAME>`, so no
        // two outputs share a file and each _ctx.onnx ships with exactly its own data.
        fs::path name(options.externalInitializersFile);
        w.externalDataName = options.models.size() == 1 && variants.size() <= 1
                                 ? name.string()
                                 : (name.parent_path() / (outStem + "_" + name.filename().string())).string();
        auto inside = resolveInside(w.output.parent_path(), w.externalDataName);
        if (!inside)
          return inside.takeError().addContext(
              fmt::format("--external-initializers-file '{}'", options.externalInitializersFile));
      }
      work.push_back(std::move(w));
    }
  if (options.share) {
    ContainerWork c;
    c.path = work.front().output.parent_path() / (work.front().stem + "_ctxkit.bin");
    for (const auto& w : work)
      if (w.output.parent_path().lexically_normal() != c.path.parent_path().lexically_normal())
        return makeError(ErrorCode::InvalidArgument,
                         "with --share every _ctx.onnx must sit beside the shared '{}'; '{}' is elsewhere (use -o DIR)",
                         c.path.filename().string(), w.output.string());
    containers.push_back(std::move(c));
  } else if (options.embedMode == 1) {
    // An embedded context travels inside its _ctx.onnx, so each output (each variant) carries only its own graphs.
    for (size_t i = 0; i < work.size(); ++i) {
      work[i].container = i;
      containers.emplace_back();
    }
  } else {
    // One context per model, shared by its variants.
    for (size_t mi = 0; mi < options.models.size(); ++mi) {
      auto first = std::find_if(work.begin(), work.end(), [&](const ModelWork& w) { return w.sourceIndex == mi; });
      ContainerWork c;
      c.path = first->output.parent_path() / (first->stem + "_ctxkit.bin");
      for (const auto& w : work)
        if (w.sourceIndex == mi && w.output.parent_path().lexically_normal() != c.path.parent_path().lexically_normal())
          return makeError(ErrorCode::InvalidArgument, "variants of '{}' must sit beside its '{}'", w.source.string(),
                           c.path.filename().string());
      containers.push_back(std::move(c));
    }
  }
  if (!options.force && !options.dryRun && options.stopAfter.empty()) {
    auto checkFree = [](const fs::path& p) -> Status {
      CTX_RETURN_IF_ERROR(checkDeploymentOutput(p, "output"));  // a link or device: say so, not "exists"
      std::error_code ec;
      if (fs::exists(p, ec))
        return makeError(ErrorCode::InvalidArgument, "output '{}' already exists (use --force to overwrite)",
                         p.string());
      return Status::ok();
    };
    for (const auto& w : work) CTX_RETURN_IF_ERROR(checkFree(w.output));
    if (options.embedMode == 0)
      for (const auto& c : containers) CTX_RETURN_IF_ERROR(checkFree(c.path));
    for (const auto& w : work)
      if (!w.externalDataName.empty()) CTX_RETURN_IF_ERROR(checkFree(w.output.parent_path() / w.externalDataName));
  }
  return Status::ok();
}

// A graph output must be an input, an initializer or a node's output, as the runtime requires at load: a model
// without one would compile into a _ctx.onnx that cannot load.
Status checkOutputsProduced(const ir::Graph& g, const fs::path& model) {
  std::set<std::string_view> defined;
  for (const auto& in : g.inputs) defined.insert(in.name);
  for (const auto& init : g.initializers) defined.insert(init.name);
  for (const auto& n : g.nodes)
    for (const auto& out : n.outputs) defined.insert(out);
  for (const auto& out : g.outputs)
    if (!defined.count(out.name))
      return makeError(ErrorCode::InvalidGraph,
                       "'{}': graph output '{}' is produced by no node and is no graph input or initializer",
                       model.string(), out.name);
  return Status::ok();
}

// Every file the run reads: the models, the external data they were loaded from (once loaded), the target file.
std::vector<RunFile> runInputs(const CompileOptions& options, const std::vector<ModelWork>& work) {
  std::vector<RunFile> files;
  for (const auto& w : work) {
    files.push_back(RunFile{w.source, "input model"});
    for (const auto& data : w.model.externalDataFiles)
      files.push_back(RunFile{data, fmt::format("external data of '{}'", w.source.string())});
  }
  // loadTarget prefers a built-in name over a file of that name, so only a non-built-in target is a file read.
  std::error_code ec;
  if (!partitioner::builtinTargetJson(options.target) && fs::is_regular_file(options.target, ec))
    files.push_back(RunFile{options.target, "target file"});
  return files;
}

// Every file the run may write.
std::vector<RunFile> runOutputs(const CompileOptions& options, const std::vector<ModelWork>& work,
                                const std::vector<ContainerWork>& containers) {
  std::vector<RunFile> files;
  for (const auto& w : work) {
    files.push_back(RunFile{w.output, "output model"});
    if (!w.externalDataName.empty())
      files.push_back(RunFile{w.output.parent_path() / w.externalDataName, "external initializers file"});
  }
  if (options.embedMode == 0)
    for (const auto& c : containers) files.push_back(RunFile{c.path, "context binary"});
  if (options.depfile) files.push_back(RunFile{*options.depfile, "depfile"});
  if (options.reportFile) files.push_back(RunFile{*options.reportFile, "JSON report"});
  return files;
}

Status compileModel(ModelWork& w, ContainerWork& container, const partitioner::Target& target,
                    const CompileOptions& options, StageClock& clock, ProgressReporter& progress,
                    codegen::KernelTuner* tuner) {
  auto say = [&](std::string s) { progress.say(std::move(s)); };
  say(fmt::format("{}: analyzing {} nodes", w.source.string(), w.model.graph.nodes.size()));
  // A bound input is a constant from here on: gone from the graph's inputs, so the _ctx.onnx does not take it.
  for (const auto& b : w.boundInputs) {
    ir::Graph& g = w.model.graph;
    std::erase_if(g.inputs, [&](const ir::ValueInfo& in) { return in.name == b.name; });
    std::erase_if(g.initializers, [&](const ir::Initializer& init) { return init.name == b.name; });
    g.initializers.push_back(ir::Initializer{b.name, b.value, std::nullopt});
  }
  driver::CompileSettings settings;
  settings.namePrefix = options.nodeNamePrefix;
  settings.stem = w.stem;
  settings.variant = w.variant;
  settings.bindings = w.bindings;
  settings.lower = driver::lowerSettings(target, "", fmt::format("'{}'", w.source.string()));
  settings.lower.dumpAfter = options.dumpAfter;
  settings.lower.stopAfter = options.stopAfter;
  settings.lower.plainWeights = options.weightless;
  settings.lower.tuner = tuner;
  driver::CompileHooks hooks;
  // Each program's weights are collected as it refers to them; the dedupe stage stores each distinct one once.
  hooks.intern = [&](size_t p, const ir::Tensor& t, const cpu::WeightLayout& layout) -> Expected<uint32_t> {
    if (w.partitionWeights.size() <= p) w.partitionWeights.resize(p + 1);
    w.partitionWeights[p].emplace_back(t, layout);
    return static_cast<uint32_t>(w.partitionWeights[p].size() - 1);
  };
  hooks.planned = [&](const analysis::GraphFacts&, const partitioner::PartitionPlan& plan) {
    say(fmt::format("{}: {}", w.source.string(), counted(plan.partitions.size(), "partition")));
  };
  hooks.onAnalysisError = [&](Error e) -> Status { return e.addContext(fmt::format("'{}'", w.source.string())); };
  CTX_ASSIGN_OR_RETURN(driver::CompiledGraph compiled,
                       driver::compilePartitions(w.model.graph, target, settings, hooks));
  w.facts = std::move(compiled.facts);
  w.plan = std::move(compiled.plan);
  w.warnings.insert(w.warnings.end(), compiled.warnings.begin(), compiled.warnings.end());
  clock.add("analyze", compiled.analyzeMs);
  clock.add("partition", compiled.partitionMs);
  clock.add("lower", compiled.lowerMs);
  clock.addPasses(compiled.graphPasses);
  clock.addDump(compiled.graphDump);
  w.partitionWeights.resize(w.plan.partitions.size());  // a partition without weights called no intern
  for (auto& c : compiled.partitions) {
    if (!container.graphNames.insert(c.name).second)
      return makeError(ErrorCode::InvalidArgument,
                       "graph name '{}' is used twice in one context (models with the same stem?)", c.name);
    clock.addPasses(c.lowered.passes);
    clock.addDump(c.lowered.dump);
    w.partitionNames.push_back(std::move(c.name));
    w.arenaSizes.push_back(c.lowered.program.arenaSize);
    w.lowered.push_back(std::move(c.lowered));
  }
  return Status::ok();
}

// A node left on the fallback path must be one the runtime can execute (docs/ctxgen.md#errors): refused right after
// partitioning, so that --dry-run fails exactly when a real compile would, rather than writing a model that fails at
// load.
Status checkFallbackRunnable(const ModelWork& w) {
  const ir::Graph& g = w.model.graph;
  for (size_t i = 0; i < w.plan.nodes.size() && i < g.nodes.size(); ++i)
    if (w.plan.nodes[i].placement == partitioner::NodePlacement::Fallback)
      if (auto r = partitioner::fallbackBlocker(g.nodes[i], w.facts); !r.empty())
        return makeError(ErrorCode::Unsupported, "'{}': {}; the node stays on the fallback path ({})",
                         w.source.filename().string(), r,
                         w.plan.nodes[i].reason.empty() ? std::string("not compiled") : w.plan.nodes[i].reason);
  return Status::ok();
}

// The dedupe stage, the one place weights are interned: every weight of a model's programs and, with
// `shareFallback`, every large fallback initializer goes into its container's pool (equal bytes, type and shape
// stored once), and the programs are pointed at pool indices and serialized for their container. It runs right
// after each model (variant) is lowered, so the lowered copies of weights already stored (another variant's, another
// model's) are freed before the next one is lowered.
Status dedupe(ModelWork& w, ContainerWork& c, const CompileOptions& options, bool shareFallback) {
  for (size_t p = 0; p < w.lowered.size(); ++p) {
    program::Program& prog = w.lowered[p].program;
    for (auto& t : prog.tensors) {
      if (t.kind != program::TensorKind::Weight) continue;
      const auto& [tensor, layout] = w.partitionWeights[p][t.index];
      CTX_ASSIGN_OR_RETURN(t.index, c.pool.intern(tensor, layout)
                                        .addContext(fmt::format("'{}': graph '{}': weight '{}'", w.source.string(),
                                                                w.partitionNames[p], t.name)));
    }
    const std::string where = fmt::format("'{}': graph '{}'", w.source.string(), w.partitionNames[p]);
    CTX_RETURN_IF_ERROR(program::validate(prog, c.pool.weights().size()).addContext(where));
    std::vector<std::byte> bytes = program::serialize(prog);
    // What ctxgen writes must load: the program is read back with the loader's own checks before it is stored.
    if (auto back = program::deserialize(bytes, c.pool.weights().size(), where); !back)
      return back.takeError().addContext("the compiled program would not load");
    c.graphs.push_back(driver::ContextGraph{w.partitionNames[p], w.source.filename().string(), std::move(bytes),
                                            program::hasLoadTimeTensors(prog)});
  }
  w.partitionWeights.clear();
  if (!shareFallback) return Status::ok();
  Status status;
  auto share = [&](const std::string& key, const ir::Initializer& init, auto& shared) {
    const ir::Tensor& t = init.tensor;
    if (!status || t.type() == ir::ElemType::String || t.byteSize() < options.shareFallbackThreshold) return;
    auto index = c.pool.intern(t);
    if (!index) status = index.takeError().addContext(fmt::format("'{}': initializer '{}'", w.source.string(), key));
    else shared.emplace_back(key, *index);
  };
  for (const auto& init : contextInitializers(w.model, w.facts, w.plan, w.lowered))
    share(init.name, init, w.sharedInitializers);
  // Weights inside If/Loop/Scan bodies of fallback nodes are stored once like the rest (docs/weight-sharing.md#scope).
  for (size_t i = 0; i < w.plan.nodes.size(); ++i)
    if (w.plan.nodes[i].placement == partitioner::NodePlacement::Fallback)
      forEachSubgraphInitializer(w.model.graph.nodes[i], i, [&](const std::string& key, const ir::Initializer& init) {
        share(key, init, w.sharedSubgraphInitializers);
      });
  CTX_RETURN_IF_ERROR(status);
  return Status::ok();
}

// Weightless contexts: where each pooled weight of container `c` lives in the models whose graphs it holds, and the
// pins of those models' files. The files are read as the runtime reads them (runtime::readSourceInitializers), so a
// weight is recorded in a source model only where the runtime will find it: in a top-level initializer or Constant,
// or in one of an If/Loop/Scan body whose name nothing else in the model has.
Status locateSourceWeights(ContainerWork& c, size_t container, const std::vector<ModelWork>& work, bool externalOnly) {
  std::vector<std::shared_ptr<const runtime::SourceInitializers>> read;
  std::vector<weightshare::SourceModel> models;
  std::set<size_t> seen;
  c.pins.clear();
  for (const auto& w : work) {
    if (w.container != container || !seen.insert(w.sourceIndex).second) continue;  // each source model once
    CTX_ASSIGN_OR_RETURN(auto source,
                         runtime::readSourceInitializers(w.source).addContext("locating the weights of a weightless "
                                                                              "context"));
    const std::string name = w.source.filename().string();
    models.push_back(weightshare::sourceModelOf(name, source->byName, source->external));
    for (auto& pin : runtime::sourcePins(name, *source)) c.pins.push_back(std::move(pin));
    read.push_back(std::move(source));
  }
  c.sources = weightshare::locateInSources(
      c.pool, models, externalOnly ? weightshare::WeightlessScope::ExternalOnly : weightshare::WeightlessScope::All);
  return Status::ok();
}

Expected<format::ContainerWriter> buildContainer(const ContainerWork& c, const partitioner::Target& target,
                                                 bool weightless) {
  return driver::buildContainer(target, c.pool, c.graphs, weightless, weightless ? &c.sources : nullptr,
                                weightless ? std::span<const format::SourcePin>(c.pins)
                                           : std::span<const format::SourcePin>());
}

std::string compatibilityString(const partitioner::Target& target) {
  epcontext::CompatibilityInfo info;
  info.formatMajor = format::kFormatMajor;
  info.formatMinor = format::kFormatMinor;
  info.targetId = target.hardwareArchitecture;
  info.targetRevision = target.revision;
  return epcontext::formatCompatibilityInfo(info);
}

// Why a model compiled no node: the reason most of its fallback nodes give, counted, so that an unbound symbolic
// dimension or a target without the model's ops is said even without -v.
std::string nothingCompiled(const ModelSummary& s) {
  std::map<std::string, size_t> byReason;
  for (const auto& f : s.fallback) ++byReason[f.reason];
  auto top = std::max_element(byReason.begin(), byReason.end(),
                              [](const auto& a, const auto& b) { return a.second < b.second; });
  return fmt::format("no node compiled: {} of {} nodes stay on the fallback path with \"{}\"{} (-v lists every node)",
                     top->second, s.nodeCount, top->first,
                     byReason.size() > 1 ? fmt::format(", the rest for {} other reasons", byReason.size() - 1) : "");
}

// Each fallback node whose shapes are not static is put behind the node its first such value's blocker names, its
// outputs looked at first (a value-dependent node is behind itself).
std::vector<ValueDependentRoot> valueDependentRoots(const ModelWork& w) {
  const analysis::GraphFacts& facts = w.facts;
  std::map<size_t, ValueDependentRoot> roots;
  auto dynamicValues = [&](size_t node, auto&& visit) {
    for (const auto ids : {facts.table.outputsOf(node), facts.table.inputsOf(node)})
      for (ir::ValueId v : ids)
        if (v != ir::kNoValue && !facts[v].shape) visit(facts[v]);
  };
  for (size_t i = 0; i < w.plan.nodes.size(); ++i) {
    if (w.plan.nodes[i].placement != partitioner::NodePlacement::Fallback) continue;
    size_t root = analysis::kNoNode;
    bool bounded = true;
    dynamicValues(i, [&](const analysis::ValueFacts& f) {
      if (root == analysis::kNoNode) root = f.blockerNode;
      bounded &= f.bound.has_value();
    });
    if (root == analysis::kNoNode || root >= w.model.graph.nodes.size()) continue;
    ValueDependentRoot& r = roots[root];
    ++r.nodes;
    if (bounded) ++r.boundedNodes;
  }
  std::vector<size_t> rank(w.model.graph.nodes.size());
  for (size_t k = 0; k < facts.order.size(); ++k) rank[facts.order[k]] = k;
  std::vector<std::pair<size_t, size_t>> byRank;
  for (auto& [node, r] : roots) {
    const ir::Node& n = w.model.graph.nodes[node];
    r.name = n.name;
    r.opType = n.opType;
    for (ir::ValueId v : facts.table.outputsOf(node))
      if (v != ir::kNoValue) {
        r.bound = facts[v].shape ? facts[v].shape : facts[v].bound;
        break;
      }
    byRank.emplace_back(rank[node], node);
  }
  std::sort(byRank.begin(), byRank.end());
  std::vector<ValueDependentRoot> out;
  for (const auto& [unused, node] : byRank) out.push_back(std::move(roots[node]));
  return out;
}

ModelSummary summarize(const ModelWork& w) {
  ModelSummary s;
  s.source = w.source;
  s.output = w.output;
  s.variant = w.variant;
  for (const auto& data : w.model.externalDataFiles) s.externalData.emplace_back(data);
  s.nodeCount = w.model.graph.nodes.size();
  for (const auto& b : w.boundInputs) s.boundInputs.emplace_back(b.name, b.text);
  s.warnings = w.warnings;
  for (size_t i = 0; i < w.plan.nodes.size(); ++i) {
    const auto& d = w.plan.nodes[i];
    const ir::Node& n = w.model.graph.nodes[i];
    switch (d.placement) {
      case partitioner::NodePlacement::Compiled: ++s.compiledNodes; break;
      case partitioner::NodePlacement::Folded: ++s.foldedNodes; break;
      case partitioner::NodePlacement::Fallback:
        ++s.fallbackNodes;
        s.fallback.push_back(FallbackNode{n.name, n.opType, d.reason});
        break;
    }
  }
  s.valueDependent = valueDependentRoots(w);
  for (size_t p = 0; p < w.plan.partitions.size(); ++p) {
    PartitionSummary ps;
    ps.name = w.partitionNames[p];
    ps.nodeCount = w.plan.partitions[p].nodes.size();
    ps.opCount = w.lowered[p].program.ops.size();
    ps.inputCount = w.lowered[p].inputs.size();
    ps.outputCount = w.lowered[p].outputs.size();
    ps.arenaBytes = w.arenaSizes[p];
    for (size_t i : w.plan.partitions[p].nodes) ps.opTypes.push_back(w.model.graph.nodes[i].opType);
    s.partitions.push_back(std::move(ps));
  }
  if (s.compiledNodes == 0 && s.fallbackNodes > 0) s.warnings.push_back(nothingCompiled(s));
  return s;
}

// Make syntax: every file written depends on every file read (runInputs: models, their external data, the target
// file), so a build system reruns ctxgen when any of them changes. The _ctx.onnx files come first, in model order:
// Ninja takes a depfile whose first target is not the build edge's first output as out of date, so a build rule
// (ctxkit_compile) can rely on the first model's _ctx.onnx leading.
std::string depfileText(const CompileReport& report, const std::vector<ModelWork>& work,
                        const std::vector<RunFile>& inputs) {
  auto escape = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == ' ' || c == '#' || c == '\\') out += '\\';
      if (c == '$') out += '$';
      out += c;
    }
    return out;
  };
  std::vector<fs::path> targets;
  for (const auto& w : work) targets.push_back(w.output);
  for (const auto& f : report.files)
    if (std::find(targets.begin(), targets.end(), f.path) == targets.end()) targets.push_back(f.path);
  std::string text;
  for (const auto& t : targets) text += escape(t.string()) + " ";
  text += ":";
  std::set<std::string> seen;
  for (const auto& in : inputs)
    if (seen.insert(in.path.string()).second) text += " " + escape(in.path.string());
  text += "\n";
  return text;
}

}  // namespace

Expected<fs::path> defaultTuneCache() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return fs::path(xdg) / "ctxkit" / "tune-cache.tsv";
  const char* home = std::getenv("HOME");
  if (home && *home) return fs::path(home) / ".cache" / "ctxkit" / "tune-cache.tsv";
  return makeError(ErrorCode::InvalidArgument,
                   "--tune: neither XDG_CACHE_HOME nor HOME is set; name the timing cache with --tune-cache PATH");
}

Expected<CompileReport> compileModels(const CompileOptions& options, const ProgressFn& progressFn) {
  CompileReport report;
  ProgressReporter progress(progressFn);
  report.dryRun = options.dryRun;
  StageClock clock(report);
  CTX_ASSIGN_OR_RETURN(auto target, partitioner::loadTarget(options.target));
  report.target = target.name;
  report.compatibility = compatibilityString(target);
  report.float16Compute = partitioner::float16ComputeName(target.float16Compute);
  std::vector<ModelWork> work;
  std::vector<ContainerWork> containers;
  CTX_ASSIGN_OR_RETURN(auto variants, parseVariants(options.variantArgs));
  CTX_RETURN_IF_ERROR(planOutputs(options, variants, work, containers));
  // Checked before loading (cheap, fails fast) and again once the models' external data files are known.
  CTX_RETURN_IF_ERROR(checkRunFiles(runInputs(options, work), runOutputs(options, work, containers)));
  if (!options.dryRun && options.stopAfter.empty()) {
    // Links and special files are never replaced: refused before any work (and again at the commit).
    for (const RunFile& f : runOutputs(options, work, containers)) {
      if (f.path == options.depfile || f.path == options.reportFile) {
        CTX_RETURN_IF_ERROR(reportTarget(f.path, f.role).status());
      } else {
        CTX_RETURN_IF_ERROR(checkDeploymentOutput(f.path, f.role));
      }
    }
  }

  // Load each model once (its variants share the loaded graph's tensors), then resolve and check the bindings.
  std::vector<ir::Model> loaded;
  for (const auto& m : options.models) {
    progress.say(fmt::format("{}: loading", m.string()));
    auto model = clock.time("load", [&] { return onnx_io::loadModel(m); });
    if (!model) return model.takeError();
    for (const auto& n : model->graph.nodes)
      if (n.kind == ir::OpKind::EPContext)
        return makeError(ErrorCode::InvalidGraph, "'{}' is already compiled: it contains EPContext node '{}'",
                         m.string(), n.name);
    CTX_RETURN_IF_ERROR(checkOutputsProduced(model->graph, m));
    loaded.push_back(std::move(model).value());
  }
  std::vector<std::vector<ir::ValueInfo>> feedInputs;
  for (const auto& m : loaded) {
    std::vector<ir::ValueInfo> feeds;
    for (const auto* in : m.graph.feedInputs()) feeds.push_back(*in);
    feedInputs.push_back(std::move(feeds));
  }
  std::vector<BindingModel> bindingModels;
  for (size_t mi = 0; mi < loaded.size(); ++mi)
    bindingModels.push_back(BindingModel{stemOf(options.models[mi]), &feedInputs[mi]});
  CTX_RETURN_IF_ERROR(checkBindings(bindingModels, options.dimArgs, options.shapeArgs, variants));
  CTX_RETURN_IF_ERROR(checkValueBindings(bindingModels, options.setArgs));
  for (auto& w : work) {
    w.model = loaded[w.sourceIndex];
    const VariantSpec* variant = nullptr;
    for (const auto& v : variants)
      if (v.name == w.variant) variant = &v;
    CTX_ASSIGN_OR_RETURN(analysis::Bindings b, bindingsFor(bindingModels[w.sourceIndex], bindingModels, options.dimArgs,
                                                           options.shapeArgs, variant));
    w.bindings = options.bindings;
    for (const auto& [k, v] : b.dims) w.bindings.dims[k] = v;
    for (const auto& [k, v] : b.shapes) w.bindings.shapes[k] = v;
    CTX_ASSIGN_OR_RETURN(w.boundInputs,
                         boundInputsFor(bindingModels[w.sourceIndex], bindingModels, options.setArgs, w.bindings));
  }

  // Large fallback initializers go to the .bin as ONNX external data: always in a --share group, and for a model of
  // its own when it has a compiled partition (its .bin is written anyway; a model with nothing compiled gets none).
  const bool fallbackToBin = options.embedMode == 0 && options.externalInitializersFile.empty() &&
                             !options.embedFallbackInitializers && !options.weightless;
  size_t compiledPartitions = 0;
  std::unique_ptr<codegen::KernelTuner> tuner;
  if (options.tune) {
    fs::path cache = options.tuneCache;
    if (cache.empty()) {
      CTX_ASSIGN_OR_RETURN(cache, defaultTuneCache());
    }
    CTX_ASSIGN_OR_RETURN(tuner, codegen::KernelTuner::open(cache));
  }
  auto shareFallback = [&](const ModelWork& w) {
    return fallbackToBin && (options.share || !w.plan.partitions.empty());
  };
  for (auto& w : work) {
    CTX_RETURN_IF_ERROR(compileModel(w, containers[w.container], target, options, clock, progress, tuner.get()));
    CTX_RETURN_IF_ERROR(checkFallbackRunnable(w));
    compiledPartitions += w.plan.partitions.size();
    report.models.push_back(summarize(w));
    if (options.stopAfter.empty()) {
      CTX_RETURN_IF_ERROR(
          clock.time("dedupe", [&] { return dedupe(w, containers[w.container], options, shareFallback(w)); }));
      report.hashedBytes = 0;
      for (const auto& c : containers) report.hashedBytes += c.pool.bytesHashed();
      progress.setHashed(report.hashedBytes);
    }
  }
  if (tuner) {
    CTX_RETURN_IF_ERROR(tuner->save());
    TuneSummary& t = report.tune.emplace();
    t.cache = tuner->path();
    t.cpuFeatures = codegen::KernelTuner::cpuFeatures();
    t.hits = tuner->hits();
    t.misses = tuner->misses();
    for (const auto& c : tuner->choices())
      t.convs.push_back(TunedConv{c.partition, c.node, c.key, std::string(cpu::convAlgorithmName(c.heuristic)),
                                  std::string(cpu::convAlgorithmName(c.chosen)), c.heuristicMs, c.chosenMs,
                                  c.cacheHit});
  }
  if (options.stopAfter.empty()) {
    if (options.dumpPrograms)
      for (const auto& w : work)
        for (size_t p = 0; p < w.lowered.size(); ++p)
          report.programDump += program::dump(w.lowered[p].program, w.partitionNames[p]);
  }
  // The figures ctxinspect prints for each written .bin (program::sharingFigures), summed over the binaries.
  for (size_t c = 0; c < containers.size(); ++c) {
    std::vector<uint64_t> weightBytes;
    for (const auto& pooled : containers[c].pool.weights()) weightBytes.push_back(pooled.size);
    std::vector<const program::Program*> programs;
    for (const auto& w : work)
      if (w.container == c)
        for (const auto& l : w.lowered) programs.push_back(&l.program);
    const program::SharingFigures figures = program::sharingFigures(weightBytes, programs);
    report.referencedWeightBytes += figures.referencedBytes;
    report.uniqueWeightBytes += figures.uniqueBytes;
    report.storedWeightBytes += figures.storedBytes;
    report.uniqueWeights += weightBytes.size();
    if (options.weightless) {
      CTX_RETURN_IF_ERROR(locateSourceWeights(containers[c], c, work, options.weightlessExternalOnly));
      for (size_t i = 0; i < weightBytes.size(); ++i)
        if (!containers[c].sources[i].empty()) {
          report.sourceWeightBytes += weightBytes[i];
          ++report.sourceWeights;
        }
    }
  }
  report.weightless = options.weightless;
  CTX_RETURN_IF_ERROR(checkRunFiles(runInputs(options, work), runOutputs(options, work, containers)));
  if (options.errorIfNoNodesCompiled && compiledPartitions == 0) {
    std::string why;
    for (const auto& m : report.models)
      if (m.fallbackNodes > 0) why += fmt::format("; '{}': {}", m.source.string(), nothingCompiled(m));
    return makeError(ErrorCode::InvalidGraph,
                     "no node could be compiled for target '{}' (--error-if-no-nodes-compiled){}", target.name, why);
  }
  if (options.dryRun) return report;
  if (!options.stopAfter.empty()) {
    report.stopped = true;
    return report;
  }

  // Every folder first: a folder that cannot be made fails the run before any file is written.
  std::vector<fs::path> folders;
  for (const auto& w : work) {
    folders.push_back(w.output.parent_path());
    if (!w.externalDataName.empty()) folders.push_back((w.output.parent_path() / w.externalDataName).parent_path());
  }
  for (const fs::path& dir : folders) {
    if (dir.empty()) continue;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return makeError(ErrorCode::IoError, "cannot create output folder '{}': {}", dir.string(), ec.message());
  }

  // Emit: each container is laid out once; each model is then built once, with its shared initializers pointing
  // at their final place in the .bin. Every file goes to a temporary name; only when all of them (and the reports)
  // are written does the commit rename them, together, under the folders' locks: a failure up to then leaves the
  // earlier deployment as it was, and two runs into one folder never mix their files.
  StagedOutputs staged;
  auto emitStatus = clock.time("emit", [&]() -> Status {
    std::vector<std::optional<format::ContainerWriter>> writers(containers.size());
    for (size_t c = 0; c < containers.size(); ++c) {
      if (options.embedMode == 0 && containers[c].graphs.empty() && containers[c].pool.weights().empty()) continue;
      CTX_ASSIGN_OR_RETURN(auto writer, buildContainer(containers[c], target, options.weightless));
      writers[c].emplace(std::move(writer));
    }
    // The weights a binary stores are hashed while it is written.
    auto hashedWhileWritten = [&](size_t c) {
      const ContainerWork& work = containers[c];
      for (size_t i = 0; i < work.pool.weights().size(); ++i)
        if (work.sources.empty() || work.sources[i].empty()) report.hashedBytes += work.pool.weights()[i].size;
      progress.setHashed(report.hashedBytes);
    };
    auto written = [&](const fs::path& path, uint64_t bytes) {
      report.files.push_back(FileWritten{path, bytes});
      progress.addWritten(bytes);
    };
    std::vector<std::vector<std::byte>> embedded(containers.size());
    if (options.embedMode == 1)
      for (size_t c = 0; c < containers.size(); ++c) {
        CTX_ASSIGN_OR_RETURN(embedded[c], writers[c]->serialize());
        hashedWhileWritten(c);
      }
    std::vector<Hash128> checksums(containers.size());  // each .bin's identity, recorded in the models using it
    if (options.embedMode == 0)
      for (size_t c = 0; c < containers.size(); ++c) {
        if (!writers[c]) continue;  // nothing compiled: no context needed
        progress.say(fmt::format("writing {}", containers[c].path.string()));
        CTX_ASSIGN_OR_RETURN(auto bin, writers[c]->stage(containers[c].path));
        hashedWhileWritten(c);
        checksums[c] = bin.checksum;
        written(containers[c].path, bin.file->bytesWritten());
        staged.addDeployment(std::move(bin.file));
      }
    for (const ModelWork& w : work) {
      EpContextSettings settings;
      settings.embedMode = options.embedMode;
      settings.sdkVersion = epcontext::kVersion;
      settings.sourceFileName = w.source.filename().string();
      settings.hardwareArchitecture = target.hardwareArchitecture;
      settings.compatibility = compatibilityString(target);
      if (options.embedMode == 1) {
        const auto& bytes = embedded[w.container];
        settings.cacheContext.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      } else {
        settings.cacheContext = containers[w.container].path.filename().string();
      }
      for (auto [shared, located] : {std::pair{&w.sharedInitializers, &settings.externalInitializers},
                                     std::pair{&w.sharedSubgraphInitializers, &settings.externalSubgraphInitializers}})
        for (const auto& [name, index] : *shared) {
          CTX_ASSIGN_OR_RETURN(uint64_t offset, writers[w.container]->weightFileOffset(index));
          const uint64_t length = containers[w.container].pool.weights()[index].size;
          (*located)[name] = ir::ExternalLocation{containers[w.container].path.filename().string(), offset, length};
        }
      CTX_ASSIGN_OR_RETURN(ir::Model model, buildContextModel(w.model, w.facts, w.plan, w.lowered, w.partitionNames,
                                                              w.arenaSizes, settings));
      if (options.embedMode == 0 && writers[w.container])
        model.setMetadata(epcontext::contextChecksumKey(settings.cacheContext), checksums[w.container].toHex());
      progress.say(fmt::format("writing {}", w.output.string()));
      std::vector<std::unique_ptr<AtomicFileWriter>> files;
      if (w.externalDataName.empty()) {
        CTX_ASSIGN_OR_RETURN(std::string bytes,
                             onnx_io::serializeModel(model).addContext(fmt::format("writing '{}'", w.output.string())));
        CTX_ASSIGN_OR_RETURN(auto file, AtomicFileWriter::create(w.output));
        CTX_RETURN_IF_ERROR(file->write(bytes));
        CTX_RETURN_IF_ERROR(file->finish());
        files.push_back(std::move(file));
      } else {
        CTX_ASSIGN_OR_RETURN(files,
                             onnx_io::stageModelWithExternalData(std::move(model), w.output, w.externalDataName, 0)
                                 .addContext(fmt::format("writing '{}'", w.output.string())));
      }
      for (auto& file : files) {
        written(file->finalPath(), file->bytesWritten());
        staged.addDeployment(std::move(file));
      }
    }
    if (options.depfile)
      CTX_RETURN_IF_ERROR(
          staged.addReport(*options.depfile, depfileText(report, work, runInputs(options, work)), "depfile"));
    return Status::ok();
  });
  CTX_RETURN_IF_ERROR(emitStatus);
  if (options.reportFile) {
    CTX_RETURN_IF_ERROR(staged.addReport(*options.reportFile, reportJson(report), "JSON report"));
    report.reportFileWritten = true;
  }
  CTX_RETURN_IF_ERROR(staged.commit(options.force));
  return report;
}

}  // namespace ctxkit::pipeline
