// Integer matrix products and convolutions: MatMulInteger and ConvInteger (int32 results), QLinearMatMul and
// QLinearConv (requantized 8-bit results). Operands are int8 or uint8 with zero points (per tensor, per row of A,
// per column of B, per output channel of W); products accumulate exactly in int32, and requantization scales in
// float, rounds halves to even and saturates, as ONNX defines. Both run on the packed 8-bit GEMM (cpu::qgemm.h): a plan
// holds the weights in its form with their sums, the zero-point corrections and the scales, worked out once when
// the op is prepared with constant weights (else per run, in per-thread storage).
#include "cpu/convert.h"
#include "cpu/qgemm.h"
#include "kernels/ops.h"
#include "kernels/spatial.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

constexpr TypeSet k8BitTypes = typeBit(ElemType::Int8) | typeBit(ElemType::Uint8);

// A zero point (absent: 0) or scale as `count` values into `v`: one value broadcast, or exactly `count` values.
// `v` is the caller's per-thread scratch, so that runs allocate nothing once it has grown.
template <typename T>
Status perIndex(const OpContext& ctx, const ir::Tensor* t, size_t count, const char* what, std::vector<T>& v) {
  v.assign(count, T(0));
  if (!t) return Status::ok();
  thread_local std::vector<double> values;
  values.resize(static_cast<size_t>(t->elementCount()));
  CTX_RETURN_IF_ERROR(cpu::convertElements(t->type(), t->data(), ElemType::Double, values.data(), values.size()));
  if (values.size() == 1) {
    std::fill(v.begin(), v.end(), static_cast<T>(values[0]));
    return Status::ok();
  }
  if (values.size() != count) return invalid(ctx, "{} has {} values but expected 1 or {}", what, values.size(), count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(values[i]);
  return Status::ok();
}

bool isSigned8(ElemType t) { return t == ElemType::Int8; }

// The byte flip that moves 8-bit values into the kernel's form: int8 activations and uint8 weights shift by 128.
uint8_t flipFor(ElemType t, bool weight) { return isSigned8(t) == weight ? 0 : 0x80; }

// The activation a QLinear op's epilogue applies (the compiler's fuse-qdq: Conv/MatMul -> Relu or Clip ->
// QuantizeLinear), or none.
const ops::Epilogue* epilogueOf(const OpContext& ctx) {
  if (!ctx.typed) return nullptr;
  if (const auto* c = std::get_if<ops::ConvAttrs>(ctx.typed)) return &c->epilogue;
  if (const auto* m = std::get_if<ops::MatMulAttrs>(ctx.typed)) return &m->epilogue;
  return nullptr;
}

// The range of an 8-bit output `y` of zero point `zero` and scale `scale`: the type's, narrowed by a Relu or Clip
// epilogue. Quantizing is monotonic, so quantize(relu(x)) = max(quantize(x), zero) and quantize(clip(x, a, b)) =
// clamp(quantize(x), quantize(a), quantize(b)) exactly: the activation becomes the clamp of the requantization.
Status outputRange(const OpContext& ctx, ElemType y, int32_t zero, float scale, int32_t& lo, int32_t& hi) {
  lo = isSigned8(y) ? -128 : 0;
  hi = isSigned8(y) ? 127 : 255;
  const ops::Epilogue* e = epilogueOf(ctx);
  if (!e || e->activation == ops::Activation::None) return Status::ok();
  if (e->scale != 1.0f || e->shift != 0.0f ||
      (e->activation != ops::Activation::Relu && e->activation != ops::Activation::Clip))
    return unsupported(ctx, "a fused {} epilogue on 8-bit results: only Relu and Clip are exact there",
                       ops::activationName(e->activation));
  // As QuantizeLinear computes it: divided in float32, rounded half to even, saturated.
  auto quantize = [&](float v) {
    const double q = std::nearbyint(static_cast<double>(v / scale)) + zero;
    return static_cast<int32_t>(std::clamp(q, static_cast<double>(lo), static_cast<double>(hi)));
  };
  const int32_t from = e->activation == ops::Activation::Relu ? zero : quantize(e->alpha);
  const int32_t to = e->activation == ops::Activation::Relu ? hi : quantize(e->beta);
  lo = std::max(lo, from);
  hi = std::max(lo, std::min(hi, to));
  return Status::ok();
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
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, linear ? 8 : 2, linear ? 9 : 4));
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

