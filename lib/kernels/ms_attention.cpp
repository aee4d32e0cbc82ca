// ONNX Runtime's BERT-style attention ops (com.microsoft), as its CPU EP computes them
// (docs/runtime.md#onnx-runtimes-transformer-ops):
//  - MultiHeadAttention: Q, K and V as [batch, seq, hidden] (K and V may come as [batch, heads, kv_seq, head_size],
//    already projected), an optional projection bias, key padding mask, attention bias and a BNSH key/value cache;
//  - Attention: the Q/K/V projection of one input by merged weights, a mask index in any of the forms the CPU EP
//    reads, an attention bias and a (2, batch, heads, past, head_size) cache.
// Both score scale x QK' plus the attention bias plus the mask (mask_filter_value where a key is masked, the lowest
// float above the diagonal when unidirectional), softmax over every key, then x V.
#include "cpu/gemm.h"
#include "kernels/ops.h"

#include <cmath>
#include <limits>

namespace ctxkit::kernels::detail {

namespace {

// The sizes both ops reduce to: B batches, N heads, S queries, L new keys after P past ones (T = P + L), head sizes H
// (Q and K) and Hv (V).
struct AttendDims {
  int64_t batch = 0, heads = 0, seq = 0, kvSeq = 0, past = 0, headSize = 0, vHeadSize = 0;
  int64_t total() const { return past + kvSeq; }
};

// The mask forms the CPU EP reads, turned into an additive [B, S, T] mask.
enum class MaskForm { None, EndPositions, EndAndStart, Raw2D, Raw3D };

Expected<MaskForm> maskForm(const OpContext& ctx, const ValueDesc* mask, const AttendDims& d, size_t slot) {
  if (!mask) return MaskForm::None;
  if (mask->type != ElemType::Int32)
    return invalid(ctx, "input {} (mask) is {} but expected int32", slot, ir::elemTypeName(mask->type));
  const auto& m = mask->shape;
  const int64_t B = d.batch, S = d.seq, T = d.total();
  if (m == ir::Shape{B}) return MaskForm::EndPositions;
  if (m == ir::Shape{2 * B}) return MaskForm::EndAndStart;
  if (m == ir::Shape{B, T}) return MaskForm::Raw2D;
  if (m == ir::Shape{B, S, T}) return MaskForm::Raw3D;
  return unsupported(ctx, "input {} (mask) has shape {}; the forms supported are [{}], [{}], [{}, {}] and [{}, {}, {}]",
                     slot, shapeStr(m), B, 2 * B, B, T, B, S, T);
}

// The additive [B, S, T] mask of `form` from `mask`, with the causal part when `causal`.
void buildMask(MaskForm form, const int32_t* mask, const AttendDims& d, bool causal, float filter, float* out) {
  const int64_t B = d.batch, S = d.seq, T = d.total();
  std::fill(out, out + B * S * T, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    float* rows = out + b * S * T;
    switch (form) {
      case MaskForm::None: break;
      case MaskForm::EndPositions:
      case MaskForm::EndAndStart: {
        const int64_t end = std::clamp<int64_t>(mask[b], 0, T);
        std::fill(rows + end, rows + T, filter);
        if (form == MaskForm::EndAndStart) std::fill(rows, rows + std::clamp<int64_t>(mask[B + b], 0, T), filter);
        break;
      }
      case MaskForm::Raw2D:
        for (int64_t t = 0; t < T; ++t) rows[t] = mask[b * T + t] > 0 ? 0.0f : filter;
        break;
      case MaskForm::Raw3D:
        for (int64_t i = 0; i < S * T; ++i) rows[i] = mask[b * S * T + i] > 0 ? 0.0f : filter;
        break;
    }
    if (form != MaskForm::Raw3D)
      for (int64_t s = 1; s < S; ++s) std::copy(rows, rows + T, rows + s * T);
    if (causal)
      for (int64_t s = 0; s < S; ++s)
        std::fill(rows + s * T + std::min(T, d.past + s + 1), rows + (s + 1) * T, std::numeric_limits<float>::lowest());
  }
}

// The attention bias [B or 1, N or 1, S, T].
Status checkAttentionBias(const OpContext& ctx, const ValueDesc* bias, const AttendDims& d, size_t slot) {
  if (!bias) return Status::ok();
  const auto& a = bias->shape;
  if (a.size() != 4 || (a[0] != 1 && a[0] != d.batch) || (a[1] != 1 && a[1] != d.heads) || a[2] != d.seq ||
      a[3] != d.total())
    return invalid(ctx, "input {} (attention_bias) has shape {} but expected [{} or 1, {} or 1, {}, {}]", slot,
                   shapeStr(a), d.batch, d.heads, d.seq, d.total());
  return Status::ok();
}

// y[B, S, N x Hv] from q [B, N, S, H] and the caches k [B, N, T, H], v [B, N, T, Hv]: per (batch, head) scores =
// scale x q k' (+ bias) (+ mask), softmax over the T keys, x v.
void attend(const OpContext& ctx, const AttendDims& d, float scale, const float* q, const float* k, const float* v,
            const float* mask, const ir::Tensor* bias, float* y) {
  const int64_t B = d.batch, N = d.heads, S = d.seq, T = d.total(), H = d.headSize, Hv = d.vHeadSize;
  const float* biasData = bias ? bias->dataAs<float>() : nullptr;
  const bool biasPerBatch = bias && bias->shape()[0] != 1, biasPerHead = bias && bias->shape()[1] != 1;
  parallelForWork(ctx, static_cast<size_t>(B * N), static_cast<size_t>(S * T * (H + Hv)), [&](size_t i0, size_t i1) {
    std::vector<float> probs(static_cast<size_t>(S * T));
    for (size_t i = i0; i < i1; ++i) {
      const int64_t b = static_cast<int64_t>(i) / N, n = static_cast<int64_t>(i) % N;
      float beta = 0;
      if (biasData) {
        const float* from = biasData + ((biasPerBatch ? b * (biasPerHead ? N : 1) : 0) + (biasPerHead ? n : 0)) * S * T;
        std::copy(from, from + S * T, probs.begin());
        if (mask)
          for (int64_t j = 0; j < S * T; ++j) probs[static_cast<size_t>(j)] += mask[b * S * T + j];
        beta = 1;
      } else if (mask) {
        std::copy(mask + b * S * T, mask + (b + 1) * S * T, probs.begin());
        beta = 1;
      }
      cpu::sgemm(false, true, static_cast<size_t>(S), static_cast<size_t>(T), static_cast<size_t>(H), scale,
                 q + i * S * H, static_cast<size_t>(H), k + i * T * H, static_cast<size_t>(H), beta, probs.data(),
                 static_cast<size_t>(T), nullptr);
      for (int64_t s = 0; s < S; ++s) {
        float* p = probs.data() + s * T;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < T; ++j) mx = std::max(mx, p[j]);
        float sum = 0;
        for (int64_t j = 0; j < T; ++j) sum += p[j] = std::exp(p[j] - mx);
        for (int64_t j = 0; j < T; ++j) p[j] /= sum;
      }
      cpu::sgemm(false, false, static_cast<size_t>(S), static_cast<size_t>(Hv), static_cast<size_t>(T), 1.0f,
                 probs.data(), static_cast<size_t>(T), v + i * T * Hv, static_cast<size_t>(Hv), 0.0f,
                 y + (b * S * N + n) * Hv, static_cast<size_t>(N * Hv), nullptr);
    }
  });
}

// dst[B, N, rows, h] rows [offset, offset + S) from src[B, S, N x h] (+ bias[N x h]).
void toHeads(const float* src, const float* bias, int64_t B, int64_t S, int64_t N, int64_t h, int64_t rows,
             int64_t offset, float* dst) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t n = 0; n < N; ++n) {
        const float* from = src + ((b * S + s) * N + n) * h;
        float* to = dst + ((b * N + n) * rows + offset + s) * h;
        for (int64_t e = 0; e < h; ++e) to[e] = from[e] + (bias ? bias[n * h + e] : 0.0f);
      }
}

