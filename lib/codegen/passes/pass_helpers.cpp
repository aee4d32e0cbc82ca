// Activation parameters and per-channel affine folding shared by lowering passes (pass_helpers.h).
#include "codegen/passes/pass_helpers.h"

#include <cmath>

namespace ctxkit::codegen {

std::optional<std::vector<float>> clipBounds(const LoweringState& state, const LOp& clip) {
  float lo = -INFINITY, hi = INFINITY;
  if (clip.opset < 11) {
    const auto& bounds = std::get<ops::ClipAttrs>(clip.typed);
    return std::vector<float>{bounds.min, bounds.max};
  }
  for (size_t k = 1; k < clip.inputs.size() && k < 3; ++k) {
    if (clip.inputs[k] == kNoValue) continue;
    const ir::Tensor* t = state.constantOf(clip.inputs[k]);
    if (!t || t->type() != ir::ElemType::Float || t->elementCount() != 1) return std::nullopt;
    (k == 1 ? lo : hi) = t->dataAs<float>()[0];
  }
  return std::vector<float>{lo, hi};
}

std::optional<ops::Epilogue> activationOf(const LoweringState& state, const LOp& act) {
  using A = ops::Activation;
  if (act.outputs.size() != 1 || (act.kind != ir::OpKind::Clip && act.inputs.size() != 1)) return std::nullopt;
  switch (act.kind) {
    case ir::OpKind::Relu: return ops::Epilogue{A::Relu, 0, 0};
    case ir::OpKind::Sigmoid: return ops::Epilogue{A::Sigmoid, 0, 0};
    case ir::OpKind::Tanh: return ops::Epilogue{A::Tanh, 0, 0};
    case ir::OpKind::HardSwish: return ops::Epilogue{A::HardSwish, 0, 0};
    case ir::OpKind::LeakyRelu: return ops::Epilogue{A::LeakyRelu, std::get<ops::UnaryAttrs>(act.typed).alpha, 0};
    case ir::OpKind::HardSigmoid: {
      const auto& unary = std::get<ops::UnaryAttrs>(act.typed);
      return ops::Epilogue{A::HardSigmoid, unary.alpha, unary.beta};
    }
    case ir::OpKind::Clip: {
      auto bounds = clipBounds(state, act);
      if (!bounds) return std::nullopt;
      return ops::Epilogue{A::Clip, (*bounds)[0], (*bounds)[1]};
    }
    default: return std::nullopt;
  }
}

namespace {

// Output channels of a Conv or Gemm whose weights (and bias, when present) are float32 constants that a
// per-channel affine can be folded into; nothing for any other op.
std::optional<int64_t> foldableChannels(const LoweringState& state, const LOp& op) {
  if (op.epilogue || op.inputs.size() < 2) return std::nullopt;
  const ir::Tensor* w = state.constantOf(op.inputs[1]);
  if (!w || w->type() != ir::ElemType::Float) return std::nullopt;
  const bool hasBias = op.inputs.size() > 2 && op.inputs[2] != kNoValue;
  const ir::Tensor* bias = hasBias ? state.constantOf(op.inputs[2]) : nullptr;
  if (hasBias && (!bias || bias->type() != ir::ElemType::Float)) return std::nullopt;
  if (op.kind == ir::OpKind::Conv) {
    if (w->rank() < 3 || (bias && bias->elementCount() != static_cast<uint64_t>(w->shape()[0]))) return std::nullopt;
    return w->shape()[0];
  }
  if (op.kind == ir::OpKind::Gemm && w->rank() == 2) {
    const int64_t n = std::get<ops::GemmAttrs>(op.typed).transB ? w->shape()[0] : w->shape()[1];
    // C absent, one value, or N values along the last axis.
    if (bias && bias->elementCount() != 1 &&
        (bias->rank() > 2 || bias->elementCount() != static_cast<uint64_t>(n) || bias->shape().back() != n))
      return std::nullopt;
    return n;
  }
  return std::nullopt;
}

// Folds `affine` over the output channels of op i (a foldableChannels op) into its weights and bias; op `by`, which
// applied it, is removed and op i takes over its output.
Status foldChannelAffine(LoweringState& state, size_t i, size_t by, const ChannelAffine& affine) {
  const std::vector<double>& scale = affine.scale;
  const std::vector<double>& shift = affine.shift;
  LOp& op = state.ops[i];
  const ir::Tensor& w = *state.constantOf(op.inputs[1]);
  const bool hasBias = op.inputs.size() > 2 && op.inputs[2] != kNoValue;
  const ir::Tensor* bias = hasBias ? state.constantOf(op.inputs[2]) : nullptr;
  const auto channels = static_cast<int64_t>(scale.size());
  CTX_ASSIGN_OR_RETURN(ir::Tensor newW, ir::Tensor::allocate(ir::ElemType::Float, w.shape()));
  CTX_ASSIGN_OR_RETURN(ir::Tensor newB, ir::Tensor::allocate(ir::ElemType::Float, {channels}));
  const float* pw = w.dataAs<float>();
  float* nw = newW.mutableDataAs<float>();
  float* nb = newB.mutableDataAs<float>();
  auto biasAt = [&](int64_t c) -> double {
    if (!bias) return 0.0;
    return bias->dataAs<float>()[bias->elementCount() == 1 ? 0 : c];
  };
  if (op.kind == ir::OpKind::Conv) {
    const uint64_t perFilter = w.elementCount() / static_cast<uint64_t>(channels);
    for (int64_t c = 0; c < channels; ++c) {
      for (uint64_t k = 0; k < perFilter; ++k)
        nw[c * perFilter + k] = static_cast<float>(pw[c * perFilter + k] * scale[c]);
      nb[c] = static_cast<float>(biasAt(c) * scale[c] + shift[c]);
    }
  } else {  // Gemm: B's columns scaled; C' = beta * C * scale + shift, beta becomes 1
    auto& gemm = std::get<ops::GemmAttrs>(op.typed);
    const bool transB = gemm.transB;
    const float beta = gemm.beta;
    const int64_t k = transB ? w.shape()[1] : w.shape()[0];
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t row = 0; row < k; ++row) {
        size_t at = static_cast<size_t>(transB ? c * k + row : row * channels + c);
        nw[at] = static_cast<float>(pw[at] * scale[c]);
      }
      nb[c] = static_cast<float>(beta * biasAt(c) * scale[c] + shift[c]);
    }
    gemm.beta = 1.0f;
  }
  const ValueId wName = state.addConstant(op.name + ".folded_w" + std::to_string(state.folds), std::move(newW));
  const ValueId bName = state.addConstant(op.name + ".folded_b" + std::to_string(state.folds), std::move(newB));
  ++state.folds;
  state.setInputs(i, {op.inputs[0], wName, bName});
  state.setOutputs(i, {state.ops[by].outputs[0]});
  state.eraseOp(by);
  return Status::ok();
}

}  // namespace

Expected<size_t> foldChannelAffines(LoweringState& state, bool chains, const AffineOf& affineOf) {
  size_t folded = 0;
  for (size_t i = 0; i < state.ops.size(); ++i) {
    auto channels = foldableChannels(state, state.ops[i]);
    auto j = state.soleReader(i);
    if (!channels || !j) continue;
    auto affine = affineOf(state.ops[i], state.ops[*j], *channels);
    if (!affine) continue;
    CTX_RETURN_IF_ERROR(foldChannelAffine(state, i, *j, *affine));
    ++folded;
    if (chains) --i;  // the same op may take the next affine of a chain
  }
  return folded;
}

}  // namespace ctxkit::codegen
