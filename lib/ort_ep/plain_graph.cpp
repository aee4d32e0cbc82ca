// GetCapability and Compile for plain models: graph API -> IR -> analysis -> partitioner -> lowering -> context.
#include "ort_ep/plain_graph.h"

#include "analysis/analysis.h"
#include "driver/driver.h"
#include "epcontext/contract.h"
#include "format/container.h"
#include "ort_ep/ep.h"
#include "ort_ep/graph_reader.h"
#include "partitioner/partitioner.h"
#include "program/program.h"
#include "runtime/source_model.h"
#include "weightshare/source_weights.h"
#include "weightshare/weight_pool.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace ctxkit::ort_ep {

namespace fs = std::filesystem;

namespace {

// Weightless contexts: parses the source model files (ORT's graph may hold initializers its optimizations made, which
// the files lack) and finds the pooled weights among their initializers.
Expected<weightshare::WeightSources> locateInSourceFiles(const weightshare::WeightPool& pool,
                                                         const std::vector<fs::path>& files) {
  std::vector<std::shared_ptr<const runtime::SourceInitializers>> read;
  std::vector<weightshare::SourceModel> sources;
  for (const auto& f : files) {
    if (f.empty())
      return makeError(ErrorCode::InvalidArgument,
                       "{}: a weightless context needs the source model's file; this model came from memory",
                       epcontext::kEpName);
    CTX_ASSIGN_OR_RETURN(auto initializers, runtime::readSourceInitializers(f).addContext("weightless context"));
    weightshare::SourceModel m{f.filename().string(), {}};
    for (const auto& [name, tensor] : initializers->byName) m.initializers.emplace_back(name, &tensor);
    sources.push_back(std::move(m));
    read.push_back(std::move(initializers));
  }
  return weightshare::locateInSources(pool, sources);
}

// Says which nodes stay with ORT and why: the first blocker of each stretch of fallback nodes (consecutive in
// topological order), with ORT's spelling of the fix for a dynamic dimension.
void noteBlockers(const ir::Graph& g, const partitioner::PartitionPlan& plan, const std::string& where,
                  const std::function<void(const std::string&)>& note) {
  size_t fallback = 0, compiled = 0;
  for (const auto& d : plan.nodes) {
    fallback += d.placement == partitioner::NodePlacement::Fallback;
    compiled += d.placement == partitioner::NodePlacement::Compiled;
  }
  if (fallback == 0) return;
  note(fmt::format("{}: claims {} of the {} nodes of {} in {} partition(s); {} stay with ONNX Runtime",
                   epcontext::kEpName, compiled, g.nodes.size(), where, plan.partitions.size(), fallback));
  std::set<std::string> said;
  bool previousFallback = false;
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const auto& d = plan.nodes[i];
    const bool isFallback = d.placement == partitioner::NodePlacement::Fallback;
    if (isFallback && !previousFallback && said.insert(d.reason).second) {
      std::string reason = d.reason;
      // The partitioner words a dimension's fix for ctxgen (--dim); in ORT it is a free dimension override.
      if (auto at = reason.find("(use --dim "); at != std::string::npos) {
        const auto end = reason.find("=N)", at);
        if (end != std::string::npos) {
          const std::string symbol = reason.substr(at + 11, end - at - 11);
          reason = reason.substr(0, at) + fmt::format("(set a free dimension override: "
                                                      "SessionOptions::AddFreeDimensionOverrideByName(\"{}\", N))",
                                                      symbol);
        }
      }
      note(fmt::format("{}: {}: node '{}' ({}) and what follows it stay with ONNX Runtime: {}", epcontext::kEpName,
                       where, g.nodes[i].name, g.nodes[i].opType, reason));
    }
    if (d.placement != partitioner::NodePlacement::Folded) previousFallback = isFallback;
  }
}

