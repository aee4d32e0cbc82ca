// Integer matrix products and convolutions: MatMulInteger and ConvInteger (int32 results), QLinearMatMul and
// QLinearConv (requantized 8-bit results). Operands are int8 or uint8 with zero points (per tensor, per row of A,
// per column of B, per output channel of W); products accumulate exactly in int32, and requantization scales in
// float, rounds halves to even and saturates, as ONNX defines.
#include "kernels/convert.h"
#include "kernels/ops.h"
#include "kernels/spatial.h"

#include <cmath>

namespace ctxkit::kernels::detail {

namespace {

constexpr TypeSet k8BitTypes = typeBit(ElemType::Int8) | typeBit(ElemType::Uint8);

// The values of an int8/uint8 tensor as int32, into `v` (per-thread scratch of the callers).
void widen(const ir::Tensor& t, std::vector<int32_t>& v) {
  v.resize(static_cast<size_t>(t.elementCount()));
  if (t.type() == ElemType::Int8)
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.dataAs<int8_t>()[i];
  else
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.dataAs<uint8_t>()[i];
}

// A zero point (absent: 0) or scale as `count` values into `v`: one value broadcast, or exactly `count` values.
// `v` is the caller's per-thread scratch, so that runs allocate nothing once it has grown.
template <typename T>
Status perIndex(const OpContext& ctx, const ir::Tensor* t, size_t count, const char* what, std::vector<T>& v) {
  v.assign(count, T(0));
  if (!t) return Status::ok();
  thread_local std::vector<double> values;
  values.resize(static_cast<size_t>(t->elementCount()));
  CTX_RETURN_IF_ERROR(convertElements(t->type(), t->data(), ElemType::Double, values.data(), values.size()));
  if (values.size() == 1) {
    std::fill(v.begin(), v.end(), static_cast<T>(values[0]));
    return Status::ok();
  }
  if (values.size() != count) return invalid(ctx, "{} has {} values but expected 1 or {}", what, values.size(), count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(values[i]);
  return Status::ok();
}

// C[M x N] (int32) = (A - aZero[row]) * (B - bZero[column]), A and B row-major int32 values.
void integerGemm(const int32_t* a, const int32_t* b, int32_t* c, int64_t M, int64_t N, int64_t K, const int32_t* aZero,
                 const int32_t* bZero) {
  thread_local std::vector<int32_t> row;
  row.resize(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    std::fill(row.begin(), row.end(), 0);
    for (int64_t k = 0; k < K; ++k) {
      const int32_t av = a[i * K + k] - aZero[static_cast<size_t>(i)];
      const int32_t* bk = b + k * N;
      for (int64_t j = 0; j < N; ++j) row[static_cast<size_t>(j)] += av * (bk[j] - bZero[static_cast<size_t>(j)]);
    }
    std::copy(row.begin(), row.end(), c + i * N);
  }
}

// round-half-even(acc * scale) + zero, saturated to the 8-bit output type.
void requantize(const int32_t* acc, size_t n, float scale, int32_t zero, ir::Tensor& y, size_t offset) {
  const bool isSigned = y.type() == ElemType::Int8;
  const int32_t lo = isSigned ? -128 : 0, hi = isSigned ? 127 : 255;
  for (size_t i = 0; i < n; ++i) {
    float v = std::nearbyint(static_cast<float>(acc[i]) * scale) + static_cast<float>(zero);
    int32_t q = static_cast<int32_t>(std::min(static_cast<float>(hi), std::max(static_cast<float>(lo), v)));
    if (isSigned) y.mutableDataAs<int8_t>()[offset + i] = static_cast<int8_t>(q);
    else y.mutableDataAs<uint8_t>()[offset + i] = static_cast<uint8_t>(q);
  }
}

// ---- matrix products ---------------------------------------------------------------------------------------

struct IntMatMul {
  int64_t batches = 1, M = 0, N = 0, K = 0;
  bool bBatched = false;  // B has batch dims of its own (else one B for every batch)
};

Expected<IntMatMul> planIntMatMul(const OpContext& ctx, std::span<const int64_t> a, std::span<const int64_t> b) {
  if (a.size() < 2 || b.size() < 2)
    return unsupported(ctx, "inputs have shapes {} and {}: integer products need matrices (rank 2 or more)",
                       shapeStr(a), shapeStr(b));
  IntMatMul p;
  p.M = a[a.size() - 2];
  p.K = a.back();
  p.N = b.back();
  if (b[b.size() - 2] != p.K)
    return invalid(ctx, "inputs have shapes {} and {} whose inner dimensions {} and {} differ", shapeStr(a),
                   shapeStr(b), p.K, b[b.size() - 2]);
  p.bBatched = b.size() > 2;
  if (p.bBatched && !std::equal(a.begin(), a.end() - 2, b.begin(), b.end() - 2))
    return unsupported(ctx, "inputs have shapes {} and {}: batch dimensions must be equal", shapeStr(a), shapeStr(b));
  p.batches = dimProduct(a, 0, a.size() - 2);
  return p;
}

}  // namespace

// MatMulInteger (A, B, a_zero_point, b_zero_point) and QLinearMatMul (a, a_scale, a_zero_point, b, b_scale,
// b_zero_point, y_scale, y_zero_point).
InferResult inferIntegerMatMul(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  const bool linear = ctx.kind == ir::OpKind::QLinearMatMul;
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, linear ? 8 : 2, linear ? 8 : 4));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  const size_t bIndex = linear ? 3 : 1;
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, k8BitTypes));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, bIndex, k8BitTypes));
  CTX_ASSIGN_OR_RETURN(IntMatMul p, planIntMatMul(ctx, inputs[0].shape, inputs[bIndex].shape));
  // A's shape with its last dim N (runs never build it: the plan they use carries no shapes).
  ir::Shape outShape(inputs[0].shape.begin(), inputs[0].shape.end() - 1);
  outShape.push_back(p.N);
  if (!linear) return single(ElemType::Int32, std::move(outShape));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 7, k8BitTypes));
  return single(inputs[7].type, std::move(outShape));
}

