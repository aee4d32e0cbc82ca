// The compile steps ctxgen and the plugin EP share, so that both name, lower and store partitions the same way:
// the partition names, the values each partition shares with the rest of the graph, lowering one partition with the
// target's options and limits, and the one container builder. Callers bring an ir::Graph: no protobuf here.
#pragma once

#include "analysis/analysis.h"
#include "analysis/graph_passes.h"
#include "codegen/lower.h"
#include "format/container.h"
#include "ir/graph.h"
#include "partitioner/partitioner.h"
#include "partitioner/target.h"
#include "weightshare/source_weights.h"
#include "weightshare/weight_pool.h"

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace ctxkit::driver {

// `<prefix><stem>_ctxkit_<index>`, or `<prefix><stem>_<variant>_ctxkit_<index>` for a shape variant
// (docs/compiler.md#variants): the graph's name in the context and the EPContext node's partition_name. `index` is the
// partition's index in its plan.
std::string partitionName(const std::string& prefix, const std::string& stem, const std::string& variant, size_t index);

// Which graph values each partition shares with the rest of the graph, found in one pass over the graph's value table
// (a pass per partition made compiling thousands of partitions quadratic).
class OutsideUses {
public:
  OutsideUses(const ir::ValueTable& table, const partitioner::PartitionPlan& plan);
  // The values partition `p`'s nodes read or produce that are read outside it (by other partitions or fallback
  // nodes) or listed as graph outputs: what lowering asks of a partition's values. Ids of `table`, ascending.
  const std::vector<ir::ValueId>& of(size_t p) const { return shared_[p]; }

private:
  std::vector<std::vector<ir::ValueId>> shared_;  // by partition
};

// What lowering one partition needs besides the graph: codegen's options (the target's GEMM layout, weightless
// contexts' plain weights, ctxgen's dump/stop requests, the partition's name) and the model, for errors.
struct LowerSettings : codegen::LowerOptions {
  std::string where;
};
LowerSettings lowerSettings(const partitioner::Target& target, std::string name, std::string where);

// Lowers partition `p` of `plan`; `usedOutside` as OutsideUses::of gives it (plus what else reads the partition's
// values), ids of facts.table, ascending. The planned arena must fit the memory limit a runtime applies at load. Errors
// name the model and partition.
Expected<codegen::LoweredPartition> lowerPlanned(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                                 const partitioner::PartitionPlan& plan, size_t p,
                                                 std::span<const ir::ValueId> usedOutside,
                                                 const codegen::WeightInterner& intern, const LowerSettings& settings);

// How compilePartitions compiles one graph: the same for every caller but for these choices.
struct CompileSettings {
  std::string namePrefix;  // ep.context_node_name_prefix
  std::string stem;        // the model's file stem
  std::string variant;     // a shape variant's name, or ""
  // Before partitioning, analysis::runGraphPasses (inline-if, remove-noops, fold-subgraphs) rewrites the graph;
  // lower.dumpAfter and lower.stopAfter may name its passes too. When set: the nodes the passes keep, and where each
  // node of the rewritten graph came from (the plugin EP, which fuses ORT's own nodes, finds them through it).
  analysis::GraphPassTrace* trace = nullptr;
  analysis::Bindings bindings;
  LowerSettings lower;  // `name` is set for each partition
};

// Where the callers differ in what they do, not in what they know.
struct CompileHooks {
  // Gives a weight of partition `p` its index (codegen::WeightInterner with the partition's index). Required.
  std::function<Expected<uint32_t>(size_t p, const ir::Tensor&, const cpu::WeightLayout&)> intern;
  // Called once the graph is partitioned, before anything is lowered.
  std::function<void(const analysis::GraphFacts&, const partitioner::PartitionPlan&)> planned;
  // True: partition `p` is not lowered (and stays with the fallback path); say why there.
  std::function<bool(size_t p, const partitioner::Partition&)> skip;
  // What a failure does. Unset, it ends the compile (ctxgen). Set, the callback decides: an error ends the compile,
  // ok leaves the graph (analysis) or the partition (lowering) to the fallback path.
  std::function<Status(Error)> onAnalysisError;
  std::function<Status(const partitioner::Partition&, const std::string& name, Error)> onPartitionError;
  // Values partition `p` gives as outputs besides those the graph's nodes and outputs read outside it (what ORT reads
  // through the nodes of its own graph, which the graph passes may have changed), by name: names the compiled graph
  // does not have are passed over.
  std::function<std::vector<std::string>(size_t p)> alsoOutputs;
};

// One lowered partition.
struct CompiledPartition {
  size_t index = 0;  // in the plan
  std::string name;  // partitionName(...)
  codegen::LoweredPartition lowered;
};

struct CompiledGraph {
  bool analyzed = false;  // false: onAnalysisError left the whole graph to the fallback path (no facts, no plan)
  analysis::GraphFacts facts;
  partitioner::PartitionPlan plan;
  std::vector<ir::PassRun> graphPasses;
  std::string graphDump;  // with lower.dumpAfter or lower.stopAfter naming a graph pass: the graph after it
  bool stopped = false;   // lower.stopAfter named a graph pass: the graph was neither partitioned nor lowered
  std::vector<std::string> warnings;          // from the graph passes
  std::vector<CompiledPartition> partitions;  // the partitions lowered, in plan order
  double analyzeMs = 0, partitionMs = 0, lowerMs = 0;
};

// The one compile loop of ctxgen and the plugin EP: analyze (with the graph passes) -> partition -> lower each
// partition, named partitionName(prefix, stem, variant, index in the plan). What becomes of the lowered programs
// (weights interned, containers built) is the caller's.
Expected<CompiledGraph> compilePartitions(ir::Graph& graph, const partitioner::Target& target,
                                          const CompileSettings& settings, const CompileHooks& hooks);

// One graph of a context: its name, the source model's file name and the serialized program.
struct ContextGraph {
  std::string name;
  std::string sourceModel;
  std::vector<std::byte> program;
  bool loadTimeTensors = false;  // program::hasLoadTimeTensors of the program
};

// The one container builder: the pool's weights in pool order, then the graphs, for `target`. `weightless` marks a
// context whose weights are plain (packed at load); with `sources` too, weights found in the source models are
// recorded there, not stored, and `pins` pin the source models' files (docs/weight-sharing.md#pins).
Expected<format::ContainerWriter> buildContainer(const partitioner::Target& target, const weightshare::WeightPool& pool,
                                                 const std::vector<ContextGraph>& graphs, bool weightless,
                                                 const weightshare::WeightSources* sources,
                                                 std::span<const format::SourcePin> pins = {});

}  // namespace ctxkit::driver
