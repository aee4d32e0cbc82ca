// DeformConv (opset 19, 2-D): a convolution whose taps are moved by learned per-position offsets (and scaled by
// an optional mask); each moved tap reads X bilinearly with zeros outside, then the usual grouped weights apply.
#include "kernels/ops.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

struct DeformPlan {
  int64_t n = 0, c = 0, h = 0, w = 0;  // X
  int64_t oc = 0, kh = 0, kw = 0;      // W [oc, c / group, kh, kw]
  int64_t oh = 0, ow = 0;
  int64_t group = 1, offsetGroup = 1;
  int64_t stride[2] = {1, 1}, dilation[2] = {1, 1}, pad[4] = {0, 0, 0, 0};  // pads: top, left, bottom, right
};

Expected<DeformPlan> planDeform(const OpContext& ctx, InDescs inputs) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 5));
  for (size_t i = 0; i < 3; ++i) CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, i, 4));
  for (size_t i = 1; i < inputs.size(); ++i)
    if (inputs[i].present) CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
  DeformPlan p;
  const ir::Shape &x = inputs[0].shape, &wt = inputs[1].shape, &off = inputs[2].shape;
  p.n = x[0], p.c = x[1], p.h = x[2], p.w = x[3];
  p.oc = wt[0], p.kh = wt[2], p.kw = wt[3];
  const auto& attrs = attrsOf<ops::DeformConvAttrs>(ctx);  // group, offset_group and the window checked at decode
  p.group = attrs.group;
  p.offsetGroup = attrs.offsetGroup;
  if (p.c % p.group != 0 || p.oc % p.group != 0 || p.c % p.offsetGroup != 0 || p.c / p.group != wt[1])
    return invalid(ctx, "X {} and W {} do not fit group {} and offset_group {}", shapeStr(x), shapeStr(wt), p.group,
                   p.offsetGroup);
  auto ints = [&](std::string_view name, const std::optional<ops::IntList>& list, size_t count, int64_t fallback,
                  int64_t* out) -> Status {
    CTX_ASSIGN_OR_RETURN(Dims values, listOrDefault<Dims>(ctx, list, name, count, fallback));
    std::copy(values.begin(), values.end(), out);
    return Status::ok();
  };
  CTX_RETURN_IF_ERROR(ints("strides", attrs.window.strides, 2, 1, p.stride));
  CTX_RETURN_IF_ERROR(ints("dilations", attrs.window.dilations, 2, 1, p.dilation));
  CTX_RETURN_IF_ERROR(ints("pads", attrs.window.pads, 4, 0, p.pad));
  if (const auto& k = attrs.window.kernelShape; k && (k->size() != 2 || (*k)[0] != p.kh || (*k)[1] != p.kw))
    return invalid(ctx, "attribute kernel_shape does not match W's shape {}", shapeStr(wt));
  // Checked: the attributes and shapes come from a file and may be anything.
  const CheckedInt oh =
      (CheckedInt(p.h) + p.pad[0] + p.pad[2] - (CheckedInt(p.dilation[0]) * (CheckedInt(p.kh) - 1) + 1)) / p.stride[0] +
      1;
  const CheckedInt ow =
      (CheckedInt(p.w) + p.pad[1] + p.pad[3] - (CheckedInt(p.dilation[1]) * (CheckedInt(p.kw) - 1) + 1)) / p.stride[1] +
      1;
  const CheckedInt offsetChannels = CheckedInt(p.offsetGroup) * 2 * p.kh * p.kw;
  if (!oh.ok() || !ow.ok() || !offsetChannels.ok())
    return invalid(ctx, "the output or offset shape overflows (X {}, W {}, the window attributes)", shapeStr(x),
                   shapeStr(wt));
  p.oh = oh.value();
  p.ow = ow.value();
  if (off != ir::Shape{p.n, offsetChannels.value(), p.oh, p.ow})
    return invalid(ctx, "input 2 (offset) has shape {} but expected [{}, {}, {}, {}]", shapeStr(off), p.n,
                   offsetChannels.value(), p.oh, p.ow);
  if (const ValueDesc* b = optionalInput(inputs, 3); b && b->shape != ir::Shape{p.oc})
    return invalid(ctx, "input 3 (B) has shape {} but expected [{}]", shapeStr(b->shape), p.oc);
  const int64_t maskChannels = offsetChannels.value() / 2;
  if (const ValueDesc* m = optionalInput(inputs, 4); m && m->shape != ir::Shape{p.n, maskChannels, p.oh, p.ow})
    return invalid(ctx, "input 4 (mask) has shape {} but expected [{}, {}, {}, {}]", shapeStr(m->shape), p.n,
                   maskChannels, p.oh, p.ow);
  return p;
}

