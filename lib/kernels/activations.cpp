// One-input elementwise ops (math functions and activations) and the fused activation epilogue.
#include "cpu/vec_math.h"
#include "kernels/ops.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

constexpr float kSqrtHalf = 0.70710678118654752f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;

using UnaryParams = ops::UnaryAttrs;

template <typename T> T negate(T x) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(U(0) - static_cast<U>(x));
  } else {
    return static_cast<T>(-x);
  }
}

template <typename T> T absolute(T x) {
  if constexpr (std::is_unsigned_v<T>) return x;
  else return x < T(0) ? negate(x) : x;
}

template <typename T> T sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

template <typename T> T gelu(T x, bool tanhApprox) {
  if (tanhApprox) {
    T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  }
  return T(0.5) * x * (T(1) + std::erf(x * T(kSqrtHalf)));
}

// Applies `f` elementwise over n elements, in parallel chunks.
template <typename T, typename F>
void mapElements(const OpContext& ctx, const T* in, T* out, size_t n, size_t minChunk, F f) {
  parallelFor(ctx, n, minChunk, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) out[i] = f(in[i]);
  });
}

// Float32 paths use the vectorized math in vec_math.h on whole chunks.
bool runFloatFast(const OpContext& ctx, const float* in, float* out, size_t n, const UnaryParams& p) {
  auto chunked = [&](size_t minChunk, auto fn) {
    parallelFor(ctx, n, minChunk, [&](size_t begin, size_t end) { fn(in + begin, out + begin, end - begin); });
  };
  switch (ctx.kind) {
    case ir::OpKind::Exp: chunked(4096, cpu::vecExp); return true;
    case ir::OpKind::Sigmoid: chunked(4096, cpu::vecSigmoid); return true;
    case ir::OpKind::Tanh: chunked(4096, cpu::vecTanh); return true;
    case ir::OpKind::Erf: chunked(4096, cpu::vecErf); return true;
    case ir::OpKind::Gelu:
      if (p.tanhApprox) chunked(4096, cpu::vecGeluTanh);
      else chunked(4096, cpu::vecGeluErf);
      return true;
    case ir::OpKind::Relu:
      chunked(16384, [](const float* x, float* y, size_t m) { cpu::vecClamp(x, y, m, 0.0f, INFINITY); });
      return true;
    case ir::OpKind::HardSigmoid:
      chunked(16384, [&p](const float* x, float* y, size_t m) { cpu::vecHardSigmoid(x, y, m, p.alpha, p.beta); });
      return true;
    case ir::OpKind::HardSwish: chunked(16384, cpu::vecHardSwish); return true;
    case ir::OpKind::LeakyRelu:
      chunked(16384, [&p](const float* x, float* y, size_t m) { cpu::vecLeakyRelu(x, y, m, p.alpha); });
      return true;
    default: return false;
  }
}

template <typename T> Status runUnaryTyped(const OpContext& ctx, const T* in, T* out, size_t n, const UnaryParams& p) {
  switch (ctx.kind) {
    case ir::OpKind::Abs: mapElements(ctx, in, out, n, 16384, [](T x) { return absolute(x); }); break;
    case ir::OpKind::Neg: mapElements(ctx, in, out, n, 16384, [](T x) { return negate(x); }); break;
    case ir::OpKind::Relu: mapElements(ctx, in, out, n, 16384, [](T x) { return x < T(0) ? T(0) : x; }); break;
    default:
      if constexpr (std::is_floating_point_v<T>) {
        switch (ctx.kind) {
          case ir::OpKind::Sqrt: mapElements(ctx, in, out, n, 16384, [](T x) { return std::sqrt(x); }); break;
          case ir::OpKind::Erf: mapElements(ctx, in, out, n, 4096, [](T x) { return std::erf(x); }); break;
          case ir::OpKind::Exp: mapElements(ctx, in, out, n, 4096, [](T x) { return std::exp(x); }); break;
          case ir::OpKind::Log: mapElements(ctx, in, out, n, 4096, [](T x) { return std::log(x); }); break;
          case ir::OpKind::Reciprocal: mapElements(ctx, in, out, n, 16384, [](T x) { return T(1) / x; }); break;
          case ir::OpKind::LeakyRelu: {
            T alpha = static_cast<T>(p.alpha);
            mapElements(ctx, in, out, n, 16384, [alpha](T x) { return x < T(0) ? alpha * x : x; });
            break;
          }
          case ir::OpKind::Sigmoid: mapElements(ctx, in, out, n, 4096, [](T x) { return sigmoid(x); }); break;
          case ir::OpKind::HardSigmoid: {
            T alpha = static_cast<T>(p.alpha), beta = static_cast<T>(p.beta);
            mapElements(ctx, in, out, n, 16384,
                        [alpha, beta](T x) { return std::max(T(0), std::min(T(1), alpha * x + beta)); });
            break;
          }
          case ir::OpKind::Tanh: mapElements(ctx, in, out, n, 4096, [](T x) { return std::tanh(x); }); break;
          case ir::OpKind::HardSwish:
            mapElements(ctx, in, out, n, 16384,
                        [](T x) { return x * std::max(T(0), std::min(T(1), x * T(1.0 / 6.0) + T(0.5))); });
            break;
          case ir::OpKind::Gelu: {
            bool approx = p.tanhApprox;
            mapElements(ctx, in, out, n, 4096, [approx](T x) { return gelu(x, approx); });
            break;
          }
          default: return unsupported(ctx, "no elementwise kernel for this op");
        }
      } else {
        return unsupported(ctx, "op is not defined for integer inputs");
      }
  }
  return Status::ok();
}

}  // namespace

