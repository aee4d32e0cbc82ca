// GroupQueryAttention (com.microsoft), the attention ONNX Runtime GenAI's model builder writes for decoder LLMs
// (docs/runtime.md#onnx-runtimes-transformer-ops): causal attention of num_heads query heads over kv_num_heads
// key/value heads, Q/K/V packed in one input or separate, a BNSH key/value cache (present = the first seqlens_k + 1 - S
// rows of past, then the new rows, then zeros), optional rotary embedding of Q and K from cos/sin caches, a local
// window and softcap. Semantics are ONNX Runtime's CPU EP's.
#include "cpu/gemm.h"
#include "kernels/ops.h"
#include "kernels/rotate.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

// Input slots (ONNX Runtime's schema).
enum : size_t { kQuery, kKey, kValue, kPastKey, kPastValue, kSeqlensK, kTotalSeqLen, kCos, kSin, kFirstUnsupported };

struct GqaDims {
  int64_t batch = 0, seq = 0, heads = 0, kvHeads = 0, headSize = 0;
  int64_t past = 0;     // rows of the past buffers
  int64_t present = 0;  // rows of the present buffers
  int64_t rotaryHalf = 0;
  bool packed = false;
};

Expected<GqaDims> gqaDims(const OpContext& ctx, InDescs inputs) {
  const ops::GroupQueryAttentionAttrs& a = attrsOf<ops::GroupQueryAttentionAttrs>(ctx);
  for (size_t i = kFirstUnsupported; i < inputs.size(); ++i)
    if (optionalInput(inputs, i))
      return unsupported(ctx, "input {} (position_ids, attention_bias, head_sink, ...) is not supported", i);
  if (a.smoothSoftmax) return unsupported(ctx, "smooth_softmax is not supported");
  const auto& q = inputs[kQuery].shape;
  if (q.size() != 3) return invalid(ctx, "input 0 (query) has shape {} but expected [batch, seq, hidden]", shapeStr(q));
  GqaDims d;
  d.batch = q[0];
  d.seq = q[1];
  d.heads = a.numHeads;
  d.kvHeads = a.kvNumHeads;
  const ValueDesc* key = optionalInput(inputs, kKey);
  const ValueDesc* value = optionalInput(inputs, kValue);
  if (!key != !value) return invalid(ctx, "inputs 1 (key) and 2 (value) must be both present or both absent");
  d.packed = key == nullptr;
  const int64_t split = d.packed ? d.heads + 2 * d.kvHeads : d.heads;
  if (q[2] % split != 0)
    return invalid(ctx, "input 0 (query) has hidden size {}, not a multiple of {} heads", q[2], split);
  d.headSize = q[2] / split;
  if (!d.packed) {
    const ir::Shape kv{d.batch, d.seq, d.kvHeads * d.headSize};
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kKey));
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kValue));
    if (key->shape != kv || value->shape != kv)
      return invalid(ctx, "key and value have shapes {} and {} but expected {}", shapeStr(key->shape),
                     shapeStr(value->shape), shapeStr(kv));
  }
  const ValueDesc* pastKey = optionalInput(inputs, kPastKey);
  const ValueDesc* pastValue = optionalInput(inputs, kPastValue);
  if (!pastKey != !pastValue) return invalid(ctx, "past_key and past_value must be both present or both absent");
  if (pastKey) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kPastKey));
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kPastValue));
    const auto& pk = pastKey->shape;
    if (pk.size() != 4 || pk[0] != d.batch || pk[1] != d.kvHeads || pk[3] != d.headSize || pastValue->shape != pk)
      return invalid(ctx, "past_key and past_value have shapes {} and {} but expected [{}, {}, past, {}]", shapeStr(pk),
                     shapeStr(pastValue->shape), d.batch, d.kvHeads, d.headSize);
    d.past = pk[2];
  }
  const ValueDesc& seqlens = inputs[kSeqlensK];
  if (seqlens.type != ElemType::Int32 || seqlens.shape != ir::Shape{d.batch})
    return invalid(ctx, "input 5 (seqlens_k) is {} {} but expected int32 [{}]", ir::elemTypeName(seqlens.type),
                   shapeStr(seqlens.shape), d.batch);
  const ValueDesc& total = inputs[kTotalSeqLen];
  if (total.type != ElemType::Int32 || dimProduct(total.shape) != 1)
    return invalid(ctx, "input 6 (total_sequence_length) is {} {} but expected one int32", ir::elemTypeName(total.type),
                   shapeStr(total.shape));
  // The present buffers hold max(total_sequence_length, past) rows; without the total's value, past + S (the
  // cache that grows by the new rows each step, as the model builder's models without a shared buffer use it).
  d.present = total.value ? std::max<int64_t>(tensorInts(*total.value)[0], d.past) : d.past + d.seq;
  if (d.present < d.seq)
    return invalid(ctx, "total_sequence_length {} is below the sequence length {}", d.present, d.seq);
  const ValueDesc* cos = optionalInput(inputs, kCos);
  const ValueDesc* sin = optionalInput(inputs, kSin);
  if (!cos != !sin) return invalid(ctx, "cos_cache and sin_cache must be both present or both absent");
  if (a.doRotary && !cos) return invalid(ctx, "do_rotary needs inputs 7 (cos_cache) and 8 (sin_cache)");
  if (cos && a.doRotary) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kCos));
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kSin));
    if (cos->shape.size() != 2 || sin->shape != cos->shape || 2 * cos->shape[1] > d.headSize ||
        cos->shape[0] < d.present)
      return invalid(ctx, "cos_cache and sin_cache have shapes {} and {} but expected [>= {}, <= {}]",
                     shapeStr(cos->shape), shapeStr(sin->shape), d.present, d.headSize / 2);
    d.rotaryHalf = cos->shape[1];
  }
  return d;
}

}  // namespace

