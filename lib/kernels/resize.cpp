// Resize (opset 10, 11, 13, 18, 19): nearest, linear and cubic modes over any axes, from scales or sizes, with
// every coordinate transformation mode (tf_crop_and_resize samples the roi box and writes extrapolation_value
// outside the input); computed as one 1-D resampling pass per axis.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace ctxkit::kernels::detail {

namespace {

using Coord = ops::ResizeCoord;
// ops::NearestMode's values in its order, then opset 10's rule (Simple).
enum class Nearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };
// ops::NearestMode's values map onto the first four by value.
static_assert(static_cast<int>(Nearest::RoundPreferFloor) == static_cast<int>(ops::NearestMode::RoundPreferFloor) &&
              static_cast<int>(Nearest::RoundPreferCeil) == static_cast<int>(ops::NearestMode::RoundPreferCeil) &&
              static_cast<int>(Nearest::Floor) == static_cast<int>(ops::NearestMode::Floor) &&
              static_cast<int>(Nearest::Ceil) == static_cast<int>(ops::NearestMode::Ceil));

// Ranks a run handles with fixed-size arrays.
constexpr size_t kMaxRank = 16;
// The largest output extent a scale may give (2^40: far above any tensor, far below int64).
constexpr double kMaxExtent = static_cast<double>(int64_t{1} << 40);

struct ResizePlan {
  int taps = 1;  // source elements per output element: 1 nearest, 2 linear, 4 cubic
  double cubicA = -0.75;
  bool excludeOutside = false;
  Coord coord = Coord::HalfPixel;
  Nearest nearest = Nearest::RoundPreferFloor;
  std::vector<double> scales;            // per axis of the input
  std::vector<double> roiStart, roiEnd;  // tf_crop_and_resize: the sampled box per axis, as fractions of the input
  double extrapolation = 0;              // tf_crop_and_resize: the value of outputs sampled outside the input
  bool stretchedToSizes = false;         // scales are sizes / input lengths (the sizes input, policy stretch)
  ir::Shape out;
};

// The contents of a float scales input, or Unsupported when unknown.
Expected<std::vector<double>> knownScales(const OpContext& ctx, const ValueDesc& in, size_t index) {
  if (in.type != ElemType::Float)
    return invalid(ctx, "input {} (scales) has type {} but expected float32", index, ir::elemTypeName(in.type));
  if (in.shape.size() != 1)
    return invalid(ctx, "input {} (scales) has shape {} but expected rank 1", index, shapeStr(in.shape));
  if (!in.value) return unsupported(ctx, "input {} (scales) must be a known constant to infer the output shape", index);
  const float* p = in.value->dataAs<float>();
  return std::vector<double>(p, p + in.value->elementCount());
}

