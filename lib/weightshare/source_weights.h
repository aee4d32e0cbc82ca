// Writing a weight pool into a context binary, and weightless contexts (docs/weight-sharing.md#weightless): finding
// each pooled weight among the initializers of the source models, so that the binary records where it lives instead of
// its bytes.
#pragma once

#include "format/container.h"
#include "weightshare/weight_pool.h"

#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::weightshare {

// Which initializers of a source model a weightless context leaves there (ONNX Runtime's OrtWeightlessSupport):
// all of them, or only those stored as external data (ExternalOnly: the ones inside the .onnx file are stored in the
// context, as ORT's EXTERNAL_ONLY says an EP copies internal initializers).
enum class WeightlessScope { All, ExternalOnly };

// A model whose compiled graphs a context holds: `name` is the onnx_model_filename its EPContext nodes record.
struct SourceModel {
  struct Initializer {
    std::string_view name;  // as the runtime finds it (runtime::SourceInitializers::byName)
    const ir::Tensor* tensor;
    bool external;  // its bytes are external data
  };
  std::string name;
  std::vector<Initializer> initializers;
};

// A source model of these initializers (by the name the runtime finds each under), `external` naming those whose bytes
// are external data; the tensors must outlive the result.
SourceModel sourceModelOf(std::string name, const std::map<std::string, ir::Tensor>& byName,
                          const std::set<std::string>& external);

using WeightSources = std::vector<std::vector<format::WeightInfo::Source>>;  // per pooled weight; empty: not found

// For every pooled weight, the initializers of `models` in `scope` with the same element type and bytes (the shape
// may differ: lowering may view a weight in another shape), at most one per model. Weights found nowhere (folded,
// fused, packed) get an empty list.
WeightSources locateInSources(const WeightPool& pool, std::span<const SourceModel> models,
                              WeightlessScope scope = WeightlessScope::All);

// Adds every pooled weight to `writer` in pool order (the programs' weight indices). With `sources` (a weightless
// writer), a weight found in a source model is added as a source weight, the others with their bytes.
Status addPoolWeights(format::ContainerWriter& writer, const WeightPool& pool, const WeightSources* sources = nullptr);

}  // namespace ctxkit::weightshare
