// The Reduce* family (Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare) and ArgMax/ArgMin.
// Axes come from the attribute or, from opset 18 (ReduceSum: 13), from input 1; keepdims and
// noop_with_empty_axes as ONNX defines them. Floating-point inputs accumulate in double, integers in 64 bits.
#include "cpu/vec_math.h"
#include "kernels/ops.h"
#include "kernels/thread_scratch.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

namespace ctxkit::kernels::detail {

namespace {

using ir::OpKind;

struct ReducePlan {
  bool identity = false;      // noop_with_empty_axes with no axes: output = input
  std::vector<bool> reduced;  // per input dim
  ir::Shape keptShape;        // input shape with reduced dims set to 1
  ir::Shape outShape;
};

Expected<ReducePlan> planReduce(const OpContext& ctx, InDescs inputs) {
  const ops::ReduceAttrs& a = attrsOf<ops::ReduceAttrs>(ctx);
  const auto& x = inputs[0].shape;
  int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> axes;
  if (a.axesFromInput) {
    if (optionalInput(inputs, 1)) {
      CTX_ASSIGN_OR_RETURN(axes, knownInts(ctx, inputs, 1, "axes"));
    }
  } else {
    if (inputs.size() > 1) return invalid(ctx, "expected 1 input at opset {} but got {}", ctx.opset, inputs.size());
    if (a.axes) axes.assign(a.axes->begin(), a.axes->end());
  }
  ReducePlan p;
  if (axes.empty() && a.noopWithEmptyAxes) {
    p.identity = true;
    p.outShape = x;
    return p;
  }
  CTX_ASSIGN_OR_RETURN(axes, normalizeAxes(ctx, std::move(axes), rank, "axes"));
  p.reduced.assign(x.size(), axes.empty());
  for (int64_t ax : axes) p.reduced[static_cast<size_t>(ax)] = true;
  for (size_t i = 0; i < x.size(); ++i) {
    p.keptShape.push_back(p.reduced[i] ? 1 : x[i]);
    if (!p.reduced[i]) p.outShape.push_back(x[i]);
    else if (a.keepdims) p.outShape.push_back(1);
  }
  return p;
}

template <typename T>
using AccOf =
    std::conditional_t<std::is_floating_point_v<T>, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

// One reduction: the accumulator's start, how an element joins it, and the result from it.
template <typename T> struct Reducer {
  using Acc = AccOf<T>;
  OpKind kind;

  Acc init() const {
    switch (kind) {
      case OpKind::ReduceProd: return Acc(1);
      case OpKind::ReduceMax:
      case OpKind::ReduceLogSumExp:
        if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<Acc>::infinity();
        else return static_cast<Acc>(std::numeric_limits<T>::lowest());
      case OpKind::ReduceMin:
        if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<Acc>::infinity();
        else return static_cast<Acc>(std::numeric_limits<T>::max());
      default: return Acc(0);
    }
  }

  Acc join(Acc acc, T v) const {
    Acc x = static_cast<Acc>(v);
    switch (kind) {
      case OpKind::ReduceProd: return acc * x;
      case OpKind::ReduceMax:
      case OpKind::ReduceLogSumExp:  // first pass: the maximum
        if constexpr (std::is_floating_point_v<T>)
          if (std::isnan(x)) return x;
        return x > acc ? x : acc;
      case OpKind::ReduceMin:
        if constexpr (std::is_floating_point_v<T>)
          if (std::isnan(x)) return x;
        return x < acc ? x : acc;
      case OpKind::ReduceL1:
        if constexpr (std::is_signed_v<Acc>) return acc + (x < 0 ? -x : x);
        else return acc + x;
      case OpKind::ReduceL2:
      case OpKind::ReduceSumSquare: return acc + x * x;
      default: return acc + x;  // Sum, Mean, LogSum
    }
  }

  T finish(Acc acc, double count) const {
    switch (kind) {
      case OpKind::ReduceMean:
        if constexpr (std::is_floating_point_v<T>) return static_cast<T>(acc / count);
        else return count == 0 ? T(0) : static_cast<T>(std::trunc(static_cast<double>(acc) / count));
      case OpKind::ReduceL2: return static_cast<T>(std::sqrt(static_cast<double>(acc)));
      case OpKind::ReduceLogSum: return static_cast<T>(std::log(static_cast<double>(acc)));
      default: return static_cast<T>(acc);
    }
  }
};

// Accumulates x into acc (one accumulator per output element, `keptShape` indexing) with `join`.
template <typename T, typename Acc, typename Join>
void accumulate(std::span<const int64_t> xShape, std::span<const int64_t> keptShape, const T* px, Acc* acc, Join join) {
  std::array<std::span<const int64_t>, 1> kept{keptShape};
  BroadcastWalk walk = BroadcastWalk::make(xShape, kept);
  walk.visit(0, walk.total, [&](const auto& off, int64_t n) {
    const T* src = px + off[0];
    Acc* a = acc + off[1];
    if (walk.innerStride[1]) {
      for (int64_t i = 0; i < n; ++i) a[i] = join(a[i], src[i]);
    } else {
      Acc s = *a;
      for (int64_t i = 0; i < n; ++i) s = join(s, src[i]);
      *a = s;
    }
  });
}

template <typename T>
Status reduceTyped(const OpContext& ctx, const ReducePlan& p, const ir::Tensor& x, ir::Tensor& y) {
  using Acc = AccOf<T>;
  const Reducer<T> r{ctx.kind};
  const T* px = x.dataAs<T>();
  T* py = y.mutableDataAs<T>();
  const size_t outCount = static_cast<size_t>(y.elementCount());
  double count = 1;
  for (size_t i = 0; i < p.reduced.size(); ++i)
    if (p.reduced[i]) count *= static_cast<double>(x.shape()[i]);

  // Reduced dims all trailing: each output reduces one contiguous row (parallel over rows).
  size_t firstReduced = p.reduced.size();
  while (firstReduced > 0 && p.reduced[firstReduced - 1]) --firstReduced;
  bool trailing = std::find(p.reduced.begin(), p.reduced.begin() + static_cast<long>(firstReduced), true) ==
                  p.reduced.begin() + static_cast<long>(firstReduced);
  if (trailing && ctx.kind != OpKind::ReduceLogSumExp) {
    const int64_t row = dimProduct(x.shape(), firstReduced, x.rank());
    parallelFor(ctx, outCount, std::max<size_t>(1, 16384 / static_cast<size_t>(std::max<int64_t>(row, 1))),
                [&](size_t r0, size_t r1) {
                  for (size_t o = r0; o < r1; ++o) {
                    const T* src = px + static_cast<int64_t>(o) * row;
                    Acc acc = r.init();
                    if constexpr (std::is_same_v<T, float>) {
                      const auto n = static_cast<size_t>(row);
                      if (ctx.kind == OpKind::ReduceSum || ctx.kind == OpKind::ReduceMean) {
                        py[o] = r.finish(static_cast<double>(cpu::vecSum(src, n)), count);
                        continue;
                      }
                      if (ctx.kind == OpKind::ReduceMax || ctx.kind == OpKind::ReduceMin) {
                        py[o] = ctx.kind == OpKind::ReduceMax ? cpu::vecReduceMax(src, n) : cpu::vecReduceMin(src, n);
                        continue;
                      }
                    }
                    for (int64_t i = 0; i < row; ++i) acc = r.join(acc, src[i]);
                    py[o] = r.finish(acc, count);
                  }
                });
    return Status::ok();
  }

  std::vector<Acc> acc(outCount, r.init());
  // The common joins without the switch on the kind per element, so that the loops over rows vectorize.
  switch (ctx.kind) {
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
      accumulate(x.shape(), p.keptShape, px, acc.data(), [](Acc a, T v) { return a + static_cast<Acc>(v); });
      break;
    case OpKind::ReduceMax:  // NaN wins, and stays (nothing compares greater than it)
      accumulate(x.shape(), p.keptShape, px, acc.data(), [](Acc a, T v) {
        const auto x = static_cast<Acc>(v);
        return x > a || x != x ? x : a;
      });
      break;
    case OpKind::ReduceMin:
      accumulate(x.shape(), p.keptShape, px, acc.data(), [](Acc a, T v) {
        const auto x = static_cast<Acc>(v);
        return x < a || x != x ? x : a;
      });
      break;
    default: accumulate(x.shape(), p.keptShape, px, acc.data(), [&](Acc a, T v) { return r.join(a, v); });
  }
  if (ctx.kind == OpKind::ReduceLogSumExp) {
    // Second pass: the sum of exp(x - max), so that large inputs do not overflow.
    std::vector<double> sums(outCount, 0.0);
    std::vector<double> maxima(acc.begin(), acc.end());
    std::array<std::span<const int64_t>, 1> kept{p.keptShape};
    BroadcastWalk walk = BroadcastWalk::make(x.shape(), kept);
    walk.visit(0, walk.total, [&](const auto& off, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        size_t o = static_cast<size_t>(off[1] + i * walk.innerStride[1]);
        sums[o] += std::exp(static_cast<double>(px[off[0] + i]) - maxima[o]);
      }
    });
    for (size_t o = 0; o < outCount; ++o)
      py[o] = std::isfinite(maxima[o]) ? static_cast<T>(maxima[o] + std::log(sums[o])) : static_cast<T>(maxima[o]);
    return Status::ok();
  }
  for (size_t o = 0; o < outCount; ++o) py[o] = r.finish(acc[o], count);
  return Status::ok();
}

TypeSet reduceTypes(OpKind kind) {
  if (kind == OpKind::ReduceMax || kind == OpKind::ReduceMin) return kNumericTypes | typeBit(ElemType::Bool);
  return kNumericTypes;
}

}  // namespace

