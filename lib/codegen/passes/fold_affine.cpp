// fold-affine: Conv or Gemm followed only by Mul, Add, Sub or Div with a constant of one value or one per output
// channel (PP-LCNet's learnable affine blocks, a model's own scale and shift) folds that into its weights and bias;
// chains fold one op at a time.
#include "codegen/passes/pass_helpers.h"
#include "codegen/passes/passes.h"

namespace ctxkit::codegen {

namespace {

// The values of a float32 constant that broadcasts against an output of `rank` dims over axis 1 only (one
// value, or one per channel): the per-channel operand of an affine; nothing otherwise.
std::optional<std::vector<double>> channelValues(const LoweringState& state, ValueId name, size_t rank,
                                                 int64_t channels) {
  const ir::Tensor* t = state.constantOf(name);
  if (!t || t->type() != ir::ElemType::Float || t->rank() > rank) return std::nullopt;
  const size_t lead = rank - t->rank();
  for (size_t d = 0; d < t->rank(); ++d)
    if (t->shape()[d] != 1 && !(lead + d == 1 && t->shape()[d] == channels)) return std::nullopt;
  std::vector<double> v(static_cast<size_t>(channels));
  for (size_t c = 0; c < v.size(); ++c) v[c] = t->dataAs<float>()[t->elementCount() == 1 ? 0 : c];
  return v;
}

}  // namespace

Expected<ir::PassChange> FoldAffine::run(LoweringState& state) const {
  auto affineOf = [&](const LOp& producer, const LOp& next, int64_t channels) -> std::optional<ChannelAffine> {
    const bool arithmetic = next.kind == ir::OpKind::Mul || next.kind == ir::OpKind::Add ||
                            next.kind == ir::OpKind::Sub || next.kind == ir::OpKind::Div;
    if (!arithmetic || next.inputs.size() != 2 || next.outputs.size() != 1) return std::nullopt;
    const bool first = next.inputs[0] == producer.outputs[0];
    if (!first && (next.kind == ir::OpKind::Sub || next.kind == ir::OpKind::Div)) return std::nullopt;
    // (the weight may be one a weightless context rescales at load: a load-time value, whose shape is known)
    const auto weightShape = state.shapeOf(producer.inputs[1]);
    if (!weightShape) return std::nullopt;
    const size_t rank = producer.kind == ir::OpKind::Conv ? weightShape->size() : 2;
    auto values = channelValues(state, next.inputs[first ? 1 : 0], rank, channels);
    if (!values) return std::nullopt;
    ChannelAffine affine{std::vector<double>(values->size(), 1.0), std::vector<double>(values->size(), 0.0)};
    for (size_t c = 0; c < values->size(); ++c) {
      double v = (*values)[c];
      switch (next.kind) {
        case ir::OpKind::Mul: affine.scale[c] = v; break;
        case ir::OpKind::Div: affine.scale[c] = 1.0 / v; break;
        case ir::OpKind::Add: affine.shift[c] = v; break;
        default: affine.shift[c] = -v; break;
      }
    }
    return affine;
  };
  // Chains fold one op at a time: the same producer may take the next affine.
  CTX_ASSIGN_OR_RETURN(size_t folded, foldChannelAffines(state, true, affineOf));
  return ir::PassChange{}.count("affine_ops_folded", folded);
}

}  // namespace ctxkit::codegen