namespace {

// What the plans of both families share: the packed depth and width, the two operands' zero points and the output's
// requantization. Inputs by index: x (a), x_scale, x_zero_point, w (b), w_scale, w_zero_point, y_scale,
// y_zero_point for QLinear ops; x, w, x_zero_point, w_zero_point for Integer ops.
struct QPlanBase {
  size_t quads = 0, rowStride = 0, nPad = 0;
  bool linear = false;
  int32_t yZero = 0, yLo = 0, yHi = 255;  // the output's zero point and range (QLinear ops)
  std::vector<float> scale;               // per weight channel: x_scale x w_scale / y_scale (QLinear ops)
  std::vector<int32_t> xz, wz, yz;        // the zero points as given (xz: one per activation row for products)
  std::vector<float> xs, ws, ys;          // scratch of the plan's making
};

// Fills the shared part for depth k, n columns of the activation's packed panels, `xRows` activation zero points
// and `channels` weight channels.
Status planShared(const OpContext& ctx, std::span<const ir::Tensor* const> v, size_t k, size_t n, size_t xRows,
                  size_t channels, QPlanBase& p) {
  p.linear = ctx.kind == ir::OpKind::QLinearMatMul || ctx.kind == ir::OpKind::QLinearConv;
  const bool conv = ctx.kind == ir::OpKind::QLinearConv || ctx.kind == ir::OpKind::ConvInteger;
  const ir::Tensor* xZero = p.linear ? v[2] : (v.size() > 2 ? v[2] : nullptr);
  const ir::Tensor* wZero = p.linear ? v[5] : (v.size() > 3 ? v[3] : nullptr);
  p.quads = cpu::roundUp(k, cpu::kQuad) / cpu::kQuad;
  p.rowStride = p.quads * cpu::kQuad;
  p.nPad = cpu::roundUp(std::max<size_t>(n, 1), cpu::qgemmColumnAlign());
  CTX_RETURN_IF_ERROR(perIndex<int32_t>(ctx, xZero, xRows, conv ? "x_zero_point" : "a_zero_point", p.xz));
  CTX_RETURN_IF_ERROR(perIndex<int32_t>(ctx, wZero, channels, conv ? "w_zero_point" : "b_zero_point", p.wz));
  if (p.linear) {
    CTX_RETURN_IF_ERROR(perIndex<float>(ctx, v[1], 1, conv ? "x_scale" : "a_scale", p.xs));
    CTX_RETURN_IF_ERROR(perIndex<float>(ctx, v[4], channels, conv ? "w_scale" : "b_scale", p.ws));
    CTX_RETURN_IF_ERROR(perIndex<float>(ctx, v[6], 1, "y_scale", p.ys));
    CTX_RETURN_IF_ERROR(perIndex<int32_t>(ctx, v[7], 1, "y_zero_point", p.yz));
    p.yZero = p.yz[0];
    CTX_RETURN_IF_ERROR(outputRange(ctx, v[7]->type(), p.yZero, p.ys[0], p.yLo, p.yHi));
    p.scale.resize(channels);
    for (size_t c = 0; c < channels; ++c) p.scale[c] = p.xs[0] * p.ws[c] / p.ys[0];
  }
  return Status::ok();
}

// `zeros` shifted by `shift` into `out`, or `out` empty when all of them are then 0 (`negate`: their negatives).
void shiftedZeros(const std::vector<int32_t>& zeros, int32_t shift, bool negate, std::vector<int32_t>& out) {
  out.clear();
  for (int32_t z : zeros)
    if (z + shift != 0) out.resize(zeros.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = negate ? -(zeros[i] + shift) : zeros[i] + shift;
}

// A matrix product planned for the packed GEMM: B (the weight) packed with its column terms.
struct QMatMulPlan : QPlanBase {
  IntMatMul shape;
  uint8_t aFlip = 0;
  std::vector<uint8_t> b;         // each batch's B (one unless B is batched) in packed quads
  std::vector<int32_t> aZero;     // A's zero point per row, in the kernel's form (empty: all zero)
  std::vector<int32_t> negBZero;  // minus B's zero point per column, in the kernel's form (empty: all zero)
  std::vector<int32_t> bTerm;     // per batch and column: K x B's zero point - the column's sum
  std::vector<int32_t> colAdd;    // the bias per column (QLinearMatMul's ninth input), or empty
};

// Works the plan out from A's shape and type and the other inputs' values (`v`, by input index; null: absent).
Status planMatMul(const OpContext& ctx, std::span<const int64_t> aShape, ElemType aType,
                  std::span<const ir::Tensor* const> v, QMatMulPlan& p) {
  const ir::Tensor& b = *v[ctx.kind == ir::OpKind::QLinearMatMul ? 3 : 1];
  CTX_ASSIGN_OR_RETURN(p.shape, planIntMatMul(ctx, aShape, b.shape()));
  const auto M = static_cast<size_t>(p.shape.M), N = static_cast<size_t>(p.shape.N), K = static_cast<size_t>(p.shape.K);
  CTX_RETURN_IF_ERROR(planShared(ctx, v, K, N, M, N, p));
  p.aFlip = flipFor(aType, false);
  const uint8_t flip = flipFor(b.type(), true);
  const int32_t bShift = flip ? -128 : 0;
  shiftedZeros(p.xz, p.aFlip ? 128 : 0, false, p.aZero);
  shiftedZeros(p.wz, bShift, true, p.negBZero);
  const size_t bBatches = p.shape.bBatched ? static_cast<size_t>(p.shape.batches) : 1;
  const size_t panelBytes = p.quads * p.nPad * cpu::kQuad;
  p.b.resize(bBatches * panelBytes);
  p.bTerm.assign(bBatches * N, 0);
  for (size_t n = 0; n < bBatches; ++n) {
    const uint8_t* src = b.dataAs<uint8_t>() + n * K * N;
    cpu::packQuads(src, N, K, N, p.nPad, flip, p.b.data() + n * panelBytes, nullptr);
    for (size_t k = 0; k < K; ++k)
      for (size_t j = 0; j < N; ++j) p.bTerm[n * N + j] -= static_cast<int8_t>(src[k * N + j] ^ flip);
    for (size_t j = 0; j < N; ++j) p.bTerm[n * N + j] += static_cast<int32_t>(K) * (p.wz[j] + bShift);
  }
  // QLinearMatMul's ninth input, ctxkit's own (fuse-qdq: Gemm or MatMul + Add): an int32 bias per column, in units
  // of a_scale x b_scale, added before requantization.
  if (const ir::Tensor* bias = p.linear && v.size() > 8 ? v[8] : nullptr) {
    if (bias->type() != ElemType::Int32 || bias->elementCount() != N)
      return invalid(ctx, "input 8 (bias) is a {} tensor of {} values but expected int32 with {}",
                     ir::elemTypeName(bias->type()), bias->elementCount(), N);
    p.colAdd.assign(bias->dataAs<int32_t>(), bias->dataAs<int32_t>() + N);
  }
  return Status::ok();
}

// The values of the inputs a plan reads, from a prepared op's descriptions: fails unless all of them but input 0
// (the activation) are constants.
Status constantInputs(const OpContext& ctx, InDescs inputs, std::vector<const ir::Tensor*>& v) {
  v.assign(inputs.size(), nullptr);
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (!inputs[i].present) continue;
    if (!inputs[i].value) return unsupported(ctx, "input {} is not a constant", i);
    v[i] = inputs[i].value;
  }
  return Status::ok();
}

// A plan worked out once when the op is prepared: all inputs but the activation must be constants.
template <typename Plan, auto make>
Expected<std::shared_ptr<const void>> planOnce(const OpContext& ctx, InDescs inputs) {
  std::vector<const ir::Tensor*> v;
  CTX_RETURN_IF_ERROR(constantInputs(ctx, inputs, v));
  auto plan = std::make_shared<Plan>();
  CTX_RETURN_IF_ERROR(make(ctx, inputs[0].shape, inputs[0].type, v, *plan));
  return std::shared_ptr<const void>(std::move(plan));
}

// Runs on the prepared plan, or on one worked out now in per-thread storage that grows once.
template <typename Plan, auto make, auto run> Status runPlanned(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  if (ctx.plan) return run(ctx, *static_cast<const Plan*>(ctx.plan), *inputs[0], *outputs[0]);
  thread_local Plan plan;
  CTX_RETURN_IF_ERROR(make(ctx, inputs[0]->shape(), inputs[0]->type(), inputs, plan));
  return run(ctx, plan, *inputs[0], *outputs[0]);
}

Status runMatMulPlan(const OpContext& ctx, const QMatMulPlan& p, const ir::Tensor& a, ir::Tensor& y) {
  const auto M = static_cast<size_t>(p.shape.M), N = static_cast<size_t>(p.shape.N), K = static_cast<size_t>(p.shape.K);
  // Per-thread scratch that grows once: a steady-state run allocates nothing.
  thread_local std::vector<uint8_t> rows;
  thread_local std::vector<int32_t> rowSums;
  rows.resize(M * p.rowStride);
  rowSums.resize(M);
  const size_t panelBytes = p.quads * p.nPad * cpu::kQuad;
  for (size_t n = 0; n < static_cast<size_t>(p.shape.batches); ++n) {
    const uint8_t* src = a.dataAs<uint8_t>() + n * M * K;
    for (size_t i = 0; i < M; ++i) {
      uint8_t* row = rows.data() + i * p.rowStride;
      int32_t sum = 0;
      for (size_t k = 0; k < K; ++k) sum += row[k] = static_cast<uint8_t>(src[i * K + k] ^ p.aFlip);
      std::fill(row + K, row + p.rowStride, uint8_t{0});
      rowSums[i] = sum;
    }
    const size_t bIndex = p.shape.bBatched ? n : 0;
    cpu::QGemm g;
    g.rows = rows.data();
    g.rowStride = p.rowStride;
    g.rowsSigned = false;
    g.panels = p.b.data() + bIndex * panelBytes;
    g.panelStride = p.nPad * cpu::kQuad;
    g.m = M;
    g.n = N;
    g.quads = p.quads;
    if (!p.negBZero.empty()) g.rowMul = rowSums.data(), g.colMul = p.negBZero.data();
    if (!p.aZero.empty()) g.rowMul2 = p.aZero.data(), g.colMul2 = p.bTerm.data() + bIndex * N;
    g.ldOut = N;
    if (!p.colAdd.empty()) g.colAdd = p.colAdd.data();
    if (p.linear) {
      g.colScale = p.scale.data();
      g.zero = p.yZero, g.lo = p.yLo, g.hi = p.yHi;
      g.out = y.mutableDataAs<uint8_t>() + n * M * N;
    } else {
      g.out = y.mutableDataAs<int32_t>() + n * M * N;
    }
    cpu::qgemm(g, ctx.pool);
  }
  return Status::ok();
}

}  // namespace

