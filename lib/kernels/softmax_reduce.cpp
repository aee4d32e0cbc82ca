// Softmax, LogSoftmax and Hardmax (2-D coercion before opset 13, per axis from 13).
#include "cpu/vec_math.h"
#include "kernels/ops.h"

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
  float mx = cpu::vecMax(x, static_cast<size_t>(n));
  if (std::isinf(mx)) {  // all -inf (or +inf present): fall back to the definition
    for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - mx);
  } else {
    float sum = cpu::vecExpShiftSum(x, y, static_cast<size_t>(n), mx);
    float inv = 1.0f / sum;
    cpu::vecBinary(cpu::BinaryOp::Mul, y, 1, &inv, 0, y, static_cast<size_t>(n));
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

// ---- LogSoftmax, Hardmax -------------------------------------------------------------------------------

Status runLogSoftmaxOrHardmax(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  CTX_ASSIGN_OR_RETURN(SoftmaxPlan p, planSoftmax(ctx, x.shape()));
  const int64_t block = p.length * p.inner;
  if (block == 0) return Status::ok();
  const bool hard = ctx.kind == ir::OpKind::Hardmax;
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* py = outputs[0]->mutableDataAs<T>();
    parallelFor(ctx, static_cast<size_t>(p.outer), 1, [&](size_t o0, size_t o1) {
      for (size_t o = o0; o < o1; ++o)
        for (int64_t i = 0; i < p.inner; ++i) {
          const T* src = px + static_cast<int64_t>(o) * block + i;
          T* dst = py + static_cast<int64_t>(o) * block + i;
          int64_t best = 0;
          for (int64_t l = 1; l < p.length; ++l)
            if (src[l * p.inner] > src[best * p.inner]) best = l;
          T mx = src[best * p.inner];
          if (hard) {
            for (int64_t l = 0; l < p.length; ++l) dst[l * p.inner] = l == best ? T(1) : T(0);
            continue;
          }
          double sum = 0;
          for (int64_t l = 0; l < p.length; ++l) sum += std::exp(static_cast<double>(src[l * p.inner] - mx));
          T logSum = static_cast<T>(std::log(sum));
          for (int64_t l = 0; l < p.length; ++l) dst[l * p.inner] = src[l * p.inner] - mx - logSum;
        }
    });
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
