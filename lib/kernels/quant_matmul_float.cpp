// MatMulIntegerToFloat and DynamicQuantizeMatMul (com.microsoft), the integer products ONNX Runtime's quantizers write
// (docs/runtime.md#onnx-runtimes-transformer-ops): Y = ((A - a_zero_point) x (B - b_zero_point)) · a_scale · b_scale
// (+ bias) in float32, A [..., K] of int8 or uint8, B [K, N], b_scale and b_zero_point one value or one per column.
// DynamicQuantizeMatMul quantizes float A to uint8 first, as ONNX Runtime does: the range [min(0, min A),
// max(0, max A)] over 255 steps, the zero point rounded to nearest even.
#include "kernels/ops.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

constexpr TypeSet kInt8s = typeBit(ElemType::Int8) | typeBit(ElemType::Uint8);

// Input slots: MatMulIntegerToFloat's A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias; DynamicQuantizeMatMul
// has A, B, b_scale, b_zero_point, bias.
struct QuantSlots {
  size_t bScale, bZero, bias;
};

QuantSlots slotsOf(ir::OpKind kind) {
  return kind == ir::OpKind::DynamicQuantizeMatMul ? QuantSlots{2, 3, 4} : QuantSlots{3, 5, 6};
}

// A per-tensor or per-column input of N columns: one value or N.
bool perTensorOrColumn(const ValueDesc& v, int64_t n) {
  const int64_t count = dimProduct(v.shape);
  return v.shape.size() <= 1 && (count == 1 || count == n);
}

int32_t intAt(const ir::Tensor& t, size_t i) {
  return t.type() == ElemType::Int8 ? int32_t{t.dataAs<int8_t>()[i]} : int32_t{t.dataAs<uint8_t>()[i]};
}

}  // namespace

InferResult inferQuantMatMulFloat(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  const bool dynamic = ctx.kind == ir::OpKind::DynamicQuantizeMatMul;
  const QuantSlots slot = slotsOf(ctx.kind);
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, dynamic ? 3 : 4, dynamic ? 5 : 7));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, dynamic ? typeBit(ElemType::Float) : kInt8s));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, kInt8s));
  const auto& a = inputs[0].shape;
  const auto& b = inputs[1].shape;
  if (a.empty() || b.size() != 2 || a.back() != b[0])
    return invalid(ctx, "A of shape {} and B of shape {} do not multiply (B must be [K, N])", shapeStr(a), shapeStr(b));
  const int64_t n = b[1];
  if (!dynamic) {
    CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 2, typeBit(ElemType::Float)));
    if (dimProduct(inputs[2].shape) != 1) return invalid(ctx, "input 2 (a_scale) must hold one value");
    if (const ValueDesc* az = optionalInput(inputs, 4)) {
      CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 4));
      if (dimProduct(az->shape) != 1) return invalid(ctx, "input 4 (a_zero_point) must hold one value");
    }
  }
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, slot.bScale, typeBit(ElemType::Float)));
  if (!perTensorOrColumn(inputs[slot.bScale], n))
    return invalid(ctx, "input {} (b_scale) has shape {}; expected one value or N = {}", slot.bScale,
                   shapeStr(inputs[slot.bScale].shape), n);
  if (const ValueDesc* bz = optionalInput(inputs, slot.bZero)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 1, slot.bZero));
    if (!perTensorOrColumn(*bz, n))
      return invalid(ctx, "input {} (b_zero_point) has shape {}; expected one value or N = {}", slot.bZero,
                     shapeStr(bz->shape), n);
  }
  if (const ValueDesc* bias = optionalInput(inputs, slot.bias)) {
    CTX_RETURN_IF_ERROR(checkType(ctx, inputs, slot.bias, typeBit(ElemType::Float)));
    if (bias->shape != ir::Shape{n}) return invalid(ctx, "bias has shape {}; expected [{}]", shapeStr(bias->shape), n);
  }
  ir::Shape out(a.begin(), a.end());
  out.back() = n;
  return single(ElemType::Float, std::move(out));
}

Status runQuantMatMulFloat(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const bool dynamic = ctx.kind == ir::OpKind::DynamicQuantizeMatMul;
  const QuantSlots slot = slotsOf(ctx.kind);
  auto in = [&](size_t i) { return i < inputs.size() ? inputs[i] : nullptr; };
  const ir::Tensor& a = *inputs[0];
  const ir::Tensor& b = *inputs[1];
  const int64_t K = b.shape()[0], N = b.shape()[1];
  const int64_t M = K == 0 ? 0 : static_cast<int64_t>(a.elementCount()) / K;

  // A - a_zero_point as int32, and a_scale; DynamicQuantizeMatMul quantizes A here.
  std::vector<int32_t> qa(static_cast<size_t>(M * K));
  float aScale = 1.0f;
  if (dynamic) {
    const float* pa = a.dataAs<float>();
    const DynamicUint8 q = dynamicUint8(pa, qa.size());  // as DynamicQuantizeLinear quantizes
    aScale = q.scale;
    const auto zero = static_cast<int32_t>(q.zero);
    for (size_t i = 0; i < qa.size(); ++i) qa[i] = int32_t{q.quantize(pa[i])} - zero;
  } else {
    aScale = in(2)->dataAs<float>()[0];
    const int32_t zero = in(4) ? intAt(*in(4), 0) : 0;
    for (size_t i = 0; i < qa.size(); ++i) qa[i] = intAt(a, i) - zero;
  }
  // B - b_zero_point as int32 [K, N].
  const ir::Tensor* bZero = in(slot.bZero);
  std::vector<int32_t> qb(static_cast<size_t>(K * N));
  const bool zeroPerColumn = bZero && bZero->elementCount() > 1;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      qb[static_cast<size_t>(k * N + n)] = intAt(b, static_cast<size_t>(k * N + n)) -
                                           (bZero ? intAt(*bZero, zeroPerColumn ? static_cast<size_t>(n) : 0) : 0);
  const ir::Tensor& bScales = *in(slot.bScale);
  const bool scalePerColumn = bScales.elementCount() > 1;
  const float* pbs = bScales.dataAs<float>();
  const float* bias = in(slot.bias) ? in(slot.bias)->dataAs<float>() : nullptr;
  float* y = outputs[0]->mutableDataAs<float>();
  parallelForWork(ctx, static_cast<size_t>(M), static_cast<size_t>(K * N), [&](size_t m0, size_t m1) {
    std::vector<int32_t> acc(static_cast<size_t>(N));
    for (size_t m = m0; m < m1; ++m) {
      std::fill(acc.begin(), acc.end(), 0);
      const int32_t* row = qa.data() + m * static_cast<size_t>(K);
      for (int64_t k = 0; k < K; ++k) {
        const int32_t av = row[k];
        const int32_t* brow = qb.data() + k * N;
        for (int64_t n = 0; n < N; ++n) acc[static_cast<size_t>(n)] += av * brow[n];
      }
      float* out = y + m * static_cast<size_t>(N);
      for (int64_t n = 0; n < N; ++n) {
        out[n] = static_cast<float>(acc[static_cast<size_t>(n)]) * (aScale * pbs[scalePerColumn ? n : 0]);
        if (bias) out[n] += bias[n];
      }
    }
  });
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
