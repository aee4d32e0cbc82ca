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

// The type and bound of each output of `node` (one entry per output, nullopt where there is none), given its inputs as
// shape inference sees them with every non-static input's shape replaced by its bound (`inputs`), `dynamic[i]` telling
// which inputs those are. Roots: NonZero (rank x elements of its input), NonMaxSuppression (batch x classes x
// min(max_output_boxes_per_class, boxes) rows when that count is constant, batch x classes x boxes otherwise), TopK
// with a computed k (its input's shape). Other nodes: their own shape rule run on the bounds, when it can run
// without a value it is not given (a Reshape to a computed shape has no bound). Each dimension of a bound is at
// least the dimension the node gives at run time; the rank is the same.
// Whether `node`'s output shape depends on values it reads, whatever its inputs' shapes: NonZero,
// NonMaxSuppression, TopK with a k not known at compile time. Such a node is the root of the dynamic shapes after it.
bool isValueDependent(const ir::Node& node, std::span<const kernels::ValueDesc> inputs);

// An output's element type and the upper bound of its shape.
struct BoundedOutput {
  ir::ElemType type = ir::ElemType::Undefined;
  ir::Shape bound;
};

std::vector<std::optional<BoundedOutput>> outputBounds(const ir::Node& node, const kernels::OpContext& ctx,
                                                       std::span<const kernels::ValueDesc> inputs,
                                                       std::span<const uint8_t> dynamic, size_t outputCount);

}  // namespace ctxkit::analysis