InferResult inferGroupQueryAttention(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  // Inputs 1 to 4 are optional, 5 and 6 required.
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, std::max<size_t>(inputs.size(), 7)));
  if (!optionalInput(inputs, kSeqlensK) || !optionalInput(inputs, kTotalSeqLen))
    return invalid(ctx, "inputs 5 (seqlens_k) and 6 (total_sequence_length) are required");
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 3, 3));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, kQuery, typeBit(ElemType::Float) | kHalfTypes));
  CTX_ASSIGN_OR_RETURN(GqaDims d, gqaDims(ctx, inputs));
  const ElemType t = inputs[kQuery].type;
  const ir::Shape present{d.batch, d.kvHeads, d.present, d.headSize};
  return std::vector<OutputDesc>{{t, {d.batch, d.seq, d.heads * d.headSize}}, {t, present}, {t, present}};
}

Status runGroupQueryAttention(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ops::GroupQueryAttentionAttrs& a = attrsOf<ops::GroupQueryAttentionAttrs>(ctx);
  std::vector<ValueDesc> descs = describeInputs(inputs, true);
  CTX_ASSIGN_OR_RETURN(GqaDims d, gqaDims(ctx, descs));
  auto in = [&](size_t i) { return i < inputs.size() ? inputs[i] : nullptr; };
  const int64_t B = d.batch, S = d.seq, N = d.heads, NKV = d.kvHeads, H = d.headSize, T = d.present;
  const int32_t* seqlens = in(kSeqlensK)->dataAs<int32_t>();
  const int64_t totalSeqLen = IntView(*in(kTotalSeqLen))[0];
  // The outputs were sized when the op was prepared, possibly before total_sequence_length's value was known (then
  // for past + S rows): a run whose value asks for other present buffers is refused, never written past their end.
  const ir::Shape present{B, NKV, T, H};
  if (outputs[1]->shape() != present || outputs[2]->shape() != present || outputs[0]->shape() != ir::Shape{B, S, N * H})
    return invalid(ctx, "total_sequence_length {} needs present buffers of {} rows; the op was prepared for {}",
                   totalSeqLen, T, outputs[1]->rank() == 4 ? outputs[1]->shape()[2] : -1);
  // ONNX Runtime's three cases: the first prompt (S == total_sequence_length: no past rows are read), a subsequent
  // prompt (S > 1 with a past; batch 1 only) and token generation (S == 1).
  const bool firstPrompt = S == totalSeqLen;
  if (!firstPrompt && S > 1 && B != 1)
    return invalid(ctx, "a prompt of {} tokens after a past needs batch 1 (batch is {})", S, B);
  std::vector<int64_t> pastRows(static_cast<size_t>(B)), totals(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t total = int64_t{seqlens[b]} + 1;
    const int64_t past = firstPrompt ? 0 : total - S;
    if (total < 1 || past < 0 || past > d.past || past + S > T || (firstPrompt && total > T))
      return invalid(ctx, "seqlens_k[{}] = {} does not fit {} new rows, {} past rows and {} present rows", b,
                     seqlens[b], S, d.past, T);
    pastRows[static_cast<size_t>(b)] = past;
    totals[static_cast<size_t>(b)] = firstPrompt ? std::min(total, S) : total;
  }

  // Q as [B, N, S, H]; the new K and V rows go straight into the present buffers at each sequence's past length.
  const float* query = in(kQuery)->dataAs<float>();
  const int64_t qRow = d.packed ? (N + 2 * NKV) * H : N * H;
  std::vector<float> q(static_cast<size_t>(B * N * S * H));
  float* presentK = outputs[1]->mutableDataAs<float>();
  float* presentV = outputs[2]->mutableDataAs<float>();
  std::fill(presentK, presentK + B * NKV * T * H, 0.0f);
  std::fill(presentV, presentV + B * NKV * T * H, 0.0f);
  const float* pastK = in(kPastKey) ? in(kPastKey)->dataAs<float>() : nullptr;
  const float* pastV = in(kPastValue) ? in(kPastValue)->dataAs<float>() : nullptr;
  const float* cosCache = d.rotaryHalf ? in(kCos)->dataAs<float>() : nullptr;
  const float* sinCache = d.rotaryHalf ? in(kSin)->dataAs<float>() : nullptr;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t past = pastRows[static_cast<size_t>(b)];
    for (int64_t s = 0; s < S; ++s) {
      const float* row = query + (b * S + s) * qRow;
      const float* keyRow = d.packed ? row + N * H : in(kKey)->dataAs<float>() + (b * S + s) * NKV * H;
      const float* valueRow = d.packed ? row + (N + NKV) * H : in(kValue)->dataAs<float>() + (b * S + s) * NKV * H;
      // The rotary position: ONNX Runtime numbers a first prompt's padding rows (past seqlens_k) 1.
      const int64_t position = firstPrompt ? (s < totals[static_cast<size_t>(b)] ? s : 1) : past + s;
      const float* c = cosCache ? cosCache + position * d.rotaryHalf : nullptr;
      const float* sn = sinCache ? sinCache + position * d.rotaryHalf : nullptr;
      for (int64_t n = 0; n < N; ++n) {
        float* dst = q.data() + ((b * N + n) * S + s) * H;
        std::copy(row + n * H, row + (n + 1) * H, dst);
        if (c) rotateHead(dst, dst, c, sn, d.rotaryHalf, a.rotaryInterleaved);
      }
      for (int64_t n = 0; n < NKV; ++n) {
        float* k = presentK + ((b * NKV + n) * T + past + s) * H;
        std::copy(keyRow + n * H, keyRow + (n + 1) * H, k);
        if (c) rotateHead(k, k, c, sn, d.rotaryHalf, a.rotaryInterleaved);
        std::copy(valueRow + n * H, valueRow + (n + 1) * H, presentV + ((b * NKV + n) * T + past + s) * H);
      }
    }
    for (int64_t n = 0; n < NKV && past > 0; ++n) {
      const int64_t from = (b * NKV + n) * d.past * H, to = (b * NKV + n) * T * H;
      std::copy(pastK + from, pastK + from + past * H, presentK + to);
      std::copy(pastV + from, pastV + from + past * H, presentV + to);
    }
  }

  // Per (batch, head): scores = scale x Q K^T over the sequence's keys, softcapped, softmax over the causal keys (the
  // last local_window_size of them, the query's own included, as ONNX Runtime 1.30 counts the window), zero
  // elsewhere, then x V into the output's [B, S, N x H] rows.
  const float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(H));
  const int64_t group = N / NKV, window = a.localWindowSize;
  float* y = outputs[0]->mutableDataAs<float>();
  parallelForWork(ctx, static_cast<size_t>(B * N), static_cast<size_t>(2 * S * T * H), [&](size_t i0, size_t i1) {
    std::vector<float> probs(static_cast<size_t>(S * T));
    for (size_t i = i0; i < i1; ++i) {
      const int64_t b = static_cast<int64_t>(i) / N, n = static_cast<int64_t>(i) % N, kvh = n / group;
      const int64_t total = totals[static_cast<size_t>(b)], past = pastRows[static_cast<size_t>(b)];
      const float* k = presentK + (b * NKV + kvh) * T * H;
      const float* v = presentV + (b * NKV + kvh) * T * H;
      cpu::sgemm(false, true, static_cast<size_t>(S), static_cast<size_t>(total), static_cast<size_t>(H), scale,
                 q.data() + (b * N + n) * S * H, static_cast<size_t>(H), k, static_cast<size_t>(H), 0.0f, probs.data(),
                 static_cast<size_t>(T), nullptr);
      for (int64_t s = 0; s < S; ++s) {
        float* p = probs.data() + s * T;
        const int64_t causal = std::min(past + s + 1, total);
        const int64_t first = window > 0 && causal > window ? causal - window : 0;
        if (a.softcap > 0)
          for (int64_t j = first; j < causal; ++j) p[j] = a.softcap * std::tanh(p[j] / a.softcap);
        float mx = p[first];
        for (int64_t j = first; j < causal; ++j) mx = std::max(mx, p[j]);
        float sum = 0;
        for (int64_t j = first; j < causal; ++j) sum += p[j] = std::exp(p[j] - mx);
        for (int64_t j = first; j < causal; ++j) p[j] /= sum;
        std::fill(p, p + first, 0.0f);
        std::fill(p + causal, p + total, 0.0f);
      }
      cpu::sgemm(false, false, static_cast<size_t>(S), static_cast<size_t>(H), static_cast<size_t>(total), 1.0f,
                 probs.data(), static_cast<size_t>(T), v, static_cast<size_t>(H), 0.0f, y + (b * S * N + n) * H,
                 static_cast<size_t>(N * H), nullptr);
    }
  });
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