Expected<ResizePlan> planResize(const OpContext& ctx, InDescs inputs) {
  ResizePlan p;
  const auto& attrs = attrsOf<ops::ResizeAttrs>(ctx);  // antialias = 1 is refused by the decoder
  p.taps = attrs.mode == ops::ResizeMode::Nearest ? 1 : attrs.mode == ops::ResizeMode::Linear ? 2 : 4;
  p.cubicA = attrs.cubicA;
  p.excludeOutside = attrs.excludeOutside;
  if (ctx.opset < 11) {
    p.coord = Coord::Asymmetric;
    p.nearest = Nearest::Simple;
  } else {
    p.coord = attrs.coord;
    p.nearest = static_cast<Nearest>(attrs.nearest);
  }
  const ir::Shape& in = inputs[0].shape;
  auto rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  if (attrs.axes) {
    CTX_ASSIGN_OR_RETURN(axes, normalizeAxes(ctx, *attrs.axes, rank, "axes"));
  }
  const ValueDesc* scales = nullptr;
  const ValueDesc* sizes = nullptr;
  size_t scalesIndex = ctx.opset < 11 ? 1 : 2;
  scales = optionalInput(inputs, scalesIndex);
  if (scales && dimProduct(scales->shape) == 0 && scales->shape.size() == 1) scales = nullptr;
  if (ctx.opset >= 11) sizes = optionalInput(inputs, 3);
  if ((scales != nullptr) == (sizes != nullptr)) return invalid(ctx, "expected exactly one of scales and sizes");
  p.scales.assign(in.size(), 1.0);
  p.roiStart.assign(in.size(), 0.0);
  p.roiEnd.assign(in.size(), 1.0);
  if (p.coord == Coord::TfCropAndResize) {
    const ValueDesc* roi = optionalInput(inputs, 1);
    if (!roi || roi->type != ElemType::Float || !roi->value ||
        dimProduct(roi->shape) != static_cast<int64_t>(2 * axes.size()))
      return unsupported(ctx, "tf_crop_and_resize needs a known float32 roi of {} values", 2 * axes.size());
    const float* r = roi->value->dataAs<float>();
    for (size_t i = 0; i < 2 * axes.size(); ++i)
      if (!std::isfinite(r[i])) return invalid(ctx, "input 1 (roi) holds {}, not a finite coordinate", r[i]);
    for (size_t i = 0; i < axes.size(); ++i) {
      p.roiStart[static_cast<size_t>(axes[i])] = r[i];
      p.roiEnd[static_cast<size_t>(axes[i])] = r[i + axes.size()];
    }
    p.extrapolation = attrs.extrapolation;
  }
  p.out = in;
  if (scales) {
    CTX_ASSIGN_OR_RETURN(std::vector<double> s, knownScales(ctx, *scales, scalesIndex));
    if (s.size() != axes.size())
      return invalid(ctx, "input {} (scales) has {} values but expected {}", scalesIndex, s.size(), axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      auto a = static_cast<size_t>(axes[i]);
      if (!(s[i] > 0)) return invalid(ctx, "input {} (scales) holds {}, not a positive scale", scalesIndex, s[i]);
      p.scales[a] = s[i];
      // tf_crop_and_resize scales the roi box, not the whole input.
      const double box = p.coord == Coord::TfCropAndResize ? p.roiEnd[a] - p.roiStart[a] : 1.0;
      const double extent = std::floor(static_cast<double>(in[a]) * box * s[i]);
      // An infinite or huge scale (or a reversed crop box) gives no extent a tensor can have: refused before the
      // conversion to an integer, which would be undefined.
      if (!(extent >= 0 && extent <= kMaxExtent))
        return invalid(ctx, "input {} (scales) holds {}: axis {} of {} would have {} elements", scalesIndex, s[i],
                       axes[i], in[a], extent);
      p.out[a] = static_cast<int64_t>(extent);
    }
    return p;
  }
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> sz, knownInts(ctx, inputs, 3, "sizes"));
  if (sz.size() != axes.size())
    return invalid(ctx, "input 3 (sizes) has {} values but expected {}", sz.size(), axes.size());
  const ops::AspectPolicy policy = attrs.policy;
  for (size_t i = 0; i < axes.size(); ++i)
    if (sz[i] < 0) return invalid(ctx, "input 3 (sizes) holds negative size {}", sz[i]);
  if (policy == ops::AspectPolicy::Stretch) {
    p.stretchedToSizes = true;
    for (size_t i = 0; i < axes.size(); ++i) {
      auto a = static_cast<size_t>(axes[i]);
      p.out[a] = sz[i];
      p.scales[a] = in[a] == 0 ? 1.0 : static_cast<double>(sz[i]) / static_cast<double>(in[a]);
    }
    return p;
  }
  const bool notLarger = policy == ops::AspectPolicy::NotLarger;
  double common = notLarger ? INFINITY : 0.0;
  for (size_t i = 0; i < axes.size(); ++i) {
    auto a = static_cast<size_t>(axes[i]);
    if (in[a] == 0) continue;
    double s = static_cast<double>(sz[i]) / static_cast<double>(in[a]);
    common = notLarger ? std::min(common, s) : std::max(common, s);
  }
  if (!std::isfinite(common) || common <= 0) common = 1.0;
  for (int64_t a : axes) {
    auto u = static_cast<size_t>(a);
    p.scales[u] = common;
    p.out[u] = static_cast<int64_t>(std::floor(common * static_cast<double>(in[u]) + 0.5));
  }
  return p;
}

