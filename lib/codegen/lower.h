// Lowers one partition to a compiled program: static shapes, folded constants, BatchNormalization folded
// into Conv, activations fused into Conv/Gemm/MatMul, MatMul+Add as Gemm, reshape-like ops as views, and a static memory plan.
#pragma once

#include "analysis/analysis.h"
#include "ir/graph.h"
#include "partitioner/partitioner.h"
#include "program/program.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace ctxkit::codegen {

struct LoweredPartition {
  program::Program program;
  std::vector<std::string> inputs;   // boundary values read, in EPContext input order
  std::vector<std::string> outputs;  // boundary values written, in EPContext output order
};

// Gives a weight its weight-table index (shared across partitions and models by the caller).
using WeightInterner = std::function<Expected<uint32_t>(const ir::Tensor&)>;

struct LowerOptions {
  uint64_t arenaAlignment = 64;
  bool foldBatchNorm = true;
  bool fuseActivations = true;
  bool fuseMatMulAdd = true;
};

// `usedOutside` holds every value read by nodes outside this partition or listed as a graph output.
Expected<LoweredPartition> lowerPartition(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                          const partitioner::Partition& partition,
                                          const std::set<std::string>& usedOutside, const WeightInterner& intern,
                                          const LowerOptions& options = {});

}  // namespace ctxkit::codegen
