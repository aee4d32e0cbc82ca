// Sliding-window output sizes and padding (explicit pads or auto_pad), shared by Conv and pooling.
#include "kernels/spatial.h"

namespace ctxkit::kernels::detail {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// A per-dimension list (the decoder checked its values) or its default, of `count` values.
Expected<std::vector<int64_t>> listOrDefault(const OpContext& ctx, const std::optional<std::vector<int64_t>>& list,
                                             std::string_view name, size_t count, int64_t fallback) {
  if (!list) return std::vector<int64_t>(count, fallback);
  if (list->size() != count) return invalid(ctx, "attribute {} has {} values but expected {}", name, list->size(), count);
  return *list;
}

}  // namespace

Expected<Window> computeWindow(const OpContext& ctx, const ops::WindowAttrs& attrs, std::span<const int64_t> in,
                               std::span<const int64_t> kernel, bool ceilMode) {
  size_t n = in.size();
  Window w;
  w.in.assign(in.begin(), in.end());
  w.kernel.assign(kernel.begin(), kernel.end());
  for (int64_t k : w.kernel)
    if (k < 1) return invalid(ctx, "kernel shape {} has a dimension below 1", shapeStr(w.kernel));
  CTX_ASSIGN_OR_RETURN(w.strides, listOrDefault(ctx, attrs.strides, "strides", n, 1));
  CTX_ASSIGN_OR_RETURN(w.dilations, listOrDefault(ctx, attrs.dilations, "dilations", n, 1));
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> pads, listOrDefault(ctx, attrs.pads, "pads", 2 * n, 0));
  using ops::AutoPad;
  w.padBegin.assign(n, 0);
  w.padEnd.assign(n, 0);
  w.out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    int64_t span = w.dilations[i] * (w.kernel[i] - 1) + 1;  // extent of the dilated kernel
    int64_t s = w.strides[i];
    if (attrs.autoPad == AutoPad::SameUpper || attrs.autoPad == AutoPad::SameLower) {
      int64_t out = ceilDiv(w.in[i], s);
      int64_t total = std::max<int64_t>(0, (out - 1) * s + span - w.in[i]);
      int64_t small = total / 2, large = total - total / 2;
      w.padBegin[i] = attrs.autoPad == AutoPad::SameUpper ? small : large;
      w.padEnd[i] = attrs.autoPad == AutoPad::SameUpper ? large : small;
      w.out[i] = out;
      continue;
    }
    if (attrs.autoPad == AutoPad::NotSet) {
      w.padBegin[i] = pads[i];
      w.padEnd[i] = pads[i + n];
    }
    int64_t padded = w.in[i] + w.padBegin[i] + w.padEnd[i];
    if (padded < span)
      return invalid(ctx, "kernel extent {} exceeds the padded input extent {} in spatial dimension {}", span, padded,
                     i);
    int64_t out = (ceilMode ? ceilDiv(padded - span, s) : floorDiv(padded - span, s)) + 1;
    // With ceil_mode, a last window starting inside the end padding is dropped.
    if (ceilMode && (out - 1) * s >= w.in[i] + w.padBegin[i]) --out;
    w.out[i] = out;
  }
  return w;
}

Window3 toWindow3(const Window& w) {
  Window3 r{};
  size_t lead = 3 - w.in.size();
  for (size_t i = 0; i < 3; ++i) {
    bool real = i >= lead;
    size_t j = i - lead;
    r.in[i] = real ? w.in[j] : 1;
    r.kernel[i] = real ? w.kernel[j] : 1;
    r.stride[i] = real ? w.strides[j] : 1;
    r.dilation[i] = real ? w.dilations[j] : 1;
    r.padBegin[i] = real ? w.padBegin[j] : 0;
    r.padEnd[i] = real ? w.padEnd[j] : 0;
    r.out[i] = real ? w.out[j] : 1;
  }
  return r;
}

}  // namespace ctxkit::kernels::detail