// X's plane sampled at (y, x) bilinearly, pixels outside the plane reading zero.
double bilinear(const float* plane, int64_t h, int64_t w, double y, double x) {
  const double y0 = std::floor(y), x0 = std::floor(x);
  const double fy = y - y0, fx = x - x0;
  double sum = 0;
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      const auto iy = static_cast<int64_t>(y0) + dy, ix = static_cast<int64_t>(x0) + dx;
      if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
      sum += (dy ? fy : 1 - fy) * (dx ? fx : 1 - fx) * plane[iy * w + ix];
    }
  return sum;
}

}  // namespace

InferResult inferDeformConv(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_ASSIGN_OR_RETURN(DeformPlan p, planDeform(ctx, inputs));
  return single(inputs[0].type, {p.n, p.oc, p.oh, p.ow});
}

Status runDeformConv(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, false);
  CTX_ASSIGN_OR_RETURN(DeformPlan p, planDeform(ctx, descs));
  const float* x = inputs[0]->dataAs<float>();
  const float* wt = inputs[1]->dataAs<float>();
  const float* off = inputs[2]->dataAs<float>();
  const float* bias = inputs.size() > 3 && inputs[3] ? inputs[3]->dataAs<float>() : nullptr;
  const float* mask = inputs.size() > 4 && inputs[4] ? inputs[4]->dataAs<float>() : nullptr;
  float* y = outputs[0]->mutableDataAs<float>();
  const int64_t taps = p.kh * p.kw, positions = p.oh * p.ow, cg = p.c / p.group, ocg = p.oc / p.group;
  const int64_t perOffsetGroup = p.c / p.offsetGroup;
  // col[(c, tap), position]: the moved, masked samples of one image.
  std::vector<double> col(static_cast<size_t>(p.c * taps * positions));
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t c = 0; c < p.c; ++c) {
      const float* plane = x + (n * p.c + c) * p.h * p.w;
      const int64_t g = c / perOffsetGroup;
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t i = t / p.kw, j = t % p.kw;
        const float* dy = off + ((n * p.offsetGroup + g) * 2 * taps + 2 * t) * positions;
        const float* dx = dy + positions;
        const float* m = mask ? mask + ((n * p.offsetGroup + g) * taps + t) * positions : nullptr;
        double* out = col.data() + (c * taps + t) * positions;
        for (int64_t oy = 0; oy < p.oh; ++oy)
          for (int64_t ox = 0; ox < p.ow; ++ox) {
            const int64_t q = oy * p.ow + ox;
            const double sy = static_cast<double>(oy * p.stride[0] - p.pad[0] + i * p.dilation[0]) + dy[q];
            const double sx = static_cast<double>(ox * p.stride[1] - p.pad[1] + j * p.dilation[1]) + dx[q];
            out[q] = bilinear(plane, p.h, p.w, sy, sx) * (m ? m[q] : 1.0f);
          }
      }
    }
    for (int64_t o = 0; o < p.oc; ++o) {
      const int64_t g = o / ocg;
      float* yo = y + (n * p.oc + o) * positions;
      for (int64_t q = 0; q < positions; ++q) {
        double sum = bias ? bias[o] : 0.0;
        for (int64_t k = 0; k < cg * taps; ++k)
          sum += static_cast<double>(wt[o * cg * taps + k]) *
                 col[static_cast<size_t>((g * cg * taps + k) * positions + q)];
        yo[q] = static_cast<float>(sum);
      }
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
