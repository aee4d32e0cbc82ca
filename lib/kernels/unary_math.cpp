// One-input math ops beyond activations.cpp: trigonometric and hyperbolic functions, rounding, Sign,
// IsNaN/IsInf, and the parameterized activations (Elu, Selu, Celu, Softplus, Softsign, ThresholdedRelu,
// Shrink, Mish, Swish). Attributes come decoded as ops::UnaryMathAttrs.
#include "kernels/ops.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

using ir::OpKind;

template <typename T> T softplus(T x) { return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// The float function of `kind`, or null for kinds handled elsewhere.
template <typename T> T floatMath(OpKind kind, const ops::UnaryMathAttrs& a, T x) {
  const T alpha = static_cast<T>(a.alpha), beta = static_cast<T>(a.beta);
  switch (kind) {
    case OpKind::Sin: return std::sin(x);
    case OpKind::Cos: return std::cos(x);
    case OpKind::Tan: return std::tan(x);
    case OpKind::Asin: return std::asin(x);
    case OpKind::Acos: return std::acos(x);
    case OpKind::Atan: return std::atan(x);
    case OpKind::Sinh: return std::sinh(x);
    case OpKind::Cosh: return std::cosh(x);
    case OpKind::Asinh: return std::asinh(x);
    case OpKind::Acosh: return std::acosh(x);
    case OpKind::Atanh: return std::atanh(x);
    case OpKind::Floor: return std::floor(x);
    case OpKind::Ceil: return std::ceil(x);
    case OpKind::Round: return std::nearbyint(x);  // halves to even in the default rounding mode
    case OpKind::Elu: return x < T(0) ? alpha * (std::exp(x) - T(1)) : x;
    case OpKind::Selu: return beta * (x > T(0) ? x : alpha * (std::exp(x) - T(1)));
    case OpKind::Celu: return std::max(T(0), x) + std::min(T(0), alpha * (std::exp(x / alpha) - T(1)));
    case OpKind::Softplus: return softplus(x);
    case OpKind::Softsign: return x / (T(1) + std::fabs(x));
    case OpKind::ThresholdedRelu: return x > alpha ? x : T(0);
    case OpKind::Mish: return x * std::tanh(softplus(x));
    case OpKind::Swish: return x / (T(1) + std::exp(-alpha * x));
    default: return x;
  }
}

bool isPredicate(OpKind kind) { return kind == OpKind::IsNaN || kind == OpKind::IsInf; }

TypeSet mathTypes(OpKind kind) {
  if (kind == OpKind::Sign || kind == OpKind::Shrink) return kNumericTypes;
  return kFloatTypes;
}

}  // namespace

InferResult inferUnaryMath(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, mathTypes(ctx.kind)));
  return single(isPredicate(ctx.kind) ? ElemType::Bool : inputs[0].type, inputs[0].shape);
}

Status runUnaryMath(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  const ops::UnaryMathAttrs& a = attrsOf<ops::UnaryMathAttrs>(ctx);
  const size_t n = static_cast<size_t>(x.elementCount());
  const OpKind kind = ctx.kind;
  return visitType<kNativeNumeric>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    if (isPredicate(kind)) {
      bool* py = y.mutableDataAs<bool>();
      if constexpr (std::is_floating_point_v<T>) {
        for (size_t i = 0; i < n; ++i) {
          T v = px[i];
          py[i] = kind == OpKind::IsNaN ? std::isnan(v)
                                        : std::isinf(v) && ((v > 0 && a.detectPositive) || (v < 0 && a.detectNegative));
        }
      }
      return Status::ok();
    }
    T* py = y.mutableDataAs<T>();
    if (kind == OpKind::Sign) {
      for (size_t i = 0; i < n; ++i) {
        if constexpr (std::is_unsigned_v<T>) py[i] = px[i] > T(0) ? T(1) : T(0);
        else py[i] = px[i] > T(0) ? T(1) : (px[i] < T(0) ? T(-1) : T(0));
      }
      return Status::ok();
    }
    if (kind == OpKind::Shrink) {
      const double lambd = a.alpha, bias = a.beta;
      for (size_t i = 0; i < n; ++i) {
        double v = static_cast<double>(px[i]);
        py[i] = static_cast<T>(v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0));
      }
      return Status::ok();
    }
    if constexpr (std::is_floating_point_v<T>) {
      parallelFor(ctx, n, 4096, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) py[i] = floatMath<T>(kind, a, px[i]);
      });
      return Status::ok();
    } else {
      return unsupported(ctx, "op is not defined for integer inputs");
    }
  });
}

}  // namespace ctxkit::kernels::detail
