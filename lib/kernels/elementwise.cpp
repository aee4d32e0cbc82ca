// Broadcasting binary arithmetic: Add, Sub, Mul, Div (C-style integer division) and Pow (mixed types).
#include "cpu/convert.h"
#include "cpu/vec_math.h"
#include "kernels/ops.h"

#include <cmath>
#include <limits>

namespace ctxkit::kernels::detail {

namespace {

constexpr size_t kMinChunk = 16384;

// out = op(a, b) over the broadcast of a and b; R, A, B are the element types of out, a and b.
template <typename R, typename A, typename B, typename Op>
void broadcastApply(const OpContext& ctx, const ir::Tensor& a, const ir::Tensor& b, R* out,
                    std::span<const int64_t> outShape, Op op) {
  std::array<std::span<const int64_t>, 2> shapes{a.shape(), b.shape()};
  BroadcastWalk walk = BroadcastWalk::make(outShape, shapes);
  const A* pa = a.dataAs<A>();
  const B* pb = b.dataAs<B>();
  parallelFor(ctx, static_cast<size_t>(walk.total), kMinChunk, [&](size_t begin, size_t end) {
    walk.visit(static_cast<int64_t>(begin), static_cast<int64_t>(end), [&](const auto& off, int64_t n) {
      R* o = out + off[0];
      const A* x = pa + off[1];
      const B* y = pb + off[2];
      if (walk.innerStride[1] && walk.innerStride[2]) {
        for (int64_t i = 0; i < n; ++i) o[i] = op(x[i], y[i]);
      } else if (walk.innerStride[1]) {
        const B yv = *y;
        for (int64_t i = 0; i < n; ++i) o[i] = op(x[i], yv);
      } else if (walk.innerStride[2]) {
        const A xv = *x;
        for (int64_t i = 0; i < n; ++i) o[i] = op(xv, y[i]);
      } else {
        const R v = op(*x, *y);
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      }
    });
  });
}

template <typename T> T divide(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    // Integer division by zero is undefined in C++; ONNX leaves it unspecified. Give 0 rather than trap.
    if (y == 0) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (y == T(-1))
        return static_cast<T>(std::make_unsigned_t<T>(0) -
                              static_cast<std::make_unsigned_t<T>>(x));  // MIN / -1 traps; negate with wrap-around
    }
    return static_cast<T>(x / y);
  } else {
    return x / y;
  }
}

// Integer arithmetic wraps (computed unsigned to avoid signed-overflow UB).
template <typename T, typename Op> T wrapping(T x, T y, Op op) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(op(static_cast<U>(x), static_cast<U>(y))));
  } else {
    return static_cast<T>(op(x, y));
  }
}

int64_t intPow(int64_t base, int64_t exp) {
  if (exp < 0) {
    // Like C pow() then truncation: only 1 and -1 survive a negative exponent.
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;
  }
  uint64_t result = 1;
  uint64_t b = static_cast<uint64_t>(base);
  auto e = static_cast<uint64_t>(exp);
  while (e) {
    if (e & 1u) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<int64_t>(result);
}

bool isIntegralType(ElemType t) { return inSet(kIntTypes | typeBit(ElemType::Bool), t); }

}  // namespace

InferResult inferBinary(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kNumericTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  auto shape = broadcastShapes(inputs[0].shape, inputs[1].shape);
  if (!shape)
    return invalid(ctx, "input shapes {} and {} do not broadcast", shapeStr(inputs[0].shape),
                   shapeStr(inputs[1].shape));
  return single(inputs[0].type, std::move(*shape));
}

