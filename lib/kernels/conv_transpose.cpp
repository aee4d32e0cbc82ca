// ConvTranspose (any number of spatial dims; strides, dilations, pads, auto_pad, group, output_padding,
// output_shape, optional bias) in float32: a GEMM of the weights with the input, then its columns scattered into
// the output (col2im).
#include "cpu/gemm.h"
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

// Floats of the column buffer built at once (4 MB).
constexpr int64_t kColumnBudget = int64_t{1} << 20;

struct ConvTransposePlan {
  int64_t batch = 0, channels = 0, outChannels = 0, group = 1;
  std::vector<int64_t> in, kernel, strides, dilations, padBegin, padEnd, out;
};

Expected<ConvTransposePlan> planConvTranspose(const OpContext& ctx, std::span<const int64_t> x,
                                              std::span<const int64_t> w) {
  if (x.size() < 3)
    return invalid(ctx, "input 0 has shape {} but expected rank 3 or more (N x C x spatial)", shapeStr(x));
  if (w.size() != x.size())
    return invalid(ctx, "input 1 has shape {} but expected rank {} like input 0", shapeStr(w), x.size());
  ConvTransposePlan p;
  size_t rank = x.size() - 2;
  p.batch = x[0];
  p.channels = x[1];
  const auto& attrs = attrsOf<ops::ConvTransposeAttrs>(ctx);
  const ops::WindowAttrs& window = attrs.window;
  p.group = attrs.group;  // at least 1 (the decoder's rule)
  if (w[0] != p.channels)
    return invalid(ctx, "input 0 has {} channels but weight shape {} expects {}", p.channels, shapeStr(w), w[0]);
  if (p.channels % p.group != 0)
    return invalid(ctx, "input 0 has {} channels, not a multiple of group {}", p.channels, p.group);
  const CheckedInt outChannels = CheckedInt(w[1]) * p.group;
  if (!outChannels.ok()) return invalid(ctx, "weight shape {} with group {} overflows", shapeStr(w), p.group);
  p.outChannels = outChannels.value();
  p.in.assign(x.begin() + 2, x.end());
  p.kernel.assign(w.begin() + 2, w.end());
  if (window.kernelShape &&
      !std::equal(window.kernelShape->begin(), window.kernelShape->end(), p.kernel.begin(), p.kernel.end()))
    return invalid(ctx, "attribute kernel_shape {} does not match weight shape {}", shapeStr(*window.kernelShape),
                   shapeStr(w));
  // Strides and dilations of at least 1 and output padding not negative: the decoder's rules.
  CTX_ASSIGN_OR_RETURN(p.strides, listOrDefault<std::vector<int64_t>>(ctx, window.strides, "strides", rank, 1));
  CTX_ASSIGN_OR_RETURN(p.dilations, listOrDefault<std::vector<int64_t>>(ctx, window.dilations, "dilations", rank, 1));
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> outPad,
                       listOrDefault<std::vector<int64_t>>(ctx, attrs.outputPadding, "output_padding", rank, 0));
  const ops::AutoPad autoPad = window.autoPad;
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                       listOrDefault<std::vector<int64_t>>(ctx, window.pads, "pads", 2 * rank, 0));
  p.padBegin.assign(pads.begin(), pads.begin() + static_cast<ptrdiff_t>(rank));
  p.padEnd.assign(pads.begin() + static_cast<ptrdiff_t>(rank), pads.end());
  std::vector<int64_t> outputShape;
  if (attrs.outputShape) outputShape.assign(attrs.outputShape->begin(), attrs.outputShape->end());
  if (outputShape.size() > rank)
    outputShape.erase(outputShape.begin(), outputShape.end() - static_cast<ptrdiff_t>(rank));
  if (!outputShape.empty() && outputShape.size() != rank)
    return invalid(ctx, "attribute output_shape has {} values but expected {}", outputShape.size(), rank);
  bool same = autoPad == ops::AutoPad::SameUpper || autoPad == ops::AutoPad::SameLower;
  // Every size below is checked: the attributes and shapes come from a file and may be anything.
  auto overflow = [&](size_t i) {
    return invalid(ctx,
                   "the output extent of spatial dimension {} overflows (input {}, kernel {}, stride {}, dilation "
                   "{}, output padding {})",
                   i, p.in[i], p.kernel[i], p.strides[i], p.dilations[i], outPad[i]);
  };
  if (outputShape.empty() && same)
    for (size_t i = 0; i < rank; ++i) {
      const CheckedInt extent = CheckedInt(p.in[i]) * p.strides[i];
      if (!extent.ok()) return overflow(i);
      outputShape.push_back(extent.value());
    }
  p.out.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    const CheckedInt checkedFull = CheckedInt(p.strides[i]) * (CheckedInt(p.in[i]) - 1) + outPad[i] +
                                   (CheckedInt(p.kernel[i]) - 1) * p.dilations[i] + 1;
    if (!checkedFull.ok() || (!outputShape.empty() && !(checkedFull - outputShape[i]).ok())) return overflow(i);
    const int64_t full = checkedFull.value();
    if (autoPad == ops::AutoPad::Valid) {
      p.padBegin[i] = p.padEnd[i] = 0;
    } else if (!outputShape.empty()) {
      // A negative total (output_shape larger than the full output) pads with zeros at the end.
      int64_t total = full - outputShape[i];
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
      if (autoPad == ops::AutoPad::SameUpper) {
        p.padBegin[i] = half;
        p.padEnd[i] = total - half;
      } else {
        p.padBegin[i] = total - half;
        p.padEnd[i] = half;
      }
    }
    const CheckedInt out = CheckedInt(full) - p.padBegin[i] - p.padEnd[i];
    if (!out.ok()) return overflow(i);
    p.out[i] = out.value();
    if (p.out[i] < 0) return invalid(ctx, "output spatial dimension {} would be {}", i, p.out[i]);
  }
  return p;
}

}  // namespace