// The partition each folded node (a value ctxkit knows at compile time) goes to in ORT's graph: ctxgen leaves folded
// nodes out of the _ctx.onnx, and ORT can only fuse a partition when no unclaimed node sits on a path between two of
// its nodes (Shape -> Concat -> Reshape). A folded node is fused with the one partition that reads all it makes;
// one read by a fallback node, by two partitions or giving a graph output stays with ORT (-1).
std::vector<int> foldedOwners(const ir::Graph& g, const analysis::GraphFacts& facts,
                              const partitioner::PartitionPlan& plan, const std::set<std::string>& implicitReads) {
  std::unordered_map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) readers[in].push_back(i);
  std::set<std::string> graphOutputs = implicitReads;  // read by a body: as good as a graph output
  for (const auto& o : g.outputs) graphOutputs.insert(o.name);
  std::vector<int> owner(g.nodes.size(), -1);
  for (auto it = facts.order.rbegin(); it != facts.order.rend(); ++it) {
    const size_t i = *it;
    if (plan.nodes[i].placement != partitioner::NodePlacement::Folded) continue;
    int only = -1;
    bool ok = true;
    for (const auto& out : g.nodes[i].outputs) {
      if (out.empty()) continue;
      if (graphOutputs.count(out)) ok = false;
      if (auto r = readers.find(out); r != readers.end())
        for (size_t reader : r->second) {
          const auto& d = plan.nodes[reader];
          const int p = d.placement == partitioner::NodePlacement::Compiled ? d.partition
                        : d.placement == partitioner::NodePlacement::Folded ? owner[reader]
                                                                            : -1;
          if (p < 0 || (only >= 0 && p != only)) ok = false;
          only = p;
        }
    }
    if (ok && only >= 0) owner[i] = only;
  }
  return owner;
}

}  // namespace