// Input coordinate of output position x along an axis of inLen -> outLen with scale s (and roi box [r0, r1]).
double sourceCoord(Coord c, int64_t x, double s, int64_t inLen, int64_t outLen, double r0, double r1) {
  double xr = static_cast<double>(x);
  switch (c) {
    case Coord::TfCropAndResize: {
      const auto last = static_cast<double>(inLen - 1);
      return outLen > 1 ? r0 * last + xr * (r1 - r0) * last / static_cast<double>(outLen - 1) : 0.5 * (r0 + r1) * last;
    }
    case Coord::HalfPixel: return (xr + 0.5) / s - 0.5;
    case Coord::HalfPixelSymmetric: {
      double adjustment = static_cast<double>(outLen) / (s * static_cast<double>(inLen));
      double center = static_cast<double>(inLen) / 2;
      return center * (1 - adjustment) + (xr + 0.5) / s - 0.5;
    }
    case Coord::PytorchHalfPixel: return outLen > 1 ? (xr + 0.5) / s - 0.5 : 0.0;
    case Coord::AlignCorners: {
      // The resized length is scale * inLen before flooring, as the ONNX reference computes it.
      double resized = s * static_cast<double>(inLen);
      return resized == 1.0 ? 0.0 : xr * static_cast<double>(inLen - 1) / (resized - 1);
    }
    case Coord::Asymmetric: return xr / s;
    case Coord::TfHalfPixelForNn: return (xr + 0.5) / s;
  }
  return 0.0;
}

int64_t nearestIndex(Nearest m, double x, double s) {
  switch (m) {
    case Nearest::RoundPreferFloor: return static_cast<int64_t>(std::ceil(x - 0.5));
    case Nearest::RoundPreferCeil: return static_cast<int64_t>(std::floor(x + 0.5));
    case Nearest::Floor: return static_cast<int64_t>(std::floor(x));
    case Nearest::Ceil: return static_cast<int64_t>(std::ceil(x));
    case Nearest::Simple: return s < 1 ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(x);
  }
  return 0;
}

// One axis of the resampling: output position j is the sum over taps t of w[j * taps + t] times the source
// element idx[j * taps + t].
struct AxisMap {
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<uint8_t> outside;  // tf_crop_and_resize: output positions sampled outside the input
  bool identity = true;
};

