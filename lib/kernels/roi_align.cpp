// RoiAlign: for each region of interest (x1, y1, x2, y2 in input pixels times spatial_scale) and each channel, an
// output_height x output_width grid of bins, each the average ("avg") or the largest weighted corner ("max", as ONNX's
// reference and ONNX Runtime compute it) of bilinear samples taken on a regular grid inside the bin.
#include "kernels/ops.h"
#include "kernels/thread_scratch.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ctxkit::kernels::detail {

namespace {

using ops::RoiAlignAttrs;

// Samples per bin beyond which a region is refused: a region this large relative to its bins has coordinates no real
// detector emits (a 1024-pixel square region in one bin takes 2^20), and sampling it would take 40 MiB a bin.
constexpr double kMaxSamplesPerBin = 1 << 20;

using Sample = RoiSample;

// The bilinear sample at (y, x) of an H x W plane, as ONNX defines it for RoiAlign: a point more than one pixel
// outside the image (or not a number) reads nothing; the rest are clamped to the image's edge.
Sample bilinear(double y, double x, int64_t height, int64_t width) {
  Sample s;
  if (!(y >= -1.0 && y <= static_cast<double>(height) && x >= -1.0 && x <= static_cast<double>(width))) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto low = static_cast<int64_t>(y), left = static_cast<int64_t>(x);
  int64_t high = low + 1, right = left + 1;
  if (low >= height - 1) {
    low = high = height - 1;
    y = static_cast<double>(low);
  }
  if (left >= width - 1) {
    left = right = width - 1;
    x = static_cast<double>(left);
  }
  const double ly = y - static_cast<double>(low), lx = x - static_cast<double>(left);
  const double hy = 1 - ly, hx = 1 - lx;
  s.pos[0] = low * width + left;
  s.pos[1] = low * width + right;
  s.pos[2] = high * width + left;
  s.pos[3] = high * width + right;
  s.w[0] = static_cast<float>(hy * hx);
  s.w[1] = static_cast<float>(hy * lx);
  s.w[2] = static_cast<float>(ly * hx);
  s.w[3] = static_cast<float>(ly * lx);
  return s;
}

}  // namespace

// Inputs: X [N, C, H, W], rois [R, 4], batch_indices [R] (int64). Output [R, C, output_height, output_width].
InferResult inferRoiAlign(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float)));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 2, typeBit(ElemType::Int64)));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 0, 4));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 1, 2));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 2, 1));
  const ir::Shape &x = inputs[0].shape, &rois = inputs[1].shape, &batch = inputs[2].shape;
  if (rois[1] != 4 || batch[0] != rois[0])
    return invalid(ctx, "rois have shape {} and batch_indices {} but expected [R, 4] and [R]", shapeStr(rois),
                   shapeStr(batch));
  const auto& a = attrsOf<RoiAlignAttrs>(ctx);
  return single(inputs[0].type, {rois[0], x[1], a.outputHeight, a.outputWidth});
}

namespace {

// Where a region's samples come from: its bins' origin and extent in input pixels and the samples per bin.
struct RegionGrid {
  double x0 = 0, y0 = 0, binHeight = 0, binWidth = 0;
  int64_t gh = 0, gw = 0;
};

Expected<RegionGrid> regionGrid(const OpContext& ctx, const RoiAlignAttrs& a, const float* roi, int64_t r) {
  const double offset = a.halfPixel ? 0.5 : 0.0;
  RegionGrid g;
  g.x0 = roi[0] * static_cast<double>(a.spatialScale) - offset;
  g.y0 = roi[1] * static_cast<double>(a.spatialScale) - offset;
  double roiWidth = roi[2] * static_cast<double>(a.spatialScale) - offset - g.x0;
  double roiHeight = roi[3] * static_cast<double>(a.spatialScale) - offset - g.y0;
  if (!a.halfPixel) {  // output_half_pixel: a region is at least one pixel
    roiWidth = std::max(roiWidth, 1.0);
    roiHeight = std::max(roiHeight, 1.0);
  }
  g.binHeight = roiHeight / static_cast<double>(a.outputHeight);
  g.binWidth = roiWidth / static_cast<double>(a.outputWidth);
  double gridH = a.samplingRatio > 0 ? static_cast<double>(a.samplingRatio) : std::ceil(g.binHeight);
  double gridW = a.samplingRatio > 0 ? static_cast<double>(a.samplingRatio) : std::ceil(g.binWidth);
  // A region with a corner that is not a finite number samples nothing: its bins are 0.
  if (!std::isfinite(g.x0) || !std::isfinite(g.y0) || !std::isfinite(g.binHeight) || !std::isfinite(g.binWidth))
    gridH = gridW = 0;
  if (!(gridH * gridW <= kMaxSamplesPerBin))
    return invalid(ctx, "region {} is [{}, {}, {}, {}]: {} x {} samples per bin exceed the limit of {}", r, roi[0],
                   roi[1], roi[2], roi[3], gridH, gridW, kMaxSamplesPerBin);
  // A region of no (or negative) extent takes no samples but still divides by one.
  g.gh = static_cast<int64_t>(std::max(gridH, 0.0));
  g.gw = static_cast<int64_t>(std::max(gridW, 0.0));
  return g;
}

}  // namespace

