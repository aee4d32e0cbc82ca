// Attention (opset 23/24): scaled dot-product attention over 3-D [batch, seq, heads * head_size] or 4-D
// [batch, heads, seq, head_size] inputs, with grouped-query heads, an optional boolean or additive mask
// (padded with -inf past its last column), causal masking offset by the past length (or by
// nonpad_kv_seqlen), softcap, a key/value cache (present = past ++ new) and the optional QK output.
#include "kernels/ops.h"

#include <cmath>
#include <limits>

namespace ctxkit::kernels::detail {

namespace {

struct AttentionDims {
  bool threeD = false;
  int64_t batch = 0, qHeads = 0, kvHeads = 0, qSeq = 0, kvSeq = 0, past = 0, headSize = 0, vHeadSize = 0;
  int64_t total() const { return past + kvSeq; }
};

const ValueDesc* slot(InDescs inputs, size_t i) { return optionalInput(inputs, i); }

Expected<AttentionDims> attentionDims(const OpContext& ctx, InDescs inputs) {
  const ops::AttentionAttrs& a = attrsOf<ops::AttentionAttrs>(ctx);
  const auto& q = inputs[0].shape;
  const auto& k = inputs[1].shape;
  const auto& v = inputs[2].shape;
  AttentionDims d;
  if (q.size() != k.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4))
    return invalid(ctx, "Q, K and V have shapes {}, {} and {} but expected all 3-D or all 4-D", shapeStr(q),
                   shapeStr(k), shapeStr(v));
  d.threeD = q.size() == 3;
  d.batch = q[0];
  if (d.threeD) {
    if (a.qNumHeads < 1 || a.kvNumHeads < 1)
      return invalid(ctx, "3-D inputs need the attributes q_num_heads and kv_num_heads");
    d.qHeads = a.qNumHeads;
    d.kvHeads = a.kvNumHeads;
    if (q[2] % d.qHeads || k[2] % d.kvHeads || v[2] % d.kvHeads)
      return invalid(ctx, "hidden sizes {}, {}, {} are not multiples of the head counts", q[2], k[2], v[2]);
    d.qSeq = q[1];
    d.kvSeq = k[1];
    d.headSize = q[2] / d.qHeads;
    d.vHeadSize = v[2] / d.kvHeads;
    if (k[2] / d.kvHeads != d.headSize) return invalid(ctx, "Q and K head sizes differ");
  } else {
    d.qHeads = q[1];
    d.kvHeads = k[1];
    d.qSeq = q[2];
    d.kvSeq = k[2];
    d.headSize = q[3];
    d.vHeadSize = v[3];
    if (k[3] != d.headSize || v[1] != d.kvHeads || v[2] != d.kvSeq) return invalid(ctx, "K and V shapes disagree");
  }
  if (k[0] != d.batch || v[0] != d.batch) return invalid(ctx, "Q, K and V batch sizes differ");
  if (d.kvHeads < 1 || d.qHeads % d.kvHeads != 0)
    return invalid(ctx, "{} query heads are not a multiple of {} key/value heads", d.qHeads, d.kvHeads);
  if (const ValueDesc* pk = slot(inputs, 4)) {
    if (pk->shape.size() != 4 || pk->shape[0] != d.batch || pk->shape[1] != d.kvHeads || pk->shape[3] != d.headSize)
      return invalid(ctx, "past_key has shape {}", shapeStr(pk->shape));
    d.past = pk->shape[2];
    const ValueDesc* pv = slot(inputs, 5);
    if (!pv || pv->shape != ir::Shape{d.batch, d.kvHeads, d.past, d.vHeadSize})
      return invalid(ctx, "past_value must accompany past_key with shape [{}, {}, {}, {}]", d.batch, d.kvHeads, d.past,
                     d.vHeadSize);
  }
  if (const ValueDesc* m = slot(inputs, 3)) {
    const auto& ms = m->shape;
    if (ms.empty() || ms.size() > 4 || ms.back() > d.total())
      return invalid(ctx, "attn_mask has shape {} for {} keys", shapeStr(ms), d.total());
    ir::Shape target{d.batch, d.qHeads, d.qSeq, ms.back()};
    if (!broadcastsTo(ms, target))
      return invalid(ctx, "attn_mask of shape {} does not broadcast to {}", shapeStr(ms), shapeStr(target));
  }
  return d;
}

// Copies a 3-D [B, S, H * D] or 4-D [B, H, S, D] tensor into `dst` as [B, H, offset + S, D] rows starting at
// `offset` within each head's `rows` rows.
template <typename T>
void gatherHeads(const T* src, bool threeD, int64_t b, int64_t h, int64_t s, int64_t dim, int64_t rows, int64_t offset,
                 std::vector<double>& dst) {
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t si = 0; si < s; ++si)
        for (int64_t di = 0; di < dim; ++di) {
          int64_t from = threeD ? ((bi * s + si) * h + hi) * dim + di : ((bi * h + hi) * s + si) * dim + di;
          dst[static_cast<size_t>(((bi * h + hi) * rows + offset + si) * dim + di)] = static_cast<double>(src[from]);
        }
}

}  // namespace