InferResult inferUnary(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  TypeSet allowed = kFloatTypes;
  if (ctx.kind == ir::OpKind::Abs) allowed = kNumericTypes;
  if (ctx.kind == ir::OpKind::Neg || ctx.kind == ir::OpKind::Relu) allowed = kFloatTypes | kSignedIntTypes;
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, allowed));
  return single(inputs[0].type, inputs[0].shape);
}

Status runUnary(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  const UnaryParams& p = attrsOf<UnaryParams>(ctx);
  size_t n = static_cast<size_t>(x.elementCount());
  if (x.type() == ElemType::Float && runFloatFast(ctx, x.dataAs<float>(), y.mutableDataAs<float>(), n, p))
    return Status::ok();
  return visitType<kNativeNumeric>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    return runUnaryTyped<T>(ctx, x.dataAs<T>(), y.mutableDataAs<T>(), n, p);
  });
}

void applyFusedActivation(const ops::Epilogue& act, float* data, size_t n) {
  using K = ops::Activation;
  switch (act.activation) {
    case K::None: break;
    case K::Relu: cpu::vecClamp(data, data, n, 0.0f, INFINITY); break;
    case K::Clip: cpu::vecClamp(data, data, n, act.alpha, act.beta); break;
    case K::LeakyRelu: cpu::vecLeakyRelu(data, data, n, act.alpha); break;
    case K::Sigmoid: cpu::vecSigmoid(data, data, n); break;
    case K::Tanh: cpu::vecTanh(data, data, n); break;
    case K::HardSigmoid: cpu::vecHardSigmoid(data, data, n, act.alpha, act.beta); break;
    case K::HardSwish: cpu::vecHardSwish(data, data, n); break;
    case K::Swish: cpu::vecSwish(data, data, n); break;
    case K::Gelu: cpu::vecGeluErf(data, data, n); break;
  }
  if (act.scale != 1.0f || act.shift != 0.0f) cpu::vecScaleShift(data, data, n, act.scale, act.shift);
}

void applyBiasActivation(const ops::Epilogue& act, float bias, float* data, size_t n) {
  using K = ops::Activation;
  const bool plain = act.scale == 1.0f && act.shift == 0.0f;
  if (plain && (act.activation == K::None || act.activation == K::Relu || act.activation == K::Clip)) {
    if (act.activation == K::None && bias == 0.0f) return;
    const float lo = act.activation == K::Relu ? 0.0f : act.activation == K::Clip ? act.alpha : -INFINITY;
    const float hi = act.activation == K::Clip ? act.beta : INFINITY;
    // (No add of a zero bias: -0 + 0 is +0, and the outputs stay those of the separate passes bit for bit.)
    if (bias == 0.0f) cpu::vecClamp(data, data, n, lo, hi);
    else cpu::vecAddClamp(data, data, n, bias, lo, hi);
    return;
  }
  if (bias != 0.0f) cpu::vecBinary(cpu::BinaryOp::Add, data, 1, &bias, 0, data, n);
  applyFusedActivation(act, data, n);
}

}  // namespace ctxkit::kernels::detail
