// The compile steps ctxgen and the plugin EP share (driver.h).
#include "driver/driver.h"

#include "epcontext/contract.h"
#include "ir/tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace ctxkit::driver {

std::string partitionName(const std::string& prefix, const std::string& stem, const std::string& variant,
                          size_t index) {
  return variant.empty() ? fmt::format("{}{}_ctxkit_{}", prefix, stem, index)
                         : fmt::format("{}{}_{}_ctxkit_{}", prefix, stem, variant, index);
}

OutsideUses::OutsideUses(const ir::ValueTable& table, const partitioner::PartitionPlan& plan)
    : shared_(plan.partitions.size()) {
  constexpr int kNobody = -2, kOther = -1;  // kOther: a fallback node or a graph output
  auto unitOf = [&](uint32_t node) {
    const auto& d = plan.nodes[node];
    if (d.placement == partitioner::NodePlacement::Folded) return kNobody;
    return d.placement == partitioner::NodePlacement::Compiled ? d.partition : kOther;
  };
  std::vector<int> readers, touching;  // of one value: the units reading it, the partitions reading or producing it
  auto add = [](std::vector<int>& units, int unit) {
    if (unit != kNobody && std::find(units.begin(), units.end(), unit) == units.end()) units.push_back(unit);
  };
  for (ir::ValueId v = 0; v < table.size(); ++v) {
    const ir::ValueEntry& e = table[v];
    readers.clear();
    touching.clear();
    if (e.isGraphOutput) add(readers, kOther);
    for (const ir::ValueUse& use : e.uses) add(readers, unitOf(use.node));
    for (int unit : readers)
      if (unit >= 0) add(touching, unit);
    if (e.hasProducer())
      if (const int unit = unitOf(e.producer); unit >= 0) add(touching, unit);
    for (int p : touching)
      if (readers.size() > 1 || (readers.size() == 1 && readers[0] != p)) shared_[p].push_back(v);
  }
}

LowerSettings lowerSettings(const partitioner::Target& target, std::string name, std::string where) {
  LowerSettings s;
  s.name = std::move(name);
  s.where = std::move(where);
  s.gemmLayout = target.gemmLayout;
  s.float16Compute = target.float16Compute;
  return s;
}

Expected<codegen::LoweredPartition> lowerPlanned(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                                 const partitioner::PartitionPlan& plan, size_t p,
                                                 std::span<const ir::ValueId> usedOutside,
                                                 const codegen::WeightInterner& intern, const LowerSettings& settings) {
  auto lowered = codegen::lowerPartition(graph, facts, plan.partitions[p], usedOutside, intern, settings);
  if (!lowered) return lowered.takeError().addContext(fmt::format("{}: partition {}", settings.where, settings.name));
  // A runtime allocates the planned arena at load: one it could never hold is refused here, not written.
  CTX_RETURN_IF_ERROR(ir::checkMemoryLimit(
      lowered->program.arenaSize, fmt::format("{}: partition {}'s planned arena", settings.where, settings.name)));
  return lowered;
}

namespace {

double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Expected<CompiledGraph> compilePartitions(ir::Graph& graph, const partitioner::Target& target,
                                          const CompileSettings& settings, const CompileHooks& hooks) {
  CompiledGraph out;
  auto start = std::chrono::steady_clock::now();
  analysis::GraphPassDump dump;
  dump.dumpAfter = settings.lower.dumpAfter;
  dump.stopAfter = settings.lower.stopAfter;
  dump.name = settings.variant.empty() ? settings.stem : settings.stem + "_" + settings.variant;
  auto facts =
      analysis::runGraphPasses(graph, settings.bindings, out.graphPasses, {}, &out.warnings, settings.trace, &dump);
  out.analyzeMs = millisecondsSince(start);
  out.graphDump = std::move(dump.text);
  if (!facts) {
    if (!hooks.onAnalysisError) return facts.takeError();
    CTX_RETURN_IF_ERROR(hooks.onAnalysisError(facts.takeError()));
    return out;
  }
  out.analyzed = true;
  out.facts = std::move(facts).value();
  if (dump.stopped) {
    out.stopped = true;
    return out;
  }
  start = std::chrono::steady_clock::now();
  out.plan = partitioner::partitionGraph(graph, out.facts, target);
  out.partitionMs = millisecondsSince(start);
  if (hooks.planned) hooks.planned(out.facts, out.plan);

  start = std::chrono::steady_clock::now();
  const OutsideUses outsideUses(out.facts.table, out.plan);
  std::vector<ir::ValueId> used;
  LowerSettings lower = settings.lower;
  for (size_t p = 0; p < out.plan.partitions.size(); ++p) {
    if (hooks.skip && hooks.skip(p, out.plan.partitions[p])) continue;
    lower.name = partitionName(settings.namePrefix, settings.stem, settings.variant, p);
    used = outsideUses.of(p);
    if (hooks.alsoOutputs) {
      for (const std::string& name : hooks.alsoOutputs(p))
        if (const ir::ValueId v = out.facts.table.find(name); v != ir::kNoValue) used.push_back(v);
      std::sort(used.begin(), used.end());
      used.erase(std::unique(used.begin(), used.end()), used.end());
    }
    auto intern = [&](const ir::Tensor& t, const cpu::WeightLayout& layout) { return hooks.intern(p, t, layout); };
    auto lowered = lowerPlanned(graph, out.facts, out.plan, p, used, intern, lower);
    if (!lowered) {
      if (!hooks.onPartitionError) return lowered.takeError();
      CTX_RETURN_IF_ERROR(hooks.onPartitionError(out.plan.partitions[p], lower.name, lowered.takeError()));
      continue;
    }
    out.partitions.push_back(CompiledPartition{p, lower.name, std::move(lowered).value()});
  }
  out.lowerMs = millisecondsSince(start);
  return out;
}

Expected<format::ContainerWriter> buildContainer(const partitioner::Target& target, const weightshare::WeightPool& pool,
                                                 const std::vector<ContextGraph>& graphs, bool weightless,
                                                 const weightshare::WeightSources* sources,
                                                 std::span<const format::SourcePin> pins) {
  format::CompatInfo compat{epcontext::kProducer, epcontext::kVersion, target.hardwareArchitecture, target.revision};
  format::ContainerWriter writer(compat, format::WriterOptions{target.weightAlignment, weightless});
  CTX_RETURN_IF_ERROR(weightshare::addPoolWeights(writer, pool, sources));
  for (const auto& pin : pins) CTX_RETURN_IF_ERROR(writer.addSourcePin(pin));
  for (const auto& g : graphs)
    CTX_RETURN_IF_ERROR(writer.addGraph(g.name, g.sourceModel, g.program, g.loadTimeTensors));
  return writer;
}

}  // namespace ctxkit::driver