InferResult inferAttention(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 7));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 4));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
  CTX_ASSIGN_OR_RETURN(AttentionDims d, attentionDims(ctx, inputs));
  const ElemType t = inputs[0].type;
  std::vector<OutputDesc> outs;
  outs.push_back({t, d.threeD ? ir::Shape{d.batch, d.qSeq, d.qHeads * d.vHeadSize}
                              : ir::Shape{d.batch, d.qHeads, d.qSeq, d.vHeadSize}});
  if (outputCount > 1) outs.push_back({t, {d.batch, d.kvHeads, d.total(), d.headSize}});
  if (outputCount > 2) outs.push_back({t, {d.batch, d.kvHeads, d.total(), d.vHeadSize}});
  if (outputCount > 3) outs.push_back({t, {d.batch, d.qHeads, d.qSeq, d.total()}});
  return outs;
}

Status runAttention(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, false);
  CTX_ASSIGN_OR_RETURN(AttentionDims d, attentionDims(ctx, descs));
  const ops::AttentionAttrs& a = attrsOf<ops::AttentionAttrs>(ctx);
  auto in = [&](size_t i) -> const ir::Tensor* { return i < inputs.size() ? inputs[i] : nullptr; };
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(inputs[0]->type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const int64_t total = d.total(), dk = d.headSize, dv = d.vHeadSize;
    std::vector<double> q(static_cast<size_t>(d.batch * d.qHeads * d.qSeq * dk));
    std::vector<double> k(static_cast<size_t>(d.batch * d.kvHeads * total * dk));
    std::vector<double> v(static_cast<size_t>(d.batch * d.kvHeads * total * dv));
    gatherHeads(in(0)->dataAs<T>(), d.threeD, d.batch, d.qHeads, d.qSeq, dk, d.qSeq, 0, q);
    if (d.past > 0) {
      gatherHeads(in(4)->dataAs<T>(), false, d.batch, d.kvHeads, d.past, dk, total, 0, k);
      gatherHeads(in(5)->dataAs<T>(), false, d.batch, d.kvHeads, d.past, dv, total, 0, v);
    }
    gatherHeads(in(1)->dataAs<T>(), d.threeD, d.batch, d.kvHeads, d.kvSeq, dk, total, d.past, k);
    gatherHeads(in(2)->dataAs<T>(), d.threeD, d.batch, d.kvHeads, d.kvSeq, dv, total, d.past, v);
    if (outputs.size() > 1 && outputs[1])
      for (size_t i = 0; i < k.size(); ++i) outputs[1]->mutableDataAs<T>()[i] = static_cast<T>(k[i]);
    if (outputs.size() > 2 && outputs[2])
      for (size_t i = 0; i < v.size(); ++i) outputs[2]->mutableDataAs<T>()[i] = static_cast<T>(v[i]);

    // The mask as an additive bias, read through broadcast strides over [B, Hq, Sq, maskCols].
    const ir::Tensor* mask = in(3);
    const int64_t maskCols = mask ? mask->shape().back() : 0;
    Dims maskStrides;
    if (mask) maskStrides = broadcastStrides(mask->shape(), ir::Shape{d.batch, d.qHeads, d.qSeq, maskCols});
    std::vector<int64_t> nonpad;
    if (const ir::Tensor* np = in(6)) nonpad = tensorInts(*np);
    const double scale = a.hasScale ? a.scale : 1.0 / std::sqrt(static_cast<double>(dk));
    const double inf = std::numeric_limits<double>::infinity();
    const int64_t group = d.qHeads / d.kvHeads;
    T* y = outputs[0]->mutableDataAs<T>();
    T* qkOut = outputs.size() > 3 && outputs[3] ? outputs[3]->mutableDataAs<T>() : nullptr;
    std::vector<double> scores(static_cast<size_t>(total)), biased(static_cast<size_t>(total));
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t h = 0; h < d.qHeads; ++h) {
        const int64_t kvh = h / group;
        const double* kh = k.data() + (b * d.kvHeads + kvh) * total * dk;
        const double* vh = v.data() + (b * d.kvHeads + kvh) * total * dv;
        for (int64_t i = 0; i < d.qSeq; ++i) {
          const double* qi = q.data() + ((b * d.qHeads + h) * d.qSeq + i) * dk;
          int64_t offset = d.past;
          if (d.past == 0 && !nonpad.empty()) offset = nonpad[static_cast<size_t>(b)] - d.qSeq;
          for (int64_t j = 0; j < total; ++j) {
            double s = 0;
            for (int64_t e = 0; e < dk; ++e) s += qi[e] * kh[j * dk + e];
            s *= scale;
            if (a.softcap > 0) s = a.softcap * std::tanh(s / a.softcap);
            double bias = 0;
            if (mask) {
              if (j >= maskCols) {
                bias = -inf;
              } else {
                int64_t off = b * maskStrides[0] + h * maskStrides[1] + i * maskStrides[2] + j * maskStrides[3];
                if (mask->type() == ElemType::Bool) bias = mask->dataAs<bool>()[off] ? 0.0 : -inf;
                else bias = static_cast<double>(mask->dataAs<T>()[off]);
              }
            }
            if (a.isCausal && j > i + offset) bias = -inf;
            if (!nonpad.empty() && j >= nonpad[static_cast<size_t>(b)]) bias = -inf;
            scores[static_cast<size_t>(j)] = s;
            biased[static_cast<size_t>(j)] = s + bias;
          }
          double mx = -inf;
          for (double s : biased) mx = std::max(mx, s);
          double sum = 0;
          std::vector<double> p(static_cast<size_t>(total), 0.0);
          if (mx > -inf) {  // a fully masked row attends to nothing: zero weights, not NaN
            for (int64_t j = 0; j < total; ++j)
              sum += p[static_cast<size_t>(j)] = std::exp(biased[static_cast<size_t>(j)] - mx);
            for (double& x : p) x /= sum;
          }
          if (qkOut) {
            T* row = qkOut + ((b * d.qHeads + h) * d.qSeq + i) * total;
            for (int64_t j = 0; j < total; ++j) {
              auto jj = static_cast<size_t>(j);
              double val = a.qkMatmulOutputMode == 3 ? p[jj] : (a.qkMatmulOutputMode == 2 ? biased[jj] : scores[jj]);
              row[j] = static_cast<T>(val);
            }
          }
          for (int64_t e = 0; e < dv; ++e) {
            double acc = 0;
            for (int64_t j = 0; j < total; ++j) acc += p[static_cast<size_t>(j)] * vh[j * dv + e];
            int64_t dst =
                d.threeD ? ((b * d.qSeq + i) * d.qHeads + h) * dv + e : ((b * d.qHeads + h) * d.qSeq + i) * dv + e;
            y[dst] = static_cast<T>(acc);
          }
        }
      }
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