Status runIntegerMatMul(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const bool linear = ctx.kind == ir::OpKind::QLinearMatMul;
  const ir::Tensor& a = *inputs[0];
  const ir::Tensor& b = *inputs[linear ? 3 : 1];
  const ir::Tensor* aZero = linear ? inputs[2] : (inputs.size() > 2 ? inputs[2] : nullptr);
  const ir::Tensor* bZero = linear ? inputs[5] : (inputs.size() > 3 ? inputs[3] : nullptr);
  ir::Tensor& y = *outputs[0];
  CTX_ASSIGN_OR_RETURN(IntMatMul p, planIntMatMul(ctx, a.shape(), b.shape()));
  // Per-thread scratch that grows once: a steady-state run allocates nothing.
  thread_local std::vector<int32_t> az, bz, av, bv, acc, yz;
  thread_local std::vector<float> scale, as, bs, ys;
  CTX_RETURN_IF_ERROR(perIndex<int32_t>(ctx, aZero, static_cast<size_t>(p.M), "a_zero_point", az));
  CTX_RETURN_IF_ERROR(perIndex<int32_t>(ctx, bZero, static_cast<size_t>(p.N), "b_zero_point", bz));
  widen(a, av);
  widen(b, bv);
  acc.resize(static_cast<size_t>(p.M * p.N));
  scale.clear();
  float yScale = 1;
  int32_t yZero = 0;
  if (linear) {
    CTX_RETURN_IF_ERROR(perIndex<float>(ctx, inputs[1], 1, "a_scale", as));
    CTX_RETURN_IF_ERROR(perIndex<float>(ctx, inputs[4], static_cast<size_t>(p.N), "b_scale", bs));
    CTX_RETURN_IF_ERROR(perIndex<float>(ctx, inputs[6], 1, "y_scale", ys));
    CTX_RETURN_IF_ERROR(perIndex<int32_t>(ctx, inputs[7], 1, "y_zero_point", yz));
    yScale = ys[0];
    yZero = yz[0];
    for (float s : bs) scale.push_back(as[0] * s / yScale);
  }
  for (int64_t n = 0; n < p.batches; ++n) {
    integerGemm(av.data() + n * p.M * p.K, bv.data() + (p.bBatched ? n * p.K * p.N : 0), acc.data(), p.M, p.N, p.K,
                az.data(), bz.data());
    const size_t base = static_cast<size_t>(n * p.M * p.N);
    if (!linear) {
      std::copy(acc.begin(), acc.end(), y.mutableDataAs<int32_t>() + base);
      continue;
    }
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j)
        requantize(&acc[static_cast<size_t>(i * p.N + j)], 1, scale[static_cast<size_t>(j)], yZero, y,
                   base + static_cast<size_t>(i * p.N + j));
  }
  return Status::ok();
}

// ---- convolutions ---------------------------------------------------------------------------------------

namespace {

struct IntConv {
  Window3 w;
  int64_t batch = 0, channels = 0, outChannels = 0, group = 1;
  Dims outShape;  // inline: runs plan too
};

Expected<IntConv> planIntConv(const OpContext& ctx, std::span<const int64_t> x, std::span<const int64_t> w) {
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
    return invalid(ctx,
                   "inputs have shapes {} and {} but expected N x C x (1 to 3 spatial dims) and a weight of that rank",
                   shapeStr(x), shapeStr(w));
  const ops::ConvAttrs& attrs = attrsOf<ops::ConvAttrs>(ctx);
  IntConv p;
  p.batch = x[0];
  p.channels = x[1];
  p.outChannels = w[0];
  p.group = attrs.group;
  if (p.channels != w[1] * p.group || p.outChannels % p.group != 0)
    return invalid(ctx, "input 0 has {} channels but weight shape {} with group {} does not fit", p.channels,
                   shapeStr(w), p.group);
  CTX_ASSIGN_OR_RETURN(Window window, computeWindow(ctx, attrs.window, x.subspan(2), w.subspan(2), false));
  p.w = toWindow3(window);
  p.outShape.push_back(p.batch);
  p.outShape.push_back(p.outChannels);
  for (int64_t d : window.out) p.outShape.push_back(d);
  return p;
}

}  // namespace

