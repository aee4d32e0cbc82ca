// Normalizations over groups of elements: InstanceNormalization, GroupNormalization, LpNormalization,
// MeanVarianceNormalization and LRN. Statistics accumulate in double.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

constexpr TypeSet kTypes = typeBit(ElemType::Float) | typeBit(ElemType::Double);

// Sum of x[0, n) - shift and of its squares in double, in four independent lanes (the order is fixed: results do not
// depend on the machine).
template <typename T> void sumAndSquares(const T* x, int64_t n, double shift, double& sum, double& squares) {
  double s[4] = {}, q[4] = {};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) {
      const double d = static_cast<double>(x[i + k]) - shift;
      s[k] += d;
      q[k] += d * d;
    }
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - shift;
    s[0] += d;
    q[0] += d * d;
  }
  sum = (s[0] + s[1]) + (s[2] + s[3]);
  squares = (q[0] + q[1]) + (q[2] + q[3]);
}

// A per-channel (or, when `perGroup`, per-group) parameter as double.
double paramAt(const ir::Tensor& t, int64_t i) {
  return t.type() == ElemType::Double ? t.dataAs<double>()[i] : static_cast<double>(t.dataAs<float>()[i]);
}

// Normalizes `groups` consecutive runs of `channelsPerGroup` x `spatial` elements each to zero mean and unit variance
// (+ eps), then applies the scale and bias of each channel (channel index modulo `channels`; of each group instead
// when `paramsPerGroup`), as one multiply-add per element. Statistics are taken in double around the group's first
// element (which keeps the variance accurate when the mean is large), on the pool's threads by group.
template <typename T>
void normalizeGroups(const OpContext& ctx, const T* x, T* y, int64_t groups, int64_t channelsPerGroup, int64_t spatial,
                     int64_t channels, double eps, const ir::Tensor& scale, const ir::Tensor& bias,
                     bool paramsPerGroup) {
  const int64_t len = channelsPerGroup * spatial;
  parallelForWork(ctx, static_cast<size_t>(groups), static_cast<size_t>(len) * 4, [&](size_t g0, size_t g1) {
    for (auto g = static_cast<int64_t>(g0); g < static_cast<int64_t>(g1); ++g) {
      const T* src = x + g * len;
      T* dst = y + g * len;
      const double shift = len ? static_cast<double>(src[0]) : 0.0;
      double sum = 0, squares = 0;
      sumAndSquares(src, len, shift, sum, squares);
      const double n = static_cast<double>(std::max<int64_t>(len, 1));
      const double centred = sum / n;  // mean - shift
      const double variance = std::max(0.0, squares / n - centred * centred);
      const double mean = shift + centred, inv = 1.0 / std::sqrt(variance + eps);
      for (int64_t k = 0; k < channelsPerGroup; ++k) {
        const int64_t c = (g * channelsPerGroup + k) % channels;
        const int64_t param = paramsPerGroup ? c / channelsPerGroup : c;
        const double a = inv * paramAt(scale, param);
        const auto mul = static_cast<T>(a), add = static_cast<T>(paramAt(bias, param) - mean * a);
        const T* in = src + k * spatial;
        T* out = dst + k * spatial;
        for (int64_t i = 0; i < spatial; ++i) out[i] = in[i] * mul + add;
      }
    }
  });
}

}  // namespace

// ---- InstanceNormalization, GroupNormalization --------------------------------------------------------

InferResult inferGroupNorm(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  // Scale and bias are read as the input's type: another type (float16 beside float32) would be read past its end.
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
  const auto& x = inputs[0].shape;
  if (x.size() < 2) return invalid(ctx, "input 0 has shape {} but expected rank 2 or more (N x C ...)", shapeStr(x));
  const ops::GroupNormAttrs& a = attrsOf<ops::GroupNormAttrs>(ctx);
  int64_t params = x[1];
  if (ctx.kind == ir::OpKind::GroupNormalization) {
    if (a.numGroups < 1 || x[1] % a.numGroups != 0)
      return invalid(ctx, "num_groups {} does not divide the {} channels", a.numGroups, x[1]);
    if (ctx.opset < 21) params = a.numGroups;  // opset 18: scale and bias per group
  }
  for (size_t i = 1; i < 3; ++i)
    if (dimProduct(inputs[i].shape) != params)
      return invalid(ctx, "input {} has shape {} but expected {} values", i, shapeStr(inputs[i].shape), params);
  return single(inputs[0].type, x);
}

Status runGroupNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const ops::GroupNormAttrs& a = attrsOf<ops::GroupNormAttrs>(ctx);
  const int64_t n = x.shape()[0], c = x.shape()[1], spatial = dimProduct(x.shape(), 2, x.rank());
  const bool instance = ctx.kind == ir::OpKind::InstanceNormalization;
  const int64_t groups = instance ? c : a.numGroups;
  // Opset 18's GroupNormalization has a scale and bias per group, not per channel.
  const bool paramsPerGroup = !instance && ctx.opset < 21;
  return visitType<kTypes>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    normalizeGroups<T>(ctx, x.dataAs<T>(), outputs[0]->mutableDataAs<T>(), n * groups, c / groups, spatial, c,
                       a.epsilon, *inputs[1], *inputs[2], paramsPerGroup);
    return Status::ok();
  });
}

