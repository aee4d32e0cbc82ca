// Lowers one partition to a compiled program through named passes (docs/compiler.md#lowering): fuse-qdq (QDQ groups
// into integer QLinearConv/QLinearMatMul on 8-bit weights), fold-constants, fold-batchnorm (into Conv and Gemm),
// fold-affine (following per-channel scales and shifts into Conv and Gemm), widen-float16 (float16 values as float32
// between ops, for a target computing float16 in float32), fuse-matmul-add, match-activations (spelled-out
// HardSwish and GELU), match-layer-norm (spelled-out LayerNorm), fuse-epilogue (activations, x·Sigmoid(x) as Swish, and
// a scalar scale and shift into Conv/Gemm/MatMul), choose-layouts (constant GEMM operands in the target's panel
// layout), emit-program (typed ops, weights, reshape-like ops as views) and plan-memory (one arena, buffers reused by
// lifetime).
#pragma once

#include "analysis/analysis.h"
#include "cpu/weight_layout.h"
#include "ir/graph.h"
#include "ir/pass.h"
#include "partitioner/partitioner.h"
#include "program/program.h"

#include <functional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::codegen {

class KernelTuner;  // ctxgen --tune (codegen/passes/passes.h)

struct LoweredPartition {
  program::Program program;
  std::vector<std::string> inputs;   // boundary values read, in EPContext input order
  std::vector<std::string> outputs;  // boundary values written, in EPContext output order
  std::vector<ir::PassRun> passes;   // in the order they ran
  std::string dump;                  // with LowerOptions::dumpAfter: the partition after that pass
  bool stopped = false;              // LowerOptions::stopAfter ended lowering early: `program` is incomplete
};

// The lowering passes in the order they run (lib/codegen/passes, one class a file, on a LoweringState).
struct LoweringState;
using LoweringPass = ir::Pass<LoweringState>;
const std::vector<const LoweringPass*>& loweringPasses();
const std::vector<std::string_view>& loweringPassNames();

// Gives a weight its weight-table index (shared across partitions and models by the caller). The tensor is the
// plain weight; `layout` the form the table stores (a panel layout: packed by the caller when it writes them).
using WeightInterner = std::function<Expected<uint32_t>(const ir::Tensor&, const cpu::WeightLayout& layout)>;

struct LowerOptions {
  uint64_t arenaAlignment = 64;
  std::set<std::string> skipPasses;  // optimization passes to leave out (emit-program and plan-memory always run)
  std::string dumpAfter;             // a pass name: fill LoweredPartition::dump after it
  std::string stopAfter;             // a pass name: stop after it
  std::string name;                  // the partition's name, for dumps
  // How constant B operands of MatMul/Gemm are stored (the target's preferred_layouts.gemm); plain: unpacked.
  cpu::WeightLayout gemmLayout;
  // Weightless contexts (docs/weight-sharing.md#weightless): weights are stored in plain layout, the runtime packs them
  // at load where the program asks for a layout, so a weight stays byte-equal to its source initializer.
  bool plainWeights = false;
  // The target's float16_compute: with Float32, widen-float16 makes the partition's float16 values float32 between ops.
  partitioner::Float16Compute float16Compute = partitioner::Float16Compute::Float16;
  // ctxgen --tune: choose-kernels measures each Conv's algorithms with it (and records them in the program); null:
  // the cost model's choice, left implicit in the program.
  KernelTuner* tuner = nullptr;
};

// `usedOutside` holds every value read by nodes outside this partition or listed as a graph output: ids of
// facts.table (the table of `graph`), ascending.
Expected<LoweredPartition> lowerPartition(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                          const partitioner::Partition& partition,
                                          std::span<const ir::ValueId> usedOutside, const WeightInterner& intern,
                                          const LowerOptions& options = {});

}  // namespace ctxkit::codegen
