// EmbedLayerNormalization (com.microsoft), BERT's embedding layer as ONNX Runtime's transformer optimizer fuses it
// (docs/runtime.md#onnx-runtimes-transformer-ops): per token, word_embedding[id] + position_embedding[position] (+
// segment_embedding[segment id]), layer-normalized with gamma and beta; output 1 counts each batch entry's mask
// ones, output 2 is the sum before normalization. Ids outside their table are an error.
#include "kernels/ops.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

enum : size_t { kIds, kSegmentIds, kWord, kPosition, kSegment, kGamma, kBeta, kMask, kPositionIds };

struct EmbedDims {
  int64_t batch = 0, seq = 0, hidden = 0;
};

Expected<EmbedDims> embedDims(const OpContext& ctx, InDescs inputs) {
  const auto& ids = inputs[kIds].shape;
  auto int32Like = [&](size_t slot, const char* what) -> Status {
    const ValueDesc* v = optionalInput(inputs, slot);
    if (v && (v->type != ElemType::Int32 || v->shape != ids))
      return invalid(ctx, "input {} ({}) is {} {} but expected int32 {}", slot, what, ir::elemTypeName(v->type),
                     shapeStr(v->shape), shapeStr(ids));
    return Status::ok();
  };
  if (inputs[kIds].type != ElemType::Int32 || ids.size() != 2)
    return invalid(ctx, "input 0 (input_ids) is {} {} but expected int32 [batch, seq]",
                   ir::elemTypeName(inputs[kIds].type), shapeStr(ids));
  CTX_RETURN_IF_ERROR(int32Like(kSegmentIds, "segment_ids"));
  CTX_RETURN_IF_ERROR(int32Like(kMask, "mask"));
  EmbedDims d{ids[0], ids[1], 0};
  const auto& word = inputs[kWord].shape;
  if (word.size() != 2) return invalid(ctx, "input 2 (word_embedding) has shape {} but expected 2-D", shapeStr(word));
  d.hidden = word[1];
  for (size_t slot : {kPosition, kSegment}) {
    const ValueDesc* table = optionalInput(inputs, slot);
    if (!table) continue;
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kWord, slot));
    if (table->shape.size() != 2 || table->shape[1] != d.hidden)
      return invalid(ctx, "input {} has shape {} but expected [rows, {}]", slot, shapeStr(table->shape), d.hidden);
  }
  if (!optionalInput(inputs, kSegmentIds) != !optionalInput(inputs, kSegment))
    return invalid(ctx, "segment_ids (input 1) and segment_embedding (input 4) must be both present or both absent");
  for (size_t slot : {kGamma, kBeta}) {
    const ValueDesc* v = optionalInput(inputs, slot);
    if (!v) continue;
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kWord, slot));
    if (v->shape != ir::Shape{d.hidden})
      return invalid(ctx, "input {} has shape {} but expected [{}]", slot, shapeStr(v->shape), d.hidden);
  }
  if (const ValueDesc* p = optionalInput(inputs, kPositionIds)) {
    if (p->type != ElemType::Int32 || p->shape.size() != 2 || (p->shape[0] != 1 && p->shape[0] != d.batch) ||
        p->shape[1] != d.seq)
      return invalid(ctx, "input 8 (position_ids) is {} {} but expected int32 [{} or 1, {}]", ir::elemTypeName(p->type),
                     shapeStr(p->shape), d.batch, d.seq);
  }
  return d;
}

}  // namespace

InferResult inferEmbedLayerNorm(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, inputs.size()));
  if (inputs.size() < 7) return invalid(ctx, "has {} inputs but expected at least 7", inputs.size());
  for (size_t slot : {kWord, kPosition, kGamma, kBeta})
    if (!optionalInput(inputs, slot)) return invalid(ctx, "input {} is required", slot);
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 3));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, kWord, typeBit(ElemType::Float) | kHalfTypes));
  CTX_ASSIGN_OR_RETURN(EmbedDims d, embedDims(ctx, inputs));
  const ElemType t = inputs[kWord].type;
  std::vector<OutputDesc> outs{{t, {d.batch, d.seq, d.hidden}}};
  if (outputCount > 1) outs.push_back({ElemType::Int32, {d.batch}});
  if (outputCount > 2) outs.push_back({t, {d.batch, d.seq, d.hidden}});
  return outs;
}