// The cache [B, N, P + L, h]: the past's P rows of each head, then the L new ones.
void concatPast(const float* past, int64_t B, int64_t N, int64_t P, int64_t T, int64_t h, float* cache) {
  for (int64_t i = 0; i < B * N; ++i) std::copy(past + i * P * h, past + (i + 1) * P * h, cache + i * T * h);
}

float scaleFor(float attr, int64_t headSize) {
  return attr != 0 ? attr : 1.0f / std::sqrt(static_cast<float>(headSize));
}

// ---- MultiHeadAttention ----------------------------------------------------------------------------------------

enum : size_t { kQuery, kKey, kValue, kBias, kPaddingMask, kAttnBias, kPastKey, kPastValue, kPastSeqLen, kCacheIndir };

struct MhaDims {
  AttendDims d;
  bool kvHeads = false;  // K and V given as [B, N, L, H]: already projected, no bias added
};

Expected<MhaDims> mhaDims(const OpContext& ctx, InDescs inputs) {
  const ops::MsAttentionAttrs& a = attrsOf<ops::MsAttentionAttrs>(ctx);
  for (size_t i : {kPastSeqLen, kCacheIndir})
    if (optionalInput(inputs, i))
      return unsupported(ctx,
                         "input {} (past_sequence_length or cache_indirection: a shared KV buffer) is not "
                         "supported",
                         i);
  const auto& q = inputs[kQuery].shape;
  if (q.size() != 3)
    return unsupported(ctx,
                       "input 0 (query) has shape {}; only [batch, seq, hidden] is supported (ONNX Runtime's CPU "
                       "EP has no packed QKV either)",
                       shapeStr(q));
  const ValueDesc* key = optionalInput(inputs, kKey);
  const ValueDesc* value = optionalInput(inputs, kValue);
  if (!key || !value)
    return unsupported(ctx, "inputs 1 (key) and 2 (value) are required (packed QKV is not supported)");
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kKey));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kValue));
  MhaDims m;
  AttendDims& d = m.d;
  d.batch = q[0];
  d.seq = q[1];
  d.heads = a.numHeads;
  if (q[2] % d.heads) return invalid(ctx, "query hidden size {} is not a multiple of num_heads {}", q[2], d.heads);
  d.headSize = q[2] / d.heads;
  const auto& k = key->shape;
  const auto& v = value->shape;
  if (k.size() == 3 && v.size() == 3) {
    if (k[0] != d.batch || v[0] != d.batch || k[1] != v[1] || k[2] != q[2] || v[2] % d.heads)
      return invalid(ctx, "key and value have shapes {} and {}; expected [{}, L, {}] and [{}, L, N x Hv]", shapeStr(k),
                     shapeStr(v), d.batch, q[2], d.batch);
    d.kvSeq = k[1];
    d.vHeadSize = v[2] / d.heads;
  } else if (k.size() == 4 && v.size() == 4) {
    if (k[0] != d.batch || k[1] != d.heads || k[3] != d.headSize || v[0] != d.batch || v[1] != d.heads || v[2] != k[2])
      return invalid(ctx, "key and value have shapes {} and {}; expected [{}, {}, L, {}] and [{}, {}, L, Hv]",
                     shapeStr(k), shapeStr(v), d.batch, d.heads, d.headSize, d.batch, d.heads);
    m.kvHeads = true;
    d.kvSeq = k[2];
    d.vHeadSize = v[3];
  } else {
    return unsupported(ctx,
                       "key and value have shapes {} and {}; supported: both [batch, seq, hidden] or both [batch, "
                       "heads, seq, head_size] (packed KV is not supported)",
                       shapeStr(k), shapeStr(v));
  }
  if (const ValueDesc* bias = optionalInput(inputs, kBias)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kBias));
    if (bias->shape != ir::Shape{2 * d.heads * d.headSize + d.heads * d.vHeadSize})
      return invalid(ctx, "input 3 (bias) has shape {} but expected [{}]", shapeStr(bias->shape),
                     2 * d.heads * d.headSize + d.heads * d.vHeadSize);
    if (m.kvHeads) return unsupported(ctx, "a bias with key and value already in heads is not supported");
  }
  const ValueDesc* pastKey = optionalInput(inputs, kPastKey);
  const ValueDesc* pastValue = optionalInput(inputs, kPastValue);
  if (!pastKey != !pastValue) return invalid(ctx, "past_key and past_value must be both present or both absent");
  if (pastKey) {
    if (m.kvHeads) return invalid(ctx, "a past cache needs key and value as [batch, seq, hidden]");
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kPastKey));
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kQuery, kPastValue));
    const auto& pk = pastKey->shape;
    const auto& pv = pastValue->shape;
    if (pk.size() != 4 || pk[0] != d.batch || pk[1] != d.heads || pk[3] != d.headSize || pv.size() != 4 ||
        pv[0] != d.batch || pv[1] != d.heads || pv[2] != pk[2] || pv[3] != d.vHeadSize)
      return invalid(ctx,
                     "past_key and past_value have shapes {} and {} but expected [{}, {}, past, {}] and [{}, {}, "
                     "past, {}]",
                     shapeStr(pk), shapeStr(pv), d.batch, d.heads, d.headSize, d.batch, d.heads, d.vHeadSize);
    d.past = pk[2];
  }
  CTX_RETURN_IF_ERROR(maskForm(ctx, optionalInput(inputs, kPaddingMask), d, kPaddingMask).status());
  CTX_RETURN_IF_ERROR(checkAttentionBias(ctx, optionalInput(inputs, kAttnBias), d, kAttnBias));
  return m;
}

