// QuantizeLinear and DequantizeLinear (and DynamicQuantizeLinear to uint8): per-tensor (scalar scale), per-axis (1-D
// scale along `axis`) and blocked (scale with the input's rank, `block_size` elements per scale along `axis`);
// int8/uint8/int16/uint16, packed int4/uint4 and float8 data through the element conversions. Quantization rounds
// halves to even and saturates to the integer range.
#include "cpu/convert.h"
#include "cpu/simd.h"
#include "kernels/ops.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

constexpr TypeSet kQuantTypes = typeBit(ElemType::Int8) | typeBit(ElemType::Uint8) | typeBit(ElemType::Int16) |
                                typeBit(ElemType::Uint16) | typeBit(ElemType::Int4) | typeBit(ElemType::Uint4) |
                                typeBit(ElemType::Float8E4M3FN) | typeBit(ElemType::Float8E4M3FNUZ) |
                                typeBit(ElemType::Float8E5M2) | typeBit(ElemType::Float8E5M2FNUZ) |
                                typeBit(ElemType::Float4E2M1) | typeBit(ElemType::Int32);

// For each element of `shape`: the index of its scale (and zero point), into `idx`.
Status paramIndex(const OpContext& ctx, std::span<const int64_t> shape, std::span<const int64_t> scaleShape,
                  std::vector<size_t>& idx) {
  const ops::QuantizeAttrs& a = attrsOf<ops::QuantizeAttrs>(ctx);
  const size_t n = static_cast<size_t>(dimProduct(shape));
  idx.assign(n, 0);
  if (dimProduct(scaleShape) == 1 && a.blockSize == 0) return Status::ok();  // per tensor
  const int64_t rank = static_cast<int64_t>(shape.size());
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, a.axis, rank, "attribute axis"));
  const auto ax = static_cast<size_t>(axis);
  const int64_t inner = dimProduct(shape, ax + 1, shape.size());
  const int64_t len = shape[ax];
  if (a.blockSize == 0) {
    if (scaleShape.size() != 1 || scaleShape[0] != len)
      return invalid(ctx, "scale has shape {} but expected [{}] along axis {}", shapeStr(scaleShape), len, axis);
    for (size_t i = 0; i < n; ++i) idx[i] = static_cast<size_t>((static_cast<int64_t>(i) / inner) % len);
    return Status::ok();
  }
  // Blocked: the scale has the input's shape with axis length ceil(len / block_size).
  const int64_t blocks = (len + a.blockSize - 1) / a.blockSize;
  Dims expected;
  for (int64_t d : shape) expected.push_back(d);
  expected[ax] = blocks;
  if (!std::ranges::equal(scaleShape, std::span<const int64_t>(expected)))
    return invalid(ctx, "scale has shape {} but expected {} for block_size {}", shapeStr(scaleShape),
                   shapeStr(expected), a.blockSize);
  for (size_t i = 0; i < n; ++i) {
    int64_t k = static_cast<int64_t>(i);
    int64_t in = k % inner, along = (k / inner) % len, outer = k / (inner * len);
    idx[i] = static_cast<size_t>((outer * blocks + along / a.blockSize) * inner + in);
  }
  return Status::ok();
}

void asDoubles(const ir::Tensor* t, size_t fallbackCount, std::vector<double>& v) {
  v.assign(t ? static_cast<size_t>(t->elementCount()) : fallbackCount, 0.0);
  if (t) (void)cpu::convertElements(t->type(), t->data(), ElemType::Double, v.data(), v.size());
}

ElemType quantizedType(const OpContext& ctx, InDescs inputs) {
  if (const ValueDesc* zp = optionalInput(inputs, 2)) return zp->type;
  ElemType t = attrsOf<ops::QuantizeAttrs>(ctx).outputType;
  return t == ElemType::Undefined ? ElemType::Uint8 : t;
}

