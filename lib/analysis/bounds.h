// Upper bounds of value-dependent shapes: what a NonZero, NonMaxSuppression or TopK with a computed k can produce at
// most, carried through the shape rules of the nodes that follow.
#pragma once

#include "ir/graph.h"
#include "kernels/kernels.h"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace ctxkit::analysis {

// Whether `node`'s output shape depends on values it reads, whatever its inputs' shapes: NonZero,
// NonMaxSuppression, TopK with a k not known at compile time. Such a node is the root of the dynamic shapes after it.
bool isValueDependent(const ir::Node& node, std::span<const kernels::ValueDesc> inputs);

// An output's element type, the upper bound of its shape and a lower bound (each dimension at least `low` at run time;
// equal dimensions are exact).
struct BoundedOutput {
  ir::ElemType type = ir::ElemType::Undefined;
  ir::Shape bound;
  ir::Shape low;
};

// The values an integer tensor not known at compile time can hold, element by element (row-major): lo <= v <= hi.
// Kept for the small int64/int32 tensors that shapes are computed with (a Shape of a bounded value and the
// arithmetic on it), with every end within +-2^31 so that no arithmetic on them overflows.
struct ValueRange {
  int64_t lo = 0, hi = 0;
  bool operator==(const ValueRange&) const = default;
};
using ValueRanges = std::vector<ValueRange>;

// The inputs of a node as the bounds analysis sees them: `bound` and `low` with every non-static input's shape
// replaced by its upper and lower bound, `dynamic[i]` telling which inputs those are, `ranges[i]` the range of an
// integer input's values when it has one (a constant's values are in `bound[i].value`).
struct BoundInputs {
  std::span<const kernels::ValueDesc> bound, low;
  std::span<const uint8_t> dynamic;
  std::span<const ValueRanges* const> ranges;
};

// The type and bounds of each output of `node` (one entry per output, nullopt where there is none), given its inputs.
// Roots: NonZero (rank x elements of its input), NonMaxSuppression (batch x classes x min(max_output_boxes_per_class,
// boxes) rows when that count is constant, batch x classes x boxes otherwise), TopK with a computed k (its input's
// shape, the axis at most k's range). A shape computed at run time whose values have a range: Reshape, Expand,
// ConstantOfShape, Range, and Slice with computed starts or ends (never more than its input). Other nodes: their own
// shape rule run on the bounds (and on the lower bounds), when it can run without a value it is not given. Each
// dimension of a bound is at least the dimension the node gives at run time, each of `low` at most; the rank is the
// same.
std::vector<std::optional<BoundedOutput>> outputBounds(const ir::Node& node, const kernels::OpContext& ctx,
                                                       const BoundInputs& inputs, size_t outputCount);

// The range of the values of `node`'s single output, an integer tensor of `count` elements not known at compile time,
// from the ranges of its inputs' values (or their shapes' bounds, for Shape): Shape, Size, Identity, Cast,
// (Un)Squeeze, Reshape, Flatten, Gather and Slice with constant indices, Concat, Add, Sub, Mul, Div by a positive
// constant, Min, Max, ReduceMin/Max/Sum/Prod, Where (either side's values). nullopt when the node is none of those or
// an end leaves +-2^31.
std::optional<ValueRanges> outputRange(const ir::Node& node, const BoundInputs& inputs, uint64_t count);

}  // namespace ctxkit::analysis
