// Activation parameters and per-channel affine folding shared by lowering passes (pass_helpers.h).
#include "codegen/passes/pass_helpers.h"

#include <algorithm>

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
    case ir::OpKind::Gelu:
      if (std::get<ops::UnaryAttrs>(act.typed).tanhApprox) return std::nullopt;
      return ops::Epilogue{A::Gelu, 0, 0};
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

std::optional<size_t> onlyReaderOf(const LoweringState& state, ValueId v) {
  if (v == kNoValue || state.leaves(v) || state.readers(v) != 1) return std::nullopt;
  return state.readersOf(v)[0];
}

size_t replaceOpsAt(LoweringState& state, std::vector<size_t> gone, size_t last, LOp op) {
  std::sort(gone.begin(), gone.end());
  state.replaceOp(last, std::move(op));
  for (auto it = gone.rbegin(); it != gone.rend(); ++it)  // from the back: the indices before stay valid
    if (*it != last) state.eraseOp(*it);
  return gone.size() - 1;
}

// Weightless contexts derive a weight at load from a source model's constant larger than this (or from a load-time
// value): the source weight stays in the source model instead of a derived copy in the context binary. A smaller one
// is derived now and stored.
constexpr uint64_t kDeriveAtLoadFloorBytes = 4096;

std::optional<ir::Shape> derivesAtLoad(const LoweringState& state, ValueId w) {
  // (float16 weights stay constants: widen-float16 and the float16 BatchNorm fold read them as such)
  if (!state.options.plainWeights || w == kNoValue || state.typeOf(w) == ir::ElemType::Float16 ||
      state.typeOf(w) == ir::ElemType::BFloat16)
    return std::nullopt;
  if (state.isLoadTime(w)) return state.shapeOf(w);
  const ValueRecord& r = state.record(w);
  if (r.made || !r.sourceConstant || r.sourceConstant->byteSize() <= kDeriveAtLoadFloorBytes) return std::nullopt;
  return r.sourceConstant->shape();
}

ValueId scaleAtLoad(LoweringState& state, size_t i, ValueId w, const ir::Shape& wShape, ir::Tensor scale,
                    ir::ElemType wide, ir::ElemType narrow) {
  const std::string base = state.ops[i].name + ".folded_w" + std::to_string(state.folds);
  const std::string wideName = base + (wide == ir::ElemType::Double ? ".f64" : ".f32");
  const ValueId scaleValue = state.addConstant(base + ".scale", std::move(scale));
  auto loadTime = [&](const std::string& name, ir::ElemType type) {
    const ValueId v = state.value(name);
    ValueRecord& r = state.record(v);
    r.type = type;
    r.shape = wShape;
    r.loadTime = true;
    return v;
  };
  const ValueId widened = loadTime(wideName, wide);
  const ValueId scaled = loadTime(wideName + "_scaled", wide);
  const ValueId folded = loadTime(base, narrow);
  auto cast = [&](const std::string& name, ValueId in, ValueId out, ir::ElemType to) {
    LOp c = madeOp(ir::OpKind::Cast, 13, name, {in}, {out});
    std::get<ops::CastAttrs>(c.typed).to = to;
    return c;
  };
  state.insertOp(i, cast(base + ".narrow", scaled, folded, narrow));
  state.insertOp(i, madeOp(ir::OpKind::Mul, 14, base + ".scale_mul", {widened, scaleValue}, {scaled}));
  state.insertOp(i, cast(base + ".widen", w, widened, wide));
  return folded;
}