// float32 <-> 8-bit with one scale and zero point, the QDQ form around every compiled int8 op: in float32 without
// the double round trip, vectorised. Quantizing divides in float32 and rounds halves to even (adding and taking
// 1.5 x 2^23 rounds a float of magnitude below 2^22 to an integer in the current rounding mode, as nearbyint does),
// after clamping to the integral bounds [lo - zero, hi - zero] (the same result as clamping after). Dequantizing
// rounds (x - zero) x scale to float32 once, as the conversion from the exact double product does.
template <typename T>
CTX_SIMD_CLONES void quantizeFloatTo8Bit(const float* x, size_t n, float scale, float zero, float lo, float hi, T* y) {
  constexpr float kRound = 12582912.0f;  // 1.5 x 2^23
  const float below = lo - zero, above = hi - zero;
  for (size_t i = 0; i < n; ++i) {
    float v = x[i] / scale;
    v = v >= below ? v : below;  // NaN goes to the bottom of the range
    v = v <= above ? v : above;
    y[i] = static_cast<T>(static_cast<int32_t>((v + kRound) - kRound + zero));
  }
}

template <typename T>
CTX_SIMD_CLONES void dequantize8BitToFloat(const T* x, size_t n, float scale, int32_t zero, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zero) * scale;
}

bool is8Bit(ElemType t) { return t == ElemType::Int8 || t == ElemType::Uint8; }

// Runs the per-tensor float32 <-> 8-bit cases; false for any other.
bool runQuantize8Bit(const OpContext& ctx, RunIns inputs, ir::Tensor& y) {
  const ir::Tensor& x = *inputs[0];
  const ir::Tensor& scale = *inputs[1];
  const ir::Tensor* zp = inputs.size() > 2 ? inputs[2] : nullptr;
  if (scale.type() != ElemType::Float || scale.elementCount() != 1 || (zp && zp->elementCount() != 1) ||
      attrsOf<ops::QuantizeAttrs>(ctx).blockSize != 0)
    return false;
  const auto n = static_cast<size_t>(x.elementCount());
  const float s = scale.dataAs<float>()[0];
  auto zero = [&](ElemType t) -> int32_t {
    if (!zp) return 0;
    return t == ElemType::Int8 ? zp->dataAs<int8_t>()[0] : zp->dataAs<uint8_t>()[0];
  };
  if (ctx.kind == ir::OpKind::QuantizeLinear) {
    if (x.type() != ElemType::Float || !is8Bit(y.type()) || (zp && zp->type() != y.type())) return false;
    const auto z = static_cast<float>(zero(y.type()));
    if (y.type() == ElemType::Int8)
      quantizeFloatTo8Bit(x.dataAs<float>(), n, s, z, -128.0f, 127.0f, y.mutableDataAs<int8_t>());
    else quantizeFloatTo8Bit(x.dataAs<float>(), n, s, z, 0.0f, 255.0f, y.mutableDataAs<uint8_t>());
    return true;
  }
  if (!is8Bit(x.type()) || y.type() != ElemType::Float || (zp && zp->type() != x.type())) return false;
  if (x.type() == ElemType::Int8)
    dequantize8BitToFloat(x.dataAs<int8_t>(), n, s, zero(x.type()), y.mutableDataAs<float>());
  else dequantize8BitToFloat(x.dataAs<uint8_t>(), n, s, zero(x.type()), y.mutableDataAs<float>());
  return true;
}

}  // namespace

InferResult inferQuantize(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  const bool quantize = ctx.kind == ir::OpKind::QuantizeLinear;
  if (quantize) {
    CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes | typeBit(ElemType::Int32)));
  } else {
    CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kQuantTypes));
    if (optionalInput(inputs, 2)) CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
  }
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, kFloatTypes));
  if (const ValueDesc* zp = optionalInput(inputs, 2))
    if (zp->shape != inputs[1].shape && !(dimProduct(zp->shape) == 1 && dimProduct(inputs[1].shape) == 1))
      return invalid(ctx, "zero point has shape {} but the scale has {}", shapeStr(zp->shape),
                     shapeStr(inputs[1].shape));
  std::vector<size_t> index;
  CTX_RETURN_IF_ERROR(paramIndex(ctx, inputs[0].shape, inputs[1].shape, index));
  if (!quantize) {
    ElemType out = attrsOf<ops::QuantizeAttrs>(ctx).outputType;
    return single(out == ElemType::Undefined ? inputs[1].type : out, inputs[0].shape);
  }
  ElemType q = quantizedType(ctx, inputs);
  if (!inSet(kQuantTypes, q)) return unsupported(ctx, "quantization to {} is not supported", ir::elemTypeName(q));
  return single(q, inputs[0].shape);
}

