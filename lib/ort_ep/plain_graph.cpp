// GetCapability and Compile for plain models: graph API -> IR -> analysis -> partitioner -> lowering -> context.
#include "ort_ep/plain_graph.h"

#include "analysis/analysis.h"
#include "driver/driver.h"
#include "epcontext/contract.h"
#include "format/container.h"
#include "ir/value_table.h"
#include "ort_ep/ep.h"
#include "ort_ep/graph_reader.h"
#include "partitioner/partitioner.h"
#include "program/program.h"
#include "runtime/source_model.h"
#include "runtime/source_pins.h"
#include "weightshare/source_weights.h"
#include "weightshare/weight_pool.h"

#include <algorithm>
#include <set>

namespace ctxkit::ort_ep {

namespace fs = std::filesystem;

namespace {

// Weightless contexts: parses the source model files (ORT's graph may hold initializers its optimizations made, which
// the files lack), finds the pooled weights among their initializers in `scope`, and pins the files.
struct LocatedSources {
  weightshare::WeightSources weights;
  std::vector<format::SourcePin> pins;
};
Expected<LocatedSources> locateInSourceFiles(const weightshare::WeightPool& pool, const std::vector<fs::path>& files,
                                             weightshare::WeightlessScope scope) {
  std::vector<std::shared_ptr<const runtime::SourceInitializers>> read;
  std::vector<weightshare::SourceModel> sources;
  LocatedSources out;
  for (const auto& f : files) {
    if (f.empty())
      return makeError(ErrorCode::InvalidArgument,
                       "{}: a weightless context needs the source model's file; this model came from memory",
                       epcontext::kEpName);
    CTX_ASSIGN_OR_RETURN(auto initializers, runtime::readSourceInitializers(f).addContext("weightless context"));
    sources.push_back(weightshare::sourceModelOf(f.filename().string(), initializers->byName, initializers->external));
    for (auto& pin : runtime::sourcePins(f.filename().string(), *initializers)) out.pins.push_back(std::move(pin));
    read.push_back(std::move(initializers));
  }
  out.weights = weightshare::locateInSources(pool, sources, scope);
  return out;
}

// Says which nodes stay with ORT and why: the first blocker of each stretch of fallback nodes (consecutive in
// topological order), with ORT's spelling of the fix for a dynamic dimension. `owner` says which of ORT's nodes
// partitions take.
void noteBlockers(const ir::Graph& g, const partitioner::PartitionPlan& plan, const std::vector<int>& owner,
                  const std::string& where, const std::function<void(const std::string&)>& note) {
  const auto claimed = static_cast<size_t>(std::count_if(owner.begin(), owner.end(), [](int p) { return p >= 0; }));
  if (claimed == owner.size()) return;
  note(fmt::format("{}: claims {} of the {} nodes of {} in {} partition(s); {} stay with ONNX Runtime",
                   epcontext::kEpName, claimed, owner.size(), where, plan.partitions.size(), owner.size() - claimed));
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

// Which of ORT's nodes each partition fuses. The graph passes rewrote ctxkit's copy of ORT's graph, and the
// partitioner placed the copy's nodes; ORT's nodes follow:
//  - a node compiled in a partition goes to it; one left on the fallback path stays with ORT;
//  - an inlined If goes to the partition that holds every compiled node of its branch (a branch node left on the
//    fallback path, or compiled nodes in two partitions: it cannot, and is listed in `keep`, to stay whole);
//  - a node whose values are known at compile time (folded: ctxgen leaves it out of the _ctx.onnx), a removed no-op
//    and an inlined If whose branch is all folded go to the one partition that every node reading them goes to;
//    read by a node left to ORT, by two partitions or giving a graph output, they stay with ORT (which runs them).
// ORT fuses a set of nodes only when no node left to it lies on a path between two of them (Shape -> Concat ->
// Reshape): a removed no-op that would is listed in `keep` too, for the passes to leave it in the graph.
struct OrtClaim {
  std::vector<int> owner;  // per node of ORT's graph: a partition, or -1 (stays with ORT)
  std::vector<size_t> keep;
  std::vector<size_t> between;  // other nodes left to ORT between two nodes of one partition (ORT refuses that set)
  std::vector<std::set<std::string>> outputs;  // per partition: the values ORT reads from its fused node
};

// The nodes left to ORT (owner -1) that lie on a path between two nodes of one partition.
std::set<size_t> betweenFused(const std::vector<std::vector<size_t>>& successors, const std::vector<int>& owner,
                              size_t partitions) {
  const size_t n = owner.size();
  std::vector<std::vector<size_t>> predecessors(n);
  for (size_t j = 0; j < n; ++j)
    for (size_t k : successors[j]) predecessors[k].push_back(j);
  std::set<size_t> between;
  std::vector<uint8_t> after(n), before(n);
  std::vector<size_t> work;
  for (size_t p = 0; p < partitions; ++p) {
    const int part = static_cast<int>(p);
    // Nodes outside the partition reachable from it, and those from which it is reachable.
    auto sweep = [&](const std::vector<std::vector<size_t>>& edges, std::vector<uint8_t>& seen) {
      std::fill(seen.begin(), seen.end(), 0);
      work.clear();
      for (size_t j = 0; j < n; ++j)
        if (owner[j] == part) work.push_back(j);
      if (work.empty()) return false;
      while (!work.empty()) {
        const size_t j = work.back();
        work.pop_back();
        for (size_t k : edges[j])
          if (owner[k] != part && !seen[k]) {
            seen[k] = 1;
            work.push_back(k);
          }
      }
      return true;
    };
    if (!sweep(successors, after)) continue;
    sweep(predecessors, before);
    for (size_t j = 0; j < n; ++j)
      if (after[j] && before[j]) between.insert(j);
  }
  return between;
}

OrtClaim claimOrtNodes(const ReadGraph& ort, const ir::Graph& g, const partitioner::PartitionPlan& plan,
                       const analysis::GraphPassTrace& trace) {
  const ir::Graph& original = ort.model.graph;
  const size_t n = original.nodes.size();
  constexpr int kPending = -2, kMixed = -3;
  OrtClaim claim;
  claim.owner.assign(n, kPending);
  std::vector<bool> inlined(n, false), removed(n, false);
  for (size_t j : trace.inlined) inlined[j] = true;
  for (size_t j : trace.removed) removed[j] = true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const size_t j = trace.origin[i];
    const partitioner::NodeDecision& d = plan.nodes[i];
    const int placed = d.placement == partitioner::NodePlacement::Compiled   ? d.partition
                       : d.placement == partitioner::NodePlacement::Fallback ? -1
                                                                             : kPending;
    int& o = claim.owner[j];
    if (!inlined[j] || o == kPending) o = placed;
    else if (placed != kPending && placed != o) o = kMixed;
  }
  for (size_t j : trace.inlined)
    if (claim.owner[j] == -1 || claim.owner[j] == kMixed) {
      claim.keep.push_back(j);
      claim.owner[j] = -1;
    }

  // Readers of each value of ORT's graph among its nodes (by value id), their bodies' reads included.
  const ir::ValueTable table(original);
  std::vector<std::vector<size_t>> readers(table.size());
  for (size_t j = 0; j < n; ++j) {
    for (ir::ValueId v : table.inputsOf(j))
      if (v != ir::kNoValue) readers[v].push_back(j);
    for (const auto& in : ort.implicitInputs[j])
      if (const ir::ValueId v = table.find(in); v != ir::kNoValue) readers[v].push_back(j);
  }
  // Pending nodes may read each other: settle them until nothing changes; what is left (nothing reads it) stays.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t j = 0; j < n; ++j) {
      if (claim.owner[j] != kPending) continue;
      int only = -1;
      bool ok = true, waiting = false;
      for (ir::ValueId out : table.outputsOf(j)) {
        if (out == ir::kNoValue) continue;
        if (table[out].isGraphOutput) ok = false;
        for (size_t reader : readers[out]) {
          const int p = claim.owner[reader];
          if (p == kPending) {
            waiting = true;
            continue;
          }
          if (p < 0 || (only >= 0 && p != only)) ok = false;
          only = p;
        }
      }
      if (waiting && ok) continue;
      claim.owner[j] = ok ? only : -1;
      changed = true;
    }
  }
  for (int& o : claim.owner)
    if (o == kPending) o = -1;
  if (!claim.keep.empty()) return claim;

