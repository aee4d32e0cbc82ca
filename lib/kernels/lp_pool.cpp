// LpPool: the p-norm, (sum |x|^p)^(1/p), of each window over 1-3 spatial dims; padding contributes zeros, so only
// the taps inside the input are summed.
#include "kernels/ops.h"
#include "kernels/spatial.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

Expected<Window> planLpPool(const OpContext& ctx, std::span<const int64_t> x) {
  if (x.size() < 3 || x.size() > 5)
    return invalid(ctx, "input 0 has shape {} but expected N x C x 1-3 spatial dimensions", shapeStr(x));
  const ops::LpPoolAttrs& attrs = attrsOf<ops::LpPoolAttrs>(ctx);
  const ops::IntList& ks = *attrs.window.kernelShape;  // the decoder requires it
  if (ks.size() != x.size() - 2)
    return invalid(ctx, "attribute kernel_shape has {} values but input 0 has shape {} with {} spatial dimensions",
                   ks.size(), shapeStr(x), x.size() - 2);
  return computeWindow(ctx, attrs.window, x.subspan(2), ks, attrs.ceilMode);
}

template <typename T> void lpPool(const OpContext& ctx, const T* x, T* y, const Window3& w, int64_t planes, double p) {
  const int64_t inSize = w.in[0] * w.in[1] * w.in[2];
  const int64_t outSize = w.out[0] * w.out[1] * w.out[2];
  parallelFor(ctx, static_cast<size_t>(planes), 1, [&](size_t p0, size_t p1) {
    for (size_t plane = p0; plane < p1; ++plane) {
      const T* xp = x + static_cast<int64_t>(plane) * inSize;
      T* yp = y + static_cast<int64_t>(plane) * outSize;
      forEachWindow(w, [&](int64_t o, auto&& taps) {
        double sum = 0;
        taps([&](int64_t pos) { sum += std::pow(std::fabs(static_cast<double>(xp[pos])), p); });
        yp[o] = static_cast<T>(std::pow(sum, 1.0 / p));
      });
    }
  });
}

}  // namespace

InferResult inferLpPool(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  CTX_ASSIGN_OR_RETURN(Window window, planLpPool(ctx, inputs[0].shape));
  ir::Shape out{inputs[0].shape[0], inputs[0].shape[1]};
  out.insert(out.end(), window.out.begin(), window.out.end());
  return single(inputs[0].type, std::move(out));
}

Status runLpPool(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  CTX_ASSIGN_OR_RETURN(Window window, planLpPool(ctx, x.shape()));
  const Window3 w = toWindow3(window);
  const auto p = static_cast<double>(attrsOf<ops::LpPoolAttrs>(ctx).p);
  constexpr TypeSet types = typeBit(ElemType::Float) | typeBit(ElemType::Double);
  return visitType<types>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    lpPool<T>(ctx, x.dataAs<T>(), outputs[0]->mutableDataAs<T>(), w, x.shape()[0] * x.shape()[1], p);
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
