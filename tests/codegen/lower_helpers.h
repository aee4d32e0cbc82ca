// What the lowering tests share: lowering a whole graph as one partition, and running the program it makes on its
// planned arena, to compare with the source graph evaluated node by node.
#pragma once

#include "analysis/analysis.h"
#include "codegen/lower.h"
#include "cpu/weight_layout.h"
#include "weightshare/weight_pool.h"

#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::testing {

// The ids lowerPartition takes for values read outside a partition: ascending.
std::vector<ir::ValueId> outsideIds(const analysis::GraphFacts& facts, std::initializer_list<std::string_view> names);

ir::Tensor randomInput(ir::Shape shape, uint32_t seed);

// The source graph, evaluated node by node with the kernels (no lowering involved).
ir::Tensor evaluateGraph(const ir::Graph& g, const ir::Tensor& x);

// Executes a lowered program with the kernels: weights from the pool, arena tensors at their planned offsets in one
// arena of the program's arena size (so that a wrong plan computes wrong values), views reshaped. Returns output 0.
ir::Tensor executeProgram(const program::Program& p, const weightshare::WeightPool& pool, const ir::Tensor& x);

void requireClose(const ir::Tensor& a, const ir::Tensor& b);

// The layout the built-in targets ask for.
inline const cpu::WeightLayout kPanels32{cpu::WeightLayoutKind::GemmPanels, 32, 256};

struct Lowered {
  codegen::LoweredPartition partition;
  weightshare::WeightPool pool;

  std::vector<ir::OpKind> kinds() const;
  const ir::PassRun& run(const std::string& pass) const;
  bool changed(const std::string& pass) const { return run(pass).changed != 0; }
};

// Lowers all of `g`'s nodes as one partition (even nodes the partitioner would fold), skipping `skip`, computing
// float16 as `float16Compute` says; `outside` names the values read outside it (g's first output when empty).
std::unique_ptr<Lowered> lowerAll(const ir::Graph& g, std::set<std::string> skip = {},
                                  partitioner::Float16Compute float16Compute = partitioner::Float16Compute::Float16,
                                  bool plainWeights = false, std::vector<std::string> outside = {});

// The program's weight tensors by name.
std::map<std::string, program::TensorDesc> weightDescs(const Lowered& l);

void checkComputesSource(const ir::Graph& g, const Lowered& l, ir::Shape inputShape);

}  // namespace ctxkit::testing
