// Comparisons (Equal, Greater, Less, GreaterOrEqual, LessOrEqual), logic (Not, And, Or), Where, variadic
// Max/Min/Sum/Mean and Clip: broadcasting elementwise ops that select or compare rather than compute.
#include "kernels/broadcast_apply.h"

#include <cstring>
#include <limits>

namespace ctxkit::kernels::detail {

// ---- comparisons and logic ----------------------------------------------------------------------------

InferResult inferCompare(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  TypeSet allowed = kNumericTypes;
  if (ctx.kind == ir::OpKind::Equal) allowed |= typeBit(ElemType::Bool);
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, allowed));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  return broadcastPair(ctx, inputs, ElemType::Bool);
}

Status runCompare(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& a = *inputs[0];
  const ir::Tensor& b = *inputs[1];
  ir::Tensor& y = *outputs[0];
  return visitType<kNativeNumeric | typeBit(ElemType::Bool)>(a.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    switch (ctx.kind) {
      case ir::OpKind::Equal: binaryApply<bool, T>(ctx, a, b, y, [](T p, T q) { return p == q; }); break;
      case ir::OpKind::Greater: binaryApply<bool, T>(ctx, a, b, y, [](T p, T q) { return p > q; }); break;
      case ir::OpKind::Less: binaryApply<bool, T>(ctx, a, b, y, [](T p, T q) { return p < q; }); break;
      case ir::OpKind::GreaterOrEqual: binaryApply<bool, T>(ctx, a, b, y, [](T p, T q) { return p >= q; }); break;
      default: binaryApply<bool, T>(ctx, a, b, y, [](T p, T q) { return p <= q; }); break;
    }
    return Status::ok();
  });
}

InferResult inferLogic(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  bool unary = ctx.kind == ir::OpKind::Not;
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, unary ? 1 : 2, unary ? 1 : 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Bool)));
  if (unary) return single(ElemType::Bool, inputs[0].shape);
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  return broadcastPair(ctx, inputs, ElemType::Bool);
}

Status runLogic(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  if (ctx.kind == ir::OpKind::Not) {
    const bool* x = inputs[0]->dataAs<bool>();
    bool* out = y.mutableDataAs<bool>();
    for (uint64_t i = 0; i < y.elementCount(); ++i) out[i] = !x[i];
  } else if (ctx.kind == ir::OpKind::And) {
    binaryApply<bool, bool>(ctx, *inputs[0], *inputs[1], y, [](bool p, bool q) { return p && q; });
  } else {
    binaryApply<bool, bool>(ctx, *inputs[0], *inputs[1], y, [](bool p, bool q) { return p || q; });
  }
  return Status::ok();
}

// ---- Where --------------------------------------------------------------------------------------------

InferResult inferWhere(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Bool)));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, kFixedSizeTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 1, 2));
  auto ab = broadcastShapes(inputs[1].shape, inputs[2].shape);
  std::optional<ir::Shape> shape;
  if (ab) shape = broadcastShapes(inputs[0].shape, *ab);
  if (!shape)
    return invalid(ctx, "input shapes {}, {} and {} do not broadcast", shapeStr(inputs[0].shape),
                   shapeStr(inputs[1].shape), shapeStr(inputs[2].shape));
  return single(inputs[1].type, std::move(*shape));
}

Status runWhere(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& c = *inputs[0];
  const ir::Tensor& a = *inputs[1];
  const ir::Tensor& b = *inputs[2];
  ir::Tensor& y = *outputs[0];
  return visitElemSize(ctx, ir::elemSize(y.type()), [&](auto tag) -> Status {
    using T = decltype(tag);
    std::array<std::span<const int64_t>, 3> shapes{c.shape(), a.shape(), b.shape()};
    const bool* pc = c.dataAs<bool>();
    const T* pa = a.dataAs<T>();
    const T* pb = b.dataAs<T>();
    T* out = y.mutableDataAs<T>();
    walkBroadcast(ctx, y.shape(), shapes, [&](const auto& off, int64_t n, const auto& st) {
      for (int64_t i = 0; i < n; ++i)
        out[off[0] + i] = pc[off[1] + i * st[1]] ? pa[off[2] + i * st[2]] : pb[off[3] + i * st[3]];
    });
    return Status::ok();
  });
}