void cubicCoeffs(double t, double a, double* c) {
  double t1 = t + 1, u = 1 - t, u1 = u + 1;
  c[0] = ((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a;
  c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  c[2] = ((a + 2) * u - (a + 3)) * u * u + 1;
  c[3] = ((a * u1 - 5 * a) * u1 + 8 * a) * u1 - 4 * a;
}

AxisMap axisMap(const ResizePlan& p, size_t axis, int64_t inLen) {
  AxisMap m;
  int64_t outLen = p.out[axis];
  double s = p.scales[axis];
  auto clampIdx = [&](int64_t i) { return std::clamp<int64_t>(i, 0, inLen - 1); };
  for (int64_t j = 0; j < outLen; ++j) {
    double x = sourceCoord(p.coord, j, s, inLen, outLen, p.roiStart[axis], p.roiEnd[axis]);
    if (p.coord == Coord::TfCropAndResize) {
      m.outside.push_back(x < 0 || x > static_cast<double>(inLen - 1));
      if (m.outside.back()) m.identity = false;
    }
    if (p.taps == 1) {
      m.idx.push_back(clampIdx(nearestIndex(p.nearest, x, s)));
      m.w.push_back(1.0);
      if (m.idx.back() != j) m.identity = false;
      continue;
    }
    // Source positions below and above x; outside positions repeat the edge element.
    double f = std::floor(x);
    double t = x - f;
    auto base = static_cast<int64_t>(f);
    if (p.taps == 2) {
      m.idx.push_back(clampIdx(base));
      m.idx.push_back(clampIdx(base + 1));
      m.w.push_back(1 - t);
      m.w.push_back(t);
      if (base != j || t != 0) m.identity = false;
      continue;
    }
    if (t == 0) {  // an exact hit takes taps base-2 .. base+1 with the hit third, as the ONNX reference does
      t = 1;
      base -= 1;
    }
    double c[4];
    cubicCoeffs(t, p.cubicA, c);
    double sum = 0;
    for (int k = 0; k < 4; ++k) {
      int64_t i = base - 1 + k;
      if (p.excludeOutside && (i < 0 || i >= inLen)) c[k] = 0;
      sum += c[k];
    }
    for (int k = 0; k < 4; ++k) {
      m.idx.push_back(clampIdx(base - 1 + k));
      m.w.push_back(p.excludeOutside && sum != 0 ? c[k] / sum : c[k]);
    }
    if (x != static_cast<double>(j)) m.identity = false;
  }
  if (outLen != inLen) m.identity = false;
  return m;
}

// Nearest mode: each output element copies one input element, so the output is written in one pass. Rows along
// the last axis gather through its map; a row whose source row equals the previous row's is copied from it.
template <typename T>
void resizeNearest(const OpContext& ctx, const ResizePlan& p, std::span<const AxisMap> maps, const ir::Tensor& x,
                   ir::Tensor& y) {
  const ir::Shape& in = x.shape();
  const size_t rank = in.size();
  int64_t inStride[kMaxRank];
  inStride[rank - 1] = 1;
  for (size_t a = rank; a-- > 1;) inStride[a - 1] = inStride[a] * in[a];
  const int64_t outLast = p.out[rank - 1];
  const int64_t rows = dimProduct(p.out, 0, rank - 1);
  const T* px = x.dataAs<T>();
  T* py = y.mutableDataAs<T>();
  const AxisMap& last = maps[rank - 1];
  auto sourceRow = [&](int64_t row) {
    int64_t offset = 0;
    for (size_t a = rank - 1; a-- > 0;) {
      const int64_t j = row % p.out[a];
      row /= p.out[a];
      offset += maps[a].idx[static_cast<size_t>(j)] * inStride[a];
    }
    return offset;
  };
  parallelFor(ctx, static_cast<size_t>(rows), std::max<int64_t>(1, 4096 / std::max<int64_t>(outLast, 1)),
              [&](size_t r0, size_t r1) {
                int64_t previous = -1;
                for (size_t r = r0; r < r1; ++r) {
                  const int64_t src = sourceRow(static_cast<int64_t>(r));
                  T* dst = py + static_cast<int64_t>(r) * outLast;
                  if (src == previous) {
                    std::memcpy(dst, dst - outLast, static_cast<size_t>(outLast) * sizeof(T));
                  } else if (last.identity) {
                    std::memcpy(dst, px + src, static_cast<size_t>(outLast) * sizeof(T));
                  } else {
                    const T* row = px + src;
                    const int64_t* idx = last.idx.data();
                    for (int64_t k = 0; k < outLast; ++k) dst[k] = row[idx[k]];
                  }
                  previous = src;
                }
              });
}

}  // namespace

InferResult inferResize(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, ctx.opset < 11 ? 2 : 1, ctx.opset < 11 ? 2 : 4));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_ASSIGN_OR_RETURN(ResizePlan p, planResize(ctx, inputs));
  if (p.taps > 1) CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  return single(inputs[0].type, p.out);
}