  std::vector<std::vector<size_t>> successors(n);
  for (ir::ValueId v = 0; v < table.size(); ++v)
    if (const ir::ValueEntry& e = table[v]; e.hasProducer())
      successors[e.producer].insert(successors[e.producer].end(), readers[v].begin(), readers[v].end());
  for (size_t j : betweenFused(successors, claim.owner, plan.partitions.size()))
    (removed[j] ? claim.keep : claim.between).push_back(j);
  if (!claim.keep.empty()) return claim;

  // What ORT reads from each fused node: the values its nodes make that a node outside it reads, or graph outputs.
  claim.outputs.resize(plan.partitions.size());
  for (size_t j = 0; j < n; ++j) {
    const int p = claim.owner[j];
    if (p < 0) continue;
    for (ir::ValueId out : table.outputsOf(j)) {
      if (out == ir::kNoValue) continue;
      bool outside = table[out].isGraphOutput;
      for (size_t reader : readers[out]) outside |= claim.owner[reader] != p;
      if (outside) claim.outputs[static_cast<size_t>(p)].insert(table.name(out));
    }
  }
  return claim;
}

// The names ORT gives the inputs of the fused node of ORT's nodes `fused`, for each of a program's inputs: the same
// name, or a value that a removed no-op passed the input through as. Empty when one has none. Values are matched by
// id of the graph the passes were given (ORT's), through its names: those are what ORT and the programs share.
std::vector<std::string> ortInputNames(const std::vector<std::string>& programInputs, const ReadGraph& ort,
                                       const std::vector<size_t>& fused, const analysis::GraphPassTrace& trace) {
  const ir::ValueTable& ids = trace.given;
  std::vector<bool> made(ids.size(), false), read(ids.size(), false);
  auto mark = [&](std::vector<bool>& set, const std::string& name) {
    if (const ir::ValueId v = name.empty() ? ir::kNoValue : ids.find(name); v != ir::kNoValue) set[v] = true;
  };
  for (size_t j : fused) {
    const ir::Node& node = ort.model.graph.nodes[j];
    for (const auto& out : node.outputs) mark(made, out);
    for (const auto& in : node.inputs) mark(read, in);
    for (const auto& in : ort.implicitInputs[j]) mark(read, in);
  }
  // By id: the value ORT names for a program input of that id (the value itself wins over an alias of it).
  std::vector<ir::ValueId> ortValue(ids.size(), ir::kNoValue);
  for (ir::ValueId v = 0; v < ids.size(); ++v) {
    if (!read[v] || made[v]) continue;
    const ir::ValueId program = trace.passedThrough[v] == ir::kNoValue ? v : trace.passedThrough[v];
    if (ortValue[program] == ir::kNoValue) ortValue[program] = v;
    ortValue[v] = v;
  }
  std::vector<std::string> names;
  for (const auto& in : programInputs) {
    const ir::ValueId v = ids.find(in);
    if (v == ir::kNoValue || ortValue[v] == ir::kNoValue) return {};
    names.push_back(ids.name(ortValue[v]));
  }
  return names;
}

}  // namespace