// ConvInteger (x, w, x_zero_point, w_zero_point) and QLinearConv (x, x_scale, x_zero_point, w, w_scale,
// w_zero_point, y_scale, y_zero_point, B).
InferResult inferIntegerConv(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  const bool linear = ctx.kind == ir::OpKind::QLinearConv;
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, linear ? 8 : 2, linear ? 9 : 4));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  const size_t wIndex = linear ? 3 : 1;
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, k8BitTypes));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, wIndex, k8BitTypes));
  CTX_ASSIGN_OR_RETURN(IntConv p, planIntConv(ctx, inputs[0].shape, inputs[wIndex].shape));
  const ir::Shape outShape(p.outShape.begin(), p.outShape.end());
  if (!linear) return single(ElemType::Int32, outShape);
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 7, k8BitTypes));
  if (const ValueDesc* bias = optionalInput(inputs, 8)) {
    CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 8, typeBit(ElemType::Int32)));
    if (dimProduct(bias->shape) != p.outChannels)
      return invalid(ctx, "input 8 (B) has shape {} but expected {} values", shapeStr(bias->shape), p.outChannels);
  }
  return single(inputs[7].type, outShape);
}

Status runIntegerConv(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const bool linear = ctx.kind == ir::OpKind::QLinearConv;
  const ir::Tensor& x = *inputs[0];
  const ir::Tensor& wt = *inputs[linear ? 3 : 1];
  const ir::Tensor* xZero = linear ? inputs[2] : (inputs.size() > 2 ? inputs[2] : nullptr);
  const ir::Tensor* wZero = linear ? inputs[5] : (inputs.size() > 3 ? inputs[3] : nullptr);
  const ir::Tensor* bias = linear && inputs.size() > 8 ? inputs[8] : nullptr;
  ir::Tensor& y = *outputs[0];
  CTX_ASSIGN_OR_RETURN(IntConv p, planIntConv(ctx, x.shape(), wt.shape()));
  const Window3& w = p.w;
  const int64_t cg = p.channels / p.group, mg = p.outChannels / p.group;
  const int64_t kSize = w.kernel[0] * w.kernel[1] * w.kernel[2];
  const int64_t inSize = w.in[0] * w.in[1] * w.in[2], outSize = w.out[0] * w.out[1] * w.out[2];
  const int64_t rows = cg * kSize;
  // Per-thread scratch that grows once: a steady-state run allocates nothing.
  thread_local std::vector<int32_t> xz, wz, yz, xv, wv, col, acc, noZero;
  thread_local std::vector<float> scale, xs, ws, ys;
  CTX_RETURN_IF_ERROR(perIndex<int32_t>(ctx, xZero, 1, "x_zero_point", xz));
  CTX_RETURN_IF_ERROR(perIndex<int32_t>(ctx, wZero, static_cast<size_t>(p.outChannels), "w_zero_point", wz));
  scale.assign(static_cast<size_t>(p.outChannels), 1.0f);
  int32_t yZero = 0;
  if (linear) {
    CTX_RETURN_IF_ERROR(perIndex<float>(ctx, inputs[1], 1, "x_scale", xs));
    CTX_RETURN_IF_ERROR(perIndex<float>(ctx, inputs[4], static_cast<size_t>(p.outChannels), "w_scale", ws));
    CTX_RETURN_IF_ERROR(perIndex<float>(ctx, inputs[6], 1, "y_scale", ys));
    CTX_RETURN_IF_ERROR(perIndex<int32_t>(ctx, inputs[7], 1, "y_zero_point", yz));
    yZero = yz[0];
    for (size_t m = 0; m < scale.size(); ++m) scale[m] = xs[0] * ws[m] / ys[0];
  }
  widen(x, xv);
  widen(wt, wv);
  col.resize(static_cast<size_t>(rows * outSize));
  acc.resize(static_cast<size_t>(mg * outSize));
  noZero.assign(static_cast<size_t>(outSize), 0);
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t g = 0; g < p.group; ++g) {
      // Taps in the padding read the input's zero point, so that after subtracting it they add nothing.
      im2col(xv.data() + (n * p.channels + g * cg) * inSize, w, col.data(), 0, rows, 0, outSize, xz[0]);
      for (int32_t& v : col) v -= xz[0];
      integerGemm(wv.data() + g * mg * rows, col.data(), acc.data(), mg, outSize, rows, wz.data() + g * mg,
                  noZero.data());
      for (int64_t m = 0; m < mg; ++m) {
        const int64_t oc = g * mg + m;
        int32_t* am = acc.data() + m * outSize;
        const size_t offset = static_cast<size_t>((n * p.outChannels + oc) * outSize);
        if (bias)
          for (int64_t i = 0; i < outSize; ++i) am[i] += bias->dataAs<int32_t>()[oc];
        if (linear) requantize(am, static_cast<size_t>(outSize), scale[static_cast<size_t>(oc)], yZero, y, offset);
        else std::copy(am, am + outSize, y.mutableDataAs<int32_t>() + offset);
      }
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
