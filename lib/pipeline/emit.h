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
