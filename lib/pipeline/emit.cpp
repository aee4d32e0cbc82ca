// EPContext model construction (docs/epcontext-models.md).
#include "pipeline/emit.h"

#include "epcontext/contract.h"
#include "ops/node_attrs.h"
#include "pipeline/pipeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <span>

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

// What node `node` reads of the graph's values: its inputs and what its subgraphs read from the graph.
void appendReads(const ir::ValueTable& table, size_t node, std::vector<ir::ValueId>& out) {
  for (ir::ValueId v : table.inputsOf(node))
    if (v != ir::kNoValue) out.push_back(v);
  const std::span<const ir::ValueId> sub = table.subgraphReadsOf(node);
  out.insert(out.end(), sub.begin(), sub.end());
}

// The ids of a partition's boundary values (names of the graph).
void appendIds(const ir::ValueTable& table, const std::vector<std::string>& names, std::vector<ir::ValueId>& out) {
  for (const auto& name : names)
    if (const ir::ValueId v = table.find(name); v != ir::kNoValue) out.push_back(v);
}

// Orders fallback nodes and partitions topologically, preferring source order.
std::vector<Unit> orderUnits(const analysis::GraphFacts& facts, const partitioner::PartitionPlan& plan,
                             const std::vector<codegen::LoweredPartition>& lowered) {
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  const ir::ValueTable& table = facts.table;
  std::vector<Unit> units;
  std::vector<size_t> producer(table.size(), kNone);  // by value id: the unit producing it
  std::vector<size_t> rank;                           // first topological position of each unit
  std::vector<std::vector<ir::ValueId>> reads;
  std::vector<ir::ValueId> ids;
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
      appendIds(table, lp.inputs, reads.emplace_back());
      ids.clear();
      appendIds(table, lp.outputs, ids);
      for (ir::ValueId o : ids) producer[o] = units.size() - 1;
      continue;
    }
    units.push_back(Unit{false, i});
    rank.push_back(pos);
    appendReads(table, i, reads.emplace_back());
    for (ir::ValueId o : table.outputsOf(i))
      if (o != ir::kNoValue) producer[o] = units.size() - 1;
  }
  std::vector<size_t> pending(units.size(), 0);
  std::vector<std::vector<size_t>> consumers(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    std::set<size_t> deps;
    for (ir::ValueId v : reads[u])
      if (producer[v] != kNone && producer[v] != u) deps.insert(producer[v]);
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
    } else if (f->bound) {
      // A value-dependent shape (a compiled program's bounded output or input): its exact dimensions, and a symbol of
      // its own for each dimension a run computes, so ONNX Runtime takes any extent there
      // (docs/epcontext-models.md). Without a lower bound every dimension is one a run computes, as the lowering
      // takes it (ValueRecord::low).
      const bool lows = f->low && f->low->size() == f->bound->size();
      std::vector<ir::Dim> dims;
      for (size_t d = 0; d < f->bound->size(); ++d)
        dims.push_back(lows && (*f->low)[d] == (*f->bound)[d] ? ir::Dim::known((*f->bound)[d])
                                                              : ir::Dim::named(fmt::format("{}_dim{}", name, d)));
      v.shape = std::move(dims);
    }
  }
  return v;
}

// By value id: the values the output graph reads (graph inputs and outputs, fallback nodes, EPContext inputs), and
// the values its nodes produce.
struct OutputUses {
  std::vector<bool> needed, produced;
};

// Whether `name` is a value of the graph marked in `marks` (by value id).
bool marked(const ir::ValueTable& table, const std::vector<bool>& marks, const std::string& name) {
  const ir::ValueId v = table.find(name);
  return v != ir::kNoValue && marks[v];
}

OutputUses collectUses(const ir::Graph& g, const analysis::GraphFacts& facts, const partitioner::PartitionPlan& plan,
                       const std::vector<codegen::LoweredPartition>& lowered) {
  const ir::ValueTable& table = facts.table;
  OutputUses uses{std::vector<bool>(table.size()), std::vector<bool>(table.size())};
  std::vector<ir::ValueId> ids;
  for (const auto& o : g.outputs) ids.push_back(table.find(o.name));
  for (const auto& in : g.inputs) ids.push_back(table.find(in.name));
  for (const Unit& u : orderUnits(facts, plan, lowered)) {
    if (!u.isPartition) {
      appendReads(table, u.index, ids);
      for (ir::ValueId o : table.outputsOf(u.index))
        if (o != ir::kNoValue) uses.produced[o] = true;
      continue;
    }
    appendIds(table, lowered[u.index].inputs, ids);
    std::vector<ir::ValueId> outs;
    appendIds(table, lowered[u.index].outputs, outs);
    for (ir::ValueId o : outs) uses.produced[o] = true;
  }
  for (ir::ValueId v : ids)
    if (v != ir::kNoValue) uses.needed[v] = true;
  return uses;
}