namespace {

// tf_crop_and_resize: outputs sampled outside the input along any axis take extrapolation_value.
Status extrapolate(const OpContext& ctx, const ResizePlan& p, std::span<const AxisMap> maps, const ir::Tensor& x,
                   ir::Tensor& y) {
  const size_t rank = x.rank();
  bool any = false;
  for (size_t a = 0; a < rank; ++a)
    any = any || std::find(maps[a].outside.begin(), maps[a].outside.end(), 1) != maps[a].outside.end();
  if (!any) return Status::ok();
  return visitType<typeBit(ElemType::Float) | typeBit(ElemType::Double)>(
             y.type(),
             [&](auto tag) -> Status {
               using T = decltype(tag);
               T* py = y.mutableDataAs<T>();
               std::vector<int64_t> index(rank, 0);
               for (size_t o = 0; o < y.elementCount(); ++o) {
                 for (size_t a = 0; a < rank; ++a)
                   if (maps[a].outside[static_cast<size_t>(index[a])]) {
                     py[o] = static_cast<T>(p.extrapolation);
                     break;
                   }
                 for (size_t a = rank; a-- > 0;) {
                   if (++index[a] < p.out[a]) break;
                   index[a] = 0;
                 }
               }
               return Status::ok();
             })
      .addContext(nodeLabel(ctx));
}

Status resample(const OpContext& ctx, const ResizePlan& p, std::span<const AxisMap> maps, const ir::Tensor& x,
                ir::Tensor& y);

// Linear Resize of the last two axes of a float32 image ([N, C, H, W] with N and C kept), computed as ONNX Runtime's
// CPU kernel does, so that the results agree bit for bit: source coordinates, their clamping and the weights in
// float32 (a clamped source position, where both taps are one element, weighs 0.5 and 0.5), and each output the sum
// (dx2·dy2)·X11 + (dx1·dy2)·X21 + (dx2·dy1)·X12 + (dx1·dy1)·X22 in that order. The general path resamples one axis
// at a time in double-precision weights, which rounds differently (up to a few ulp).
struct BilinearAxis {
  std::vector<int64_t> i1, i2;  // the two source positions
  std::vector<float> d1, d2;    // the weights of i2 and i1: |x - i1| and |x - i2|
};

// The source coordinate of output position x in float32, as ONNX Runtime computes it.
float sourceCoordF(Coord c, float x, float s, float outLen, float inLen) {
  switch (c) {
    case Coord::HalfPixel: return (x + 0.5f) / s - 0.5f;
    case Coord::HalfPixelSymmetric: {
      const float adjustment = outLen / (s * inLen);
      const float center = inLen / 2;
      return center * (1 - adjustment) + (x + 0.5f) / s - 0.5f;
    }
    case Coord::PytorchHalfPixel: return outLen > 1 ? (x + 0.5f) / s - 0.5f : 0.0f;
    case Coord::AlignCorners: return outLen == 1 ? 0 : x * (inLen - 1) / (outLen - 1);
    case Coord::Asymmetric: return x / s;
    case Coord::TfHalfPixelForNn: return (x + 0.5f) / s;
    case Coord::TfCropAndResize: break;  // not taken by the bilinear path
  }
  return 0;
}

BilinearAxis bilinearAxis(const ResizePlan& p, size_t axis, int64_t inLen) {
  BilinearAxis b;
  const int64_t outLen = p.out[axis];
  const float s =
      p.stretchedToSizes ? static_cast<float>(outLen) / static_cast<float>(inLen) : static_cast<float>(p.scales[axis]);
  for (auto* v : {&b.i1, &b.i2}) v->reserve(static_cast<size_t>(outLen));  // made at load: one allocation each
  for (auto* v : {&b.d1, &b.d2}) v->reserve(static_cast<size_t>(outLen));
  for (int64_t j = 0; j < outLen; ++j) {
    const auto jf = static_cast<float>(j);
    float x = s == 1 ? jf : sourceCoordF(p.coord, jf, s, static_cast<float>(outLen), static_cast<float>(inLen));
    x = std::max(0.0f, std::min(x, static_cast<float>(inLen - 1)));
    const int64_t i1 = std::min(static_cast<int64_t>(x), inLen - 1), i2 = std::min(i1 + 1, inLen - 1);
    b.i1.push_back(i1);
    b.i2.push_back(i2);
    b.d1.push_back(i1 == i2 ? 0.5f : std::fabs(x - static_cast<float>(i1)));
    b.d2.push_back(i1 == i2 ? 0.5f : std::fabs(x - static_cast<float>(i2)));
  }
  return b;
}

// Whether the bilinear path computes this Resize: linear mode on a float32 rank-4 input resized on its last two
// axes only, neither the tf_crop_and_resize box nor a keep_aspect_ratio_policy involved.
bool bilinearApplies(const ResizePlan& p, std::span<const int64_t> in, ElemType type) {
  if (p.taps != 2 || type != ElemType::Float || in.size() != 4 || p.coord == Coord::TfCropAndResize) return false;
  if (p.out[0] != in[0] || p.out[1] != in[1] || p.scales[0] != 1 || p.scales[1] != 1) return false;
  if (!p.stretchedToSizes)
    for (size_t a = 2; a < 4; ++a)  // a scale whose flooring gave another length than ONNX Runtime's float product
      if (p.out[a] != static_cast<int64_t>(static_cast<float>(p.scales[a]) * static_cast<float>(in[a]))) return false;
  return in[2] > 0 && in[3] > 0;
}

void resizeBilinear(const OpContext& ctx, const BilinearAxis& ys, const BilinearAxis& xs, const ir::Tensor& x,
                    ir::Tensor& y) {
  const ir::Shape& in = x.shape();
  const int64_t planes = in[0] * in[1], inW = in[3], inPlane = in[2] * in[3];
  const auto outH = static_cast<int64_t>(ys.i1.size()), outW = static_cast<int64_t>(xs.i1.size());
  const float* px = x.dataAs<float>();
  float* py = y.mutableDataAs<float>();
  // Work items are output rows of every plane.
  parallelForWork(ctx, static_cast<size_t>(planes * outH), static_cast<size_t>(outW) * 8, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const int64_t plane = static_cast<int64_t>(r) / outH, oy = static_cast<int64_t>(r) % outH;
      const float* row1 = px + plane * inPlane + ys.i1[static_cast<size_t>(oy)] * inW;
      const float* row2 = px + plane * inPlane + ys.i2[static_cast<size_t>(oy)] * inW;
      const float dy1 = ys.d1[static_cast<size_t>(oy)], dy2 = ys.d2[static_cast<size_t>(oy)];
      float* out = py + static_cast<int64_t>(r) * outW;
      for (int64_t ox = 0; ox < outW; ++ox) {
        const auto k = static_cast<size_t>(ox);
        const int64_t x1 = xs.i1[k], x2 = xs.i2[k];
        const float dx1 = xs.d1[k], dx2 = xs.d2[k];
        out[ox] = dx2 * dy2 * row1[x1] + dx1 * dy2 * row1[x2] + dx2 * dy1 * row2[x1] + dx1 * dy1 * row2[x2];
      }
    }
  });
}