// ---- Attention -------------------------------------------------------------------------------------------------

enum : size_t { kInput, kWeights, kQkvBias, kMaskIndex, kPast, kAttentionBias, kPastSequenceLength };

Expected<AttendDims> attentionDims(const OpContext& ctx, InDescs inputs) {
  const ops::MsAttentionAttrs& a = attrsOf<ops::MsAttentionAttrs>(ctx);
  if (a.doRotary) return unsupported(ctx, "do_rotary is not supported");
  if (a.pastPresentShareBuffer || optionalInput(inputs, kPastSequenceLength))
    return unsupported(ctx, "past_present_share_buffer (input 6, past_sequence_length) is not supported");
  const auto& x = inputs[kInput].shape;
  const auto& w = inputs[kWeights].shape;
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kInput, kWeights));
  if (x.size() != 3 || w.size() != 2 || w[0] != x[2])
    return invalid(ctx, "input and weights have shapes {} and {} but expected [batch, seq, in] and [in, 3 x hidden]",
                   shapeStr(x), shapeStr(w));
  int64_t dq = w[1] / 3, dk = dq, dv = dq;
  if (const auto& sizes = a.qkvHiddenSizes) {
    if (sizes->size() != 3) return invalid(ctx, "attribute qkv_hidden_sizes must have 3 values");
    dq = (*sizes)[0], dk = (*sizes)[1], dv = (*sizes)[2];
  }
  if (dq + dk + dv != w[1] || dq != dk || dq % a.numHeads || dv % a.numHeads || dq <= 0 || dv <= 0)
    return invalid(ctx,
                   "weights have {} columns; expected hidden sizes Q = K and V, multiples of num_heads {}, adding "
                   "up to them",
                   w[1], a.numHeads);
  AttendDims d;
  d.batch = x[0];
  d.seq = d.kvSeq = x[1];
  d.heads = a.numHeads;
  d.headSize = dq / d.heads;
  d.vHeadSize = dv / d.heads;
  if (const ValueDesc* bias = optionalInput(inputs, kQkvBias)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kInput, kQkvBias));
    if (bias->shape != ir::Shape{w[1]})
      return invalid(ctx, "input 2 (bias) has shape {} but expected [{}]", shapeStr(bias->shape), w[1]);
  }
  if (const ValueDesc* past = optionalInput(inputs, kPast)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, kInput, kPast));
    const auto& p = past->shape;
    if (d.headSize != d.vHeadSize || p.size() != 5 || p[0] != 2 || p[1] != d.batch || p[2] != d.heads ||
        p[4] != d.headSize)
      return invalid(ctx,
                     "input 4 (past) has shape {} but expected [2, {}, {}, past, {}] (and V's head size equal to "
                     "Q's)",
                     shapeStr(p), d.batch, d.heads, d.headSize);
    d.past = p[3];
  }
  CTX_RETURN_IF_ERROR(maskForm(ctx, optionalInput(inputs, kMaskIndex), d, kMaskIndex).status());
  CTX_RETURN_IF_ERROR(checkAttentionBias(ctx, optionalInput(inputs, kAttentionBias), d, kAttentionBias));
  return d;
}