Status runEmbedLayerNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const float epsilon = attrsOf<ops::EmbedLayerNormAttrs>(ctx).epsilon;
  CTX_ASSIGN_OR_RETURN(EmbedDims d, embedDims(ctx, describeInputs(inputs, false)));
  auto in = [&](size_t i) { return i < inputs.size() ? inputs[i] : nullptr; };
  auto rows = [&](size_t i) { return in(i) ? in(i)->shape()[0] : 0; };
  const int64_t B = d.batch, S = d.seq, H = d.hidden;
  const int32_t* ids = in(kIds)->dataAs<int32_t>();
  const int32_t* segmentIds = in(kSegmentIds) ? in(kSegmentIds)->dataAs<int32_t>() : nullptr;
  const int32_t* positionIds = in(kPositionIds) ? in(kPositionIds)->dataAs<int32_t>() : nullptr;
  const bool positionsPerBatch = positionIds && in(kPositionIds)->shape()[0] == B;
  // Every index is checked before any row is read.
  for (int64_t i = 0; i < B * S; ++i) {
    const int64_t position = positionIds ? positionIds[positionsPerBatch ? i : i % S] : i % S;
    if (ids[i] < 0 || ids[i] >= rows(kWord))
      return invalid(ctx, "input_ids[{}] = {} is outside word_embedding's {} rows", i, ids[i], rows(kWord));
    if (position < 0 || position >= rows(kPosition))
      return invalid(ctx, "position {} of token {} is outside position_embedding's {} rows", position, i,
                     rows(kPosition));
    if (segmentIds && (segmentIds[i] < 0 || segmentIds[i] >= rows(kSegment)))
      return invalid(ctx, "segment_ids[{}] = {} is outside segment_embedding's {} rows", i, segmentIds[i],
                     rows(kSegment));
  }
  const float* word = in(kWord)->dataAs<float>();
  const float* pos = in(kPosition)->dataAs<float>();
  const float* seg = in(kSegment) ? in(kSegment)->dataAs<float>() : nullptr;
  const float* gamma = in(kGamma)->dataAs<float>();
  const float* beta = in(kBeta)->dataAs<float>();
  float* y = outputs[0]->mutableDataAs<float>();
  float* sum = outputs.size() > 2 && outputs[2] ? outputs[2]->mutableDataAs<float>() : nullptr;
  parallelForWork(ctx, static_cast<size_t>(B * S), static_cast<size_t>(4 * H), [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      const int64_t t = static_cast<int64_t>(i);
      const int64_t position = positionIds ? positionIds[positionsPerBatch ? t : t % S] : t % S;
      const float* w = word + ids[t] * H;
      const float* p = pos + position * H;
      const float* g = seg ? seg + segmentIds[t] * H : nullptr;
      float* row = y + t * H;
      double mean = 0;
      for (int64_t e = 0; e < H; ++e) {
        row[e] = w[e] + p[e] + (g ? g[e] : 0.0f);
        mean += row[e];
      }
      if (sum) std::copy(row, row + H, sum + t * H);
      mean /= static_cast<double>(H);
      double var = 0;
      for (int64_t e = 0; e < H; ++e) var += (row[e] - mean) * (row[e] - mean);
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(H) + epsilon);
      for (int64_t e = 0; e < H; ++e) row[e] = static_cast<float>((row[e] - mean) * inv) * gamma[e] + beta[e];
    }
  });
  if (outputs.size() > 1 && outputs[1]) {
    int32_t* count = outputs[1]->mutableDataAs<int32_t>();
    const int32_t* mask = in(kMask) ? in(kMask)->dataAs<int32_t>() : nullptr;
    for (int64_t b = 0; b < B; ++b) {
      count[b] = 0;
      for (int64_t s = 0; mask && s < S; ++s) count[b] += mask[b * S + s] == 1;
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
