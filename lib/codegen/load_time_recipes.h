// Weightless contexts: the constants the analysis folded from source weights by moving or converting their elements
// (a Slice, Concat, Transpose, Reshape or Cast of a weight), or computed by exact arithmetic (anchors, masks), are
// computed again at load instead of stored (docs/weight-sharing.md#derived-weights).
#pragma once

#include "analysis/analysis.h"
#include "partitioner/partitioner.h"

#include <span>
#include <vector>

namespace ctxkit::codegen {

// The folded nodes (graph indices, in a topological order) that compute, from a source model's constants, the
// constant inputs of `partition` worth computing at load: each such input larger than 4 KiB that a chain of those
// kinds computes from initializers or Constant values, reading at least one larger than 4 KiB and nothing else larger
// (what else it reads, such as a Slice's bounds, is stored), and that the partition reads only as a weight (a Conv's,
// ConvTranspose's or Gemm's weight, a MatMul operand, a recurrent op's W, R or B, a Gather table: never a bias or a
// factor a fold needs as a constant). Their outputs become load-time values; none of them may be read outside the
// partition (`usedOutside`, ascending). Float16 values are left out (widen-float16 retypes them).
std::vector<size_t> loadTimeRecipes(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                    const partitioner::Partition& partition, std::span<const ir::ValueId> usedOutside);

// The constants of `partition` that a weightless context may compute at load by ops whose results IEEE arithmetic
// fixes exactly (Add, Sub, Mul, Div, Sqrt, comparisons, Where, Range, ConstantOfShape, Expand, Tile, ScatterND and the
// rearrangements above; docs/weight-sharing.md#derived-weights): anchors, attention masks, a Gather of a position
// table. `values` are the constants (graph value ids) larger than 4 KiB that the partition reads, computed from source
// constants and from other constants of at most 4 KiB (stored), fewer bytes stored than computed; `nodes` compute
// them (graph indices, in a topological order). None of their outputs is read outside the partition, none is a 16-bit
// float, none is computed by one of `rearrangements` (loadTimeRecipes' nodes) or by a node of the partition.
// Whether each is computed at load is emit-program's choice: only if the program still reads it unchanged.
struct ExactRecipes {
  std::vector<size_t> nodes;
  std::vector<ir::ValueId> values;
};
ExactRecipes exactRecipes(const ir::Graph& graph, const analysis::GraphFacts& facts,
                          const partitioner::Partition& partition, std::span<const ir::ValueId> usedOutside,
                          std::span<const size_t> rearrangements);

}  // namespace ctxkit::codegen
