// The transformer ops ONNX Runtime's exporters and optimizer write in the com.microsoft domain, on float32 (float16
// and bfloat16 run through float32): Gelu, BiasGelu, FastGelu and QuickGelu (an activation of x plus an optional bias
// along the last axis), and SkipLayerNormalization / SkipSimplifiedLayerNormalization (input + skip (+ bias), then
// layer or RMS normalization over the last axis). Semantics are ONNX Runtime's CPU EP's
// (docs/runtime.md#onnx-runtimes-transformer-ops).
#include "cpu/vec_math.h"
#include "kernels/ops.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

// Whether `b` repeats over `x`: its shape, leading ones dropped, is a suffix of x's (so x's element i takes b's
// element i mod |b|).
bool repeatsAlongTail(std::span<const int64_t> b, std::span<const int64_t> x) {
  size_t lead = 0;
  while (lead < b.size() && b[lead] == 1 && b.size() - lead > 1) ++lead;
  b = b.subspan(lead);
  if (b.size() > x.size()) return false;
  return std::equal(b.begin(), b.end(), x.end() - static_cast<std::ptrdiff_t>(b.size()));
}

}  // namespace

InferResult inferBiasActivation(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  const bool takesBias = ctx.kind == ir::OpKind::BiasGelu || ctx.kind == ir::OpKind::FastGelu;
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, ctx.kind == ir::OpKind::BiasGelu ? 2 : 1, takesBias ? 2 : 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float) | kHalfTypes));
  if (const ValueDesc* b = optionalInput(inputs, 1)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
    if (b->shape.empty() || !repeatsAlongTail(b->shape, inputs[0].shape))
      return invalid(ctx, "input 1 (bias) has shape {}, which does not repeat along the last axes of input 0's {}",
                     shapeStr(b->shape), shapeStr(inputs[0].shape));
  }
  return single(inputs[0].type, inputs[0].shape);
}

Status runBiasActivation(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const ir::Tensor* bias = inputs.size() > 1 ? inputs[1] : nullptr;
  const size_t n = static_cast<size_t>(x.elementCount());
  const size_t period = bias ? static_cast<size_t>(bias->elementCount()) : n;
  const float* px = x.dataAs<float>();
  const float* pb = bias ? bias->dataAs<float>() : nullptr;
  float* py = outputs[0]->mutableDataAs<float>();
  const float alpha = ctx.kind == ir::OpKind::QuickGelu ? attrsOf<ops::UnaryAttrs>(ctx).alpha : 0.0f;
  // Rows of the bias's length (the whole tensor without a bias): v = x + b into the output, then the activation of v
  // in place.
  const size_t rows = period == 0 ? 0 : n / period;
  parallelForWork(ctx, rows, period, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const float* src = px + r * period;
      float* dst = py + r * period;
      if (pb) {
        for (size_t i = 0; i < period; ++i) dst[i] = src[i] + pb[i];
        src = dst;
      }
      switch (ctx.kind) {
        case ir::OpKind::FastGelu: cpu::vecGeluTanh(src, dst, period); break;
        case ir::OpKind::QuickGelu:  // v * sigmoid(alpha v)
          for (size_t i = 0; i < period; ++i) {
            const float v = src[i];
            dst[i] = v / (1.0f + std::exp(-alpha * v));
          }
          break;
        default: cpu::vecGeluErf(src, dst, period); break;  // Gelu, BiasGelu
      }
    }
  });
  return Status::ok();
}

InferResult inferSkipNorm(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 5));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 4));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float) | kHalfTypes));
  const auto& x = inputs[0].shape;
  if (x.empty()) return invalid(ctx, "input 0 is a scalar; it needs a last (hidden) axis");
  const int64_t hidden = x.back();
  for (size_t i = 1; i < inputs.size(); ++i) {
    const ValueDesc* in = optionalInput(inputs, i);
    if (!in) continue;
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
    if (i == 1) {
      if (!repeatsAlongTail(in->shape, x) || in->shape.empty() || in->shape.back() != hidden)
        return invalid(ctx, "input 1 (skip) has shape {}, which does not repeat along input 0's {}",
                       shapeStr(in->shape), shapeStr(x));
    } else if (dimProduct(in->shape) != hidden || in->shape.empty() || in->shape.back() != hidden) {
      return invalid(ctx, "input {} has shape {}; it must hold the hidden size {} along one axis", i,
                     shapeStr(in->shape), hidden);
    }
  }
  if (!optionalInput(inputs, 2)) return invalid(ctx, "input 2 (gamma) is required");
  std::vector<OutputDesc> outs{{inputs[0].type, x}};
  ir::Shape stats = x;
  stats.back() = 1;
  for (size_t o = 1; o < outputCount; ++o)
    outs.push_back({o == 3 ? inputs[0].type : ElemType::Float, o == 3 ? x : stats});
  return outs;
}

// Per row: v = input + skip (+ bias), written to output 3 when asked; then (v - mean) / sqrt(var + eps) * gamma +
// beta, or for the simplified kind v / sqrt(mean(v^2) + eps) * gamma; outputs 1 and 2 (when asked) the row's mean
// and inverse standard deviation. SkipSimplifiedLayerNormalization's input 3 is its bias in the schema, but ONNX
// Runtime's CPU kernel reads input 3 as beta, which the simplified form never uses, and input 4 as the bias: so does
// this one.
Status runSkipNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  auto in = [&](size_t i) -> const float* {
    return i < inputs.size() && inputs[i] ? inputs[i]->dataAs<float>() : nullptr;
  };
  auto out = [&](size_t o) -> float* {
    return o < outputs.size() && outputs[o] ? outputs[o]->mutableDataAs<float>() : nullptr;
  };
  const bool simplified = ctx.kind == ir::OpKind::SkipSimplifiedLayerNormalization;
  const float* px = x.dataAs<float>();
  const float* skip = in(1);
  const float* gamma = in(2);
  const float* beta = simplified ? nullptr : in(3);
  const float* bias = in(4);
  float* py = out(0);
  float* meanOut = out(1);
  float* invOut = out(2);
  float* sumOut = out(3);
  const size_t hidden = static_cast<size_t>(x.shape().back());
  const size_t skipSize = static_cast<size_t>(inputs[1]->elementCount());
  const size_t rows = hidden == 0 ? 0 : static_cast<size_t>(x.elementCount()) / hidden;
  const double eps = attrsOf<ops::LayerNormAttrs>(ctx).epsilon;
  parallelForWork(ctx, rows, hidden * 4, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const size_t offset = r * hidden;
      const float* src = px + offset;
      const float* sk = skip + offset % skipSize;
      float* dst = py + offset;
      double sum = 0, squares = 0;
      for (size_t h = 0; h < hidden; ++h) {
        float v = src[h] + sk[h];
        if (bias) v += bias[h];
        dst[h] = v;
        sum += v;
        squares += static_cast<double>(v) * v;
      }
      if (sumOut) std::copy(dst, dst + hidden, sumOut + offset);
      const double n = static_cast<double>(hidden);
      const double mean = hidden > 0 && !simplified ? sum / n : 0.0;
      const double var = hidden > 0 ? (simplified ? squares / n : std::max(0.0, squares / n - mean * mean)) : 0.0;
      const double inv = 1.0 / std::sqrt(var + eps);
      cpu::vecNormalize(dst, dst, hidden, static_cast<float>(mean), static_cast<float>(inv), gamma, beta);
      if (meanOut) meanOut[r] = static_cast<float>(mean);
      if (invOut) invOut[r] = static_cast<float>(inv);
    }
  });
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