Status runBinary(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& a = *inputs[0];
  const ir::Tensor& b = *inputs[1];
  ir::Tensor& y = *outputs[0];
  ir::OpKind kind = ctx.kind;
  if (y.type() == ElemType::Float) {
    cpu::BinaryOp op = kind == ir::OpKind::Add   ? cpu::BinaryOp::Add
                       : kind == ir::OpKind::Sub ? cpu::BinaryOp::Sub
                       : kind == ir::OpKind::Mul ? cpu::BinaryOp::Mul
                                                 : cpu::BinaryOp::Div;
    std::array<std::span<const int64_t>, 2> shapes{a.shape(), b.shape()};
    BroadcastWalk walk = BroadcastWalk::make(y.shape(), shapes);
    const float* pa = a.dataAs<float>();
    const float* pb = b.dataAs<float>();
    float* out = y.mutableDataAs<float>();
    parallelFor(ctx, static_cast<size_t>(walk.total), kMinChunk, [&](size_t begin, size_t end) {
      walk.visit(static_cast<int64_t>(begin), static_cast<int64_t>(end), [&](const auto& off, int64_t n) {
        cpu::vecBinary(op, pa + off[1], static_cast<size_t>(walk.innerStride[1]), pb + off[2],
                       static_cast<size_t>(walk.innerStride[2]), out + off[0], static_cast<size_t>(n));
      });
    });
    return Status::ok();
  }
  return visitType<kNativeNumeric>(y.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    T* out = y.mutableDataAs<T>();
    switch (kind) {
      case ir::OpKind::Add:
        broadcastApply<T, T, T>(ctx, a, b, out, y.shape(), [](T p, T q) { return wrapping(p, q, std::plus<>()); });
        break;
      case ir::OpKind::Sub:
        broadcastApply<T, T, T>(ctx, a, b, out, y.shape(), [](T p, T q) { return wrapping(p, q, std::minus<>()); });
        break;
      case ir::OpKind::Mul:
        broadcastApply<T, T, T>(ctx, a, b, out, y.shape(),
                                [](T p, T q) { return wrapping(p, q, std::multiplies<>()); });
        break;
      default: broadcastApply<T, T, T>(ctx, a, b, out, y.shape(), [](T p, T q) { return divide(p, q); }); break;
    }
    return Status::ok();
  });
}

InferResult inferPow(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  TypeSet baseTypes = kFloatTypes | typeBit(ElemType::Int32) | typeBit(ElemType::Int64);
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, baseTypes));
  if (attrsOf<ops::BinaryAttrs>(ctx).sameTypeOperands) CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  else CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, kNumericTypes));
  auto shape = broadcastShapes(inputs[0].shape, inputs[1].shape);
  if (!shape)
    return invalid(ctx, "input shapes {} and {} do not broadcast", shapeStr(inputs[0].shape),
                   shapeStr(inputs[1].shape));
  return single(inputs[0].type, std::move(*shape));
}

Status runPow(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& a = *inputs[0];
  const ir::Tensor& b = *inputs[1];
  ir::Tensor& y = *outputs[0];
  if (a.type() == ElemType::Float && b.type() == ElemType::Float) {
    broadcastApply<float, float, float>(ctx, a, b, y.mutableDataAs<float>(), y.shape(),
                                        [](float p, float q) { return q == 2.0f ? p * p : std::pow(p, q); });
    return Status::ok();
  }
  if (a.type() == ElemType::Double && b.type() == ElemType::Double) {
    broadcastApply<double, double, double>(ctx, a, b, y.mutableDataAs<double>(), y.shape(),
                                           [](double p, double q) { return std::pow(p, q); });
    return Status::ok();
  }
  // Mixed types: integers compute exactly in int64, anything involving a float computes in double.
  bool ints = isIntegralType(a.type()) && isIntegralType(b.type());
  ElemType wide = ints ? ElemType::Int64 : ElemType::Double;
  auto widen = [&](const ir::Tensor& t) -> Expected<ir::Tensor> {
    CTX_ASSIGN_OR_RETURN(ir::Tensor w, ir::Tensor::allocate(wide, t.shape()));
    CTX_RETURN_IF_ERROR(
        cpu::convertElements(t.type(), t.data(), wide, w.mutableData(), static_cast<size_t>(t.elementCount())));
    return w;
  };
  CTX_ASSIGN_OR_RETURN(ir::Tensor wa, widen(a));
  CTX_ASSIGN_OR_RETURN(ir::Tensor wb, widen(b));
  CTX_ASSIGN_OR_RETURN(ir::Tensor wy, ir::Tensor::allocate(wide, y.shape()));
  if (ints) {
    broadcastApply<int64_t, int64_t, int64_t>(ctx, wa, wb, wy.mutableDataAs<int64_t>(), y.shape(), intPow);
  } else {
    broadcastApply<double, double, double>(ctx, wa, wb, wy.mutableDataAs<double>(), y.shape(),
                                           [](double p, double q) { return std::pow(p, q); });
  }
  return cpu::convertElements(wide, wy.data(), y.type(), y.mutableData(), static_cast<size_t>(y.elementCount()));
}

}  // namespace ctxkit::kernels::detail
