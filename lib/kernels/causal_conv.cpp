// CausalConvWithState (opset 27): the stateful causal depthwise 1-D convolution of Mamba's and Gated DeltaNet's short
// conv (docs/runtime.md#causal-convolution-with-state). Per batch entry and channel, seq is past_state's k - 1 values
// (zeros when absent) followed by the input's L values; output[t] = activation(bias + sum over j of weight[j] x
// seq[t + j]) and present_state is seq's last k - 1 values. Activation "none", or "silu" / "swish" (x sigmoid(x)).
// float32; float16 and bfloat16 run through float32.
#include "kernels/ops.h"

namespace ctxkit::kernels::detail {

InferResult inferCausalConv(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 4));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 2));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float) | kHalfTypes));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 0, 3));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 1, 3));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  const ir::Shape& x = inputs[0].shape;
  const ir::Shape& w = inputs[1].shape;
  const int64_t batch = x[0], channels = x[1], k = w[2];
  if (w[0] != channels || w[1] != 1 || k < 1)
    return invalid(ctx, "weight has shape {} but expected [{}, 1, k] with k >= 1 (one kernel per channel)", shapeStr(w),
                   channels);
  if (const ValueDesc* bias = optionalInput(inputs, 2)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
    if (bias->shape != ir::Shape{channels})
      return invalid(ctx, "bias has shape {} but expected [{}]", shapeStr(bias->shape), channels);
  }
  const ir::Shape state{batch, channels, k - 1};
  if (const ValueDesc* past = optionalInput(inputs, 3)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 3));
    if (past->shape != state)
      return invalid(ctx, "past_state has shape {} but expected {}", shapeStr(past->shape), shapeStr(state));
  }
  std::vector<OutputDesc> out{{inputs[0].type, x}};
  if (outputCount > 1) out.push_back({inputs[0].type, state});
  return out;
}

Status runCausalConv(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const size_t channels = static_cast<size_t>(x.shape()[1]), length = static_cast<size_t>(x.shape()[2]);
  const size_t k = static_cast<size_t>(inputs[1]->shape()[2]), carry = k - 1;
  const float* xs = x.dataAs<float>();
  const float* w = inputs[1]->dataAs<float>();
  const float* bias = inputs.size() > 2 && inputs[2] ? inputs[2]->dataAs<float>() : nullptr;
  const float* past = inputs.size() > 3 && inputs[3] ? inputs[3]->dataAs<float>() : nullptr;
  float* y = outputs[0]->mutableDataAs<float>();
  float* present = outputs.size() > 1 && outputs[1] ? outputs[1]->mutableDataAs<float>() : nullptr;
  const ops::Epilogue act{attrsOf<ops::CausalConvAttrs>(ctx).activation};
  const size_t rows = static_cast<size_t>(x.shape()[0]) * channels;
  parallelFor(ctx, rows, std::max<size_t>(1, 4096 / std::max<size_t>(1, length * k)), [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const float* in = xs + r * length;
      const float* wr = w + (r % channels) * k;
      const float* state = past ? past + r * carry : nullptr;
      // seq[p]: the carried state for p < k - 1, else the input.
      auto seq = [&](size_t p) { return p >= carry ? in[p - carry] : state ? state[p] : 0.0f; };
      float* out = y + r * length;
      for (size_t t = 0; t < length; ++t) {
        float sum = 0;
        if (t >= carry)
          for (size_t j = 0; j < k; ++j) sum += wr[j] * in[t - carry + j];
        else
          for (size_t j = 0; j < k; ++j) sum += wr[j] * seq(t + j);
        out[t] = sum + (bias ? bias[r % channels] : 0.0f);
      }
      applyFusedActivation(act, out, length);
      if (present)
        for (size_t s = 0; s < carry; ++s) present[r * carry + s] = seq(length + s);
    }
  });
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
