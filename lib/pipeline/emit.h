// Builds the `_ctx.onnx` model: EPContext nodes for compiled partitions, fallback nodes and their initializers.
#pragma once

#include "analysis/analysis.h"
#include "codegen/lower.h"
#include "ir/graph.h"
#include "partitioner/partitioner.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace ctxkit::pipeline {

struct EpContextSettings {
  std::string cacheContext;  // the .bin path relative to the model, or the embedded payload
  int embedMode = 0;
  std::string sdkVersion;
  std::string sourceFileName;
  std::string hardwareArchitecture;
  std::string compatibility;  // ep_compatibility_info value
  // Initializers stored elsewhere (a --share group's .bin) by name, referenced as ONNX external data.
  std::map<std::string, ir::ExternalLocation> externalInitializers;
  // The same for initializers inside the subgraphs of fallback nodes, by their forEachSubgraphInitializer key.
  std::map<std::string, ir::ExternalLocation> externalSubgraphInitializers;
};

// Calls `visit(key, initializer)` for every initializer inside the subgraphs (If/Loop/Scan bodies, nested ones
// too) of node `index` of a model's main graph. The key names its place ("3/then_branch/W"), so that two bodies'
// initializers of one name stay apart.
void forEachSubgraphInitializer(const ir::Node& node, size_t index,
                                const std::function<void(const std::string&, const ir::Initializer&)>& visit);

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

// The initializers a `_ctx.onnx` keeps, in output order: the source's initializers that fallback nodes or graph
// outputs read, then folded constants they read.
std::vector<ir::Initializer> contextInitializers(const ir::Model& source, const analysis::GraphFacts& facts,
                                                 const partitioner::PartitionPlan& plan,
                                                 const std::vector<codegen::LoweredPartition>& lowered);

Expected<ir::Model> buildContextModel(const ir::Model& source, const analysis::GraphFacts& facts,
                                      const partitioner::PartitionPlan& plan,
                                      const std::vector<codegen::LoweredPartition>& lowered,
                                      const std::vector<std::string>& partitionNames,
                                      const std::vector<uint64_t>& arenaSizes, const EpContextSettings& settings);

}  // namespace ctxkit::pipeline
