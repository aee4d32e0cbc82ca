// fold-batchnorm: Conv or Gemm followed only by BatchNormalization (inference, four float32 constant vectors of its
// channels) becomes one op with rescaled weights and bias. On a target computing float16 in float32, a Conv of float16
// weights followed by a float16 BatchNormalization is folded as ONNX Runtime folds it (ConvBNFusion): in float16, each
// step rounded, into float16 weights and bias.
#include "codegen/passes/pass_helpers.h"
#include "codegen/passes/passes.h"
#include "cpu/convert.h"

#include <algorithm>
#include <cmath>

namespace ctxkit::codegen {

namespace {

// A float16 operation as ONNX Runtime's initializer arithmetic does it: in float32, rounded to float16.
float half(float v) { return cpu::halfToFloat(cpu::floatToHalf(v)); }

// A float16 BatchNorm folded into a Conv: the per-channel factor (a float16 value), the folded bias, and the folded
// weight unless a weightless context computes it at load (halfFoldsAtLoad).
struct HalfFold {
  std::vector<float> scale;
  std::optional<ir::Tensor> w;
  ir::Tensor b;
};

// A weightless context (LowerOptions::plainWeights) folds a float16 weight larger than this at load from the source
// weight, which then stays in the source model: the same floor as derivesAtLoad's.
constexpr uint64_t kHalfAtLoadFloorBytes = 4096;

bool halfFoldsAtLoad(const LoweringState& state, ValueId w) {
  const ValueRecord& r = state.record(w);
  return state.options.plainWeights && r.sourceConstant && !r.made && !r.loadTime &&
         r.sourceConstant->byteSize() > kHalfAtLoadFloorBytes;
}

// Conv (float16 weights, optional float16 bias) followed only by BatchNormalization of float16 constants: the folded
// weights and bias, computed in ONNX Runtime's order (var + epsilon, sqrt, scale / that; W * it per output channel;
// with a bias ((B - mean) * it) + bn_B, without one bn_B - mean * it), or nothing when the pair does not qualify.
std::optional<HalfFold> foldHalf(const LoweringState& state, const LOp& conv, const LOp& bn) {
  if (conv.kind != ir::OpKind::Conv || conv.epilogue || conv.inputs.size() < 2 || conv.outputs.size() != 1 ||
      bn.kind != ir::OpKind::BatchNormalization || bn.inputs.size() != 5 || bn.inputs[0] != conv.outputs[0] ||
      std::get<ops::BatchNormAttrs>(bn.typed).perActivation || state.leaves(bn.outputs[0]) ||
      std::any_of(bn.outputs.begin() + 1, bn.outputs.end(), [](ValueId o) { return o != kNoValue; }))
    return std::nullopt;
  auto halfConstant = [&](ValueId v) -> const ir::Tensor* {
    const ir::Tensor* t = state.constantOf(v);
    return t && t->type() == ir::ElemType::Float16 ? t : nullptr;
  };
  const ir::Tensor* w = halfConstant(conv.inputs[1]);
  if (!w || w->rank() <= 2) return std::nullopt;
  const int64_t channels = w->shape()[0];
  const uint16_t* p[4];
  for (int k = 0; k < 4; ++k) {
    const ir::Tensor* t = halfConstant(bn.inputs[1 + k]);
    if (!t || t->rank() != 1 || t->shape()[0] != channels) return std::nullopt;
    p[k] = t->dataAs<uint16_t>();
  }
  const bool hasBias = conv.inputs.size() > 2 && conv.inputs[2] != kNoValue;
  const ir::Tensor* bias = hasBias ? halfConstant(conv.inputs[2]) : nullptr;
  if (hasBias && (!bias || bias->rank() != 1 || bias->shape()[0] != channels)) return std::nullopt;
  auto f = [](uint16_t bits) { return cpu::halfToFloat(bits); };
  const float epsilon = std::get<ops::BatchNormAttrs>(bn.typed).epsilon;
  // (W * scale is exact in float32, a product of two float16 values: rounding it to float16 is the one rounding,
  // which a weightless context's load-time Cast does as this does)
  const bool atLoad = halfFoldsAtLoad(state, conv.inputs[1]);
  auto newW = atLoad ? Expected<ir::Tensor>(ir::Tensor()) : ir::Tensor::allocate(ir::ElemType::Float16, w->shape());
  auto newB = ir::Tensor::allocate(ir::ElemType::Float16, {channels});
  if (!newW || !newB) return std::nullopt;
  HalfFold fold{std::vector<float>(static_cast<size_t>(channels)), std::nullopt, std::move(*newB)};
  const uint64_t perFilter = w->elementCount() / static_cast<uint64_t>(channels);
  for (int64_t c = 0; c < channels; ++c) {
    const float sd = half(std::sqrt(half(f(p[3][c]) + epsilon)));
    const float scale = half(f(p[0][c]) / sd);
    fold.scale[static_cast<size_t>(c)] = scale;
    for (uint64_t k = 0; !atLoad && k < perFilter; ++k) {
      const uint64_t at = static_cast<uint64_t>(c) * perFilter + k;
      newW->mutableDataAs<uint16_t>()[at] = cpu::floatToHalf(f(w->dataAs<uint16_t>()[at]) * scale);
    }
    const float b = bias ? half(half(half(f(bias->dataAs<uint16_t>()[c]) - f(p[2][c])) * scale) + f(p[1][c]))
                         : half(f(p[1][c]) - half(f(p[2][c]) * scale));
    fold.b.mutableDataAs<uint16_t>()[c] = cpu::floatToHalf(b);
  }
  if (!atLoad) fold.w = std::move(*newW);
  return fold;
}

// The folded float16 weight of Conv i made at load (halfFoldsAtLoad): float16(float32(w) * scale[c]), the arithmetic
// foldHalf does. Returns the new weight's value.
ValueId halfFoldAtLoad(LoweringState& state, size_t i, const std::vector<float>& scale) {
  const ValueId w = state.ops[i].inputs[1];
  const ir::Shape wShape = state.constantOf(w)->shape();
  ir::Shape scaleShape(wShape.size(), 1);
  scaleShape[0] = static_cast<int64_t>(scale.size());
  return scaleAtLoad(state, i, w, wShape, ir::Tensor::fromVector(ir::ElemType::Float, scaleShape, scale),
                     ir::ElemType::Float, ir::ElemType::Float16);
}

}  // namespace

Expected<ir::PassChange> FoldBatchNorm::run(LoweringState& state) const {
  size_t halfFolded = 0;
  if (state.options.float16Compute == partitioner::Float16Compute::Float32) {
    for (size_t i = 0; i < state.ops.size(); ++i) {
      auto j = state.soleReader(i);
      if (!j) continue;
      auto folded = foldHalf(state, state.ops[i], state.ops[*j]);
      if (!folded) continue;
      ValueId w = kNoValue;
      if (folded->w) {
        w = state.addConstant(state.ops[i].name + ".folded_w" + std::to_string(state.folds), std::move(*folded->w));
      } else {
        w = halfFoldAtLoad(state, i, folded->scale);  // three ops before op i: it and its reader move on by three
        i += 3;
        *j += 3;
      }
      const LOp& conv = state.ops[i];
      const ValueId b = state.addConstant(conv.name + ".folded_b" + std::to_string(state.folds), std::move(folded->b));
      ++state.folds;
      state.setInputs(i, {conv.inputs[0], w, b});
      state.setOutputs(i, {state.ops[*j].outputs[0]});
      state.eraseOp(*j);
      ++halfFolded;
    }
  }
  auto batchNorm = [&](const LOp& producer, const LOp& bn, int64_t channels) -> std::optional<ChannelAffine> {
    // (training_mode = 1 does not decode: such a node never reaches a partition)
    if (bn.kind != ir::OpKind::BatchNormalization || bn.inputs.size() != 5 || bn.inputs[0] != producer.outputs[0])
      return std::nullopt;
    if (std::any_of(bn.outputs.begin() + 1, bn.outputs.end(), [](ValueId o) { return o != kNoValue; }))
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
  return ir::PassChange{}.count("batchnorms_folded", folded + halfFolded);
}

}  // namespace ctxkit::codegen
