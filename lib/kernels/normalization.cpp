// BatchNormalization (inference mode), LayerNormalization (axis, epsilon, optional bias, Mean/InvStdDev) and
// RMSNormalization (LayerNormalization without centering or bias).
#include "cpu/vec_math.h"
#include "kernels/ops.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

constexpr TypeSet kNormTypes = typeBit(ElemType::Float) | typeBit(ElemType::Double);

// BatchNormalization before opset 9 could normalize per activation (spatial = 0) instead of per channel.
bool perActivation(const OpContext& ctx) { return attrsOf<ops::BatchNormAttrs>(ctx).perActivation; }

// Parameter `i` of a float or double tensor, as double.
double paramValue(const ir::Tensor& t, size_t i) {
  return t.type() == ElemType::Double ? t.dataAs<double>()[i] : t.dataAs<float>()[i];
}

}  // namespace

InferResult inferBatchNorm(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 5, 5));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 5));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  if (outputCount > 1)
    return unsupported(ctx, "{} outputs requested: the running mean/variance outputs exist only in training mode",
                       outputCount);
  const auto& x = inputs[0].shape;
  if (x.size() < 2) return invalid(ctx, "input 0 has shape {} but expected rank 2 or more (N x C ...)", shapeStr(x));
  int64_t expected = perActivation(ctx) ? dimProduct(x, 1, x.size()) : x[1];
  static constexpr const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    CTX_RETURN_IF_ERROR(checkType(ctx, inputs, i, kFloatTypes));
    if (dimProduct(inputs[i].shape) != expected || (!perActivation(ctx) && inputs[i].shape.size() != 1))
      return invalid(ctx, "input {} ({}) has shape {} but expected {} values for input shape {}", i, kNames[i],
                     shapeStr(inputs[i].shape), expected, shapeStr(x));
  }
  return single(inputs[0].type, x);
}

namespace {

// y = x * a + b with a = scale / sqrt(var + eps), b = B - mean * a: per channel (or per activation).
struct BatchNormCoefficients {
  std::vector<double> a, b;
};

BatchNormCoefficients batchNormCoefficients(const OpContext& ctx, const ir::Tensor& scaleT, const ir::Tensor& biasT,
                                            const ir::Tensor& meanT, const ir::Tensor& varT) {
  // One pass over the four parameters, read in place (a compiled program's BatchNorms are prepared at every load:
  // DenseNet-121 keeps 60 of them, whose copies of the parameters were a fifth of a lone session's creation).
  const double eps = attrsOf<ops::BatchNormAttrs>(ctx).epsilon;
  const auto n = static_cast<size_t>(scaleT.elementCount());
  BatchNormCoefficients k{std::vector<double>(n), std::vector<double>(n)};
  for (size_t c = 0; c < n; ++c) {
    k.a[c] = paramValue(scaleT, c) / std::sqrt(paramValue(varT, c) + eps);
    k.b[c] = paramValue(biasT, c) - paramValue(meanT, c) * k.a[c];
  }
  return k;
}

}  // namespace

// With constant parameters (a compiled program's weights) the coefficients are worked out once, at prepare.
Expected<std::shared_ptr<const void>> planBatchNormOnce(const OpContext& ctx, InDescs inputs) {
  // float16 parameters are widened to float32 around the kernel (runViaFloat): those are read per run.
  for (size_t i = 1; i < 5; ++i)
    if (!inputs[i].value || (inputs[i].type != ElemType::Float && inputs[i].type != ElemType::Double))
      return unsupported(ctx, "input {} is not a float32 or float64 constant", i);
  return std::shared_ptr<const void>(std::make_shared<const BatchNormCoefficients>(
      batchNormCoefficients(ctx, *inputs[1].value, *inputs[2].value, *inputs[3].value, *inputs[4].value)));
}