Status PlainGraphCache::claimPartitions(const Api& api, const EpConfig& config, const OrtGraph& graph,
                                        OrtEpGraphSupportInfo& support,
                                        const std::function<void(const std::string&)>& note) {
  const OrtNode* parent = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetParentNode(&graph, &parent));
  if (parent != nullptr) return Status::ok();  // If/Loop/Scan bodies stay with ORT
  CTX_ASSIGN_OR_RETURN(const ReadGraph read, readGraph(api, graph));
  const ir::Graph& ortGraph = read.model.graph;
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

  // ctxgen's compile loop, graph passes included, on a copy of ORT's graph; ORT's own nodes are then fused as the
  // rewritten graph's partitions say (claimOrtNodes). A graph ctxkit cannot analyze and a partition it cannot lower
  // are ORT's (said, and a compile fails on the latter as ctxgen does); partitions holding If/Loop/Scan nodes, whose
  // bodies ctxkit's programs do not run, stay with ORT.
  analysis::GraphPassTrace trace;
  driver::CompileSettings settings;
  settings.namePrefix = config.context.nodeNamePrefix;
  settings.stem = stem;
  settings.trace = &trace;
  settings.lower = driver::lowerSettings(target, "", where);
  settings.lower.plainWeights = plainWeights;
  ir::Graph g;
  OrtClaim claim;
  bool again = false;  // an inlined If cannot be fused: partition again with that If kept
  driver::CompileHooks hooks;
  hooks.intern = [&](size_t, const ir::Tensor& t, const cpu::WeightLayout& layout) -> Expected<uint32_t> {
    if (!sharing) return pool.intern(t, layout);
    CTX_ASSIGN_OR_RETURN(auto owned, ir::Tensor::copyOf(t.type(), t.shape(), t.bytes()));
    return pool.intern(owned, layout);
  };
  hooks.onAnalysisError = [&](Error e) -> Status {
    note(fmt::format("{}: {} claims none of the {} nodes of {}: {}", epcontext::kEpName, epcontext::kEpName,
                     ortGraph.nodes.size(), where, e.message()));
    return Status::ok();
  };
  hooks.planned = [&](const analysis::GraphFacts&, const partitioner::PartitionPlan& plan) {
    claim = claimOrtNodes(read, g, plan, trace);
    again = !claim.keep.empty();
    if (again) {
      trace.keep.insert(claim.keep.begin(), claim.keep.end());
      return;
    }
    noteBlockers(g, plan, claim.owner, where, note);
    for (size_t j : claim.between)
      note(fmt::format("{}: {}: node '{}' ({}) stays with ONNX Runtime on a path between two nodes of one partition "
                       "ctxkit claims; ONNX Runtime refuses to fuse such a partition",
                       epcontext::kEpName, where, ortGraph.nodes[j].name, ortGraph.nodes[j].opType));
    // ctxgen replaces an If whose condition the shapes decide by its branch and compiles what it can of it; ORT can
    // only fuse the If whole, so one whose branch does not go whole into one partition stays with ORT: said, as the
    // claims then differ.
    for (size_t j : trace.keep)
      if (ortGraph.nodes[j].kind == ir::OpKind::If)
        note(fmt::format("{}: {}: If node '{}' has a condition known at compile time, but its chosen branch does not "
                         "compile into one partition; ctxgen compiles what it can of the branch in place of the If, "
                         "while ONNX Runtime can only hand over the If whole, so it stays with ONNX Runtime",
                         epcontext::kEpName, where, ortGraph.nodes[j].name));
  };
  hooks.skip = [&](size_t p, const partitioner::Partition& partition) {
    if (again || partition.nodes.empty()) return true;
    const bool nested = std::any_of(partition.nodes.begin(), partition.nodes.end(), [&](size_t i) {
      const ir::OpKind k = g.nodes[i].kind;
      return k == ir::OpKind::If || k == ir::OpKind::Loop || k == ir::OpKind::Scan;
    });
    if (nested)
      note(fmt::format("{}: {}: partition {} stays with ONNX Runtime: it holds an If/Loop/Scan node, whose bodies "
                       "ctxkit leaves to ONNX Runtime",
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
  hooks.alsoOutputs = [&](size_t p) {
    return std::vector<std::string>(claim.outputs[p].begin(), claim.outputs[p].end());
  };
  driver::CompiledGraph compiled;
  // Each attempt keeps at least one more If, so the attempts end.
  do {
    g = ortGraph;
    again = false;
    CTX_ASSIGN_OR_RETURN(compiled, driver::compilePartitions(g, target, settings, hooks));
  } while (again);
  if (compiled.partitions.empty()) return Status::ok();

  // Each partition as ORT sees it: its own nodes, and the names its fused node's inputs have there. One whose values
  // ORT would see differently from the program's (never expected) stays with ORT, said.
  struct Claimed {
    driver::CompiledPartition* partition;
    std::vector<size_t> fused;  // ORT's nodes
    std::vector<std::string> inputs;
  };
  std::vector<Claimed> claimed;
  std::vector<int> owner = claim.owner;
  for (driver::CompiledPartition& c : compiled.partitions) {
    Claimed k{&c, {}, {}};
    for (size_t j = 0; j < owner.size(); ++j)
      if (owner[j] == static_cast<int>(c.index)) k.fused.push_back(j);
    k.inputs = ortInputNames(c.lowered.inputs, read, k.fused, trace);
    const std::set<std::string> outputs(c.lowered.outputs.begin(), c.lowered.outputs.end());
    if (k.inputs.size() != c.lowered.inputs.size() || outputs != claim.outputs[c.index]) {
      note(fmt::format("{}: {}: partition {} stays with ONNX Runtime: its values do not match those of ONNX "
                       "Runtime's nodes it would replace",
                       epcontext::kEpName, where, c.name));
      for (size_t j : k.fused) owner[j] = -1;
      continue;
    }
    claimed.push_back(std::move(k));
  }
  if (claimed.empty()) return Status::ok();

  // The context the partitions run from holds the pool's weights (copied: nothing refers to ORT's initializer buffers
  // after this); their programs stay in memory. Only a context ORT writes (ep.context_enable) holds the programs,
  // serialized for it here, once; with ep.share_ep_contexts, Compile hands them to the shared context instead.
  auto context = std::make_shared<PlainContext>();
  auto containerBytes =
      [&](const std::vector<driver::ContextGraph>& graphs, const weightshare::WeightSources* sources,
          std::span<const format::SourcePin> pins = {}) -> Expected<std::shared_ptr<const std::vector<std::byte>>> {
    CTX_ASSIGN_OR_RETURN(auto writer, driver::buildContainer(target, pool, graphs, plainWeights, sources, pins));
    CTX_ASSIGN_OR_RETURN(auto bytes, writer.serialize());
    return std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  };
  if (compiling && !sharing) {
    std::vector<driver::ContextGraph> graphs;
    for (const Claimed& k : claimed)
      graphs.push_back({k.partition->name, modelPath.filename().string(),
                        program::serialize(k.partition->lowered.program),
                        program::hasLoadTimeTensors(k.partition->lowered.program)});
    // Weightless: weights found in the source model are recorded there, not stored; the partitions still run from a
    // context with every weight.
    LocatedSources sources;
    if (plainWeights) {
      CTX_ASSIGN_OR_RETURN(sources, locateInSourceFiles(pool, {modelPath}, config.weightlessScope));
    }
    CTX_ASSIGN_OR_RETURN(context->fileBytes,
                         containerBytes(graphs, plainWeights ? &sources.weights : nullptr, sources.pins));
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
  // The weights live in the context; but ORT would also drop an initializer that an If/Loop/Scan body of a node it
  // keeps reads (ORT's implicit inputs do not list every one), and then cannot write the compiled model: with such
  // nodes left to ORT, ORT keeps the initializers.
  const bool dropInitializers =
      std::all_of(read.hasSubgraphs.begin(), read.hasSubgraphs.end(), [&](size_t j) { return owner[j] >= 0; });
  for (Claimed& k : claimed) {
    driver::CompiledPartition& c = *k.partition;
    auto run = std::make_shared<LoweredPartitionRun>();
    CTX_ASSIGN_OR_RETURN(run->program, runtime::CompiledProgram::create(std::move(c.lowered.program), shared, c.name));
    run->name = std::move(c.name);
    run->inputs = std::move(k.inputs);
    run->outputs = std::move(c.lowered.outputs);
    run->context = context;
    std::vector<const OrtNode*> fuse;
    {
      std::lock_guard lock(mutex_);
      auto model =
          std::find_if(models_.begin(), models_.end(), [&](const ModelPartitions& m) { return m.model == key; });
      if (model == models_.end()) model = models_.insert(models_.end(), ModelPartitions{key, {}});
      for (size_t j : k.fused) {
        fuse.push_back(read.nodes[j]);
        for (const auto& out : ortGraph.nodes[j].outputs)
          if (!out.empty()) model->byOutput[out] = run;
      }
    }
    OrtNodeFusionOptions options{};
    options.ort_version_supported = ORT_API_VERSION;
    options.drop_constant_initializers = dropInitializers;
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

Status SharedCompile::addGraph(const std::string& name, const fs::path& sourceModel, const program::Program& compiled) {
  std::vector<std::byte> program = program::serialize(compiled);
  const bool loadTime = program::hasLoadTimeTensors(compiled);
  for (auto& g : graphs_) {
    if (g.name != name) continue;
    // The same model compiled again in one group: a session of it that ORT failed after its Compile (ORT's session
    // path refuses an existing output model only then), retried. Its weights were interned already; the graph is
    // replaced. (Two models from memory cannot be told apart: refused.)
    if (!sourceModel.empty() && g.sourceModel == sourceModel) {
      g.program = std::move(program);
      g.loadTimeTensors = loadTime;
      return Status::ok();
    }
    return makeError(
        ErrorCode::InvalidArgument,
        "graph name '{}' is used twice in one shared context, by '{}' and '{}' (models with the same stem?)", name,
        g.sourceModel.string(), sourceModel.string());
  }
  graphs_.push_back({name, sourceModel, std::move(program), loadTime});
  return Status::ok();
}

Status SharedCompile::writeAndReset(const fs::path& path, const partitioner::Target& target, bool weightless,
                                    weightshare::WeightlessScope scope) {
  LocatedSources sources;
  if (weightless) {
    std::vector<fs::path> files;
    for (const auto& g : graphs_)
      if (std::find(files.begin(), files.end(), g.sourceModel) == files.end()) files.push_back(g.sourceModel);
    CTX_ASSIGN_OR_RETURN(sources, locateInSourceFiles(pool_, files, scope));
  }
  std::vector<driver::ContextGraph> graphs;
  for (const auto& g : graphs_)
    graphs.push_back({g.name, g.sourceModel.filename().string(), g.program, g.loadTimeTensors});
  CTX_ASSIGN_OR_RETURN(auto writer, driver::buildContainer(target, pool_, graphs, weightless,
                                                           weightless ? &sources.weights : nullptr, sources.pins));
  CTX_RETURN_IF_ERROR(writer.write(path));
  reset();
  return Status::ok();
}

bool SharedCompile::endGroup(uint64_t group) {
  std::lock_guard lock(mutex_);
  if (group != group_) return false;
  reset();
  return true;
}

void SharedCompile::reset() {
  pool_ = weightshare::WeightPool();
  graphs_.clear();
  binName_.clear();
  ++group_;
}

}  // namespace ctxkit::ort_ep