Expected<std::shared_ptr<const void>> planIntegerMatMul(const OpContext& ctx, InDescs inputs) {
  return planOnce<QMatMulPlan, planMatMul>(ctx, inputs);
}

Status runIntegerMatMul(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  return runPlanned<QMatMulPlan, planMatMul, runMatMulPlan>(ctx, inputs, outputs);
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

namespace {

// A convolution planned for the packed GEMM: the weight rows in the kernel's form with their terms.
struct QConvPlan : QPlanBase {
  IntConv shape;
  int64_t cg = 0, mg = 0, rows = 0, inSize = 0, outSize = 0;
  bool direct = false;            // a 1 x 1 window with stride 1 and no padding reads the input as it is
  bool planar = false;            // else 1-D or 2-D: unfolded straight from padded planes (else through im2col)
  uint8_t xFlip = 0, xFill = 0;   // the input's byte flip, and its zero point as a byte (padding)
  std::vector<uint8_t> w;         // output channels x rowStride bytes
  std::vector<int32_t> rowAdd;    // bias - x_zero x weight sum + K x x_zero x w_zero, per output channel
  std::vector<int32_t> negWZero;  // minus w_zero per output channel, in the kernel's form (empty: all zero)
};

Status planConv(const OpContext& ctx, std::span<const int64_t> xShape, ElemType xType,
                std::span<const ir::Tensor* const> v, QConvPlan& p) {
  const bool linear = ctx.kind == ir::OpKind::QLinearConv;
  const ir::Tensor& wt = *v[linear ? 3 : 1];
  const ir::Tensor* bias = linear && v.size() > 8 ? v[8] : nullptr;
  CTX_ASSIGN_OR_RETURN(p.shape, planIntConv(ctx, xShape, wt.shape()));
  const Window3& w = p.shape.w;
  p.cg = p.shape.channels / p.shape.group;
  p.mg = p.shape.outChannels / p.shape.group;
  p.rows = p.cg * w.kernel[0] * w.kernel[1] * w.kernel[2];
  p.inSize = w.in[0] * w.in[1] * w.in[2];
  p.outSize = w.out[0] * w.out[1] * w.out[2];
  p.direct = p.rows == p.cg;
  for (int d = 0; d < 3; ++d) p.direct = p.direct && w.stride[d] == 1 && w.padBegin[d] == 0 && w.in[d] == w.out[d];
  p.planar = !p.direct && w.in[0] == 1 && w.kernel[0] == 1 && w.out[0] == 1 && w.padBegin[0] == 0 && w.padEnd[0] == 0;
  const auto M = static_cast<size_t>(p.shape.outChannels), K = static_cast<size_t>(p.rows);
  CTX_RETURN_IF_ERROR(planShared(ctx, v, K, static_cast<size_t>(p.outSize), 1, M, p));
  p.xFlip = flipFor(xType, false);
  p.xFill = static_cast<uint8_t>(p.xz[0]);
  const int64_t xZeroK = p.xz[0] + (p.xFlip ? 128 : 0);
  const uint8_t wFlip = flipFor(wt.type(), true);
  const int32_t wShift = wFlip ? -128 : 0;
  p.w.assign(M * p.rowStride, 0);
  p.rowAdd.resize(M);
  for (size_t m = 0; m < M; ++m) {
    const uint8_t* src = wt.dataAs<uint8_t>() + m * K;
    int64_t sum = 0;
    for (size_t k = 0; k < K; ++k) {
      p.w[m * p.rowStride + k] = static_cast<uint8_t>(src[k] ^ wFlip);
      sum += static_cast<int8_t>(src[k] ^ wFlip);
    }
    const int64_t wZeroK = p.wz[m] + wShift;
    const int64_t b = bias ? bias->dataAs<int32_t>()[m] : 0;
    p.rowAdd[m] = static_cast<int32_t>(b - xZeroK * sum + static_cast<int64_t>(K) * wZeroK * xZeroK);
  }
  shiftedZeros(p.wz, wShift, true, p.negWZero);
  return Status::ok();
}

// One group's input planes (cg of them) copied into `buffer` with the window's padding filled with the input's zero
// point, plus the slack cpu::packWindowQuads may read.
cpu::PaddedWindow padPlanes(const uint8_t* x, const QConvPlan& p, std::vector<uint8_t>& buffer) {
  const Window3& w = p.shape.w;
  const auto h = static_cast<size_t>(w.in[1]), wd = static_cast<size_t>(w.in[2]);
  const auto top = static_cast<size_t>(w.padBegin[1]), left = static_cast<size_t>(w.padBegin[2]);
  cpu::PaddedWindow pw;
  pw.rowStride = wd + left + static_cast<size_t>(w.padEnd[2]);
  pw.planeStride = (h + top + static_cast<size_t>(w.padEnd[1])) * pw.rowStride;
  buffer.assign(static_cast<size_t>(p.cg) * pw.planeStride + 32, p.xFill);
  for (size_t c = 0; c < static_cast<size_t>(p.cg); ++c)
    for (size_t r = 0; r < h; ++r)
      std::memcpy(buffer.data() + c * pw.planeStride + (top + r) * pw.rowStride + left, x + (c * h + r) * wd, wd);
  pw.planes = buffer.data();
  pw.kernelH = static_cast<size_t>(w.kernel[1]), pw.kernelW = static_cast<size_t>(w.kernel[2]);
  pw.strideH = static_cast<size_t>(w.stride[1]), pw.strideW = static_cast<size_t>(w.stride[2]);
  pw.dilationH = static_cast<size_t>(w.dilation[1]), pw.dilationW = static_cast<size_t>(w.dilation[2]);
  pw.outH = static_cast<size_t>(w.out[1]), pw.outW = static_cast<size_t>(w.out[2]);
  return pw;
}

Status runConvPlan(const OpContext& ctx, const QConvPlan& p, const ir::Tensor& x, ir::Tensor& y) {
  // Per-thread scratch that grows once: a steady-state run allocates nothing.
  thread_local std::vector<uint8_t> col, panels, planes;
  thread_local std::vector<int32_t> colSums;
  const auto K = static_cast<size_t>(p.rows), N = static_cast<size_t>(p.outSize);
  if (!p.direct && !p.planar) col.resize(K * N);
  panels.resize(p.quads * p.nPad * cpu::kQuad);
  colSums.resize(p.nPad);
  const int64_t M = p.shape.outChannels;
  for (int64_t n = 0; n < p.shape.batch; ++n) {
    for (int64_t g = 0; g < p.shape.group; ++g) {
      const uint8_t* xg = x.dataAs<uint8_t>() + (n * p.shape.channels + g * p.cg) * p.inSize;
      // Taps in the padding read the input's zero point, so that after subtracting it they add nothing.
      int32_t* sums = p.negWZero.empty() ? nullptr : colSums.data();
      if (p.direct) {
        cpu::packQuads(xg, static_cast<size_t>(p.inSize), K, N, p.nPad, p.xFlip, panels.data(), sums);
      } else if (p.planar) {
        cpu::packWindowQuads(padPlanes(xg, p, planes), K, p.nPad, p.xFlip, panels.data(), sums);
      } else {
        im2col(xg, p.shape.w, col.data(), 0, p.rows, 0, p.outSize, p.xFill);
        cpu::packQuads(col.data(), N, K, N, p.nPad, p.xFlip, panels.data(), sums);
      }
      cpu::QGemm q;
      q.rows = p.w.data() + static_cast<size_t>(g * p.mg) * p.rowStride;
      q.rowStride = p.rowStride;
      q.rowsSigned = true;
      q.panels = panels.data();
      q.panelStride = p.nPad * cpu::kQuad;
      q.m = static_cast<size_t>(p.mg);
      q.n = N;
      q.quads = p.quads;
      q.rowAdd = p.rowAdd.data() + g * p.mg;
      if (sums) q.rowMul = p.negWZero.data() + g * p.mg, q.colMul = sums;
      q.ldOut = N;
      const auto offset = static_cast<size_t>((n * M + g * p.mg) * p.outSize);
      if (p.linear) {
        q.rowScale = p.scale.data() + g * p.mg;
        q.zero = p.yZero, q.lo = p.yLo, q.hi = p.yHi;
        q.out = y.mutableDataAs<uint8_t>() + offset;
      } else {
        q.out = y.mutableDataAs<int32_t>() + offset;
      }
      cpu::qgemm(q, ctx.pool);
    }
  }
  return Status::ok();
}

}  // namespace

Expected<std::shared_ptr<const void>> planIntegerConv(const OpContext& ctx, InDescs inputs) {
  return planOnce<QConvPlan, planConv>(ctx, inputs);
}

Status runIntegerConv(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  return runPlanned<QConvPlan, planConv, runConvPlan>(ctx, inputs, outputs);
}

}  // namespace ctxkit::kernels::detail
