// Softmax (2-D coercion before opset 13, per axis from 13) and ReduceMean (axes attribute, then input from 18).
#include "kernels/ops.h"
#include "kernels/vec_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace ctxkit::kernels::detail {

namespace {

// Softmax as [outer, length, inner]: normalized along `length`, elements of one row `inner` apart.
struct SoftmaxPlan {
  int64_t outer = 1, length = 1, inner = 1;
};

Expected<SoftmaxPlan> planSoftmax(const OpContext& ctx, std::span<const int64_t> shape) {
  int64_t rank = static_cast<int64_t>(shape.size());
  SoftmaxPlan p;
  if (rank == 0) return p;  // a scalar is its own single-element row
  const ops::SoftmaxAttrs& attrs = attrsOf<ops::SoftmaxAttrs>(ctx);
  const bool legacy = attrs.coerce2d;
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrs.axis, rank, "attribute axis"));
  auto a = static_cast<size_t>(axis);
  p.outer = dimProduct(shape, 0, a);
  if (legacy) {
    p.length = dimProduct(shape, a, shape.size());  // input coerced to 2-D at axis
  } else {
    p.length = shape[a];
    p.inner = dimProduct(shape, a + 1, shape.size());
  }
  return p;
}

void softmaxRowFloat(const float* x, float* y, int64_t n) {
  float mx = vecMax(x, static_cast<size_t>(n));
  if (std::isinf(mx)) {  // all -inf (or +inf present): fall back to the definition
    for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - mx);
  } else {
    float sum = vecExpShiftSum(x, y, static_cast<size_t>(n), mx);
    float inv = 1.0f / sum;
    vecBinary(BinaryOp::Mul, y, 1, &inv, 0, y, static_cast<size_t>(n));
    return;
  }
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += y[i];
  for (int64_t i = 0; i < n; ++i) y[i] /= sum;
}

template <typename T> void softmaxStrided(const T* x, T* y, int64_t length, int64_t inner, std::vector<T>& scratch) {
  // Row max and sum per inner position, walking contiguous inner runs.
  scratch.assign(static_cast<size_t>(2 * inner), T(0));
  T* mx = scratch.data();
  T* sum = mx + inner;
  for (int64_t i = 0; i < inner; ++i) mx[i] = -std::numeric_limits<T>::infinity();
  for (int64_t l = 0; l < length; ++l)
    for (int64_t i = 0; i < inner; ++i) mx[i] = std::max(mx[i], x[l * inner + i]);
  for (int64_t l = 0; l < length; ++l)
    for (int64_t i = 0; i < inner; ++i) {
      T e = std::exp(x[l * inner + i] - mx[i]);
      y[l * inner + i] = e;
      sum[i] += e;
    }
  for (int64_t l = 0; l < length; ++l)
    for (int64_t i = 0; i < inner; ++i) y[l * inner + i] /= sum[i];
}

}  // namespace

InferResult inferSoftmax(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  CTX_RETURN_IF_ERROR(planSoftmax(ctx, inputs[0].shape).status());
  return single(inputs[0].type, inputs[0].shape);
}

Status runSoftmax(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  CTX_ASSIGN_OR_RETURN(SoftmaxPlan p, planSoftmax(ctx, x.shape()));
  const int64_t block = p.length * p.inner;
  if (block == 0) return Status::ok();
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* py = outputs[0]->mutableDataAs<T>();
    size_t minRows = static_cast<size_t>(std::max<int64_t>(1, 16384 / block));
    parallelFor(ctx, static_cast<size_t>(p.outer), minRows, [&](size_t o0, size_t o1) {
      std::vector<T> scratch;
      for (size_t o = o0; o < o1; ++o) {
        const T* src = px + static_cast<int64_t>(o) * block;
        T* dst = py + static_cast<int64_t>(o) * block;
        if constexpr (std::is_same_v<T, float>) {
          if (p.inner == 1) {
            softmaxRowFloat(src, dst, p.length);
            continue;
          }
        }
        softmaxStrided<T>(src, dst, p.length, p.inner, scratch);
      }
    });
    return Status::ok();
  });
}

// ---- ReduceMean --------------------------------------------------------------------------------------

