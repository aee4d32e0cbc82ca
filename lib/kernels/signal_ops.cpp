// Signal-processing generators: HannWindow, HammingWindow and BlackmanWindow (periodic or symmetric cosine sums of
// `size` points) and MelWeightMatrix (triangular mel filterbanks over a onesided DFT), computed in double precision
// and written in the requested element type.
#include "cpu/convert.h"
#include "kernels/ops.h"

#include <cmath>
#include <numbers>

namespace ctxkit::kernels::detail {

namespace {

constexpr TypeSet kOutputTypes = kFloatTypes;

Expected<int64_t> scalarInt(const OpContext& ctx, const ValueDesc& in, size_t index, const char* name) {
  if (dimProduct(in.shape) != 1)
    return invalid(ctx, "input {} ({}) has shape {} but expected a scalar", index, name, shapeStr(in.shape));
  if (!in.value)
    return unsupported(ctx, "input {} ({}) must be a known constant to infer the output shape", index, name);
  return tensorInts(*in.value)[0];
}

Status writeDoubles(const std::vector<double>& values, ir::Tensor& y) {
  return cpu::convertElements(ElemType::Double, values.data(), y.type(), y.mutableData(), values.size());
}

}  // namespace

InferResult inferWindow(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Int32) | typeBit(ElemType::Int64)));
  const ElemType out = attrsOf<ops::SignalAttrs>(ctx).outputType;
  if (!inSet(kOutputTypes, out)) return unsupported(ctx, "output_datatype {} is not supported", ir::elemTypeName(out));
  CTX_ASSIGN_OR_RETURN(int64_t size, scalarInt(ctx, inputs[0], 0, "size"));
  if (size < 0) return invalid(ctx, "input 0 (size) is {} but must not be negative", size);
  return single(out, {size});
}

Status runWindow(const OpContext& ctx, RunIns, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  const auto n = static_cast<int64_t>(y.elementCount());
  // cos terms: sum_k a_k cos(2 pi k i / N), with N = size (periodic) or size - 1 (symmetric).
  std::vector<double> a;
  switch (ctx.kind) {
    case ir::OpKind::HannWindow: a = {0.5, -0.5}; break;
    case ir::OpKind::HammingWindow: a = {25.0 / 46.0, -21.0 / 46.0}; break;
    default: a = {0.42, -0.5, 0.08}; break;  // BlackmanWindow
  }
  const double denominator = static_cast<double>(attrsOf<ops::SignalAttrs>(ctx).periodic ? n : n - 1);
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    for (size_t k = 0; k < a.size(); ++k)
      v += a[k] * (denominator > 0
                       ? std::cos(2 * std::numbers::pi * static_cast<double>(k) * static_cast<double>(i) / denominator)
                       : 1.0);
    w[static_cast<size_t>(i)] = v;
  }
  return writeDoubles(w, y);
}

// MelWeightMatrix (num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz).
InferResult inferMelWeightMatrix(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 5, 5));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  const ElemType out = attrsOf<ops::SignalAttrs>(ctx).outputType;
  if (!inSet(kOutputTypes, out)) return unsupported(ctx, "output_datatype {} is not supported", ir::elemTypeName(out));
  CTX_ASSIGN_OR_RETURN(int64_t bins, scalarInt(ctx, inputs[0], 0, "num_mel_bins"));
  CTX_ASSIGN_OR_RETURN(int64_t dft, scalarInt(ctx, inputs[1], 1, "dft_length"));
  if (bins < 1 || dft < 1) return invalid(ctx, "num_mel_bins {} and dft_length {} must be positive", bins, dft);
  return single(out, {dft / 2 + 1, bins});
}

Status runMelWeightMatrix(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  const int64_t bins = y.shape()[1], spectrum = y.shape()[0];
  auto number = [&](size_t i) {
    double v = 0;
    (void)cpu::convertElements(inputs[i]->type(), inputs[i]->data(), ElemType::Double, &v, 1);
    return v;
  };
  const double dft = number(1), rate = number(2), lower = number(3), upper = number(4);
  if (!(rate > 0 && std::isfinite(rate) && std::isfinite(lower) && std::isfinite(upper)))
    return invalid(ctx, "sample_rate {}, lower_edge_hertz {} and upper_edge_hertz {} must be finite, the rate positive",
                   rate, lower, upper);
  // Band edges far outside the spectrum (a crafted rate of 1e-30) are clamped to +-2^40: the rows a band covers are
  // clipped to the spectrum below, so no loop runs over them and every conversion to an integer stays defined.
  constexpr double kFarEdge = static_cast<double>(int64_t{1} << 40);
  // bins + 2 band edges, evenly spaced on the mel scale from lower_edge_hertz, as spectrum bin indices.
  auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double lowMel = mel(lower), step = (mel(upper) - lowMel) / static_cast<double>(bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + lowMel) / 2595.0) - 1.0);
    const double e = std::floor((dft + 1.0) * hz / rate);
    if (std::isnan(e)) return invalid(ctx, "band edge {} of the mel scale is not a number", i);
    edge[static_cast<size_t>(i)] = static_cast<int64_t>(std::clamp(e, -kFarEdge, kFarEdge));
  }
  std::vector<double> w(static_cast<size_t>(spectrum * bins), 0.0);
  auto set = [&](int64_t row, int64_t col, double v) {
    if (row >= 0 && row < spectrum) w[static_cast<size_t>(row * bins + col)] = v;
  };
  for (int64_t b = 0; b < bins; ++b) {
    const int64_t left = edge[static_cast<size_t>(b)], center = edge[static_cast<size_t>(b + 1)],
                  right = edge[static_cast<size_t>(b + 2)];
    if (center == left) {
      set(center, b, 1.0);
    } else {
      for (int64_t j = std::max<int64_t>(left, 0); j <= std::min(center, spectrum - 1); ++j)
        set(j, b, static_cast<double>(j - left) / static_cast<double>(center - left));
    }
    for (int64_t j = std::max<int64_t>(center, 0); j < std::min(right, spectrum); ++j)
      set(j, b, static_cast<double>(right - j) / static_cast<double>(right - center));
  }
  return writeDoubles(w, y);
}

}  // namespace ctxkit::kernels::detail
