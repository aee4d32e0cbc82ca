// Writing a weight pool into a context binary, and weightless contexts (docs/weight-sharing.md#weightless): finding
// each pooled weight among the initializers of the source models, so that the binary records where it lives instead of
// its bytes.
#pragma once

#include "format/container.h"
#include "weightshare/weight_pool.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::weightshare {

// A model whose compiled graphs a context holds: `name` is the onnx_model_filename its EPContext nodes record.
struct SourceModel {
  std::string name;
  std::vector<std::pair<std::string_view, const ir::Tensor*>> initializers;  // top-level: name, tensor
};

using WeightSources = std::vector<std::vector<format::WeightInfo::Source>>;  // per pooled weight; empty: not found

// For every pooled weight, the initializers of `models` with the same element type and bytes (the shape
// may differ: lowering may view a weight in another shape), at most one per model. Weights found nowhere (folded,
// fused, packed, from Constant nodes) get an empty list.
WeightSources locateInSources(const WeightPool& pool, std::span<const SourceModel> models);

// Adds every pooled weight to `writer` in pool order (the programs' weight indices). With `sources` (a weightless
// writer), a weight found in a source model is added as a source weight, the others with their bytes.
Status addPoolWeights(format::ContainerWriter& writer, const WeightPool& pool, const WeightSources* sources = nullptr);

}  // namespace ctxkit::weightshare