Status PlainGraphCache::claimPartitions(const Api& api, const EpConfig& config, const OrtGraph& graph,
                                        OrtEpGraphSupportInfo& support,
                                        const std::function<void(const std::string&)>& note) {
  const OrtNode* parent = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetParentNode(&graph, &parent));
  if (parent != nullptr) return Status::ok();  // If/Loop/Scan bodies stay with ORT
  CTX_ASSIGN_OR_RETURN(ReadGraph read, readGraph(api, graph));
  ir::Graph& g = read.model.graph;
  CTX_ASSIGN_OR_RETURN(fs::path modelPath, graphModelPath(api, graph));
  std::string stem = modelPath.empty() ? std::string("model") : modelPath.stem().string();
  CTX_ASSIGN_OR_RETURN(auto target, partitioner::loadTarget(config.target));
  const std::string where = modelPath.empty() ? std::string("a model from memory") : modelPath.filename().string();

  // Every partition goes into one context, as ctxgen does: one weight pool, each identical weight stored once.
  // With ep.share_ep_contexts=1 while compiling, the process-wide pool (weights copied: they outlive this session).
  const bool compiling = config.context.contextEnable;
  const bool sharing = compiling && config.context.shareContexts;
  // A weightless context written for ep.context_enable keeps weights plain (packed at load), so the programs are
  // lowered that way, and the context they run from here is marked so too.
  const bool plainWeights = compiling && config.context.weightless;
  std::unique_lock<std::mutex> sharedLock;
  if (sharing) sharedLock = std::unique_lock(SharedCompile::instance().mutex());
  weightshare::WeightPool localPool;
  weightshare::WeightPool& pool = sharing ? SharedCompile::instance().pool() : localPool;

  // ctxgen's compile loop, with ORT's choices: ORT fuses the nodes of its own graph, so no graph pass rewrites it;
  // a graph ctxkit cannot analyze and a partition it cannot lower are ORT's (said, and a compile fails on the
  // latter as ctxgen does); partitions holding If/Loop/Scan nodes, whose bodies are not read, stay with ORT.
  driver::CompileSettings settings;
  settings.namePrefix = config.context.nodeNamePrefix;
  settings.stem = stem;
  settings.graphPasses = false;
  settings.lower = driver::lowerSettings(target, "", where);
  settings.lower.plainWeights = plainWeights;
  settings.implicitReads = read.implicitReads;
  driver::CompileHooks hooks;
  hooks.intern = [&](size_t, const ir::Tensor& t, const ops::WeightLayout& layout) -> Expected<uint32_t> {
    if (!sharing) return pool.intern(t, layout);
    CTX_ASSIGN_OR_RETURN(auto owned, ir::Tensor::copyOf(t.type(), t.shape(), t.bytes()));
    return pool.intern(owned, layout);
  };
  hooks.onAnalysisError = [&](Error e) -> Status {
    note(fmt::format("{}: {} claims none of the {} nodes of {}: {}", epcontext::kEpName, epcontext::kEpName,
                     g.nodes.size(), where, e.message()));
    return Status::ok();
  };
  hooks.planned = [&](const analysis::GraphFacts& facts, const partitioner::PartitionPlan& plan) {
    noteBlockers(g, plan, where, note);
    // ctxgen replaces an If whose condition the shapes decide by its branch (the inline-if graph pass) and may
    // compile the branch; ORT keeps an If whole, so here it stays with ORT: said, as the claims then differ.
    for (size_t i : read.hasSubgraphs) {
      const ir::Node& n = g.nodes[i];
      const analysis::ValueFacts* cond =
          n.kind == ir::OpKind::If && !n.inputs.empty() ? facts.find(n.inputs[0]) : nullptr;
      if (cond && cond->constant)
        note(fmt::format("{}: {}: If node '{}' has a condition known at compile time; ctxgen compiles its chosen "
                         "branch in place of the If, but ONNX Runtime keeps an If whole, so it and its branches stay "
                         "with ONNX Runtime",
                         epcontext::kEpName, where, n.name));
    }
  };
  hooks.skip = [&](size_t p, const partitioner::Partition& partition) {
    if (partition.nodes.empty()) return true;
    const bool nested = std::any_of(partition.nodes.begin(), partition.nodes.end(), [&](size_t i) {
      return std::find(read.hasSubgraphs.begin(), read.hasSubgraphs.end(), i) != read.hasSubgraphs.end();
    });
    if (nested)
      note(fmt::format("{}: {}: partition {} stays with ONNX Runtime: it holds an If/Loop/Scan node, whose bodies "
                       "ctxkit does not read through ORT's graph API",
                       epcontext::kEpName, where, p));
    return nested;
  };
  hooks.onPartitionError = [&](const partitioner::Partition& partition, const std::string& name, Error e) -> Status {
    // Compiling, ctxkit does what ctxgen does: the compile fails with the error. A session that only runs the model
    // leaves the partition to ORT and says why.
    if (compiling) return e;
    note(fmt::format("{}: {}: partition {} ({} nodes) stays with ONNX Runtime: it cannot be lowered: {}",
                     epcontext::kEpName, where, name, partition.nodes.size(), e.message()));
    return Status::ok();
  };
  CTX_ASSIGN_OR_RETURN(driver::CompiledGraph compiled, driver::compilePartitions(g, target, settings, hooks));
  if (compiled.partitions.empty()) return Status::ok();

  // The context the partitions run from holds the pool's weights (copied: nothing refers to ORT's initializer buffers
  // after this); their programs stay in memory. Only a context ORT writes (ep.context_enable) holds the programs,
  // serialized for it here, once; with ep.share_ep_contexts, Compile hands them to the shared context instead.
  auto context = std::make_shared<PlainContext>();
  auto containerBytes =
      [&](const std::vector<driver::ContextGraph>& graphs,
          const weightshare::WeightSources* sources) -> Expected<std::shared_ptr<const std::vector<std::byte>>> {
    CTX_ASSIGN_OR_RETURN(auto writer, driver::buildContainer(target, pool, graphs, plainWeights, sources));
    CTX_ASSIGN_OR_RETURN(auto bytes, writer.serialize());
    return std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  };
  if (compiling && !sharing) {
    std::vector<driver::ContextGraph> graphs;
    for (const auto& c : compiled.partitions)
      graphs.push_back({c.name, modelPath.filename().string(), program::serialize(c.lowered.program)});
    // Weightless: weights found in the source model are recorded there, not stored; the partitions still run from a
    // context with every weight.
    weightshare::WeightSources sources;
    if (plainWeights) {
      CTX_ASSIGN_OR_RETURN(sources, locateInSourceFiles(pool, {modelPath}));
    }
    CTX_ASSIGN_OR_RETURN(context->fileBytes, containerBytes(graphs, plainWeights ? &sources : nullptr));
  }
  if (context->fileBytes && !plainWeights) {
    context->bytes = context->fileBytes;
  } else {
    CTX_ASSIGN_OR_RETURN(context->bytes, containerBytes({}, nullptr));
  }
  context->modelPath = modelPath;
  context->targetId = target.hardwareArchitecture;
  context->targetRevision = target.revision;
  CTX_ASSIGN_OR_RETURN(auto view, format::ContainerView::open(std::span(*context->bytes), context->bytes, stem));
  auto shared = std::make_shared<const format::ContainerView>(std::move(view));

  CTX_ASSIGN_OR_RETURN(ModelKey key, modelKey(api, graph));
  const std::vector<int> folded = foldedOwners(g, compiled.facts, compiled.plan, read.implicitReads);
  for (driver::CompiledPartition& c : compiled.partitions) {
    auto run = std::make_shared<LoweredPartitionRun>();
    CTX_ASSIGN_OR_RETURN(run->program, runtime::CompiledProgram::create(std::move(c.lowered.program), shared, c.name));
    run->name = std::move(c.name);
    run->inputs = std::move(c.lowered.inputs);
    run->outputs = std::move(c.lowered.outputs);
    run->context = context;
    const auto& nodes = compiled.plan.partitions[c.index].nodes;
    {
      std::lock_guard lock(mutex_);
      auto model =
          std::find_if(models_.begin(), models_.end(), [&](const ModelPartitions& m) { return m.model == key; });
      if (model == models_.end()) model = models_.insert(models_.end(), ModelPartitions{key, {}});
      for (size_t i : nodes)
        for (const auto& out : g.nodes[i].outputs)
          if (!out.empty()) model->byOutput[out] = run;
    }
    std::vector<const OrtNode*> fuse;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (folded[i] == static_cast<int>(c.index)) fuse.push_back(read.nodes[i]);
    for (size_t i : nodes) fuse.push_back(read.nodes[i]);
    OrtNodeFusionOptions options{};
    options.ort_version_supported = ORT_API_VERSION;
    // The weights live in the context; but ORT would also drop an initializer that an If/Loop/Scan body of a node it
    // keeps reads (ORT's implicit inputs do not list every one), and then cannot write the compiled model: with such
    // nodes in the graph, ORT keeps the initializers.
    options.drop_constant_initializers = read.hasSubgraphs.empty();
    CTX_ORT_RETURN_IF_ERROR(api,
                            api.ep.EpGraphSupportInfo_AddNodesToFuse(&support, fuse.data(), fuse.size(), &options));
  }
  return Status::ok();
}

