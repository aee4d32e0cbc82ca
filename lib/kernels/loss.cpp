// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reduction none / sum / mean, optional class weights,
// ignore_index). Inputs are [N, C, d1 ... dk] scores with [N, d1 ... dk] integer targets.
#include "kernels/ops.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

using ops::LossReduction;

Status checkLossShapes(const OpContext& ctx, InDescs inputs) {
  const auto& x = inputs[0].shape;
  const auto& t = inputs[1].shape;
  if (x.size() < 2) return invalid(ctx, "input 0 has shape {} but expected rank 2 or more (N x C ...)", shapeStr(x));
  ir::Shape expected{x[0]};
  expected.insert(expected.end(), x.begin() + 2, x.end());
  if (t != expected)
    return invalid(ctx, "input 1 (target) has shape {} but expected {} for input shape {}", shapeStr(t),
                   shapeStr(expected), shapeStr(x));
  if (const ValueDesc* w = optionalInput(inputs, 2))
    if (w->shape != ir::Shape{x[1]})
      return invalid(ctx, "input 2 (weight) has shape {} but expected [{}]", shapeStr(w->shape), x[1]);
  return Status::ok();
}

// Writes the loss of log-probabilities `logp` ([N, C, D] with D the product of d1..dk) into `out`.
template <typename T>
Status lossFromLogProb(const OpContext& ctx, const T* logp, std::span<const int64_t> xShape, const ir::Tensor& target,
                       const ir::Tensor* weight, T* out) {
  const ops::LossAttrs& a = attrsOf<ops::LossAttrs>(ctx);
  const int64_t n = xShape[0], c = xShape[1], d = dimProduct(xShape, 2, xShape.size());
  std::vector<int64_t> labels = tensorInts(target);
  const T* w = weight ? weight->dataAs<T>() : nullptr;
  std::vector<double> losses(static_cast<size_t>(n * d));
  double weightSum = 0, lossSum = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      int64_t label = labels[static_cast<size_t>(i * d + j)];
      double loss = 0, wt = 0;
      if (!(a.hasIgnoreIndex && label == a.ignoreIndex)) {
        if (label < 0 || label >= c) return invalid(ctx, "target value {} is outside [0, {})", label, c);
        wt = w ? static_cast<double>(w[label]) : 1.0;
        loss = -static_cast<double>(logp[(i * c + label) * d + j]) * wt;
      }
      losses[static_cast<size_t>(i * d + j)] = loss;
      lossSum += loss;
      weightSum += wt;
    }
  switch (a.reduction) {
    case LossReduction::None:
      for (size_t k = 0; k < losses.size(); ++k) out[k] = static_cast<T>(losses[k]);
      break;
    case LossReduction::Sum: out[0] = static_cast<T>(lossSum); break;
    case LossReduction::Mean: out[0] = static_cast<T>(weightSum == 0 ? 0.0 : lossSum / weightSum); break;
  }
  return Status::ok();
}

ir::Shape lossShape(const OpContext& ctx, const ir::Shape& target) {
  return attrsOf<ops::LossAttrs>(ctx).reduction == LossReduction::None ? target : ir::Shape{};
}

}  // namespace

InferResult inferLoss(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  const bool sce = ctx.kind == ir::OpKind::SoftmaxCrossEntropyLoss;
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, sce ? 2 : 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, kIndexTypes));
  if (optionalInput(inputs, 2)) CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
  CTX_RETURN_IF_ERROR(checkLossShapes(ctx, inputs));
  std::vector<OutputDesc> outs{{inputs[0].type, lossShape(ctx, inputs[1].shape)}};
  if (outputCount > 1) outs.push_back({inputs[0].type, inputs[0].shape});
  return outs;
}

Status runLoss(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const ir::Tensor* weight = inputs.size() > 2 ? inputs[2] : nullptr;
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    T* out = outputs[0]->mutableDataAs<T>();
    if (ctx.kind == ir::OpKind::NegativeLogLikelihoodLoss)
      return lossFromLogProb<T>(ctx, x.dataAs<T>(), x.shape(), *inputs[1], weight, out);
    // Softmax cross entropy: log-softmax over C, then the negative log likelihood.
    const int64_t n = x.shape()[0], c = x.shape()[1], d = dimProduct(x.shape(), 2, x.rank());
    std::vector<T> scratch;
    T* logp = nullptr;
    if (outputs.size() > 1 && outputs[1]) {
      logp = outputs[1]->mutableDataAs<T>();
    } else {
      scratch.resize(static_cast<size_t>(x.elementCount()));
      logp = scratch.data();
    }
    const T* px = x.dataAs<T>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        const T* src = px + i * c * d + j;
        T* dst = logp + i * c * d + j;
        double mx = -INFINITY;
        for (int64_t k = 0; k < c; ++k) mx = std::max(mx, static_cast<double>(src[k * d]));
        double sum = 0;
        for (int64_t k = 0; k < c; ++k) sum += std::exp(static_cast<double>(src[k * d]) - mx);
        double logSum = std::log(sum);
        for (int64_t k = 0; k < c; ++k) dst[k * d] = static_cast<T>(static_cast<double>(src[k * d]) - mx - logSum);
      }
    return lossFromLogProb<T>(ctx, logp, x.shape(), *inputs[1], weight, out);
  });
}

}  // namespace ctxkit::kernels::detail