namespace {

struct ReducePlan {
  bool identity = false;      // noop_with_empty_axes with no axes
  std::vector<bool> reduced;  // per input dim
  ir::Shape keptShape;        // input shape with reduced dims set to 1
  ir::Shape outShape;
};

Expected<ReducePlan> planReduce(const OpContext& ctx, InDescs inputs) {
  const auto& x = inputs[0].shape;
  int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> axes;
  bool noop = false;
  if (ctx.opset >= 18) {
    if (optionalInput(inputs, 1)) {
      CTX_ASSIGN_OR_RETURN(axes, knownInts(ctx, inputs, 1, "axes"));
    }
    noop = ctx.attrs.getInt("noop_with_empty_axes", 0) != 0;
  } else {
    if (inputs.size() > 1) return invalid(ctx, "expected 1 input before opset 18 but got {}", inputs.size());
    axes = ctx.attrs.getInts("axes");
  }
  int64_t keepdims = ctx.attrs.getInt("keepdims", 1);
  ReducePlan p;
  if (axes.empty() && noop) {
    p.identity = true;
    p.outShape = x;
    return p;
  }
  CTX_ASSIGN_OR_RETURN(axes, normalizeAxes(ctx, std::move(axes), rank, "axes"));
  p.reduced.assign(x.size(), axes.empty());
  for (int64_t a : axes) p.reduced[static_cast<size_t>(a)] = true;
  for (size_t i = 0; i < x.size(); ++i) {
    p.keptShape.push_back(p.reduced[i] ? 1 : x[i]);
    if (!p.reduced[i])
      p.outShape.push_back(x[i]);
    else if (keepdims != 0)
      p.outShape.push_back(1);
  }
  return p;
}

template <typename T> void storeMeans(const std::vector<double>& sums, double count, T* out) {
  for (size_t i = 0; i < sums.size(); ++i) {
    if (count == 0) {
      if constexpr (std::is_floating_point_v<T>)
        out[i] = std::numeric_limits<T>::quiet_NaN();
      else
        out[i] = T(0);
    } else if constexpr (std::is_floating_point_v<T>) {
      out[i] = static_cast<T>(sums[i] / count);
    } else {
      out[i] = static_cast<T>(std::trunc(sums[i] / count));
    }
  }
}

}  // namespace

InferResult inferReduceMean(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes | kIntTypes));
  CTX_ASSIGN_OR_RETURN(ReducePlan p, planReduce(ctx, inputs));
  return single(inputs[0].type, std::move(p.outShape));
}

Status runReduceMean(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  std::vector<ValueDesc> descs = describeInputs(inputs, true);
  CTX_ASSIGN_OR_RETURN(ReducePlan p, planReduce(ctx, descs));
  ir::Tensor& y = *outputs[0];
  if (p.identity) {
    if (x.byteSize()) std::memcpy(y.mutableData(), x.data(), x.byteSize());
    return Status::ok();
  }
  const int64_t total = static_cast<int64_t>(x.elementCount());
  const int64_t outCount = static_cast<int64_t>(y.elementCount());
  double reduceCount = 1;
  for (size_t i = 0; i < p.reduced.size(); ++i)
    if (p.reduced[i]) reduceCount *= static_cast<double>(x.shape()[i]);
  return visitType<kNativeNumeric>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* py = y.mutableDataAs<T>();
    // Trailing reduced dims: each output is the mean of one contiguous row (parallel over rows).
    size_t firstReduced = p.reduced.size();
    while (firstReduced > 0 && p.reduced[firstReduced - 1]) --firstReduced;
    bool trailing = std::find(p.reduced.begin(), p.reduced.begin() + static_cast<long>(firstReduced), true) ==
                    p.reduced.begin() + static_cast<long>(firstReduced);
    if (trailing && outCount > 0) {
      int64_t row = dimProduct(x.shape(), firstReduced, x.rank());
      parallelFor(ctx, static_cast<size_t>(outCount),
                  std::max<size_t>(1, 16384 / static_cast<size_t>(std::max<int64_t>(row, 1))),
                  [&](size_t r0, size_t r1) {
                    std::vector<double> sums(r1 - r0, 0.0);
                    for (size_t r = r0; r < r1; ++r) {
                      const T* src = px + static_cast<int64_t>(r) * row;
                      double s = 0;
                      if constexpr (std::is_same_v<T, float>)
                        s = vecSum(src, static_cast<size_t>(row));
                      else
                        for (int64_t i = 0; i < row; ++i) s += static_cast<double>(src[i]);
                      sums[r - r0] = s;
                    }
                    storeMeans<T>(sums, reduceCount, py + r0);
                  });
      return Status::ok();
    }
    std::vector<double> sums(static_cast<size_t>(outCount), 0.0);
    std::array<std::span<const int64_t>, 1> kept{p.keptShape};
    BroadcastWalk walk = BroadcastWalk::make(x.shape(), kept);
    walk.visit(0, total, [&](const auto& off, int64_t n) {
      const T* src = px + off[0];
      double* acc = sums.data() + off[1];
      if (walk.innerStride[1]) {
        for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(src[i]);
      } else {
        double s = 0;
        for (int64_t i = 0; i < n; ++i) s += static_cast<double>(src[i]);
        *acc += s;
      }
    });
    storeMeans<T>(sums, reduceCount, py);
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