// The plan with each axis's map, made once at prepare when the scales or sizes are constants.
struct ResizeRunPlan {
  ResizePlan p;
  std::vector<AxisMap> maps;
  std::optional<std::pair<BilinearAxis, BilinearAxis>> bilinear;  // rows and columns, when bilinearApplies
};

Expected<ResizeRunPlan> planResizeRun(const OpContext& ctx, InDescs inputs) {
  ResizeRunPlan r;
  CTX_ASSIGN_OR_RETURN(r.p, planResize(ctx, inputs));
  const ir::Shape& in = inputs[0].shape;
  if (in.size() > kMaxRank) return unsupported(ctx, "input 0 has rank {}, above {}", in.size(), kMaxRank);
  if (bilinearApplies(r.p, in, inputs[0].type)) {
    r.bilinear.emplace(bilinearAxis(r.p, 2, in[2]), bilinearAxis(r.p, 3, in[3]));
    return r;
  }
  for (size_t a = 0; a < in.size(); ++a) r.maps.push_back(axisMap(r.p, a, in[a]));
  return r;
}

}  // namespace

Expected<std::shared_ptr<const void>> planResizeOnce(const OpContext& ctx, InDescs inputs) {
  CTX_ASSIGN_OR_RETURN(ResizeRunPlan plan, planResizeRun(ctx, inputs));
  return std::shared_ptr<const void>(std::make_shared<const ResizeRunPlan>(std::move(plan)));
}