Status runQuantize(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  if (runQuantize8Bit(ctx, inputs, y)) return Status::ok();
  const size_t n = static_cast<size_t>(x.elementCount());
  // Scratch that grows to the largest tensor once per thread, instead of five allocations per run.
  thread_local std::vector<size_t> pi;
  thread_local std::vector<double> xs, scale, zp, out;
  CTX_RETURN_IF_ERROR(paramIndex(ctx, x.shape(), inputs[1]->shape(), pi));
  asDoubles(&x, n, xs);
  asDoubles(inputs[1], 1, scale);
  const ir::Tensor* zpT = inputs.size() > 2 ? inputs[2] : nullptr;
  asDoubles(zpT, scale.size(), zp);
  out.resize(n);
  if (ctx.kind == ir::OpKind::DequantizeLinear) {
    for (size_t i = 0; i < n; ++i) out[i] = (xs[i] - zp[pi[i]]) * scale[pi[i]];
    return cpu::convertElements(ElemType::Double, out.data(), y.type(), y.mutableData(), n);
  }
  const ElemType q = y.type();
  const bool isInt = inSet(kIntTypes, q) || q == ElemType::Int4 || q == ElemType::Uint4;
  double lo = 0, hi = 0;
  switch (q) {
    case ElemType::Int8: lo = -128, hi = 127; break;
    case ElemType::Uint8: lo = 0, hi = 255; break;
    case ElemType::Int16: lo = -32768, hi = 32767; break;
    case ElemType::Uint16: lo = 0, hi = 65535; break;
    case ElemType::Int32: lo = -2147483648.0, hi = 2147483647.0; break;
    case ElemType::Int4: lo = -8, hi = 7; break;
    case ElemType::Uint4: lo = 0, hi = 15; break;
    default: break;
  }
  // Float inputs divide in float32, as the reference does: a quotient just off .5 must round the same way.
  const bool single = x.type() != ElemType::Double;
  for (size_t i = 0; i < n; ++i) {
    double v = single ? static_cast<double>(static_cast<float>(xs[i]) / static_cast<float>(scale[pi[i]]))
                      : xs[i] / scale[pi[i]];
    if (isInt) v = std::clamp(std::nearbyint(v) + zp[pi[i]], lo, hi);
    else v += zp[pi[i]];  // float8: the conversion rounds and saturates
    out[i] = v;
  }
  return cpu::convertElementRange(ElemType::Double, out.data(), q, y.mutableData(), 0, n,
                                  attrsOf<ops::QuantizeAttrs>(ctx).saturate);
}

// ---- DynamicQuantizeLinear -------------------------------------------------------------------------------

InferResult inferDynamicQuantize(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 3, 3));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float)));
  return std::vector<OutputDesc>{{ElemType::Uint8, inputs[0].shape}, {ElemType::Float, {}}, {ElemType::Uint8, {}}};
}

DynamicUint8 dynamicUint8(const float* x, size_t n) {
  float lo = 0, hi = 0;
  for (size_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  DynamicUint8 q;
  q.scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;  // an all-zero input: scale 1, as the ONNX reference and ORT
  q.zero = q.scale == 0 ? 0.0f : std::clamp(std::nearbyint(-lo / q.scale), 0.0f, 255.0f);
  return q;
}

Status runDynamicQuantize(const OpContext&, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const float* px = x.dataAs<float>();
  const size_t n = static_cast<size_t>(x.elementCount());
  const DynamicUint8 q = dynamicUint8(px, n);
  uint8_t* py = outputs[0]->mutableDataAs<uint8_t>();
  for (size_t i = 0; i < n; ++i) py[i] = q.quantize(px[i]);
  outputs[1]->mutableDataAs<float>()[0] = q.scale;
  outputs[2]->mutableDataAs<uint8_t>()[0] = static_cast<uint8_t>(q.zero);
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
