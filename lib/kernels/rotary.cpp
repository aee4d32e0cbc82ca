// RotaryEmbedding (opset 23): rotates the first rotary_embedding_dim elements of each head by position-indexed
// cos/sin caches, as halves (x1 | x2) or interleaved pairs; 3-D [batch, seq, heads * head_size] or 4-D
// [batch, heads, seq, head_size] inputs; caches indexed by position_ids or per (batch, seq) without them.
#include "kernels/ops.h"

namespace ctxkit::kernels::detail {

namespace {

struct RotaryDims {
  int64_t batch = 0, seq = 0, heads = 0, headSize = 0, rotary = 0;
  bool threeD = false;
};

Expected<RotaryDims> rotaryDims(const OpContext& ctx, InDescs inputs) {
  const ops::RotaryAttrs& a = attrsOf<ops::RotaryAttrs>(ctx);
  const auto& x = inputs[0].shape;
  RotaryDims d;
  if (x.size() == 3) {
    if (a.numHeads < 1 || x[2] % a.numHeads) return invalid(ctx, "3-D input needs num_heads dividing {}", x[2]);
    d = {x[0], x[1], a.numHeads, x[2] / a.numHeads, 0, true};
  } else if (x.size() == 4) {
    d = {x[0], x[2], x[1], x[3], 0, false};
  } else {
    return invalid(ctx, "input 0 has shape {} but expected rank 3 or 4", shapeStr(x));
  }
  d.rotary = a.rotaryDim > 0 ? a.rotaryDim : d.headSize;
  if (d.rotary > d.headSize || d.rotary % 2) return invalid(ctx, "rotary_embedding_dim {} does not fit", d.rotary);
  const auto& cache = inputs[1].shape;
  if (inputs[2].shape != cache || cache.empty() || cache.back() != d.rotary / 2)
    return invalid(ctx, "cos/sin caches have shapes {} and {} but expected [..., {}]", shapeStr(cache),
                   shapeStr(inputs[2].shape), d.rotary / 2);
  if (!optionalInput(inputs, 3) && cache != ir::Shape{d.batch, d.seq, d.rotary / 2})
    return invalid(ctx, "without position_ids the caches must have shape [{}, {}, {}]", d.batch, d.seq, d.rotary / 2);
  return d;
}

}  // namespace

InferResult inferRotary(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 4));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
  CTX_RETURN_IF_ERROR(rotaryDims(ctx, inputs).status());
  return single(inputs[0].type, inputs[0].shape);
}

Status runRotary(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, false);
  CTX_ASSIGN_OR_RETURN(RotaryDims d, rotaryDims(ctx, descs));
  const bool interleaved = attrsOf<ops::RotaryAttrs>(ctx).interleaved;
  std::vector<int64_t> positions;
  if (inputs.size() > 3 && inputs[3]) positions = tensorInts(*inputs[3]);
  const int64_t half = d.rotary / 2;
  const int64_t maxPos = inputs[1]->shape()[0];
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(inputs[0]->type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* x = inputs[0]->dataAs<T>();
    const T* cosc = inputs[1]->dataAs<T>();
    const T* sinc = inputs[2]->dataAs<T>();
    T* y = outputs[0]->mutableDataAs<T>();
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t s = 0; s < d.seq; ++s) {
        int64_t row = b * d.seq + s;  // cache row without position_ids
        if (!positions.empty()) {
          row = positions[static_cast<size_t>(positions.size() == 1 ? 0 : b * d.seq + s)];
          if (row < 0 || row >= maxPos) return invalid(ctx, "position id {} is outside the cache of {}", row, maxPos);
        }
        const T* c = cosc + row * half;
        const T* sn = sinc + row * half;
        for (int64_t h = 0; h < d.heads; ++h) {
          int64_t base =
              d.threeD ? ((b * d.seq + s) * d.heads + h) * d.headSize : ((b * d.heads + h) * d.seq + s) * d.headSize;
          const T* in = x + base;
          T* out = y + base;
          for (int64_t i = 0; i < half; ++i) {
            int64_t p = interleaved ? 2 * i : i, q = interleaved ? 2 * i + 1 : i + half;
            T a = in[p], bb = in[q];
            out[p] = a * c[i] - bb * sn[i];
            out[q] = bb * c[i] + a * sn[i];
          }
          for (int64_t i = d.rotary; i < d.headSize; ++i) out[i] = in[i];
        }
      }
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