InferResult inferConvTranspose(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float) | kHalfTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  CTX_ASSIGN_OR_RETURN(ConvTransposePlan p, planConvTranspose(ctx, inputs[0].shape, inputs[1].shape));
  if (const ValueDesc* b = optionalInput(inputs, 2)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
    if (b->shape.size() != 1 || b->shape[0] != p.outChannels)
      return invalid(ctx, "input 2 has shape {} but expected {}", shapeStr(b->shape), p.outChannels);
  }
  ir::Shape shape{p.batch, p.outChannels};
  shape.insert(shape.end(), p.out.begin(), p.out.end());
  return single(inputs[0].type, std::move(shape));
}

namespace {

// What a run needs beyond the shapes: for 1-D and 2-D, nothing (each kernel tap adds a strided row of columns into
// an output row); for more spatial dims, the output position each (tap, input position) writes, -1 when cropped.
struct ConvTransposeRunPlan {
  ConvTransposePlan shape;
  bool rowWise = false;
  std::vector<int64_t> target;
};

Expected<ConvTransposeRunPlan> planConvTransposeRun(const OpContext& ctx, std::span<const int64_t> x,
                                                    std::span<const int64_t> w) {
  ConvTransposeRunPlan r;
  CTX_ASSIGN_OR_RETURN(r.shape, planConvTranspose(ctx, x, w));
  const ConvTransposePlan& p = r.shape;
  const size_t rank = p.in.size();
  r.rowWise = rank <= 2;
  if (r.rowWise) return r;
  const int64_t inSize = dimProduct(p.in), kSize = dimProduct(p.kernel);
  r.target.resize(static_cast<size_t>(kSize * inSize));
  std::vector<int64_t> kIdx(rank), iIdx(rank);
  for (int64_t k = 0; k < kSize; ++k) {
    for (int64_t q = k, d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      kIdx[static_cast<size_t>(d)] = q % p.kernel[static_cast<size_t>(d)];
      q /= p.kernel[static_cast<size_t>(d)];
    }
    for (int64_t i = 0; i < inSize; ++i) {
      for (int64_t q = i, d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
        iIdx[static_cast<size_t>(d)] = q % p.in[static_cast<size_t>(d)];
        q /= p.in[static_cast<size_t>(d)];
      }
      int64_t pos = 0;
      bool inside = true;
      for (size_t d = 0; d < rank && inside; ++d) {
        int64_t o = iIdx[d] * p.strides[d] + kIdx[d] * p.dilations[d] - p.padBegin[d];
        inside = o >= 0 && o < p.out[d];
        pos = pos * p.out[d] + o;
      }
      r.target[static_cast<size_t>(k * inSize + i)] = inside ? pos : -1;
    }
  }
  return r;
}

// 1-D and 2-D as (height, width): `col` holds one output channel's kernel taps for input rows [y0, y1), each tap a
// run of (y1 - y0) * inW columns; each tap's row lands, strided, in one output row.
void addColumnRows(const ConvTransposePlan& p, const float* col, int64_t y0, int64_t y1, float* out) {
  const bool twoD = p.in.size() == 2;
  const int64_t inH = twoD ? p.in[0] : 1, inW = p.in.back();
  const int64_t kH = twoD ? p.kernel[0] : 1, kW = p.kernel.back();
  const int64_t sH = twoD ? p.strides[0] : 1, sW = p.strides.back();
  const int64_t dH = twoD ? p.dilations[0] : 1, dW = p.dilations.back();
  const int64_t padH = twoD ? p.padBegin[0] : 0, padW = p.padBegin.back();
  const int64_t outH = twoD ? p.out[0] : 1, outW = p.out.back();
  const int64_t cols = (y1 - y0) * inW;
  (void)inH;
  for (int64_t kh = 0; kh < kH; ++kh)
    for (int64_t kw = 0; kw < kW; ++kw) {
      const float* tap = col + (kh * kW + kw) * cols;
      // Input columns x whose output column x * sW + kw * dW - padW lies in [0, outW).
      const int64_t shift = kw * dW - padW;
      const int64_t x0 = shift >= 0 ? 0 : (-shift + sW - 1) / sW;
      const int64_t x1 = std::min(inW, outW - shift > 0 ? (outW - shift + sW - 1) / sW : 0);
      if (x0 >= x1) continue;
      for (int64_t y = y0; y < y1; ++y) {
        const int64_t oy = y * sH + kh * dH - padH;
        if (oy < 0 || oy >= outH) continue;
        const float* src = tap + (y - y0) * inW;
        float* dst = out + oy * outW + shift;
        if (sW == 1) {
          for (int64_t x = x0; x < x1; ++x) dst[x] += src[x];
        } else {
          for (int64_t x = x0; x < x1; ++x) dst[x * sW] += src[x];
        }
      }
    }
}

}  // namespace

