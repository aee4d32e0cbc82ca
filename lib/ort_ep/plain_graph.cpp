// GetCapability and Compile for plain models: graph API -> IR -> analysis -> partitioner -> lowering -> context.
#include "ort_ep/plain_graph.h"

#include "analysis/analysis.h"
#include "codegen/lower.h"
#include "epcontext/contract.h"
#include "format/container.h"
#include "ort_ep/ep.h"
#include "ort_ep/graph_reader.h"
#include "partitioner/partitioner.h"
#include "pipeline/emit.h"
#include "program/program.h"
#include "runtime/source_model.h"
#include "weightshare/source_weights.h"
#include "weightshare/weight_pool.h"

#include <algorithm>
#include <set>

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

}  // namespace

Status PlainGraphCache::claimPartitions(const Api& api, const EpConfig& config, const OrtGraph& graph,
                                        OrtEpGraphSupportInfo& support) {
  const OrtNode* parent = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetParentNode(&graph, &parent));
  if (parent != nullptr) return Status::ok();  // If/Loop/Scan bodies stay with ORT
  CTX_ASSIGN_OR_RETURN(ReadGraph read, readGraph(api, graph));
  const ir::Graph& g = read.model.graph;
  CTX_ASSIGN_OR_RETURN(fs::path modelPath, graphModelPath(api, graph));
  std::string stem = modelPath.empty() ? std::string("model") : modelPath.stem().string();
  CTX_ASSIGN_OR_RETURN(auto target, partitioner::loadTarget(config.target));
  auto facts = analysis::analyzeGraph(g, {});
  if (!facts) return Status::ok();  // a graph ctxkit cannot analyze is ORT's alone
  partitioner::PartitionPlan plan = partitioner::partitionGraph(g, *facts, target);

  // Lower every partition into one context, as ctxgen does: one weight pool, each identical weight stored once.
  // With ep.share_ep_contexts=1 while compiling, the process-wide pool (weights copied: they outlive this session).
  bool sharing = config.contextEnable && config.shareContexts;
  // A weightless context written for ep.context_enable keeps weights plain (packed at load), so the programs are
  // lowered that way, and the context they run from here is marked so too.
  const bool plainWeights = config.contextEnable && config.weightless;
  std::unique_lock<std::mutex> sharedLock;
  if (sharing) sharedLock = std::unique_lock(SharedCompile::instance().mutex());
  weightshare::WeightPool localPool;
  weightshare::WeightPool& pool = sharing ? SharedCompile::instance().pool() : localPool;
  auto intern = [&](const ir::Tensor& t, const ops::WeightLayout& layout) -> Expected<uint32_t> {
    if (!sharing) return pool.intern(t, layout);
    CTX_ASSIGN_OR_RETURN(auto owned, ir::Tensor::copyOf(t.type(), t.shape(), t.bytes()));
    return pool.intern(owned, layout);
  };
  struct Claimed {
    size_t partition;
    std::string name;
    std::vector<std::string> inputs, outputs;
    program::Program program;
  };
  std::vector<Claimed> claimed;
  const pipeline::OutsideUses outsideUses(g, plan);
  for (size_t p = 0; p < plan.partitions.size(); ++p) {
    const auto& nodes = plan.partitions[p].nodes;
    bool nested = std::any_of(nodes.begin(), nodes.end(), [&](size_t i) {
      return std::find(read.hasSubgraphs.begin(), read.hasSubgraphs.end(), i) != read.hasSubgraphs.end();
    });
    if (nested || nodes.empty()) continue;
    std::string name = fmt::format("{}{}_ctxkit_{}", config.nodeNamePrefix, stem, claimed.size());
    codegen::LowerOptions options;
    options.name = name;
    options.gemmLayout = target.gemmLayout;
    options.plainWeights = plainWeights;
    auto lowered = codegen::lowerPartition(g, *facts, plan.partitions[p], outsideUses.of(p), intern, options);
    if (!lowered) continue;  // a partition ctxkit cannot lower stays with ORT's CPU EP, as an unsupported node would
    claimed.push_back({p, name, std::move(lowered->inputs), std::move(lowered->outputs), std::move(lowered->program)});
  }
  if (claimed.empty()) return Status::ok();

  format::CompatInfo compat{epcontext::kProducer, epcontext::kVersion, target.hardwareArchitecture, target.revision};
  auto context = std::make_shared<PlainContext>();
  for (bool weightless : {false, true}) {
    // Weightless: the context written for ep.context_enable; the partitions still run from the one with every weight.
    if (weightless && (!plainWeights || sharing)) break;
    format::ContainerWriter writer(compat, format::WriterOptions{target.weightAlignment, plainWeights});
    weightshare::WeightSources sources;
    if (weightless) {
      CTX_ASSIGN_OR_RETURN(sources, locateInSourceFiles(pool, {modelPath}));
    }
    CTX_RETURN_IF_ERROR(weightshare::addPoolWeights(writer, pool, weightless ? &sources : nullptr));
    for (const auto& c : claimed)
      CTX_RETURN_IF_ERROR(writer.addGraph(c.name, modelPath.filename().string(), program::serialize(c.program)));
    // The weights are copied here: nothing refers to ORT's initializer buffers after this.
    CTX_ASSIGN_OR_RETURN(auto bytes, writer.serialize());
    (weightless ? context->fileBytes : context->bytes) =
        std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  }
  context->modelPath = modelPath;
  context->targetId = target.hardwareArchitecture;
  context->targetRevision = target.revision;
  CTX_ASSIGN_OR_RETURN(auto view, format::ContainerView::open(std::span(*context->bytes), context->bytes, stem));
  auto shared = std::make_shared<const format::ContainerView>(std::move(view));

  for (size_t k = 0; k < claimed.size(); ++k) {
    Claimed& c = claimed[k];
    const format::GraphInfo* info = shared->findGraph(c.name);
    if (!info)
      return makeError(ErrorCode::Internal, "{}: graph '{}' missing from the context just written", stem, c.name);
    size_t index = static_cast<size_t>(info - shared->graphs().data());
    CTX_ASSIGN_OR_RETURN(auto program,
                         program::deserialize(shared->programBytes(index), shared->weights().size(), c.name));
    CTX_ASSIGN_OR_RETURN(auto compiled, runtime::CompiledProgram::create(std::move(program), shared, c.name));
    auto run = std::make_shared<LoweredPartitionRun>();
    run->name = c.name;
    run->program = std::move(compiled);
    run->inputs = std::move(c.inputs);
    run->outputs = std::move(c.outputs);
    run->context = context;
    run->programBytes = program::serialize(c.program);
    const auto& nodes = plan.partitions[c.partition].nodes;
    {
      std::lock_guard lock(mutex_);
      for (size_t i : nodes)
        for (const auto& out : g.nodes[i].outputs)
          if (!out.empty()) byOutput_[out] = run;
    }
    std::vector<const OrtNode*> fuse;
    for (size_t i : nodes) fuse.push_back(read.nodes[i]);
    OrtNodeFusionOptions options{};
    options.ort_version_supported = ORT_API_VERSION;
    options.drop_constant_initializers = true;  // the weights live in the context
    CTX_ORT_RETURN_IF_ERROR(api,
                            api.ep.EpGraphSupportInfo_AddNodesToFuse(&support, fuse.data(), fuse.size(), &options));
  }
  return Status::ok();
}

