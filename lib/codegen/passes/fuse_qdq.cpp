// fuse-qdq: QDQ groups run as integer ops (docs/compiler.md#targets: int8 QDQ on npu-sim) on their 8-bit weights.
#include "codegen/passes/pass_helpers.h"
#include "codegen/passes/passes.h"

#include <algorithm>
#include <cmath>

namespace ctxkit::codegen {

namespace {

// The DequantizeLinear producing `value`: its index, and its data, scale and zero point inputs (zero point kNoValue
// when absent). Only per-tensor or per-axis quantization (no blocks).
struct Dequantized {
  size_t index;
  ValueId data, scale, zero;
  int64_t axis;
};
std::optional<Dequantized> dequantizedFrom(const LoweringState& state, ValueId value) {
  auto dq = state.producerOf(value, ir::OpKind::DequantizeLinear);
  if (!dq) return std::nullopt;
  const LOp& op = state.ops[*dq];
  const auto& quantize = std::get<ops::QuantizeAttrs>(op.typed);
  if (op.inputs.size() < 2 || quantize.blockSize != 0) return std::nullopt;
  if (!state.constantOf(op.inputs[1]) ||
      (op.inputs.size() > 2 && op.inputs[2] != kNoValue && !state.constantOf(op.inputs[2])))
    return std::nullopt;
  return Dequantized{*dq, op.inputs[0], op.inputs[1], op.inputs.size() > 2 ? op.inputs[2] : kNoValue, quantize.axis};
}

// A zero point input for `data`: the given one, or a constant 0 of data's type when the model left it out.
ValueId zeroPointFor(LoweringState& state, const Dequantized& d) {
  if (d.zero != kNoValue) return d.zero;
  const ir::ElemType type = state.typeOf(d.data);
  auto zero = ir::Tensor::allocate(type, {});  // zero-filled
  return state.addConstant(state.nameOf(d.data) + ".zero_point", std::move(zero).value());
}

// Removes the ops at `indices` whose outputs nobody reads any more.
void eraseUnread(LoweringState& state, std::vector<size_t> indices) {
  std::sort(indices.rbegin(), indices.rend());
  for (size_t i : indices) {
    const LOp& op = state.ops[i];
    bool read = std::any_of(op.outputs.begin(), op.outputs.end(),
                            [&](ValueId o) { return o != kNoValue && (state.readers(o) > 0 || state.leaves(o)); });
    if (!read) state.eraseOp(i);
  }
}

// A bias in QLinear units (int32, scale x_scale x w_scale per output channel, zero point 0): a DequantizeLinear
// of int32 in exactly those units, or a float32 constant quantized to them (rounded half to even, as a quantizer
// computes it). `channels` output channels, `wScales` weight scales (1 or one per channel). kNoValue when it is
// neither; `producer` gets the DequantizeLinear's index.
ValueId quantizedBias(LoweringState& state, ValueId value, float xs, const ir::Tensor& ws, uint64_t channels,
                      std::optional<size_t>& producer) {
  auto scaleOf = [&](uint64_t c) {
    return static_cast<double>(xs) * ws.dataAs<float>()[ws.elementCount() == 1 ? 0 : c];
  };
  if (auto b = dequantizedFrom(state, value)) {
    const ir::Tensor* bq = state.constantOf(b->data);
    const ir::Tensor* bs = state.constantOf(b->scale);
    if (!bq || bq->type() != ir::ElemType::Int32 || bq->elementCount() != channels ||
        bs->type() != ir::ElemType::Float || (bs->elementCount() != 1 && bs->elementCount() != channels))
      return kNoValue;
    for (uint64_t c = 0; c < bs->elementCount(); ++c)
      if (std::abs(bs->dataAs<float>()[c] - scaleOf(c)) > 1e-6 * std::abs(scaleOf(c))) return kNoValue;
    if (const ir::Tensor* bz = state.constantOf(b->zero))
      for (uint64_t c = 0; c < bz->elementCount(); ++c)
        if (bz->dataAs<int32_t>()[c] != 0) return kNoValue;
    producer = b->index;
    return b->data;
  }
  const ir::Tensor* bf = state.constantOf(value);
  if (!bf || bf->type() != ir::ElemType::Float || bf->elementCount() != channels) return kNoValue;
  std::vector<int32_t> q(channels);
  for (uint64_t c = 0; c < channels; ++c) {
    const double v = std::nearbyint(static_cast<double>(bf->dataAs<float>()[c]) / scaleOf(c));
    if (!std::isfinite(v) || std::abs(v) > 2147483647.0) return kNoValue;
    q[c] = static_cast<int32_t>(v);
  }
  return state.addConstant(state.nameOf(value) + ".quantized",
                           ir::Tensor::fromVector(ir::ElemType::Int32, {static_cast<int64_t>(channels)}, q));
}

}  // namespace

// QDQ groups run as integer ops (docs/compiler.md#targets: int8 QDQ on npu-sim), in the forms ORT's quantizer and
// other tools write: DequantizeLinear on an 8-bit activation and on a constant 8-bit weight (per tensor, or per
// output channel), Conv, MatMul (optionally + Add of a bias) or Gemm, optionally Relu or Clip, then QuantizeLinear
// to 8 bits becomes QLinearConv or QLinearMatMul. The bias is an int32 DequantizeLinear in x_scale x w_scale units or
// a float32 constant quantized to them; the activation becomes the clamp of the requantization (exact: quantizing
// is monotonic). The weights stay 8-bit constants, so the context stores them at 8-bit size. Runs first: folding
// constants would turn the dequantized weights into float32.
Expected<ir::PassChange> FuseQdq::run(LoweringState& state) const {
  auto& ops = state.ops;
  const size_t opsBefore = ops.size();
  size_t groups = 0;
  auto is8Bit = [](ir::ElemType t) { return t == ir::ElemType::Int8 || t == ir::ElemType::Uint8; };
  for (size_t i = 0; i < ops.size(); ++i) {
    const LOp& op = ops[i];
    if (state.touchesBounded(op)) continue;
    const bool conv = op.kind == ir::OpKind::Conv, gemm = op.kind == ir::OpKind::Gemm,
               matmul = op.kind == ir::OpKind::MatMul || gemm;
    if ((!conv && !matmul) || op.inputs.size() < 2 || op.outputs.size() != 1 || op.epilogue) continue;
    bool transB = false;
    if (gemm) {
      const auto& g = std::get<ops::GemmAttrs>(op.typed);
      if (g.transA || g.alpha != 1.0f || (g.beta != 1.0f && op.inputs.size() > 2 && op.inputs[2] != kNoValue)) continue;
      transB = g.transB;
    }
    // What follows: for MatMul an Add of a bias, then a Relu or Clip, then the QuantizeLinear.
    std::vector<size_t> chain;  // the ops after `op` that the fused op replaces, the QuantizeLinear last
    ValueId biasValue = conv || gemm ? (op.inputs.size() > 2 ? op.inputs[2] : kNoValue) : kNoValue;
    ValueId last = op.outputs[0];
    auto next = state.soleReader(i);
    if (next && op.kind == ir::OpKind::MatMul && ops[*next].kind == ir::OpKind::Add && ops[*next].inputs.size() == 2 &&
        ops[*next].outputs.size() == 1) {
      const LOp& add = ops[*next];
      biasValue = add.inputs[0] == last ? add.inputs[1] : add.inputs[0];
      chain.push_back(*next);
      last = add.outputs[0];
      next = state.soleReader(*next);
    }
    std::optional<ops::Epilogue> activation;
    if (next && (ops[*next].kind == ir::OpKind::Relu || ops[*next].kind == ir::OpKind::Clip)) {
      activation = activationOf(state, ops[*next]);
      if (!activation) continue;
      chain.push_back(*next);
      last = ops[*next].outputs[0];
      next = state.soleReader(*next);
    }
    if (!next || ops[*next].kind != ir::OpKind::QuantizeLinear || ops[*next].inputs[0] != last) continue;
    const size_t q = *next;
    chain.push_back(q);
    const LOp& quant = ops[q];
    if (quant.inputs.size() < 2 || !state.constantOf(quant.inputs[1]) ||
        state.constantOf(quant.inputs[1])->elementCount() != 1 ||
        state.constantOf(quant.inputs[1])->type() != ir::ElemType::Float)
      continue;
    if (quant.inputs.size() < 3 || quant.inputs[2] == kNoValue || !state.constantOf(quant.inputs[2]) ||
        !is8Bit(state.constantOf(quant.inputs[2])->type()))
      continue;  // the output type comes from the zero point
    auto x = dequantizedFrom(state, op.inputs[0]);
    // A Flatten or Reshape between the activation's DequantizeLinear and a MatMul moves onto the 8-bit values.
    std::optional<size_t> view;
    if (!x && matmul)
      for (ir::OpKind kind : {ir::OpKind::Flatten, ir::OpKind::Reshape})
        if (auto v = state.producerOf(op.inputs[0], kind);
            v && state.readers(op.inputs[0]) == 1 && !state.leaves(op.inputs[0])) {
          x = dequantizedFrom(state, ops[*v].inputs[0]);
          if (x) view = v;
          break;
        }
    auto w = dequantizedFrom(state, op.inputs[1]);
    if (!x || !w || state.constantOf(x->data) || !state.constantOf(w->data) || !is8Bit(state.typeOf(x->data)) ||
        !is8Bit(state.constantOf(w->data)->type()) || state.constantOf(x->scale)->elementCount() != 1)
      continue;
    if (state.constantOf(x->scale)->type() != ir::ElemType::Float ||
        state.constantOf(w->scale)->type() != ir::ElemType::Float)
      continue;
    const ir::Tensor& wq = *state.constantOf(w->data);
    const ir::Tensor& wScale = *state.constantOf(w->scale);
    const uint64_t wScales = wScale.elementCount();
    if (matmul && wq.rank() != 2) continue;
    // Weight scales: per tensor, or per output channel (axis 0 of a Conv weight and of Gemm's [N, K] weight with
    // transB, axis 1 of a [K, N] weight).
    const int64_t channelAxis = conv || transB ? 0 : 1;
    if (wScales != 1 &&
        (wq.rank() < 2 || (w->axis < 0 ? w->axis + static_cast<int64_t>(wq.rank()) : w->axis) != channelAxis ||
         wScales != static_cast<uint64_t>(wq.shape()[static_cast<size_t>(channelAxis)])))
      continue;
    const auto channels = static_cast<uint64_t>(wq.shape()[static_cast<size_t>(channelAxis)]);
    ValueId bias = kNoValue;
    std::optional<size_t> biasProducer;
    if (biasValue != kNoValue) {
      bias = quantizedBias(state, biasValue, state.constantOf(x->scale)->dataAs<float>()[0], wScale, channels,
                           biasProducer);
      if (bias == kNoValue) continue;
    }
    // QLinearMatMul reads B as [K, N]: Gemm's transposed weight is transposed once here, or at load in a weightless
    // context (a load-time Transpose of the source weight, docs/weight-sharing.md#derived-weights).
    ValueId weight = w->data;
    std::optional<LOp> transposeAtLoad;
    if (transB && derivesAtLoad(state, w->data)) {
      const std::string name = state.nameOf(w->data) + ".transposed";
      const std::optional<ValueId> made = state.findValue(name);  // another Gemm of this weight transposed it
      weight = made ? *made : state.value(name);
      if (!made) {
        ValueRecord& r = state.record(weight);
        r.type = wq.type();
        r.shape = ir::Shape{wq.shape()[1], wq.shape()[0]};
        r.loadTime = true;
        transposeAtLoad = madeOp(ir::OpKind::Transpose, 13, name, {w->data}, {weight});
      }
    } else if (transB) {
      const auto n = static_cast<size_t>(wq.shape()[0]), k = static_cast<size_t>(wq.shape()[1]);
      auto t = ir::Tensor::allocate(wq.type(), {wq.shape()[1], wq.shape()[0]});
      if (!t) return t.takeError();
      const auto* src = wq.dataAs<uint8_t>();
      auto* dst = t->mutableDataAs<uint8_t>();
      for (size_t r = 0; r < n; ++r)
        for (size_t c = 0; c < k; ++c) dst[c * n + r] = src[r * k + c];
      weight = state.addConstant(state.nameOf(w->data) + ".transposed", std::move(t).value());
    }
    LOp fused{conv ? ir::OpKind::QLinearConv : ir::OpKind::QLinearMatMul,
              10,
              op.name,
              conv ? op.typed : ops::defaultAttrsFor(ir::OpKind::QLinearMatMul),
              {x->data, x->scale, zeroPointFor(state, *x), weight, w->scale, zeroPointFor(state, *w), quant.inputs[1],
               quant.inputs[2]},
              quant.outputs,
              activation};
    if (bias != kNoValue) fused.inputs.push_back(bias);
    std::vector<size_t> producers{x->index, w->index};
    if (biasProducer) producers.push_back(*biasProducer);
    std::optional<LOp> quantizedView;
    if (view) {
      LOp v = ops[*view];
      const ValueId reshaped = state.value(state.nameOf(v.outputs[0]) + ".quantized");
      state.record(reshaped).shape = state.shapeOf(v.outputs[0]).value_or(ir::Shape{});
      v.name += ".quantized";
      v.inputs[0] = x->data;
      v.outputs = {reshaped};
      fused.inputs[0] = reshaped;
      quantizedView = std::move(v);
      producers.push_back(*view);
    }
    state.replaceOp(i, std::move(fused));
    std::sort(chain.rbegin(), chain.rend());
    for (size_t c : chain) state.eraseOp(c);
    if (quantizedView) state.insertOp(i, std::move(*quantizedView));
    if (transposeAtLoad) state.insertOp(i, std::move(*transposeAtLoad));
    // (producers come before op i: erasing the chain after it left their indices as they were)
    eraseUnread(state, producers);
    ++groups;
    i = 0;  // indices moved
  }
  const size_t removed = opsBefore > ops.size() ? opsBefore - ops.size() : 0;
  return ir::PassChange{}.count("qdq_groups_fused", groups).count("ops_removed", removed);
}

}  // namespace ctxkit::codegen