// Initializers: those still read, plus folded constants that fallback nodes or outputs read (in name order).
std::vector<ir::Initializer> selectInitializers(const ir::Graph& g, const analysis::GraphFacts& facts,
                                                const OutputUses& uses) {
  const ir::ValueTable& table = facts.table;
  std::vector<ir::Initializer> out;
  std::vector<bool> emitted(table.size());
  for (const auto& init : g.initializers)
    if (const ir::ValueId v = table.find(init.name); v != ir::kNoValue && uses.needed[v]) {
      out.push_back(ir::Initializer{init.name, init.tensor, std::nullopt});
      emitted[v] = true;
    }
  std::vector<ir::ValueId> folded;
  for (ir::ValueId v = 0; v < table.size(); ++v) {
    const analysis::ValueFacts& f = facts[v];
    if (uses.needed[v] && !emitted[v] && !uses.produced[v] && f.constant && !f.isInitializer) folded.push_back(v);
  }
  std::sort(folded.begin(), folded.end(), [&](ir::ValueId a, ir::ValueId b) { return table.name(a) < table.name(b); });
  for (ir::ValueId v : folded) out.push_back(ir::Initializer{table.name(v), *facts[v].constant, std::nullopt});
  return out;
}

// Values whose shapes the compiled model leaves open (docs/ctxgen.md#outputs), by value id: what a fallback node
// holding a subgraph that cannot run with the bound shapes reads (analysis::GraphFacts::unrunnableSubgraphs), and
// upstream of it through other fallback nodes, whose shapes ONNX Runtime infers again from their inputs. The walk
// stops at graph inputs (declared as the source declares them), partition outputs (value_info without dimensions)
// and constants.
std::vector<bool> openValues(const ir::Graph& g, const analysis::GraphFacts& facts, const std::vector<Unit>& units,
                             const std::vector<bool>& partitionOutputs) {
  const ir::ValueTable& table = facts.table;
  std::vector<bool> open(table.size());
  if (facts.unrunnableSubgraphs.empty()) return open;
  std::vector<bool> fallback(g.nodes.size()), walked(g.nodes.size());
  for (const Unit& u : units)
    if (!u.isPartition) fallback[u.index] = true;
  std::vector<ir::ValueId> work;
  auto walkNode = [&](size_t index) {
    if (walked[index]) return;
    walked[index] = true;
    appendReads(table, index, work);
  };
  for (const Unit& u : units)
    if (!u.isPartition &&
        std::binary_search(facts.unrunnableSubgraphs.begin(), facts.unrunnableSubgraphs.end(), u.index))
      walkNode(u.index);
  while (!work.empty()) {
    const ir::ValueId v = work.back();
    work.pop_back();
    const ir::ValueEntry& e = table[v];
    if (open[v] || e.isInitializer || facts[v].constant) continue;
    if (e.hasProducer() && fallback[e.producer]) {
      walkNode(e.producer);
      continue;
    }
    if (e.isGraphInput || partitionOutputs[v]) open[v] = true;
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
  const ir::ValueTable& table = facts.table;
  const std::vector<Unit> units = orderUnits(facts, plan, lowered);
  std::vector<bool> partitionOutputs(table.size());
  std::vector<ir::ValueId> ids;
  for (const Unit& u : units)
    if (u.isPartition) appendIds(table, lowered[u.index].outputs, ids);
  for (ir::ValueId v : ids) partitionOutputs[v] = true;
  // ONNX Runtime infers every branch of an If at load: one that cannot run with the bound shapes must not see them.
  const std::vector<bool> open = openValues(g, facts, units, partitionOutputs);
  for (const auto& in : g.inputs)
    og.inputs.push_back(g.findInitializer(in.name) || marked(table, open, in.name) ? in : withStaticShape(in));
  for (const auto& out : g.outputs) og.outputs.push_back(withStaticShape(out));
  // A partition output left open: its element type and rank, no dimensions.
  auto boundaryInfo = [&](const std::string& name) {
    ir::ValueInfo v = valueInfoFor(name, facts);
    if (marked(table, open, name) && v.shape) v.shape = std::vector<ir::Dim>(v.shape->size());
    return v;
  };

  const OutputUses uses = collectUses(g, facts, plan, lowered);
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
    // Once per value (one partition's output may be another's input).
    for (const auto& v : lp.inputs)
      if ((!g.findValueInfo(v) || !g.findValueInfo(v)->staticShape()) && !og.findValueInfo(v))
        og.valueInfo.push_back(boundaryInfo(v));
    for (const auto& v : lp.outputs)
      if (!g.findValueInfo(v) && !og.findValueInfo(v)) og.valueInfo.push_back(boundaryInfo(v));
  }
  // Keep the source's value_info for values that still exist.
  for (const auto& v : g.valueInfo)
    if (marked(table, uses.produced, v.name) && !og.findValueInfo(v.name)) og.valueInfo.push_back(v);

  og.initializers = selectInitializers(g, facts, uses);
  for (auto& init : og.initializers)
    if (auto it = settings.externalInitializers.find(init.name); it != settings.externalInitializers.end())
      init.external = it->second;
  return out;
}

std::vector<ir::Initializer> contextInitializers(const ir::Model& source, const analysis::GraphFacts& facts,
                                                 const partitioner::PartitionPlan& plan,
                                                 const std::vector<codegen::LoweredPartition>& lowered) {
  return selectInitializers(source.graph, facts, collectUses(source.graph, facts, plan, lowered));
}

void forEachSubgraphInitializer(const ir::Node& node, size_t index, const InitializerVisit& visit) {
  visitSubgraphs(node, fmt::format("{}/", index), visit);
}

}  // namespace ctxkit::pipeline