namespace {

// The float32 weight `w` of a Conv or Gemm that a weightless context rescales at load (derivesAtLoad). Its shape,
// when so.
std::optional<ir::Shape> foldsAtLoad(const LoweringState& state, ValueId w) {
  if (state.typeOf(w) != ir::ElemType::Float) return std::nullopt;
  return derivesAtLoad(state, w);
}

// Output channels of a Conv or Gemm whose weights (and bias, when present) are float32 constants that a
// per-channel affine can be folded into; nothing for any other op. A weightless context's weight may be one rescaled
// at load (foldsAtLoad).
std::optional<int64_t> foldableChannels(const LoweringState& state, const LOp& op) {
  if (op.epilogue || op.inputs.size() < 2) return std::nullopt;
  const std::optional<ir::Shape> atLoad = foldsAtLoad(state, op.inputs[1]);
  const ir::Tensor* w = state.constantOf(op.inputs[1]);
  if (!atLoad && (!w || w->type() != ir::ElemType::Float)) return std::nullopt;
  const ir::Shape& wShape = atLoad ? *atLoad : w->shape();
  const bool hasBias = op.inputs.size() > 2 && op.inputs[2] != kNoValue;
  const ir::Tensor* bias = hasBias ? state.constantOf(op.inputs[2]) : nullptr;
  if (hasBias && (!bias || bias->type() != ir::ElemType::Float)) return std::nullopt;
  if (op.kind == ir::OpKind::Conv) {
    if (wShape.size() < 3 || (bias && bias->elementCount() != static_cast<uint64_t>(wShape[0]))) return std::nullopt;
    return wShape[0];
  }
  if (op.kind == ir::OpKind::Gemm && wShape.size() == 2) {
    const int64_t n = std::get<ops::GemmAttrs>(op.typed).transB ? wShape[0] : wShape[1];
    // C absent, one value, or N values along the last axis.
    if (bias && bias->elementCount() != 1 &&
        (bias->rank() > 2 || bias->elementCount() != static_cast<uint64_t>(n) || bias->shape().back() != n))
      return std::nullopt;
    return n;
  }
  return std::nullopt;
}

// The rescaled weight of op i made at load (a weightless context, foldsAtLoad): float32(float64(w) * scale[c]), the
// arithmetic foldChannelAffine does, so the weight is bit for bit the one an ordinary compile stores; the scale is
// stored as float64, shaped to broadcast over the weight's channel axis (axis 0 of a Conv's or a transB Gemm's weight,
// axis 1 of a Gemm's). Returns the new weight's value.
ValueId rescaleAtLoad(LoweringState& state, size_t i, const ir::Shape& wShape, const std::vector<double>& scale) {
  const LOp& op = state.ops[i];
  const bool channelsLast = op.kind == ir::OpKind::Gemm && !std::get<ops::GemmAttrs>(op.typed).transB;
  ir::Shape scaleShape(wShape.size(), 1);
  scaleShape[channelsLast ? 1 : 0] = static_cast<int64_t>(scale.size());
  return scaleAtLoad(state, i, op.inputs[1], wShape, ir::Tensor::fromVector(ir::ElemType::Double, scaleShape, scale),
                     ir::ElemType::Double, ir::ElemType::Float);
}

// Folds `affine` over the output channels of op i (a foldableChannels op) into its weights and bias; op `by`, which
// applied it, is removed and op i takes over its output.
Status foldChannelAffine(LoweringState& state, size_t& i, size_t by, const ChannelAffine& affine) {
  const std::vector<double>& scale = affine.scale;
  const std::vector<double>& shift = affine.shift;
  LOp& op = state.ops[i];
  const std::optional<ir::Shape> atLoad = foldsAtLoad(state, op.inputs[1]);
  const ir::Tensor* w = state.constantOf(op.inputs[1]);
  const ir::Shape wShape = atLoad ? *atLoad : w->shape();
  const bool hasBias = op.inputs.size() > 2 && op.inputs[2] != kNoValue;
  const ir::Tensor* bias = hasBias ? state.constantOf(op.inputs[2]) : nullptr;
  const auto channels = static_cast<int64_t>(scale.size());
  std::optional<ir::Tensor> newW;
  if (!atLoad) {
    CTX_ASSIGN_OR_RETURN(newW, ir::Tensor::allocate(ir::ElemType::Float, wShape));
  }
  CTX_ASSIGN_OR_RETURN(ir::Tensor newB, ir::Tensor::allocate(ir::ElemType::Float, {channels}));
  const float* pw = newW ? w->dataAs<float>() : nullptr;
  float* nw = newW ? newW->mutableDataAs<float>() : nullptr;
  float* nb = newB.mutableDataAs<float>();
  auto biasAt = [&](int64_t c) -> double {
    if (!bias) return 0.0;
    return bias->dataAs<float>()[bias->elementCount() == 1 ? 0 : c];
  };
  if (op.kind == ir::OpKind::Conv) {
    const uint64_t perFilter = ir::elementCount(wShape).value_or(0) / static_cast<uint64_t>(channels);
    for (int64_t c = 0; c < channels; ++c) {
      for (uint64_t k = 0; nw && k < perFilter; ++k)
        nw[c * perFilter + k] = static_cast<float>(pw[c * perFilter + k] * scale[c]);
      nb[c] = static_cast<float>(biasAt(c) * scale[c] + shift[c]);
    }
  } else {  // Gemm: B's columns scaled; C' = beta * C * scale + shift, beta becomes 1
    auto& gemm = std::get<ops::GemmAttrs>(op.typed);
    const bool transB = gemm.transB;
    const float beta = gemm.beta;
    const int64_t k = transB ? wShape[1] : wShape[0];
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t row = 0; nw && row < k; ++row) {
        size_t at = static_cast<size_t>(transB ? c * k + row : row * channels + c);
        nw[at] = static_cast<float>(pw[at] * scale[c]);
      }
      nb[c] = static_cast<float>(beta * biasAt(c) * scale[c] + shift[c]);
    }
    gemm.beta = 1.0f;
  }
  ValueId wName = kNoValue;
  if (atLoad) {
    wName = rescaleAtLoad(state, i, wShape, scale);  // three ops before op i: it and `by` move on by three
    i += 3;
    by += 3;
  } else {
    wName = state.addConstant(state.ops[i].name + ".folded_w" + std::to_string(state.folds), std::move(*newW));
  }
  const ValueId bName =
      state.addConstant(state.ops[i].name + ".folded_b" + std::to_string(state.folds), std::move(newB));
  ++state.folds;
  state.setInputs(i, {state.ops[i].inputs[0], wName, bName});
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