Status runResize(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  ResizeRunPlan planned;
  if (!ctx.plan) {
    std::vector<ValueDesc> descs = describeInputs(inputs, true);
    CTX_ASSIGN_OR_RETURN(planned, planResizeRun(ctx, descs));
  }
  const ResizeRunPlan& plan = ctx.plan ? *static_cast<const ResizeRunPlan*>(ctx.plan) : planned;
  if (outputs[0]->elementCount() == 0) return Status::ok();
  if (plan.bilinear) {
    resizeBilinear(ctx, plan.bilinear->first, plan.bilinear->second, *inputs[0], *outputs[0]);
    return Status::ok();
  }
  CTX_RETURN_IF_ERROR(resample(ctx, plan.p, plan.maps, *inputs[0], *outputs[0]));
  return plan.p.coord == Coord::TfCropAndResize ? extrapolate(ctx, plan.p, plan.maps, *inputs[0], *outputs[0])
                                                : Status::ok();
}

namespace {

// Per-thread buffers between the axes of one resampling (the calling thread's only: the loops write into them).
template <typename T> std::vector<T>& resampleBuffer(int which) {
  thread_local std::vector<T> buffers[2];
  return buffers[which];
}

// Resamples the last axis of `outer` rows (inLen -> outLen): output j of a row is the sum over its taps of weight
// times source element, in tap order from 0 as the general loop adds them.
template <typename T>
void resampleRows(const OpContext& ctx, const AxisMap& m, size_t taps, const T* from, T* to, int64_t outer,
                  int64_t inLen, int64_t outLen) {
  parallelFor(ctx, static_cast<size_t>(outer), std::max<int64_t>(1, 4096 / std::max<int64_t>(outLen, 1)),
              [&](size_t begin, size_t end) {
                for (size_t o = begin; o < end; ++o) {
                  const T* src = from + o * static_cast<size_t>(inLen);
                  T* dst = to + o * static_cast<size_t>(outLen);
                  const int64_t* idx = m.idx.data();
                  const double* w = m.w.data();
                  for (int64_t j = 0; j < outLen; ++j, idx += taps, w += taps) {
                    T acc = T(0);
                    for (size_t t = 0; t < taps; ++t) acc += static_cast<T>(w[t]) * src[idx[t]];
                    dst[j] = acc;
                  }
                }
              });
}

Status resample(const OpContext& ctx, const ResizePlan& p, std::span<const AxisMap> maps, const ir::Tensor& x,
                ir::Tensor& y) {
  if (p.taps == 1 && x.rank() > 0)
    return visitElemSize(ctx, ir::elemSize(x.type()), [&](auto tag) -> Status {
      resizeNearest<decltype(tag)>(ctx, p, maps, x, y);
      return Status::ok();
    });
  // Axes are resampled one at a time (each map was made for the input's length on its axis, which is still the
  // length there when its turn comes); the first reads the input and the last writes the output.
  auto resample = [&](auto tag) -> Status {
    using T = decltype(tag);
    ir::Shape cur = x.shape();
    size_t lastAxis = cur.size();
    for (size_t a = 0; a < cur.size(); ++a)
      if (!maps[a].identity) lastAxis = a;
    if (lastAxis == cur.size()) {
      std::memcpy(y.mutableData(), x.data(), x.byteSize());
      return Status::ok();
    }
    const T* from = x.dataAs<T>();
    int which = 0;
    for (size_t a = 0; a <= lastAxis; ++a) {
      const AxisMap& m = maps[a];
      if (m.identity) continue;
      int64_t outer = dimProduct(cur, 0, a), inner = dimProduct(cur, a + 1, cur.size());
      int64_t inLen = cur[a], outLen = p.out[a];
      T* to = y.mutableDataAs<T>();
      if (a != lastAxis) {
        std::vector<T>& buffer = resampleBuffer<T>(which);
        buffer.resize(static_cast<size_t>(outer * outLen * inner));
        to = buffer.data();
        which ^= 1;
      }
      if constexpr (std::is_floating_point_v<T>) {
        if (inner == 1 && p.taps > 1) {  // the last axis: whole rows at a time, each output a short dot product
          resampleRows(ctx, m, static_cast<size_t>(p.taps), from, to, outer, inLen, outLen);
          from = to;
          cur[a] = outLen;
          continue;
        }
      }
      parallelFor(ctx, static_cast<size_t>(outer * outLen), std::max<int64_t>(1, 4096 / std::max<int64_t>(inner, 1)),
                  [&](size_t begin, size_t end) {
                    for (size_t r = begin; r < end; ++r) {
                      int64_t o = static_cast<int64_t>(r) / outLen, j = static_cast<int64_t>(r) % outLen;
                      T* dst = to + r * static_cast<size_t>(inner);
                      const auto taps = static_cast<size_t>(p.taps);
                      const int64_t* idx = m.idx.data() + static_cast<size_t>(j) * taps;
                      if constexpr (std::is_floating_point_v<T>) {
                        if (taps > 1) {
                          const double* w = m.w.data() + static_cast<size_t>(j) * taps;
                          for (int64_t i = 0; i < inner; ++i) dst[i] = T(0);
                          for (size_t t = 0; t < taps; ++t) {
                            const T* src = from + (o * inLen + idx[t]) * inner;
                            auto wt = static_cast<T>(w[t]);
                            for (int64_t i = 0; i < inner; ++i) dst[i] += wt * src[i];
                          }
                          continue;
                        }
                      }
                      std::memcpy(dst, from + (o * inLen + idx[0]) * inner, static_cast<size_t>(inner) * sizeof(T));
                    }
                  });
      from = to;
      cur[a] = outLen;
    }
    return Status::ok();
  };
  if (x.type() == ElemType::Float) return resample(float{});
  if (x.type() == ElemType::Double) return resample(double{});
  if (p.taps > 1) return unsupported(ctx, "linear and cubic modes need a float input");
  return visitElemSize(ctx, ir::elemSize(x.type()), [&](auto tag) -> Status {
    if constexpr (std::is_same_v<decltype(tag), ElemBytes16>)
      return unsupported(ctx, "16-byte elements are not supported");
    else return resample(tag);
  });
}

}  // namespace