Status runBatchNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  BatchNormCoefficients computed;
  if (!ctx.plan) computed = batchNormCoefficients(ctx, *inputs[1], *inputs[2], *inputs[3], *inputs[4]);
  const BatchNormCoefficients& k = ctx.plan ? *static_cast<const BatchNormCoefficients*>(ctx.plan) : computed;
  const std::vector<double>& a = k.a;
  const std::vector<double>& b = k.b;
  const int64_t batch = x.shape()[0];
  const int64_t channels = x.shape()[1];
  const int64_t spatial = dimProduct(x.shape(), 2, x.rank());
  const bool perAct = perActivation(ctx);
  return visitType<kNormTypes>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* py = outputs[0]->mutableDataAs<T>();
    parallelForWork(
        ctx, static_cast<size_t>(batch * channels), static_cast<size_t>(spatial), [&](size_t p0, size_t p1) {
          for (size_t plane = p0; plane < p1; ++plane) {
            int64_t c = static_cast<int64_t>(plane) % channels;
            const T* src = px + static_cast<int64_t>(plane) * spatial;
            T* dst = py + static_cast<int64_t>(plane) * spatial;
            if (perAct) {
              for (int64_t i = 0; i < spatial; ++i) {
                size_t k = static_cast<size_t>(c * spatial + i);
                dst[i] = static_cast<T>(src[i] * a[k] + b[k]);
              }
            } else {
              T ac = static_cast<T>(a[static_cast<size_t>(c)]), bc = static_cast<T>(b[static_cast<size_t>(c)]);
              if constexpr (std::is_same_v<T, float>)
                cpu::vecScaleShift(src, dst, static_cast<size_t>(spatial), ac, bc);
              else
                for (int64_t i = 0; i < spatial; ++i) dst[i] = src[i] * ac + bc;
            }
          }
        });
    return Status::ok();
  });
}

// ---- LayerNormalization ------------------------------------------------------------------------------

namespace {

// Expands a Scale/B tensor that broadcasts to the normalized shape into one value per normalized element, into
// `out` (the caller's per-thread scratch: runs allocate nothing once it has grown).
void expandParam(const ir::Tensor& t, std::span<const int64_t> normShape, std::vector<double>& out) {
  const int64_t d = dimProduct(normShape);
  out.resize(static_cast<size_t>(d));
  auto value = [&](int64_t k) {
    return t.type() == ElemType::Double ? t.dataAs<double>()[k] : static_cast<double>(t.dataAs<float>()[k]);
  };
  if (t.elementCount() == static_cast<uint64_t>(d)) {
    for (int64_t i = 0; i < d; ++i) out[static_cast<size_t>(i)] = value(i);
    return;
  }
  Dims strides = broadcastStrides(t.shape(), normShape);
  for (int64_t i = 0; i < d; ++i) {
    int64_t rem = i, off = 0;
    for (size_t k = normShape.size(); k-- > 0;) {
      off += (rem % normShape[k]) * strides[k];
      rem /= normShape[k];
    }
    out[static_cast<size_t>(i)] = value(off);
  }
}

}  // namespace

InferResult inferLayerNorm(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, ctx.kind == ir::OpKind::SimplifiedLayerNormalization ? 2 : 3));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  const auto& x = inputs[0].shape;
  int64_t rank = static_cast<int64_t>(x.size());
  const ops::LayerNormAttrs& attrs = attrsOf<ops::LayerNormAttrs>(ctx);
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrs.axis, rank, "attribute axis"));
  const ElemType stash = attrs.stashType;
  std::span<const int64_t> norm(x.data() + axis, x.size() - static_cast<size_t>(axis));
  if (!broadcastsTo(inputs[1].shape, norm))
    return invalid(ctx, "input 1 (Scale) has shape {} which does not broadcast to the normalized shape {}",
                   shapeStr(inputs[1].shape), shapeStr(norm));
  if (const ValueDesc* b = optionalInput(inputs, 2)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
    if (!broadcastsTo(b->shape, norm))
      return invalid(ctx, "input 2 (B) has shape {} which does not broadcast to the normalized shape {}",
                     shapeStr(b->shape), shapeStr(norm));
  }
  std::vector<OutputDesc> outs{{inputs[0].type, x}};
  ir::Shape stats(x.begin(), x.begin() + axis);
  stats.resize(x.size(), 1);
  for (size_t i = 1; i < outputCount; ++i) outs.push_back({stash, stats});
  return outs;
}

