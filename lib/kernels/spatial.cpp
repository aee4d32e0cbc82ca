// Sliding-window output sizes and padding (explicit pads or auto_pad), shared by Conv and pooling.
#include "kernels/spatial.h"

namespace ctxkit::kernels::detail {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

Expected<std::vector<int64_t>> positiveInts(const OpContext& ctx, std::string_view name, size_t count) {
  std::vector<int64_t> v = ctx.attrs.getInts(name, std::vector<int64_t>(count, 1));
  if (v.size() != count) return invalid(ctx, "attribute {} has {} values but expected {}", name, v.size(), count);
  for (int64_t x : v)
    if (x < 1) return invalid(ctx, "attribute {} has value {} but expected values of at least 1", name, x);
  return v;
}

}  // namespace

Expected<Window> computeWindow(const OpContext& ctx, std::span<const int64_t> in, std::span<const int64_t> kernel,
                               bool ceilMode, bool allowDilations) {
  size_t n = in.size();
  Window w;
  w.in.assign(in.begin(), in.end());
  w.kernel.assign(kernel.begin(), kernel.end());
  for (int64_t k : w.kernel)
    if (k < 1) return invalid(ctx, "kernel shape {} has a dimension below 1", shapeStr(w.kernel));
  CTX_ASSIGN_OR_RETURN(w.strides, positiveInts(ctx, "strides", n));
  if (allowDilations) {
    CTX_ASSIGN_OR_RETURN(w.dilations, positiveInts(ctx, "dilations", n));
  } else {
    if (ctx.attrs.has("dilations")) return invalid(ctx, "attribute dilations is not defined for this op and opset");
    w.dilations.assign(n, 1);
  }
  std::string autoPad = ctx.attrs.getString("auto_pad", "NOTSET");
  std::vector<int64_t> pads = ctx.attrs.getInts("pads", std::vector<int64_t>(2 * n, 0));
  if (pads.size() != 2 * n) return invalid(ctx, "attribute pads has {} values but expected {}", pads.size(), 2 * n);
  for (int64_t p : pads)
    if (p < 0) return invalid(ctx, "attribute pads has value {} but pads must not be negative", p);
  w.padBegin.assign(n, 0);
  w.padEnd.assign(n, 0);
  w.out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    int64_t span = w.dilations[i] * (w.kernel[i] - 1) + 1;  // extent of the dilated kernel
    int64_t s = w.strides[i];
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t out = ceilDiv(w.in[i], s);
      int64_t total = std::max<int64_t>(0, (out - 1) * s + span - w.in[i]);
      int64_t small = total / 2, large = total - total / 2;
      w.padBegin[i] = autoPad == "SAME_UPPER" ? small : large;
      w.padEnd[i] = autoPad == "SAME_UPPER" ? large : small;
      w.out[i] = out;
      continue;
    }
    if (autoPad == "NOTSET") {
      w.padBegin[i] = pads[i];
      w.padEnd[i] = pads[i + n];
    } else if (autoPad != "VALID") {
      return invalid(ctx, "attribute auto_pad is '{}' but expected NOTSET, SAME_UPPER, SAME_LOWER or VALID", autoPad);
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
