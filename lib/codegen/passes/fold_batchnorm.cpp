// fold-batchnorm: Conv or Gemm followed only by BatchNormalization (inference, four float32 constant vectors of its
// channels) becomes one op with rescaled weights and bias.
#include "codegen/passes/pass_helpers.h"
#include "codegen/passes/passes.h"

#include <algorithm>
#include <cmath>

namespace ctxkit::codegen {

Expected<ir::PassChange> FoldBatchNorm::run(LoweringState& state) const {
  auto batchNorm = [&](const LOp& producer, const LOp& bn, int64_t channels) -> std::optional<ChannelAffine> {
    // (training_mode = 1 does not decode: such a node never reaches a partition)
    if (bn.kind != ir::OpKind::BatchNormalization || bn.inputs.size() != 5 || bn.inputs[0] != producer.outputs[0])
      return std::nullopt;
    if (std::any_of(bn.outputs.begin() + 1, bn.outputs.end(), [](const std::string& o) { return !o.empty(); }))
      return std::nullopt;
    const float* params[4];
    for (int k = 0; k < 4; ++k) {
      const ir::Tensor* t = state.constantOf(bn.inputs[1 + k]);
      if (!t || t->type() != ir::ElemType::Float || t->rank() != 1 || t->shape()[0] != channels) return std::nullopt;
      params[k] = t->dataAs<float>();
    }
    const double epsilon = std::get<ops::BatchNormAttrs>(bn.typed).epsilon;
    ChannelAffine affine{std::vector<double>(static_cast<size_t>(channels)),
                         std::vector<double>(static_cast<size_t>(channels))};
    for (size_t c = 0; c < affine.scale.size(); ++c) {
      affine.scale[c] = params[0][c] / std::sqrt(static_cast<double>(params[3][c]) + epsilon);
      affine.shift[c] = params[1][c] - params[2][c] * affine.scale[c];
    }
    return affine;
  };
  CTX_ASSIGN_OR_RETURN(size_t folded, foldChannelAffines(state, false, batchNorm));
  return ir::PassChange{}.count("batchnorms_folded", folded);
}

}  // namespace ctxkit::codegen