const ir::Tensor* in(RunIns inputs, size_t i) { return i < inputs.size() ? inputs[i] : nullptr; }
ir::Tensor* out(RunOuts outputs, size_t i) { return i < outputs.size() ? outputs[i] : nullptr; }

// The additive mask of run-time input `slot` (with the causal part), or null when there is neither.
const float* maskFor(const OpContext& ctx, RunIns inputs, size_t slot, const AttendDims& d, std::vector<float>& buf) {
  const ops::MsAttentionAttrs& a = attrsOf<ops::MsAttentionAttrs>(ctx);
  const ir::Tensor* mask = in(inputs, slot);
  const bool causal = a.unidirectional && d.seq > 1;
  if (!mask && !causal) return nullptr;
  MaskForm form = MaskForm::None;
  if (mask) {
    const ir::Shape& m = mask->shape();
    form = m.size() == 3     ? MaskForm::Raw3D
           : m.size() == 2   ? MaskForm::Raw2D
           : m[0] == d.batch ? MaskForm::EndPositions
                             : MaskForm::EndAndStart;
  }
  buf.resize(static_cast<size_t>(d.batch * d.seq * d.total()));
  buildMask(form, mask ? mask->dataAs<int32_t>() : nullptr, d, causal, a.maskFilterValue, buf.data());
  return buf.data();
}

}  // namespace