Expected<std::shared_ptr<const LoweredPartitionRun>> PlainGraphCache::find(const Api& api,
                                                                           const OrtGraph& fusedGraph) const {
  CTX_ASSIGN_OR_RETURN(auto nodes, graphNodes(api, fusedGraph));
  std::lock_guard lock(mutex_);
  for (const OrtNode* n : nodes) {
    CTX_ASSIGN_OR_RETURN(auto outputs, nodeOutputNames(api, *n));
    for (const auto& o : outputs)
      if (auto it = byOutput_.find(o); it != byOutput_.end()) return it->second;
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

Status SharedCompile::writeAndReset(const fs::path& path, const std::string& targetId, const std::string& revision,
                                    uint64_t alignment, bool weightless) {
  format::CompatInfo compat{epcontext::kProducer, epcontext::kVersion, targetId, revision};
  format::ContainerWriter writer(compat, format::WriterOptions{alignment, weightless});
  weightshare::WeightSources sources;
  if (weightless) {
    std::vector<fs::path> files;
    for (const auto& g : graphs_)
      if (std::find(files.begin(), files.end(), g.sourceModel) == files.end()) files.push_back(g.sourceModel);
    CTX_ASSIGN_OR_RETURN(sources, locateInSourceFiles(pool_, files));
  }
  CTX_RETURN_IF_ERROR(weightshare::addPoolWeights(writer, pool_, weightless ? &sources : nullptr));
  for (const auto& g : graphs_)
    CTX_RETURN_IF_ERROR(writer.addGraph(g.name, g.sourceModel.filename().string(), g.program));
  CTX_RETURN_IF_ERROR(writer.write(path));
  pool_ = weightshare::WeightPool();
  graphs_.clear();
  binName_.clear();
  return Status::ok();
}

}  // namespace ctxkit::ort_ep