Status runRoiAlign(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const auto& a = attrsOf<RoiAlignAttrs>(ctx);
  const ir::Tensor &x = *inputs[0], &rois = *inputs[1], &batchIndices = *inputs[2];
  const int64_t batches = x.shape()[0], channels = x.shape()[1], height = x.shape()[2], width = x.shape()[3];
  const int64_t regions = rois.shape()[0], oh = a.outputHeight, ow = a.outputWidth;
  const float* data = x.dataAs<float>();
  const float* box = rois.dataAs<float>();
  const int64_t* batchOf = batchIndices.dataAs<int64_t>();
  float* out = outputs[0]->mutableDataAs<float>();
  // Every region is checked before any is computed, so that an error names the first bad one. (Each grid is worked
  // out again where its region is computed: a few operations, and no list of grids to allocate.)
  size_t work = 1;
  for (int64_t r = 0; r < regions; ++r) {
    const int64_t b = batchOf[r];
    if (b < 0 || b >= batches) return invalid(ctx, "batch_indices[{}] is {} but X holds {} images", r, b, batches);
    CTX_ASSIGN_OR_RETURN(const RegionGrid g, regionGrid(ctx, a, box + r * 4, r));
    work = std::max(work, static_cast<size_t>(channels * oh * ow * std::max<int64_t>(g.gh * g.gw, 1)));
  }
  // Regions in parallel; within one, the samples of all its bins are taken once (they are the same for every
  // channel), then each channel's plane is read bin after bin while it is in cache. A region whose samples would take
  // more than kRegionSamples goes bin by bin instead (each bin's samples, then every channel), as memory allows.
  constexpr size_t kRegionSamples = size_t{1} << 16;
  parallelForWork(ctx, static_cast<size_t>(regions), work, [&](size_t r0, size_t r1) {
    std::vector<Sample>& samples = threadScratch().roiSamples;  // reserved on every pool thread (no allocation)
    for (size_t r = r0; r < r1; ++r) {
      const RegionGrid g = regionGrid(ctx, a, box + r * 4, static_cast<int64_t>(r)).value();  // checked above
      const int64_t b = batchOf[r];
      const auto perBin = static_cast<size_t>(g.gh * g.gw);
      const float count = static_cast<float>(std::max<size_t>(perBin, 1));
      // Appends bin (ph, pw)'s samples.
      auto sampleBin = [&](int64_t ph, int64_t pw) {
        for (int64_t iy = 0; iy < g.gh; ++iy) {
          const double y = g.y0 + static_cast<double>(ph) * g.binHeight +
                           (static_cast<double>(iy) + 0.5) * g.binHeight / static_cast<double>(g.gh);
          for (int64_t ix = 0; ix < g.gw; ++ix) {
            const double xs = g.x0 + static_cast<double>(pw) * g.binWidth +
                              (static_cast<double>(ix) + 0.5) * g.binWidth / static_cast<double>(g.gw);
            samples.push_back(bilinear(y, xs, height, width));
          }
        }
      };
      // Bins [bin0, bin1) of every channel from `samples`, which holds their samples in order.
      auto reduce = [&](int64_t bin0, int64_t bin1) {
        for (int64_t c = 0; c < channels; ++c) {
          const float* plane = data + (b * channels + c) * height * width;
          float* y = out + (static_cast<int64_t>(r) * channels + c) * oh * ow;
          const Sample* t = samples.data();
          for (int64_t bin = bin0; bin < bin1; ++bin, t += perBin) {
            float value = 0;
            if (a.mode == ops::RoiMode::Avg) {
              for (size_t k = 0; k < perBin; ++k)
                value += t[k].w[0] * plane[t[k].pos[0]] + t[k].w[1] * plane[t[k].pos[1]] +
                         t[k].w[2] * plane[t[k].pos[2]] + t[k].w[3] * plane[t[k].pos[3]];
              value /= count;
            } else {
              for (size_t k = 0; k < perBin; ++k) {
                const float v = std::max(std::max(t[k].w[0] * plane[t[k].pos[0]], t[k].w[1] * plane[t[k].pos[1]]),
                                         std::max(t[k].w[2] * plane[t[k].pos[2]], t[k].w[3] * plane[t[k].pos[3]]));
                value = k == 0 ? v : std::max(value, v);
              }
            }
            y[bin] = value;
          }
        }
      };
      const bool whole = perBin * static_cast<size_t>(oh * ow) <= kRegionSamples;
      for (int64_t bin = 0; bin < oh * ow;) {
        const int64_t end = whole ? oh * ow : bin + 1;
        samples.clear();
        for (int64_t k = bin; k < end; ++k) sampleBin(k / ow, k % ow);
        reduce(bin, end);
        bin = end;
      }
    }
  });
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