InferResult inferReduce(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, reduceTypes(ctx.kind)));
  CTX_ASSIGN_OR_RETURN(ReducePlan p, planReduce(ctx, inputs));
  return single(inputs[0].type, std::move(p.outShape));
}

Expected<std::shared_ptr<const void>> planReduceOnce(const OpContext& ctx, InDescs inputs) {
  CTX_ASSIGN_OR_RETURN(ReducePlan p, planReduce(ctx, inputs));
  return std::shared_ptr<const void>(std::make_shared<const ReducePlan>(std::move(p)));
}

Status runReduce(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  std::optional<ReducePlan> planned;
  if (!ctx.plan) {
    std::vector<ValueDesc> descs = describeInputs(inputs, true);
    CTX_ASSIGN_OR_RETURN(planned, planReduce(ctx, descs));
  }
  const ReducePlan& p = ctx.plan ? *static_cast<const ReducePlan*>(ctx.plan) : *planned;
  if (p.identity) {
    if (x.byteSize()) std::memcpy(y.mutableData(), x.data(), x.byteSize());
    return Status::ok();
  }
  return visitType<kNativeNumeric | typeBit(ElemType::Bool)>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      // Max is "any", Min is "all".
      using U = uint8_t;
      std::vector<U> acc(static_cast<size_t>(y.elementCount()), ctx.kind == OpKind::ReduceMax ? U(0) : U(1));
      bool isMax = ctx.kind == OpKind::ReduceMax;
      accumulate(x.shape(), p.keptShape, reinterpret_cast<const U*>(x.data()), acc.data(),
                 [isMax](U a, U v) { return isMax ? U(a | v) : U(a & v); });
      bool* py = y.mutableDataAs<bool>();
      for (size_t o = 0; o < acc.size(); ++o) py[o] = acc[o] != 0;
      return Status::ok();
    } else {
      return reduceTyped<T>(ctx, p, x, y);
    }
  });
}