Expected<PlainGraphCache::ModelKey> PlainGraphCache::modelKey(const Api& api, const OrtGraph& graph) {
  CTX_ASSIGN_OR_RETURN(fs::path path, graphModelPath(api, graph));
  if (path.empty()) return ModelKey();
  auto identity = identifyFile(path);
  return identity ? ModelKey(std::move(identity).value()) : ModelKey();
}

Expected<std::shared_ptr<const LoweredPartitionRun>> PlainGraphCache::find(const Api& api,
                                                                           const OrtGraph& fusedGraph) const {
  CTX_ASSIGN_OR_RETURN(auto nodes, graphNodes(api, fusedGraph));
  CTX_ASSIGN_OR_RETURN(ModelKey key, modelKey(api, fusedGraph));
  std::lock_guard lock(mutex_);
  auto model = std::find_if(models_.begin(), models_.end(), [&](const ModelPartitions& m) { return m.model == key; });
  if (model == models_.end())
    return makeError(ErrorCode::Internal, "a fused graph of {} nodes comes from {}, of which ctxkit claimed nothing",
                     nodes.size(), key ? key->describe() : std::string("a model from memory"));
  for (const OrtNode* n : nodes) {
    CTX_ASSIGN_OR_RETURN(auto outputs, nodeOutputNames(api, *n));
    for (const auto& o : outputs)
      if (auto it = model->byOutput.find(o); it != model->byOutput.end()) return it->second;
  }
  return makeError(ErrorCode::Internal, "a fused graph of {} nodes matches no partition ctxkit claimed", nodes.size());
}

}  // namespace ctxkit::ort_ep

namespace ctxkit::ort_ep {

SharedCompile& SharedCompile::instance() {
  static SharedCompile* shared = new SharedCompile();  // lives as long as the process: sessions come and go
  return *shared;
}

std::string SharedCompile::binName(const std::string& outputStem) {
  if (binName_.empty()) binName_ = outputStem + "_ctxkit.bin";
  return binName_;
}

Status SharedCompile::addGraph(const std::string& name, const fs::path& sourceModel, std::vector<std::byte> program) {
  for (const auto& g : graphs_)
    if (g.name == name)
      return makeError(ErrorCode::InvalidArgument,
                       "graph name '{}' is used twice in one shared context (models with the same stem?)", name);
  graphs_.push_back({name, sourceModel, std::move(program)});
  return Status::ok();
}

Status SharedCompile::writeAndReset(const fs::path& path, const partitioner::Target& target, bool weightless) {
  weightshare::WeightSources sources;
  if (weightless) {
    std::vector<fs::path> files;
    for (const auto& g : graphs_)
      if (std::find(files.begin(), files.end(), g.sourceModel) == files.end()) files.push_back(g.sourceModel);
    CTX_ASSIGN_OR_RETURN(sources, locateInSourceFiles(pool_, files));
  }
  std::vector<driver::ContextGraph> graphs;
  for (const auto& g : graphs_) graphs.push_back({g.name, g.sourceModel.filename().string(), g.program});
  CTX_ASSIGN_OR_RETURN(auto writer,
                       driver::buildContainer(target, pool_, graphs, weightless, weightless ? &sources : nullptr));
  CTX_RETURN_IF_ERROR(writer.write(path));
  pool_ = weightshare::WeightPool();
  graphs_.clear();
  binName_.clear();
  return Status::ok();
}

}  // namespace ctxkit::ort_ep