InferResult inferMultiHeadAttention(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, inputs.size()));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 3));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, kQuery, typeBit(ElemType::Float) | kHalfTypes));
  CTX_ASSIGN_OR_RETURN(MhaDims m, mhaDims(ctx, inputs));
  const AttendDims& d = m.d;
  const ElemType t = inputs[kQuery].type;
  std::vector<OutputDesc> outs{{t, {d.batch, d.seq, d.heads * d.vHeadSize}}};
  if (outputCount > 1) outs.push_back({t, {d.batch, d.heads, d.total(), d.headSize}});
  if (outputCount > 2) outs.push_back({t, {d.batch, d.heads, d.total(), d.vHeadSize}});
  return outs;
}

Status runMultiHeadAttention(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ops::MsAttentionAttrs& a = attrsOf<ops::MsAttentionAttrs>(ctx);
  CTX_ASSIGN_OR_RETURN(MhaDims m, mhaDims(ctx, describeInputs(inputs, false)));
  const AttendDims& d = m.d;
  const int64_t B = d.batch, N = d.heads, S = d.seq, L = d.kvSeq, P = d.past, T = d.total(), H = d.headSize,
                Hv = d.vHeadSize;
  const float* bias = in(inputs, kBias) ? in(inputs, kBias)->dataAs<float>() : nullptr;
  std::vector<float> q(static_cast<size_t>(B * N * S * H));
  toHeads(in(inputs, kQuery)->dataAs<float>(), bias, B, S, N, H, S, 0, q.data());
  const float* k = in(inputs, kKey)->dataAs<float>();
  const float* v = in(inputs, kValue)->dataAs<float>();
  // The caches [B, N, T, h]: the present outputs when the graph asks for them, else scratch.
  std::vector<float> kScratch, vScratch;
  if (!m.kvHeads) {
    ir::Tensor* presentK = out(outputs, 1);
    ir::Tensor* presentV = out(outputs, 2);
    float* kc = presentK ? presentK->mutableDataAs<float>() : (kScratch.resize(B * N * T * H), kScratch.data());
    float* vc = presentV ? presentV->mutableDataAs<float>() : (vScratch.resize(B * N * T * Hv), vScratch.data());
    if (P > 0) {
      concatPast(in(inputs, kPastKey)->dataAs<float>(), B, N, P, T, H, kc);
      concatPast(in(inputs, kPastValue)->dataAs<float>(), B, N, P, T, Hv, vc);
    }
    toHeads(k, bias ? bias + N * H : nullptr, B, L, N, H, T, P, kc);
    toHeads(v, bias ? bias + 2 * N * H : nullptr, B, L, N, Hv, T, P, vc);
    k = kc;
    v = vc;
  } else {
    // Already in heads: the present outputs (when asked for) are copies.
    if (ir::Tensor* presentK = out(outputs, 1)) std::copy(k, k + B * N * T * H, presentK->mutableDataAs<float>());
    if (ir::Tensor* presentV = out(outputs, 2)) std::copy(v, v + B * N * T * Hv, presentV->mutableDataAs<float>());
  }
  std::vector<float> maskBuf;
  const float* mask = maskFor(ctx, inputs, kPaddingMask, d, maskBuf);
  attend(ctx, d, scaleFor(a.scale, H), q.data(), k, v, mask, in(inputs, kAttnBias), outputs[0]->mutableDataAs<float>());
  return Status::ok();
}