// Upsample (deprecated; opset 7 takes scales as an attribute, opset 9 as input 1) is Resize of opset 10: asymmetric
// coordinates, nearest or linear.
namespace {

template <typename F> auto asResize10(const OpContext& ctx, F&& f) {
  const OpContext resize{ir::OpKind::Resize, 10, ctx.attrs, ctx.nodeName, ctx.pool, ctx.typed};
  return f(resize);
}

// Opset 7's `scales` attribute as the input opset 9 would give.
Expected<ir::Tensor> scalesAttribute(const OpContext& ctx) {
  const auto& scales = attrsOf<ops::ResizeAttrs>(ctx).scales;
  if (!scales) return invalid(ctx, "required attribute scales is missing");
  return ir::Tensor::fromVector(ElemType::Float, {static_cast<int64_t>(scales->size())},
                                std::vector<float>(scales->begin(), scales->end()));
}

}  // namespace

InferResult inferUpsample(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  if (ctx.opset >= 9) return asResize10(ctx, [&](const OpContext& c) { return inferResize(c, inputs, outputCount); });
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_ASSIGN_OR_RETURN(ir::Tensor scales, scalesAttribute(ctx));
  std::vector<ValueDesc> withScales(inputs.begin(), inputs.end());
  withScales.push_back(ValueDesc{ElemType::Float, scales.shape(), &scales, true});
  return asResize10(ctx, [&](const OpContext& c) { return inferResize(c, withScales, outputCount); });
}

Status runUpsample(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  if (ctx.opset >= 9) return asResize10(ctx, [&](const OpContext& c) { return runResize(c, inputs, outputs); });
  CTX_ASSIGN_OR_RETURN(ir::Tensor scales, scalesAttribute(ctx));
  std::vector<const ir::Tensor*> withScales(inputs.begin(), inputs.end());
  withScales.push_back(&scales);
  return asResize10(ctx, [&](const OpContext& c) { return runResize(c, withScales, outputs); });
}

}  // namespace ctxkit::kernels::detail