// ---- ArgMax, ArgMin ------------------------------------------------------------------------------------

namespace {

struct ArgPlan {
  int64_t outer = 1, length = 1, inner = 1;
  ir::Shape outShape;
};

Expected<ArgPlan> planArg(const OpContext& ctx, std::span<const int64_t> shape) {
  const ops::ArgReduceAttrs& a = attrsOf<ops::ArgReduceAttrs>(ctx);
  int64_t rank = static_cast<int64_t>(shape.size());
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, a.axis, std::max<int64_t>(rank, 1), "attribute axis"));
  ArgPlan p;
  if (rank == 0) return p;
  auto ax = static_cast<size_t>(axis);
  p.outer = dimProduct(shape, 0, ax);
  p.length = shape[ax];
  p.inner = dimProduct(shape, ax + 1, shape.size());
  if (p.length == 0) return invalid(ctx, "cannot take {} over an empty axis", ir::opKindName(ctx.kind));
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i != ax) p.outShape.push_back(shape[i]);
    else if (a.keepdims) p.outShape.push_back(1);
  }
  return p;
}

}  // namespace

InferResult inferArgReduce(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kNumericTypes));
  CTX_ASSIGN_OR_RETURN(ArgPlan p, planArg(ctx, inputs[0].shape));
  return single(ElemType::Int64, std::move(p.outShape));
}

Status runArgReduce(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  CTX_ASSIGN_OR_RETURN(ArgPlan p, planArg(ctx, x.shape()));
  const bool last = attrsOf<ops::ArgReduceAttrs>(ctx).selectLastIndex;
  const bool isMax = ctx.kind == OpKind::ArgMax;
  int64_t* py = outputs[0]->mutableDataAs<int64_t>();
  return visitType<kNativeNumeric>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    if (p.inner > 1) {
      // Along the axis one plane of `inner` elements at a time, each element against its best so far (the same
      // comparisons as below, in memory order): the axis' stride is a whole plane.
      thread_local std::vector<T> bestValues;
      T* best = scratchAtLeast(bestValues, static_cast<size_t>(p.inner));
      for (int64_t o = 0; o < p.outer; ++o) {
        const T* src = px + o * p.length * p.inner;
        int64_t* idx = py + o * p.inner;
        std::copy(src, src + p.inner, best);
        std::fill(idx, idx + p.inner, int64_t{0});
        for (int64_t l = 1; l < p.length; ++l) {
          const T* row = src + l * p.inner;
          for (int64_t i = 0; i < p.inner; ++i) {
            const T v = row[i], b = best[i];
            const bool better = isMax ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
            best[i] = better ? v : b;
            idx[i] = better ? l : idx[i];
          }
        }
      }
      return Status::ok();
    }
    for (int64_t o = 0; o < p.outer; ++o)
      for (int64_t i = 0; i < p.inner; ++i) {
        const T* src = px + o * p.length * p.inner + i;
        int64_t best = 0;
        for (int64_t l = 1; l < p.length; ++l) {
          T v = src[l * p.inner], b = src[best * p.inner];
          bool better = isMax ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
          if (better) best = l;
        }
        py[o * p.inner + i] = best;
      }
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