Expected<std::shared_ptr<const void>> planConvTransposeOnce(const OpContext& ctx, InDescs inputs) {
  CTX_ASSIGN_OR_RETURN(ConvTransposeRunPlan plan, planConvTransposeRun(ctx, inputs[0].shape, inputs[1].shape));
  return std::shared_ptr<const void>(std::make_shared<const ConvTransposeRunPlan>(std::move(plan)));
}

Status runConvTranspose(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const ir::Tensor& w = *inputs[1];
  const ir::Tensor* bias = inputs.size() > 2 ? inputs[2] : nullptr;
  ir::Tensor& y = *outputs[0];
  ConvTransposeRunPlan planned;
  if (!ctx.plan) {
    CTX_ASSIGN_OR_RETURN(planned, planConvTransposeRun(ctx, x.shape(), w.shape()));
  }
  const ConvTransposeRunPlan& plan = ctx.plan ? *static_cast<const ConvTransposeRunPlan*>(ctx.plan) : planned;
  const ConvTransposePlan& p = plan.shape;
  const int64_t inSize = dimProduct(p.in), kSize = dimProduct(p.kernel), outSize = dimProduct(p.out);
  const int64_t cPerGroup = p.channels / p.group, mPerGroup = p.outChannels / p.group;
  const float* px = x.dataAs<float>();
  const float* pw = w.dataAs<float>();
  const float* pb = bias ? bias->dataAs<float>() : nullptr;
  float* py = y.mutableDataAs<float>();
  // Per (image, group): columns = Wᵀ (mPerGroup·kSize x cPerGroup) · X (cPerGroup x inSize) as one GEMM, then each
  // column row added into its output plane (col2im). Input positions are taken in chunks (whole input rows for
  // 1-D and 2-D) so the column buffer stays small.
  const int64_t rows = mPerGroup * kSize;
  const int64_t inW = plan.rowWise ? std::max<int64_t>(1, p.in.back()) : 1;
  int64_t chunk = std::max<int64_t>(1, std::min(inSize, kColumnBudget / std::max<int64_t>(rows, 1)));
  if (plan.rowWise) chunk = std::max<int64_t>(1, chunk / inW) * inW;
  if (inSize == 0)  // no input positions: the output is the bias
    for (int64_t c = 0; c < p.batch * p.outChannels; ++c)
      std::fill(py + c * outSize, py + (c + 1) * outSize, pb ? pb[c % p.outChannels] : 0.0f);
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t g = 0; g < p.group; ++g) {
      float* outG = py + (n * p.outChannels + g * mPerGroup) * outSize;
      const float* xg = px + (n * p.channels + g * cPerGroup) * inSize;
      const float* wg = pw + g * cPerGroup * rows;  // [cPerGroup][mPerGroup][kSize]
      for (int64_t i0 = 0; i0 < inSize; i0 += chunk) {
        const int64_t cols = std::min(chunk, inSize - i0);
        thread_local std::vector<float> columns;
        columns.resize(static_cast<size_t>(rows * cols));
        cpu::sgemm(true, false, static_cast<size_t>(rows), static_cast<size_t>(cols), static_cast<size_t>(cPerGroup),
                   1.0f, wg, static_cast<size_t>(rows), xg + i0, static_cast<size_t>(inSize), 0.0f, columns.data(),
                   static_cast<size_t>(cols), ctx.pool);
        // Output planes are disjoint per m: threads split them (reading this thread's buffer, not their own).
        const float* colData = columns.data();
        parallelForWork(ctx, static_cast<size_t>(mPerGroup), static_cast<size_t>(kSize * cols),
                        [&](size_t m0, size_t m1) {
                          for (int64_t m = static_cast<int64_t>(m0); m < static_cast<int64_t>(m1); ++m) {
                            float* out = outG + m * outSize;
                            if (i0 == 0) std::fill(out, out + outSize, pb ? pb[g * mPerGroup + m] : 0.0f);
                            const float* col = colData + m * kSize * cols;
                            if (plan.rowWise) {
                              addColumnRows(p, col, i0 / inW, (i0 + cols) / inW, out);
                              continue;
                            }
                            for (int64_t k = 0; k < kSize; ++k) {
                              const float* tap = col + k * cols;
                              const int64_t* t = plan.target.data() + k * inSize + i0;
                              for (int64_t i = 0; i < cols; ++i)
                                if (t[i] >= 0) out[t[i]] += tap[i];
                            }
                          }
                        });
      }
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