// ---- Max, Min -----------------------------------------------------------------------------------------

InferResult inferMinMax(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  if (inputs.empty()) return invalid(ctx, "has no inputs but expected at least 1");
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, inputs.size()));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kNumericTypes));
  ir::Shape shape = inputs[0].shape;
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (!inputs[i].present) return invalid(ctx, "input {} is missing", i);
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
    auto s = broadcastShapes(shape, inputs[i].shape);
    if (!s)
      return invalid(ctx, "input {} of shape {} does not broadcast to {}", i, shapeStr(inputs[i].shape),
                     shapeStr(shape));
    shape = std::move(*s);
  }
  return single(inputs[0].type, std::move(shape));
}

Status runMinMax(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  const ir::OpKind kind = ctx.kind;
  bool isMax = kind == ir::OpKind::Max;
  return visitType<kNativeNumeric>(y.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    T* out = y.mutableDataAs<T>();
    // out = broadcast(input 0), then folded with each further input in place.
    {
      std::array<std::span<const int64_t>, 1> shapes{inputs[0]->shape()};
      const T* p = inputs[0]->dataAs<T>();
      walkBroadcast(ctx, y.shape(), shapes, [&](const auto& off, int64_t n, const auto& st) {
        for (int64_t i = 0; i < n; ++i) out[off[0] + i] = p[off[1] + i * st[1]];
      });
    }
    for (size_t k = 1; k < inputs.size(); ++k) {
      std::array<std::span<const int64_t>, 1> shapes{inputs[k]->shape()};
      const T* p = inputs[k]->dataAs<T>();
      walkBroadcast(ctx, y.shape(), shapes, [&](const auto& off, int64_t n, const auto& st) {
        for (int64_t i = 0; i < n; ++i) {
          T& o = out[off[0] + i];
          T v = p[off[1] + i * st[1]];
          if (kind == ir::OpKind::Sum || kind == ir::OpKind::Mean) {
            o = static_cast<T>(o + v);
            continue;
          }
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(v) || std::isnan(o)) {
              o = std::numeric_limits<T>::quiet_NaN();
              continue;
            }
          }
          o = isMax ? (v > o ? v : o) : (v < o ? v : o);
        }
      });
    }
    if (kind == ir::OpKind::Mean) {
      const auto count = static_cast<T>(inputs.size());
      for (uint64_t i = 0; i < y.elementCount(); ++i) out[i] = static_cast<T>(out[i] / count);
    }
    return Status::ok();
  });
}

// ---- Clip ---------------------------------------------------------------------------------------------

InferResult inferClip(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, ctx.opset < 11 ? 1 : 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, ctx.opset < 11 ? kFloatTypes : kNumericTypes));
  for (size_t i = 1; i < inputs.size(); ++i) {
    const ValueDesc* bound = optionalInput(inputs, i);
    if (!bound) continue;
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
    if (dimProduct(bound->shape) != 1 || bound->shape.size() > 1)
      return invalid(ctx, "input {} ({}) has shape {} but expected a scalar", i, i == 1 ? "min" : "max",
                     shapeStr(bound->shape));
  }
  return single(inputs[0].type, inputs[0].shape);
}

Status runClip(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  return visitType<kNativeNumeric>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if constexpr (std::is_floating_point_v<T>) {
      lo = -std::numeric_limits<T>::infinity();
      hi = std::numeric_limits<T>::infinity();
    }
    if (ctx.opset < 11) {
      lo = static_cast<T>(attrsOf<ops::ClipAttrs>(ctx).min);
      hi = static_cast<T>(attrsOf<ops::ClipAttrs>(ctx).max);
    } else {
      if (inputs.size() > 1 && inputs[1]) lo = *inputs[1]->dataAs<T>();
      if (inputs.size() > 2 && inputs[2]) hi = *inputs[2]->dataAs<T>();
    }
    const T* in = x.dataAs<T>();
    T* out = y.mutableDataAs<T>();
    // min > max gives max everywhere (the spec applies min first, then max).
    parallelFor(ctx, static_cast<size_t>(x.elementCount()), kBroadcastMinChunk, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        T v = in[i];
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        out[i] = v;
      }
    });
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
