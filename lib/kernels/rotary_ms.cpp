// RotaryEmbedding (com.microsoft), ONNX Runtime's own rotary embedding (docs/runtime.md#onnx-runtimes-transformer-ops):
// input [batch, seq, hidden] or [batch, heads, seq, head_size], position_ids one offset (position = offset + s) or
// [batch, seq], cos/sin caches [max_position, rotary_dim / 2]; the first rotary_dim elements of each head rotate as
// halves or interleaved pairs, the rest pass through. Semantics are ONNX Runtime's CPU EP's.
#include "kernels/ops.h"
#include "kernels/rotate.h"

namespace ctxkit::kernels::detail {

namespace {

struct RotaryMsDims {
  int64_t batch = 0, seq = 0, heads = 0, headSize = 0, rotary = 0, maxPosition = 0;
  bool transposed = false;  // [batch, heads, seq, head_size]
  bool offset = false;      // position_ids is one offset
};

Expected<RotaryMsDims> rotaryMsDims(const OpContext& ctx, InDescs inputs) {
  const ops::RotaryAttrs& a = attrsOf<ops::RotaryAttrs>(ctx);
  const auto& x = inputs[0].shape;
  const auto& cache = inputs[2].shape;
  if (x.size() != 3 && x.size() != 4) return invalid(ctx, "input 0 has shape {} but expected rank 3 or 4", shapeStr(x));
  if (cache.size() != 2 || inputs[3].shape != cache || cache[1] < 1)
    return invalid(ctx, "cos_cache and sin_cache have shapes {} and {} but expected one [max_position, rotary_dim / 2]",
                   shapeStr(cache), shapeStr(inputs[3].shape));
  if (a.rotaryDim > 0 && a.numHeads < 1) return invalid(ctx, "rotary_embedding_dim needs the attribute num_heads");
  RotaryMsDims d;
  d.transposed = x.size() == 4;
  d.batch = x[0];
  d.seq = d.transposed ? x[2] : x[1];
  const int64_t hidden = d.transposed ? x[1] * x[3] : x[2];
  // ONNX Runtime's rule: without rotary_embedding_dim the head is as wide as the caches' rotation.
  d.headSize = a.rotaryDim > 0 ? hidden / a.numHeads : 2 * cache[1];
  d.heads = a.numHeads > 0 ? a.numHeads : (d.headSize > 0 ? hidden / d.headSize : 0);
  d.rotary = a.rotaryDim > 0 ? a.rotaryDim : d.headSize;
  if (d.headSize < 1 || d.heads * d.headSize != hidden || (d.transposed && (x[1] != d.heads || x[3] != d.headSize)))
    return invalid(ctx, "input 0 of shape {} does not split into heads of {} elements", shapeStr(x), d.headSize);
  if (d.rotary > d.headSize || d.rotary != 2 * cache[1])
    return invalid(ctx, "rotary dimension {} does not fit heads of {} and caches of {} angles", d.rotary, d.headSize,
                   cache[1]);
  d.maxPosition = cache[0];
  const ValueDesc& pos = inputs[1];
  if (pos.type != ElemType::Int64) return invalid(ctx, "input 1 (position_ids) must be int64");
  d.offset = dimProduct(pos.shape) == 1 && pos.shape.size() <= 1;
  if (!d.offset && pos.shape != ir::Shape{d.batch, d.seq})
    return invalid(ctx, "input 1 (position_ids) has shape {} but expected one offset or [{}, {}]", shapeStr(pos.shape),
                   d.batch, d.seq);
  return d;
}

}  // namespace

InferResult inferRotaryMs(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 4, 4));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float) | kHalfTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 3));
  CTX_RETURN_IF_ERROR(rotaryMsDims(ctx, inputs).status());
  return single(inputs[0].type, inputs[0].shape);
}

Status runRotaryMs(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, false);
  CTX_ASSIGN_OR_RETURN(RotaryMsDims d, rotaryMsDims(ctx, descs));
  const bool interleaved = attrsOf<ops::RotaryAttrs>(ctx).interleaved;
  const int64_t* positions = inputs[1]->dataAs<int64_t>();
  const float* x = inputs[0]->dataAs<float>();
  const float* cosCache = inputs[2]->dataAs<float>();
  const float* sinCache = inputs[3]->dataAs<float>();
  float* y = outputs[0]->mutableDataAs<float>();
  const int64_t half = d.rotary / 2;
  if (d.offset && (positions[0] < 0 || positions[0] > d.maxPosition))  // before positions[0] + s can overflow
    return invalid(ctx, "position offset {} is outside the caches' {} rows", positions[0], d.maxPosition);
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t s = 0; s < d.seq; ++s) {
      const int64_t position = d.offset ? positions[0] + s : positions[b * d.seq + s];
      if (position < 0 || position >= d.maxPosition)
        return invalid(ctx, "position {} (batch {}, token {}) is outside the caches' {} rows", position, b, s,
                       d.maxPosition);
      const float* c = cosCache + position * half;
      const float* sn = sinCache + position * half;
      for (int64_t h = 0; h < d.heads; ++h) {
        const int64_t base =
            d.transposed ? ((b * d.heads + h) * d.seq + s) * d.headSize : ((b * d.seq + s) * d.heads + h) * d.headSize;
        const float* in = x + base;
        float* out = y + base;
        rotateHead(in, out, c, sn, half, interleaved);
        std::copy(in + d.rotary, in + d.headSize, out + d.rotary);
      }
    }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