InferResult inferMsAttention(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, inputs.size()));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 2));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, kInput, typeBit(ElemType::Float) | kHalfTypes));
  CTX_ASSIGN_OR_RETURN(AttendDims d, attentionDims(ctx, inputs));
  const ElemType t = inputs[kInput].type;
  std::vector<OutputDesc> outs{{t, {d.batch, d.seq, d.heads * d.vHeadSize}}};
  if (outputCount > 1) outs.push_back({t, {2, d.batch, d.heads, d.total(), d.headSize}});
  return outs;
}

Status runMsAttention(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ops::MsAttentionAttrs& a = attrsOf<ops::MsAttentionAttrs>(ctx);
  CTX_ASSIGN_OR_RETURN(AttendDims d, attentionDims(ctx, describeInputs(inputs, false)));
  const int64_t B = d.batch, N = d.heads, S = d.seq, P = d.past, T = d.total(), H = d.headSize, Hv = d.vHeadSize;
  const ir::Tensor& x = *in(inputs, kInput);
  const ir::Tensor& w = *in(inputs, kWeights);
  const int64_t width = x.shape()[2], cols = w.shape()[1];
  // QKV[B x S, cols] = input x weights + bias, then Q [B, N, S, H] and the K/V caches [B, N, T, h].
  std::vector<float> qkv(static_cast<size_t>(B * S * cols));
  if (const ir::Tensor* bias = in(inputs, kQkvBias))
    for (int64_t r = 0; r < B * S; ++r) std::copy(bias->dataAs<float>(), bias->dataAs<float>() + cols, &qkv[r * cols]);
  cpu::sgemm(false, false, static_cast<size_t>(B * S), static_cast<size_t>(cols), static_cast<size_t>(width), 1.0f,
             x.dataAs<float>(), static_cast<size_t>(width), w.dataAs<float>(), static_cast<size_t>(cols),
             in(inputs, kQkvBias) ? 1.0f : 0.0f, qkv.data(), static_cast<size_t>(cols), nullptr);
  std::vector<float> q(static_cast<size_t>(B * N * S * H)), cache;
  // Row r of QKV holds Q (N x H), K (N x H), V (N x Hv): viewed as [B, S, N, h] with a row stride of `cols`.
  auto split = [&](int64_t offset, int64_t h, int64_t rows, int64_t at, float* dst) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t n = 0; n < N; ++n) {
          const float* from = qkv.data() + (b * S + s) * cols + offset + n * h;
          std::copy(from, from + h, dst + ((b * N + n) * rows + at + s) * h);
        }
  };
  split(0, H, S, 0, q.data());
  ir::Tensor* present = out(outputs, 1);
  float* kc = present ? present->mutableDataAs<float>() : (cache.resize(B * N * T * (H + Hv)), cache.data());
  float* vc = kc + B * N * T * H;
  if (P > 0) {
    const float* past = in(inputs, kPast)->dataAs<float>();
    concatPast(past, B, N, P, T, H, kc);
    concatPast(past + B * N * P * H, B, N, P, T, Hv, vc);
  }
  split(N * H, H, T, P, kc);
  split(2 * N * H, Hv, T, P, vc);
  std::vector<float> maskBuf;
  const float* mask = maskFor(ctx, inputs, kMaskIndex, d, maskBuf);
  attend(ctx, d, scaleFor(a.scale, H), q.data(), kc, vc, mask, in(inputs, kAttentionBias),
         outputs[0]->mutableDataAs<float>());
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