// ---- LpNormalization -------------------------------------------------------------------------------------

InferResult inferLpNorm(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  const ops::LpNormAttrs& a = attrsOf<ops::LpNormAttrs>(ctx);
  CTX_RETURN_IF_ERROR(
      normalizeAxis(ctx, a.axis, static_cast<int64_t>(inputs[0].shape.size()), "attribute axis").status());
  if (a.p != 1 && a.p != 2) return invalid(ctx, "attribute p is {} but expected 1 or 2", a.p);
  return single(inputs[0].type, inputs[0].shape);
}

Status runLpNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const ops::LpNormAttrs& a = attrsOf<ops::LpNormAttrs>(ctx);
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, a.axis, static_cast<int64_t>(x.rank()), "axis"));
  auto ax = static_cast<size_t>(axis);
  const int64_t outer = dimProduct(x.shape(), 0, ax), len = x.shape()[ax];
  const int64_t inner = dimProduct(x.shape(), ax + 1, x.rank());
  return visitType<kTypes>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* py = outputs[0]->mutableDataAs<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * len * inner + i;
        double norm = 0;
        for (int64_t l = 0; l < len; ++l) {
          double v = static_cast<double>(px[base + l * inner]);
          norm += a.p == 1 ? std::fabs(v) : v * v;
        }
        if (a.p == 2) norm = std::sqrt(norm);
        for (int64_t l = 0; l < len; ++l)
          py[base + l * inner] = norm == 0 ? T(0) : static_cast<T>(static_cast<double>(px[base + l * inner]) / norm);
      }
    return Status::ok();
  });
}

// ---- MeanVarianceNormalization ---------------------------------------------------------------------------

InferResult inferMvn(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  const auto& axes = attrsOf<ops::ReduceAttrs>(ctx).axes;
  CTX_RETURN_IF_ERROR(normalizeAxes(ctx,
                                    axes ? std::vector<int64_t>(axes->begin(), axes->end()) : std::vector<int64_t>{},
                                    static_cast<int64_t>(inputs[0].shape.size()), "axes")
                          .status());
  return single(inputs[0].type, inputs[0].shape);
}

Status runMvn(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const auto& attrAxes = attrsOf<ops::ReduceAttrs>(ctx).axes;
  CTX_ASSIGN_OR_RETURN(
      std::vector<int64_t> axes,
      normalizeAxes(ctx, attrAxes ? std::vector<int64_t>(attrAxes->begin(), attrAxes->end()) : std::vector<int64_t>{},
                    static_cast<int64_t>(x.rank()), "axes"));
  ir::Shape kept = x.shape();
  double count = 1;
  for (int64_t a : axes) {
    count *= static_cast<double>(kept[static_cast<size_t>(a)]);
    kept[static_cast<size_t>(a)] = 1;
  }
  const size_t groups = static_cast<size_t>(dimProduct(kept));
  std::array<std::span<const int64_t>, 1> keptShapes{kept};
  BroadcastWalk walk = BroadcastWalk::make(x.shape(), keptShapes);
  return visitType<kTypes>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* py = outputs[0]->mutableDataAs<T>();
    std::vector<double> sum(groups, 0.0), sq(groups, 0.0);
    walk.visit(0, walk.total, [&](const auto& off, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        double v = static_cast<double>(px[off[0] + i]);
        auto g = static_cast<size_t>(off[1] + i * walk.innerStride[1]);
        sum[g] += v;
        sq[g] += v * v;
      }
    });
    walk.visit(0, walk.total, [&](const auto& off, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        auto g = static_cast<size_t>(off[1] + i * walk.innerStride[1]);
        double mean = sum[g] / count;
        double var = sq[g] / count - mean * mean;
        py[off[0] + i] = static_cast<T>((static_cast<double>(px[off[0] + i]) - mean) / (std::sqrt(var) + 1e-9));
      }
    });
    return Status::ok();
  });
}

// ---- LRN ---------------------------------------------------------------------------------------------------

InferResult inferLrn(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  if (inputs[0].shape.size() < 2) return invalid(ctx, "input 0 must have rank 2 or more (N x C ...)");
  if (attrsOf<ops::LrnAttrs>(ctx).size < 1) return invalid(ctx, "attribute size must be at least 1");
  return single(inputs[0].type, inputs[0].shape);
}

// y = x / (bias + alpha / size * sum of x^2 over the neighbouring channels)^beta.
Status runLrn(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const ops::LrnAttrs& a = attrsOf<ops::LrnAttrs>(ctx);
  const int64_t n = x.shape()[0], c = x.shape()[1], spatial = dimProduct(x.shape(), 2, x.rank());
  const int64_t before = (a.size - 1) / 2, after = a.size - 1 - before;
  return visitType<kTypes>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* py = outputs[0]->mutableDataAs<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t s = 0; s < spatial; ++s) {
          double sq = 0;
          for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
            double v = static_cast<double>(px[(b * c + k) * spatial + s]);
            sq += v * v;
          }
          int64_t i = (b * c + ch) * spatial + s;
          py[i] = static_cast<T>(static_cast<double>(px[i]) /
                                 std::pow(a.bias + a.alpha / static_cast<double>(a.size) * sq, a.beta));
        }
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
