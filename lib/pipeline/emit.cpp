// EPContext model construction (docs/epcontext-models.md).
#include "pipeline/emit.h"

#include "epcontext/contract.h"
#include "ops/node_attrs.h"
#include "pipeline/pipeline.h"

#include <algorithm>
#include <map>

namespace ctxkit::pipeline {

namespace {

using InitializerVisit = std::function<void(const std::string&, const ir::Initializer&)>;

void visitSubgraphs(const ir::Node& node, const std::string& scope, const InitializerVisit& visit);

void visitGraph(const ir::Graph& g, const std::string& scope, const InitializerVisit& visit) {
  for (const auto& init : g.initializers) visit(scope + init.name, init);
  for (size_t i = 0; i < g.nodes.size(); ++i) visitSubgraphs(g.nodes[i], fmt::format("{}{}/", scope, i), visit);
}

void visitSubgraphs(const ir::Node& node, const std::string& scope, const InitializerVisit& visit) {
  for (const auto& a : node.attrs.all()) {
    if (a.g) visitGraph(*a.g, fmt::format("{}{}/", scope, a.name), visit);
    for (size_t k = 0; k < a.graphs.size(); ++k)
      if (a.graphs[k]) visitGraph(*a.graphs[k], fmt::format("{}{}.{}/", scope, a.name, k), visit);
  }
}

void referenceStoredSubgraphWeights(ir::Node& node, const std::string& scope,
                                    const std::map<std::string, ir::ExternalLocation>& stored);

// A copy of `g` (the source's subgraph is shared and stays untouched) whose stored initializers reference the .bin.
std::shared_ptr<ir::Graph> withStoredWeights(const ir::Graph& g, const std::string& scope,
                                             const std::map<std::string, ir::ExternalLocation>& stored) {
  auto copy = std::make_shared<ir::Graph>(g);
  for (auto& init : copy->initializers)
    if (auto it = stored.find(scope + init.name); it != stored.end()) init.external = it->second;
  for (size_t i = 0; i < copy->nodes.size(); ++i)
    referenceStoredSubgraphWeights(copy->nodes[i], fmt::format("{}{}/", scope, i), stored);
  return copy;
}

// The keys follow visitSubgraphs, so a fallback node's bodies find the weights the dedupe stage stored for them.
void referenceStoredSubgraphWeights(ir::Node& node, const std::string& scope,
                                    const std::map<std::string, ir::ExternalLocation>& stored) {
  for (ir::Attribute& a : node.attrs.all()) {
    if (a.g) a.g = withStoredWeights(*a.g, fmt::format("{}{}/", scope, a.name), stored);
    for (size_t k = 0; k < a.graphs.size(); ++k)
      if (a.graphs[k]) a.graphs[k] = withStoredWeights(*a.graphs[k], fmt::format("{}{}.{}/", scope, a.name, k), stored);
  }
}

// A node of the output graph: a fallback node (index) or a partition's EPContext node.
struct Unit {
  bool isPartition = false;
  size_t index = 0;
};

// Orders fallback nodes and partitions topologically, preferring source order.
std::vector<Unit> orderUnits(const ir::Graph& graph, const analysis::GraphFacts& facts,
                             const partitioner::PartitionPlan& plan,
                             const std::vector<codegen::LoweredPartition>& lowered) {
  std::vector<Unit> units;
  std::map<std::string, size_t> producer;
  std::vector<size_t> rank;  // first topological position of each unit
  std::vector<std::set<std::string>> reads;
  std::vector<int> unitOfPartition(plan.partitions.size(), -1);
  for (size_t pos = 0; pos < facts.order.size(); ++pos) {
    size_t i = facts.order[pos];
    const auto& d = plan.nodes[i];
    if (d.placement == partitioner::NodePlacement::Folded) continue;
    if (d.placement == partitioner::NodePlacement::Compiled) {
      if (unitOfPartition[d.partition] >= 0) continue;
      unitOfPartition[d.partition] = static_cast<int>(units.size());
      units.push_back(Unit{true, static_cast<size_t>(d.partition)});
      rank.push_back(pos);
      const auto& lp = lowered[d.partition];
      reads.emplace_back(lp.inputs.begin(), lp.inputs.end());
      for (const auto& o : lp.outputs) producer[o] = units.size() - 1;
      continue;
    }
    units.push_back(Unit{false, i});
    rank.push_back(pos);
    std::set<std::string> r;
    ir::collectNodeReads(graph.nodes[i], r);
    reads.push_back(std::move(r));
    for (const auto& o : graph.nodes[i].outputs)
      if (!o.empty()) producer[o] = units.size() - 1;
  }
  std::vector<size_t> pending(units.size(), 0);
  std::vector<std::vector<size_t>> consumers(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    std::set<size_t> deps;
    for (const auto& name : reads[u])
      if (auto it = producer.find(name); it != producer.end() && it->second != u) deps.insert(it->second);
    pending[u] = deps.size();
    for (size_t d : deps) consumers[d].push_back(u);
  }
  std::set<std::pair<size_t, size_t>> ready;
  for (size_t u = 0; u < units.size(); ++u)
    if (pending[u] == 0) ready.emplace(rank[u], u);
  std::vector<Unit> ordered;
  while (!ready.empty()) {
    size_t u = ready.begin()->second;
    ready.erase(ready.begin());
    ordered.push_back(units[u]);
    for (size_t c : consumers[u])
      if (--pending[c] == 0) ready.emplace(rank[c], c);
  }
  return ordered;  // the partitioner keeps the contracted graph acyclic, so every unit is placed
}

ir::ValueInfo valueInfoFor(const std::string& name, const analysis::GraphFacts& facts) {
  ir::ValueInfo v;
  v.name = name;
  if (const auto* f = facts.find(name)) {
    v.type = f->type;
    if (f->shape) {
      std::vector<ir::Dim> dims;
      for (int64_t d : *f->shape) dims.push_back(ir::Dim::known(d));
      v.shape = std::move(dims);
    }
  }
  return v;
}

// Initializers: those still read, plus folded constants that fallback nodes or outputs read.
std::vector<ir::Initializer> selectInitializers(const ir::Graph& g, const analysis::GraphFacts& facts,
                                                const std::set<std::string>& needed,
                                                const std::set<std::string>& produced) {
  std::vector<ir::Initializer> out;
  std::set<std::string> emitted;
  for (const auto& init : g.initializers)
    if (needed.count(init.name)) {
      out.push_back(ir::Initializer{init.name, init.tensor, std::nullopt});
      emitted.insert(init.name);
    }
  for (const auto& name : needed) {
    if (emitted.count(name) || produced.count(name)) continue;
    const auto* f = facts.find(name);
    if (f && f->constant && !f->isInitializer) out.push_back(ir::Initializer{name, *f->constant, std::nullopt});
  }
  return out;
}

// Values the output graph reads (graph inputs and outputs, fallback nodes, EPContext inputs) and produces.
void collectUses(const ir::Graph& g, const analysis::GraphFacts& facts, const partitioner::PartitionPlan& plan,
                 const std::vector<codegen::LoweredPartition>& lowered, std::set<std::string>& needed,
                 std::set<std::string>& produced) {
  for (const auto& o : g.outputs) needed.insert(o.name);
  for (const auto& in : g.inputs) needed.insert(in.name);
  for (const Unit& u : orderUnits(g, facts, plan, lowered)) {
    if (!u.isPartition) {
      const ir::Node& n = g.nodes[u.index];
      ir::collectNodeReads(n, needed);
      for (const auto& o : n.outputs) produced.insert(o);
      continue;
    }
    for (const auto& in : lowered[u.index].inputs) needed.insert(in);
    for (const auto& o : lowered[u.index].outputs) produced.insert(o);
  }
}

// Values whose shapes the compiled model leaves open (docs/ctxgen.md#outputs): what a fallback node holding a
// subgraph that cannot run with the bound shapes reads (analysis::GraphFacts::unrunnableSubgraphs), and upstream of
// it through other fallback nodes, whose shapes ONNX Runtime infers again from their inputs. The walk stops at graph
// inputs (declared as the source declares them), partition outputs (value_info without dimensions) and constants.
std::set<std::string> openValues(const ir::Graph& g, const analysis::GraphFacts& facts, const std::vector<Unit>& units,
                                 const std::set<std::string>& partitionOutputs) {
  std::set<std::string> open;
  if (facts.unrunnableSubgraphs.empty()) return open;
  std::map<std::string, size_t> fallbackProducer;  // value -> node index of a fallback node
  for (const Unit& u : units)
    if (!u.isPartition)
      for (const auto& o : g.nodes[u.index].outputs)
        if (!o.empty()) fallbackProducer[o] = u.index;
  std::vector<std::string> work;
  std::set<size_t> walked;
  auto walkNode = [&](size_t index) {
    if (!walked.insert(index).second) return;
    std::set<std::string> reads;
    ir::collectNodeReads(g.nodes[index], reads);
    work.insert(work.end(), reads.begin(), reads.end());
  };
  for (const Unit& u : units) {
    if (u.isPartition) continue;
    const auto& outs = g.nodes[u.index].outputs;
    auto first = std::find_if(outs.begin(), outs.end(), [](const auto& o) { return !o.empty(); });
    if (first != outs.end() && facts.unrunnableSubgraphs.count(*first)) walkNode(u.index);
  }
  while (!work.empty()) {
    std::string v = std::move(work.back());
    work.pop_back();
    if (v.empty() || open.count(v) || g.findInitializer(v)) continue;
    if (const auto* f = facts.find(v); f && f->constant) continue;
    if (auto it = fallbackProducer.find(v); it != fallbackProducer.end()) {
      walkNode(it->second);
      continue;
    }
    const bool input = std::any_of(g.inputs.begin(), g.inputs.end(), [&](const auto& in) { return in.name == v; });
    if (input || partitionOutputs.count(v)) open.insert(v);
  }
  return open;
}

}  // namespace

Expected<ir::Model> buildContextModel(const ir::Model& source, const analysis::GraphFacts& facts,
                                      const partitioner::PartitionPlan& plan,
                                      const std::vector<codegen::LoweredPartition>& lowered,
                                      const std::vector<std::string>& partitionNames,
                                      const std::vector<uint64_t>& arenaSizes, const EpContextSettings& settings) {
  const ir::Graph& g = source.graph;
  ir::Model out;
  out.irVersion = source.irVersion;
  out.opsets = source.opsets;
  if (source.opsetFor(epcontext::kDomain) == 0)
    out.opsets.push_back(ir::OpsetImport{epcontext::kDomain, epcontext::kDomainVersion});
  out.producerName = epcontext::kProducer;
  out.producerVersion = epcontext::kVersion;
  out.domain = source.domain;
  out.modelVersion = source.modelVersion;
  out.docString = source.docString;
  out.metadata = source.metadata;
  out.setMetadata(epcontext::compatibilityMetadataKey(), settings.compatibility);

  ir::Graph& og = out.graph;
  og.name = g.name;
  og.docString = g.docString;
  // Graph inputs and outputs keep their names, order and types, with the static shapes the bindings gave them, so
  // that a runtime needs no bindings again (docs/ctxgen.md#outputs).
  // Only dimensions the file leaves open are filled in: a declared static dimension stays as written. Values
  // without a tensor type (sequences, maps) keep their declaration untouched.
  auto withStaticShape = [&](ir::ValueInfo v) {
    const analysis::ValueFacts* f = facts.find(v.name);
    if (!f || !f->shape || v.type == ir::ElemType::Undefined || v.type != f->type) return v;
    if (!v.shape) v.shape = std::vector<ir::Dim>(f->shape->size());
    if (v.shape->size() != f->shape->size()) return v;
    for (size_t d = 0; d < f->shape->size(); ++d)
      if (!(*v.shape)[d].isKnown()) (*v.shape)[d] = ir::Dim::known((*f->shape)[d]);
    return v;
  };
  const std::vector<Unit> units = orderUnits(g, facts, plan, lowered);
  std::set<std::string> partitionOutputs;
  for (const Unit& u : units)
    if (u.isPartition) partitionOutputs.insert(lowered[u.index].outputs.begin(), lowered[u.index].outputs.end());
  // ONNX Runtime infers every branch of an If at load: one that cannot run with the bound shapes must not see them.
  const std::set<std::string> open = openValues(g, facts, units, partitionOutputs);
  for (const auto& in : g.inputs)
    og.inputs.push_back(g.findInitializer(in.name) || open.count(in.name) ? in : withStaticShape(in));
  for (const auto& out : g.outputs) og.outputs.push_back(withStaticShape(out));
  // A partition output left open: its element type and rank, no dimensions.
  auto boundaryInfo = [&](const std::string& name) {
    ir::ValueInfo v = valueInfoFor(name, facts);
    if (open.count(name) && v.shape) v.shape = std::vector<ir::Dim>(v.shape->size());
    return v;
  };

  std::set<std::string> needed, produced;  // values the output graph reads, and values its nodes produce
  collectUses(g, facts, plan, lowered, needed, produced);
  bool firstContext = true;
  for (const Unit& u : units) {
    if (!u.isPartition) {
      og.nodes.push_back(g.nodes[u.index]);
      if (!settings.externalSubgraphInitializers.empty())
        referenceStoredSubgraphWeights(og.nodes.back(), fmt::format("{}/", u.index),
                                       settings.externalSubgraphInitializers);
      continue;
    }
    const auto& lp = lowered[u.index];
    ir::Node node;
    node.name = partitionNames[u.index];
    node.inputs = lp.inputs;
    node.outputs = lp.outputs;
    epcontext::NodeAttributes attrs = epcontext::ourNodeAttributes();
    attrs.mainContext = firstContext ? 1 : 0;
    if (firstContext) attrs.cacheContext = settings.cacheContext;
    attrs.embedMode = settings.embedMode;
    attrs.sdkVersion = settings.sdkVersion;
    attrs.onnxModelFilename = settings.sourceFileName;
    attrs.hardwareArchitecture = settings.hardwareArchitecture;
    attrs.partitionName = partitionNames[u.index];
    attrs.maxSize = static_cast<int64_t>(arenaSizes[u.index]);
    attrs.notes = fmt::format("{} program: {} ops from {} nodes, arena {} bytes", epcontext::kProducer,
                              lp.program.ops.size(), plan.partitions[u.index].nodes.size(), arenaSizes[u.index]);
    epcontext::writeNodeAttributes(attrs, node);
    ops::decodeNode(node);  // (EPContext: no typed attributes, but every node the house makes is decoded)
    firstContext = false;
    og.nodes.push_back(std::move(node));
    for (const auto& v : lp.inputs)
      if (!g.findValueInfo(v) || !g.findValueInfo(v)->staticShape()) og.valueInfo.push_back(boundaryInfo(v));
    for (const auto& v : lp.outputs)
      if (!g.findValueInfo(v)) og.valueInfo.push_back(boundaryInfo(v));
  }
  // Keep the source's value_info for values that still exist.
  for (const auto& v : g.valueInfo)
    if (produced.count(v.name) && !og.findValueInfo(v.name)) og.valueInfo.push_back(v);

  og.initializers = selectInitializers(g, facts, needed, produced);
  for (auto& init : og.initializers)
    if (auto it = settings.externalInitializers.find(init.name); it != settings.externalInitializers.end())
      init.external = it->second;
  return out;
}

std::vector<ir::Initializer> contextInitializers(const ir::Model& source, const analysis::GraphFacts& facts,
                                                 const partitioner::PartitionPlan& plan,
                                                 const std::vector<codegen::LoweredPartition>& lowered) {
  const ir::Graph& g = source.graph;
  std::set<std::string> needed, produced;
  collectUses(g, facts, plan, lowered, needed, produced);
  return selectInitializers(g, facts, needed, produced);
}

void forEachSubgraphInitializer(const ir::Node& node, size_t index, const InitializerVisit& visit) {
  visitSubgraphs(node, fmt::format("{}/", index), visit);
}

}  // namespace ctxkit::pipeline