Status runLayerNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  int64_t rank = static_cast<int64_t>(x.rank());
  const ops::LayerNormAttrs& attrs = attrsOf<ops::LayerNormAttrs>(ctx);
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrs.axis, rank, "attribute axis"));
  double eps = attrs.epsilon;
  std::span<const int64_t> norm(x.shape().data() + axis, x.shape().size() - static_cast<size_t>(axis));
  const int64_t rows = dimProduct(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t d = dimProduct(norm);
  // Per-thread scratch that grows once, bound to references: the lambdas below also run on pool threads, where
  // the names of thread_local variables would denote those threads' own copies.
  thread_local std::vector<double> scaleScratch, biasScratch;
  thread_local std::vector<float> scaleFScratch, biasFScratch;
  std::vector<double>& scale = scaleScratch;
  std::vector<double>& bias = biasScratch;
  const ir::Tensor* biasT = inputs.size() > 2 ? inputs[2] : nullptr;
  auto expandScale = [&] { expandParam(*inputs[1], norm, scale); };
  auto expandBias = [&] {
    if (biasT) expandParam(*biasT, norm, bias);
    else bias.assign(static_cast<size_t>(d), 0.0);
  };
  // x / sqrt(mean(x^2) + eps) * scale: no centering. SimplifiedLayerNormalization (ONNX Runtime's RMS norm) has no
  // mean output: its output 1 is the inverse standard deviation.
  const bool simplified = ctx.kind == ir::OpKind::SimplifiedLayerNormalization;
  const bool rms = ctx.kind == ir::OpKind::RMSNormalization || simplified;
  ir::Tensor* meanOut = !simplified && outputs.size() > 1 ? outputs[1] : nullptr;
  ir::Tensor* invOut = outputs.size() > (simplified ? 1 : 2) ? outputs[simplified ? 1 : 2] : nullptr;
  auto store = [](ir::Tensor* t, int64_t i, double v) {
    if (!t) return;
    if (t->type() == ElemType::Double) t->mutableDataAs<double>()[i] = v;
    else t->mutableDataAs<float>()[i] = static_cast<float>(v);
  };
  if (x.type() == ElemType::Float) {
    // Float32 parameters of the normalized shape are read in place (a copy each run was a third of a LayerNorm over
    // 32 channels); others are broadcast into float copies.
    auto inPlace = [d](const ir::Tensor* t) {
      return t && t->type() == ElemType::Float && t->elementCount() == static_cast<uint64_t>(d);
    };
    std::vector<float>& scaleF = scaleFScratch;
    std::vector<float>& biasF = biasFScratch;
    const float* scaleP = inputs[1]->dataAs<float>();
    const float* biasP = biasT ? biasT->dataAs<float>() : nullptr;
    if (!inPlace(inputs[1])) {
      expandScale();
      scaleF.assign(scale.begin(), scale.end());
      scaleP = scaleF.data();
    }
    if (biasT && !inPlace(biasT)) {
      expandBias();
      biasF.assign(bias.begin(), bias.end());
      biasP = biasF.data();
    }
    const float* px = x.dataAs<float>();
    float* py = outputs[0]->mutableDataAs<float>();
    const auto n = static_cast<size_t>(d);
    parallelFor(
        ctx, static_cast<size_t>(rows), std::max<size_t>(1, 8192 / std::max<size_t>(n, 1)), [&](size_t r0, size_t r1) {
          for (size_t r = r0; r < r1; ++r) {
            const float* src = px + r * n;
            double mean = n > 0 && !rms ? cpu::vecSum(src, n) / static_cast<double>(n) : 0.0;
            double var =
                n > 0 ? cpu::vecSumSquaredDiff(src, n, static_cast<float>(mean)) / static_cast<double>(n) : 0.0;
            double inv = 1.0 / std::sqrt(var + eps);
            cpu::vecNormalize(src, py + r * n, n, static_cast<float>(mean), static_cast<float>(inv), scaleP, biasP);
            store(meanOut, static_cast<int64_t>(r), mean);
            store(invOut, static_cast<int64_t>(r), inv);
          }
        });
    return Status::ok();
  }
  expandScale();
  expandBias();
  return visitType<kNormTypes>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* py = outputs[0]->mutableDataAs<T>();
    parallelFor(ctx, static_cast<size_t>(rows), 1, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const T* src = px + static_cast<int64_t>(r) * d;
        T* dst = py + static_cast<int64_t>(r) * d;
        double sum = 0;
        for (int64_t i = 0; i < d; ++i) sum += src[i];
        double mean = d > 0 && !rms ? sum / static_cast<double>(d) : 0.0;
        double sq = 0;
        for (int64_t i = 0; i < d; ++i) {
          double diff = src[i] - mean;
          sq += diff * diff;
        }
        double inv = 1.0 / std::sqrt((d > 0 ? sq / static_cast<double>(d) : 0.0) + eps);
        for (int64_t i = 0; i < d; ++i) {
          size_t k = static_cast<size_t>(i);
          dst[i] = static_cast<T>((src[i] - mean) * inv * scale[k] + bias[k]);
        }
        store(meanOut, static_cast<int64_t>(r), mean);
        store(invOut, static_cast<int64_t>(r), inv);
      }
    });
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
