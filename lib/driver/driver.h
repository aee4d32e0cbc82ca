// The compile steps ctxgen and the plugin EP share, so that both name, lower and store partitions the same way:
// the partition names, the values each partition shares with the rest of the graph, lowering one partition with the
// target's options and limits, and the one container builder. Callers bring an ir::Graph: no protobuf here.
#pragma once

#include "analysis/analysis.h"
#include "codegen/lower.h"
#include "format/container.h"
#include "ir/graph.h"
#include "partitioner/partitioner.h"
#include "partitioner/target.h"
#include "weightshare/source_weights.h"
#include "weightshare/weight_pool.h"

#include <cstddef>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace ctxkit::driver {

// `<prefix><stem>_ctxkit_<index>`, or `<prefix><stem>_<variant>_ctxkit_<index>` for a shape variant
// (docs/compiler.md#variants): the graph's name in the context and the EPContext node's partition_name. `index` is the
// partition's index in its plan.
std::string partitionName(const std::string& prefix, const std::string& stem, const std::string& variant, size_t index);

// Which values each partition shares with the rest of the graph, found in one pass over the graph (a pass per
// partition made compiling thousands of partitions quadratic).
class OutsideUses {
public:
  OutsideUses(const ir::Graph& graph, const partitioner::PartitionPlan& plan);
  // The values partition `p`'s nodes read or produce that are read outside it (by other partitions or fallback
  // nodes) or listed as graph outputs: what lowering asks of a partition's values.
  std::set<std::string> of(size_t p) const;

private:
  struct Readers {
    int first = kNobody;   // the first unit reading the value: a partition's index, or kOther
    bool several = false;  // another unit reads it too
  };
  static constexpr int kNobody = -2, kOther = -1;  // kOther: a fallback node or a graph output
  const ir::Graph& graph_;
  const partitioner::PartitionPlan& plan_;
  std::unordered_map<std::string, Readers> readers_;
};

// What lowering one partition needs besides the graph: the target's choices and ctxgen's dump/stop requests.
struct LowerSettings {
  std::string name;   // partitionName(...)
  std::string where;  // the model, for errors
  ops::WeightLayout gemmLayout;
  bool plainWeights = false;  // weightless contexts: weights stay byte-equal to their source
  std::string dumpAfter, stopAfter;
};
LowerSettings lowerSettings(const partitioner::Target& target, std::string name, std::string where);

// Lowers partition `p` of `plan`; `usedOutside` as OutsideUses::of gives it (plus what else reads the partition's
// values). The planned arena must fit the memory limit a runtime applies at load. Errors name the model and partition.
Expected<codegen::LoweredPartition> lowerPlanned(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                                 const partitioner::PartitionPlan& plan, size_t p,
                                                 const std::set<std::string>& usedOutside,
                                                 const codegen::WeightInterner& intern, const LowerSettings& settings);

// One graph of a context: its name, the source model's file name and the serialized program.
struct ContextGraph {
  std::string name;
  std::string sourceModel;
  std::vector<std::byte> program;
};

// The one container builder: the pool's weights in pool order, then the graphs, for `target`. `weightless` marks a
// context whose weights are plain (packed at load); with `sources` too, weights found in the source models are
// recorded there, not stored.
Expected<format::ContainerWriter> buildContainer(const partitioner::Target& target, const weightshare::WeightPool& pool,
                                                 const std::vector<ContextGraph>& graphs, bool weightless,
                                                 const weightshare::WeightSources* sources);

}  // namespace ctxkit::driver
