// GetCapability and Compile for plain models: graph API -> IR -> analysis -> partitioner -> lowering -> context.
#include "ort_ep/plain_graph.h"

#include "analysis/analysis.h"
#include "codegen/lower.h"
#include "epcontext/contract.h"
#include "format/container.h"
#include "ort_ep/ep.h"
#include "ort_ep/graph_reader.h"
#include "partitioner/partitioner.h"
#include "program/program.h"
#include "weightshare/weight_pool.h"

#include <algorithm>
#include <set>

namespace ctxkit::ort_ep {

namespace fs = std::filesystem;

namespace {

// Values the partition must hand out: graph outputs and what other (not folded) nodes read.
std::set<std::string> usedOutside(const ir::Graph& graph, const partitioner::PartitionPlan& plan, int p) {
  std::set<std::string> used;
  for (const auto& out : graph.outputs) used.insert(out.name);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const auto& d = plan.nodes[i];
    if (d.placement == partitioner::NodePlacement::Folded) continue;
    if (d.placement == partitioner::NodePlacement::Compiled && d.partition == p) continue;
    ir::collectNodeReads(graph.nodes[i], used);
  }
  return used;
}

// Lowers partition `p` into a context of its own (in memory) and binds its program, as the runtime loads one.
Expected<std::shared_ptr<const LoweredPartitionRun>> lower(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                                            const partitioner::PartitionPlan& plan, int p,
                                                            const partitioner::Target& target, const std::string& name,
                                                            const std::string& sourceModel) {
  weightshare::WeightPool pool;
  auto intern = [&](const ir::Tensor& t) { return pool.intern(t); };
  codegen::LowerOptions options;
  options.name = name;
  CTX_ASSIGN_OR_RETURN(auto lowered, codegen::lowerPartition(graph, facts, plan.partitions[static_cast<size_t>(p)],
                                                             usedOutside(graph, plan, p), intern, options));
  format::CompatInfo compat{epcontext::kProducer, epcontext::kVersion, target.hardwareArchitecture, target.revision};
  format::ContainerWriter writer(compat, format::WriterOptions{target.weightAlignment});
  for (const auto& w : pool.weights())  // in pool order: the program's weight indices
    CTX_RETURN_IF_ERROR(writer.addWeight(w.tensor.type(), w.tensor.shape(), w.tensor.bytes(), w.hash).status());
  CTX_RETURN_IF_ERROR(writer.addGraph(name, sourceModel, program::serialize(lowered.program)));
  // The weights are copied here: nothing refers to ORT's initializer buffers after this.
  CTX_ASSIGN_OR_RETURN(auto bytes, writer.serialize());
  auto owner = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  CTX_ASSIGN_OR_RETURN(auto view, format::ContainerView::open(std::span(*owner), owner, name));
  auto context = std::make_shared<const format::ContainerView>(std::move(view));
  CTX_ASSIGN_OR_RETURN(auto program, program::deserialize(context->programBytes(0), context->weights().size(), name));
  CTX_ASSIGN_OR_RETURN(auto compiled, runtime::CompiledProgram::create(std::move(program), context, name));
  auto run = std::make_shared<LoweredPartitionRun>();
  run->name = name;
  run->program = std::move(compiled);
  run->inputs = std::move(lowered.inputs);
  run->outputs = std::move(lowered.outputs);
  return std::shared_ptr<const LoweredPartitionRun>(std::move(run));
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
  for (size_t p = 0; p < plan.partitions.size(); ++p) {
    const auto& nodes = plan.partitions[p].nodes;
    bool nested = std::any_of(nodes.begin(), nodes.end(), [&](size_t i) {
      return std::find(read.hasSubgraphs.begin(), read.hasSubgraphs.end(), i) != read.hasSubgraphs.end();
    });
    if (nested || nodes.empty()) continue;
    std::string name = fmt::format("{}_ctxkit_{}", stem, p);
    auto lowered = lower(g, *facts, plan, static_cast<int>(p), target, name, modelPath.filename().string());
    if (!lowered) return lowered.takeError().addContext(fmt::format("{}: partition {}", stem, name));
    {
      std::lock_guard lock(mutex_);
      for (size_t i : nodes)
        for (const auto& out : g.nodes[i].outputs)
          if (!out.empty()) byOutput_[out] = *lowered;
    }
    std::vector<const OrtNode*> fuse;
    for (size_t i : nodes) fuse.push_back(read.nodes[i]);
    OrtNodeFusionOptions options{};
    options.ort_version_supported = ORT_API_VERSION;
    options.drop_constant_initializers = true;  // the weights live in the partition's own context
    CTX_ORT_RETURN_IF_ERROR(api, api.ep.EpGraphSupportInfo_AddNodesToFuse(&support, fuse.data(), fuse.size(), &options));
  }
  return Status::ok();
}

Expected<std::shared_ptr<const LoweredPartitionRun>> PlainGraphCache::find(const Api& api, const OrtGraph& fusedGraph) const {
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
