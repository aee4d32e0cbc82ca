// LSTM, GRU and RNN (ONNX opset 7+, with opset 14's layout attribute): one shape rule and float32 kernels.
#include "cpu/gemm.h"
#include "cpu/vec_math.h"
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

// One function of the `activations` attribute, with its alpha and beta.
struct Activation {
  using Kind = ops::RnnActivation;
  Kind kind = Kind::Sigmoid;
  float alpha = 0;
  float beta = 0;
};

float activate(const Activation& a, float x) {
  using K = Activation::Kind;
  switch (a.kind) {
    case K::Sigmoid: return 1.0f / (1.0f + std::exp(-x));
    case K::Tanh: return std::tanh(x);
    case K::Relu: return x > 0 ? x : 0.0f;
    case K::HardSigmoid: return std::clamp(a.alpha * x + a.beta, 0.0f, 1.0f);
    case K::LeakyRelu: return x >= 0 ? x : a.alpha * x;
    case K::ThresholdedRelu: return x > a.alpha ? x : 0.0f;
    case K::ScaledTanh: return a.alpha * std::tanh(a.beta * x);
    case K::Elu: return x >= 0 ? x : a.alpha * (std::exp(x) - 1.0f);
    case K::Softsign: return x / (1.0f + std::fabs(x));
    case K::Softplus: return std::log1p(std::exp(x));
    case K::Affine: return a.alpha * x + a.beta;
  }
  return x;
}

// `a` over x[0, n) in place: the vector kernels for the sigmoid and tanh nearly every model uses (one exp and a
// switch per element cost an LSTM of hidden size 64 three times ONNX Runtime's time).
void activateAll(const Activation& a, float* x, size_t n) {
  using K = Activation::Kind;
  if (a.kind == K::Sigmoid) cpu::vecSigmoid(x, x, n);
  else if (a.kind == K::Tanh) cpu::vecTanh(x, x, n);
  else
    for (size_t i = 0; i < n; ++i) x[i] = activate(a, x[i]);
}

// What both ops know about a node once its inputs and attributes are checked.
struct RnnSpec {
  bool lstm = true;
  int64_t gates = 4;  // LSTM: i, o, f, c; GRU: z, r, h; RNN: one
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool reverse = false;  // direction "reverse" (bidirectional runs direction 1 reversed)
  int64_t layout = 0;    // 0: X is [seq, batch, input]; 1: [batch, seq, input]
  float clip = 0;        // 0: no clipping
  bool inputForget = false;
  bool linearBeforeReset = false;
  std::vector<Activation> acts;  // per direction: f, g (and h for LSTM); RNN: f only

  ir::Shape stateShape() const { return layout == 0 ? ir::Shape{dirs, batch, hidden} : ir::Shape{batch, dirs, hidden}; }
  ir::Shape yShape() const {
    return layout == 0 ? ir::Shape{seq, dirs, batch, hidden} : ir::Shape{batch, seq, dirs, hidden};
  }
  int64_t stateOffset(int64_t d, int64_t b) const { return (layout == 0 ? d * batch + b : b * dirs + d) * hidden; }
  int64_t yOffset(int64_t t, int64_t d, int64_t b) const {
    return (layout == 0 ? (t * dirs + d) * batch + b : (b * seq + t) * dirs + d) * hidden;
  }
  void clipAll(float* x, size_t n) const {
    if (clip > 0) cpu::vecClamp(x, x, n, -clip, clip);
  }
};

Expected<std::vector<Activation>> parseActivations(const OpContext& ctx, const ops::RecurrentAttrs& attrs,
                                                   int64_t perDir, int64_t dirs) {
  using K = Activation::Kind;
  std::vector<K> kinds;
  if (attrs.activations && !attrs.activations->empty())
    kinds.assign(attrs.activations->begin(), attrs.activations->end());
  else if (perDir == 3) kinds = {K::Sigmoid, K::Tanh, K::Tanh};
  else if (perDir == 1) kinds = {K::Tanh};
  else kinds = {K::Sigmoid, K::Tanh};
  auto want = static_cast<size_t>(perDir * dirs);
  if (kinds.size() == static_cast<size_t>(perDir) && dirs == 2) {
    const std::vector<K> once = kinds;  // one list given for both directions
    kinds.insert(kinds.end(), once.begin(), once.end());
  }
  if (kinds.size() != want) return invalid(ctx, "activations has {} functions but expected {}", kinds.size(), want);
  std::span<const float> alphas, betas;
  if (attrs.activationAlpha) alphas = *attrs.activationAlpha;
  if (attrs.activationBeta) betas = *attrs.activationBeta;
  size_t nextAlpha = 0, nextBeta = 0;
  // Alphas and betas are consumed in order by the functions that take them; absent ones get ONNX's defaults.
  auto take = [](std::span<const float> list, size_t& next, float fallback) {
    return next < list.size() ? list[next++] : fallback;
  };
  std::vector<Activation> acts;
  for (K kind : kinds) {
    Activation a{kind};
    switch (kind) {
      case K::HardSigmoid: a = {kind, take(alphas, nextAlpha, 0.2f), take(betas, nextBeta, 0.5f)}; break;
      case K::LeakyRelu: a = {kind, take(alphas, nextAlpha, 0.01f), 0}; break;
      case K::ThresholdedRelu:
      case K::Elu: a = {kind, take(alphas, nextAlpha, 1.0f), 0}; break;
      case K::ScaledTanh: a = {kind, take(alphas, nextAlpha, 1.0f), take(betas, nextBeta, 1.0f)}; break;
      case K::Affine: a = {kind, take(alphas, nextAlpha, 1.0f), take(betas, nextBeta, 0.0f)}; break;
      default: break;
    }
    acts.push_back(a);
  }
  return acts;
}

Status checkShape(const OpContext& ctx, const ValueDesc* v, size_t index, std::string_view name,
                  const ir::Shape& want) {
  if (v && v->shape != want)
    return invalid(ctx, "input {} ({}) has shape {} but expected {}", index, name, shapeStr(v->shape), shapeStr(want));
  return Status::ok();
}

// Input slots: X, W, R, B, sequence_lens, initial_h, then for LSTM initial_c and P.
Expected<RnnSpec> parseSpec(const OpContext& ctx, InDescs inputs) {
  RnnSpec s;
  s.lstm = ctx.kind == ir::OpKind::LSTM;
  s.gates = s.lstm ? 4 : ctx.kind == ir::OpKind::GRU ? 3 : 1;
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, s.lstm ? 8 : 6));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float) | kHalfTypes));
  for (size_t i = 1; i < inputs.size(); ++i)
    if (i != 4 && inputs[i].present) CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
  if (const ValueDesc* lens = optionalInput(inputs, 4))
    if (lens->type != ElemType::Int32)
      return invalid(ctx, "input 4 (sequence_lens) has type {} but expected int32", ir::elemTypeName(lens->type));
  for (size_t i = 0; i < 3; ++i) CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, i, 3));
  const auto& attrs = attrsOf<ops::RecurrentAttrs>(ctx);  // the decoder checked layout, hidden_size and clip
  s.layout = attrs.layout;
  const ir::Shape& x = inputs[0].shape;
  s.seq = s.layout == 0 ? x[0] : x[1];
  s.batch = s.layout == 0 ? x[1] : x[0];
  s.input = x[2];
  s.dirs = attrs.direction == ops::RnnDirection::Bidirectional ? 2 : 1;
  s.reverse = attrs.direction == ops::RnnDirection::Reverse;
  s.hidden = attrs.hiddenSize.value_or(inputs[2].shape[2]);
  if (s.hidden < 1) return invalid(ctx, "hidden_size is {} but must be positive", s.hidden);
  s.clip = attrs.clip.value_or(0.0f);
  s.inputForget = s.lstm && attrs.inputForget;
  s.linearBeforeReset = !s.lstm && attrs.linearBeforeReset;
  // R's shape may give the hidden size (the attribute's range is the decoder's): the gate sizes must not overflow.
  const CheckedInt gates = CheckedInt(2) * s.gates * s.hidden;
  if (!gates.ok()) return invalid(ctx, "hidden size {} overflows the gate sizes", s.hidden);
  const int64_t gh = s.gates * s.hidden;
  CTX_RETURN_IF_ERROR(checkShape(ctx, &inputs[1], 1, "W", {s.dirs, gh, s.input}));
  CTX_RETURN_IF_ERROR(checkShape(ctx, &inputs[2], 2, "R", {s.dirs, gh, s.hidden}));
  CTX_RETURN_IF_ERROR(checkShape(ctx, optionalInput(inputs, 3), 3, "B", {s.dirs, 2 * gh}));
  CTX_RETURN_IF_ERROR(checkShape(ctx, optionalInput(inputs, 4), 4, "sequence_lens", {s.batch}));
  CTX_RETURN_IF_ERROR(checkShape(ctx, optionalInput(inputs, 5), 5, "initial_h", s.stateShape()));
  if (s.lstm) {
    CTX_RETURN_IF_ERROR(checkShape(ctx, optionalInput(inputs, 6), 6, "initial_c", s.stateShape()));
    CTX_RETURN_IF_ERROR(checkShape(ctx, optionalInput(inputs, 7), 7, "P", {s.dirs, 3 * s.hidden}));
  }
  CTX_ASSIGN_OR_RETURN(s.acts, parseActivations(ctx, attrs, s.lstm ? 3 : s.gates == 3 ? 2 : 1, s.dirs));
  return s;
}

// One direction's W and R as GEMM B operands in panels, packed once at prepare from constant weights: W^T (K =
// input, N = gates*hidden), and R^T for the step products: LSTM and RNN all gates, GRU z and r (and h too with
// linear_before_reset), GRU's h block apart.
struct DirectionPanels {
  std::unique_ptr<float[]> w, r, rh;
  cpu::PanelsB wp, rp, rhp;
};

// The products of one step, H·R^T into `cols` columns, or (r ⊙ H)·Rh^T.
size_t stepColumns(const RnnSpec& s) {
  const auto H = static_cast<size_t>(s.hidden);
  return s.gates == 3 && !s.linearBeforeReset ? 2 * H : static_cast<size_t>(s.gates) * H;
}

cpu::PanelsB packTransposed(const float* b, size_t n, size_t k, std::unique_ptr<float[]>& storage) {
  const size_t width = cpu::sgemmNaturalPanelWidth();
  storage.reset(new float[std::max<size_t>(1, cpu::panelElements(k, n, width))]);
  cpu::packPanels(true, b, k, k, n, width, cpu::kPanelDepth, storage.get());
  return cpu::PanelsB{storage.get(), k, n, width, cpu::kPanelDepth, {}};
}

// One direction's weights and state; `h` and `c` are [batch, hidden], the caller thread's buffers.
struct Direction {
  const float* w;     // [gates*hidden, input]
  const float* r;     // [gates*hidden, hidden]
  const float* bias;  // [2*gates*hidden] or null
  const float* p;     // LSTM peepholes [3*hidden] (i, o, f) or null
  const Activation* acts;
  bool reverse;
  const DirectionPanels* panels;  // W and R packed at prepare, or null
  std::vector<float>& h;
  std::vector<float>& c;
};

// C [m x n] = A [m x k] · B^T with B [n x k] (rows k apart), from panels when packed.
void productBT(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* b, const cpu::PanelsB* panels,
               float* c, size_t ldc, ThreadPool* pool) {
  if (panels) cpu::sgemmPanels(false, m, 1.0f, a, lda, *panels, 0.0f, c, ldc, pool);
  else cpu::sgemm(false, true, m, n, k, 1.0f, a, lda, b, k, 0.0f, c, ldc, pool);
}

// Per-thread buffers of a run (on the calling thread only: the products' pool threads write into C, not these).
struct RecurrentBuffers {
  std::vector<float> xw, hr, z, rh, h, c, xTime, gates, bias;
  std::vector<int64_t> lens;
};
RecurrentBuffers& recurrentBuffers() {
  thread_local RecurrentBuffers buffers;
  return buffers;
}

// X·W^T for every time step plus the biases that do not depend on the state: [seq*batch, gates*hidden].
void inputProjection(const OpContext& ctx, const RnnSpec& s, const float* x, const Direction& dir,
                     std::vector<float>& xw) {
  const int64_t gh = s.gates * s.hidden, rows = s.seq * s.batch;
  xw.resize(static_cast<size_t>(rows * gh));  // the product overwrites it (beta 0)
  if (rows == 0 || s.input == 0) std::fill(xw.begin(), xw.end(), 0.0f);
  else
    productBT(static_cast<size_t>(rows), static_cast<size_t>(gh), static_cast<size_t>(s.input), x,
              static_cast<size_t>(s.input), dir.w, dir.panels ? &dir.panels->wp : nullptr, xw.data(),
              static_cast<size_t>(gh), ctx.pool);
  if (dir.bias) {
    // Wb + Rb per gate column, then added row by row (a column at a time strides a whole row per element).
    std::vector<float>& bias = recurrentBuffers().bias;
    bias.resize(static_cast<size_t>(gh));
    for (int64_t j = 0; j < gh; ++j) {
      // GRU with linear_before_reset applies Rbh inside the reset product instead.
      bool skipRb = s.linearBeforeReset && j >= 2 * s.hidden;
      bias[static_cast<size_t>(j)] = dir.bias[j] + (skipRb ? 0.0f : dir.bias[gh + j]);
    }
    for (int64_t row = 0; row < rows; ++row)
      cpu::vecBinary(cpu::BinaryOp::Add, xw.data() + row * gh, 1, bias.data(), 1, xw.data() + row * gh,
                     static_cast<size_t>(gh));
  }
}

// Time index of step `step` for a batch entry of length `len` (reverse runs from its own last step).
int64_t timeAt(const Direction& dir, int64_t step, int64_t len) { return dir.reverse ? len - 1 - step : step; }

void runLstm(const OpContext& ctx, const RnnSpec& s, const std::vector<float>& xw, std::span<const int64_t> lens,
             Direction& dir, int64_t d, float* y) {
  const int64_t H = s.hidden, gh = 4 * H;
  const auto uH = static_cast<size_t>(H);
  RecurrentBuffers& buffers = recurrentBuffers();
  std::vector<float>& hr = buffers.hr;
  hr.resize(static_cast<size_t>(s.batch * gh));
  // One batch entry's gates i, o, f, c (pre-activation, then activated) and tanh(c): five blocks of H.
  std::vector<float>& gates = buffers.gates;
  gates.resize(5 * uH);
  float *gi = gates.data(), *go = gi + H, *gf = go + H, *gc = gf + H, *hc = gc + H;
  const Activation &f = dir.acts[0], &g = dir.acts[1], &hAct = dir.acts[2];
  for (int64_t step = 0; step < s.seq; ++step) {
    productBT(static_cast<size_t>(s.batch), static_cast<size_t>(gh), uH, dir.h.data(), uH, dir.r,
              dir.panels ? &dir.panels->rp : nullptr, hr.data(), static_cast<size_t>(gh), ctx.pool);
    for (int64_t b = 0; b < s.batch; ++b) {
      if (step >= lens[static_cast<size_t>(b)]) continue;
      int64_t t = timeAt(dir, step, lens[static_cast<size_t>(b)]);
      const float* xr = xw.data() + (t * s.batch + b) * gh;
      const float* rr = hr.data() + b * gh;
      float* hb = dir.h.data() + b * H;
      float* cb = dir.c.data() + b * H;
      for (int64_t j = 0; j < gh; ++j) gi[j] = xr[j] + rr[j];
      if (dir.p) {
        for (int64_t j = 0; j < H; ++j) {
          gi[j] += dir.p[j] * cb[j];
          gf[j] += dir.p[2 * H + j] * cb[j];
        }
      }
      s.clipAll(gi, uH);
      s.clipAll(gf, 2 * uH);  // f and c
      activateAll(f, gi, uH);
      if (s.inputForget) {
        for (int64_t j = 0; j < H; ++j) gf[j] = 1.0f - gi[j];
      } else {
        activateAll(f, gf, uH);
      }
      activateAll(g, gc, uH);
      for (int64_t j = 0; j < H; ++j) hc[j] = cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
      if (dir.p)
        for (int64_t j = 0; j < H; ++j) go[j] += dir.p[H + j] * cb[j];
      s.clipAll(go, uH);
      activateAll(f, go, uH);
      activateAll(hAct, hc, uH);
      for (int64_t j = 0; j < H; ++j) hb[j] = go[j] * hc[j];
      if (y) std::copy(hb, hb + H, y + s.yOffset(t, d, b));
    }
  }
}

void runGru(const OpContext& ctx, const RnnSpec& s, const std::vector<float>& xw, std::span<const int64_t> lens,
            Direction& dir, int64_t d, float* y) {
  const int64_t H = s.hidden, gh = 3 * H;
  const auto uH = static_cast<size_t>(H), uGh = static_cast<size_t>(gh), uB = static_cast<size_t>(s.batch);
  RecurrentBuffers& buffers = recurrentBuffers();
  std::vector<float>& hr = buffers.hr;
  std::vector<float>& z = buffers.z;
  std::vector<float>& rh = buffers.rh;
  hr.resize(static_cast<size_t>(s.batch * gh));
  z.resize(uB * uH);
  rh.assign(uB * uH, 0.0f);
  buffers.gates.resize(uH);  // one batch entry's candidate
  const Activation &f = dir.acts[0], &g = dir.acts[1];
  const float* rbh = dir.bias ? dir.bias + gh + 2 * H : nullptr;
  for (int64_t step = 0; step < s.seq; ++step) {
    // H·R^T for z and r (and h too when the linear part comes before the reset).
    productBT(uB, stepColumns(s), uH, dir.h.data(), uH, dir.r, dir.panels ? &dir.panels->rp : nullptr, hr.data(), uGh,
              ctx.pool);
    for (int64_t b = 0; b < s.batch; ++b) {
      if (step >= lens[static_cast<size_t>(b)]) continue;
      int64_t t = timeAt(dir, step, lens[static_cast<size_t>(b)]);
      const float* xr = xw.data() + (t * s.batch + b) * gh;
      const float* rr = hr.data() + b * gh;
      float* zb = z.data() + b * H;
      float* rb = rh.data() + b * H;
      for (int64_t j = 0; j < H; ++j) zb[j] = xr[j] + rr[j];
      for (int64_t j = 0; j < H; ++j) rb[j] = xr[H + j] + rr[H + j];
      s.clipAll(zb, uH);
      s.clipAll(rb, uH);
      activateAll(f, zb, uH);
      activateAll(f, rb, uH);
      if (!s.linearBeforeReset)  // else r is kept for the candidate below
        for (int64_t j = 0; j < H; ++j) rb[j] *= dir.h[static_cast<size_t>(b * H + j)];
    }
    if (!s.linearBeforeReset)  // (r ⊙ H)·Rh^T into the h columns
      productBT(uB, uH, uH, rh.data(), uH, dir.r + 2 * H * H, dir.panels ? &dir.panels->rhp : nullptr,
                hr.data() + 2 * H, uGh, ctx.pool);
    for (int64_t b = 0; b < s.batch; ++b) {
      if (step >= lens[static_cast<size_t>(b)]) continue;
      int64_t t = timeAt(dir, step, lens[static_cast<size_t>(b)]);
      const float* xr = xw.data() + (t * s.batch + b) * gh + 2 * H;
      const float* rr = hr.data() + b * gh + 2 * H;
      float* cand = buffers.gates.data();
      const float* zb = z.data() + b * H;
      const float* rb = rh.data() + b * H;
      float* hb = dir.h.data() + b * H;
      for (int64_t j = 0; j < H; ++j)
        cand[j] = s.linearBeforeReset ? xr[j] + rb[j] * (rr[j] + (rbh ? rbh[j] : 0.0f)) : xr[j] + rr[j];
      s.clipAll(cand, uH);
      activateAll(g, cand, uH);
      for (int64_t j = 0; j < H; ++j) hb[j] = (1.0f - zb[j]) * cand[j] + zb[j] * hb[j];
      if (y) std::copy(hb, hb + H, y + s.yOffset(t, d, b));
    }
  }
}

// RNN: H = f(X·W^T + H·R^T + Wb + Rb), the biases already in `xw`.
void runRnn(const OpContext& ctx, const RnnSpec& s, const std::vector<float>& xw, std::span<const int64_t> lens,
            Direction& dir, int64_t d, float* y) {
  const int64_t H = s.hidden;
  const auto uH = static_cast<size_t>(H), uB = static_cast<size_t>(s.batch);
  std::vector<float>& hr = recurrentBuffers().hr;
  hr.resize(uB * uH);
  for (int64_t step = 0; step < s.seq; ++step) {
    productBT(uB, uH, uH, dir.h.data(), uH, dir.r, dir.panels ? &dir.panels->rp : nullptr, hr.data(), uH, ctx.pool);
    for (int64_t b = 0; b < s.batch; ++b) {
      if (step >= lens[static_cast<size_t>(b)]) continue;
      int64_t t = timeAt(dir, step, lens[static_cast<size_t>(b)]);
      const float* xr = xw.data() + (t * s.batch + b) * H;
      float* hb = dir.h.data() + b * H;
      for (int64_t j = 0; j < H; ++j) hb[j] = xr[j] + hr[static_cast<size_t>(b * H + j)];
      s.clipAll(hb, uH);
      activateAll(dir.acts[0], hb, uH);
      if (y) std::copy(hb, hb + H, y + s.yOffset(t, d, b));
    }
  }
}

const float* dataOrNull(RunIns inputs, size_t i) {
  return i < inputs.size() && inputs[i] ? inputs[i]->dataAs<float>() : nullptr;
}

}  // namespace

InferResult inferRecurrent(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  bool lstm = ctx.kind == ir::OpKind::LSTM;
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 0, lstm ? 3 : 2));
  CTX_ASSIGN_OR_RETURN(RnnSpec s, parseSpec(ctx, inputs));
  std::vector<OutputDesc> outs;
  ElemType type = inputs[0].type;
  for (size_t i = 0; i < outputCount; ++i) outs.push_back({type, i == 0 ? s.yShape() : s.stateShape()});
  return outs;
}

namespace {

// The spec and, for constant float32 W and R, every direction's panels: worked out once at prepare.
struct RecurrentPlan {
  RnnSpec spec;
  std::vector<DirectionPanels> dirs;  // empty: W or R is not a float32 constant
};

Expected<RecurrentPlan> planRecurrent(const OpContext& ctx, InDescs inputs) {
  RecurrentPlan plan;
  CTX_ASSIGN_OR_RETURN(plan.spec, parseSpec(ctx, inputs));
  const RnnSpec& s = plan.spec;
  if (!inputs[1].value || !inputs[2].value || inputs[1].type != ElemType::Float || inputs[2].type != ElemType::Float)
    return plan;
  const auto H = static_cast<size_t>(s.hidden), gh = static_cast<size_t>(s.gates) * H;
  const auto in = static_cast<size_t>(s.input);
  plan.dirs.resize(static_cast<size_t>(s.dirs));
  for (size_t d = 0; d < plan.dirs.size(); ++d) {
    DirectionPanels& p = plan.dirs[d];
    const float* w = inputs[1].value->dataAs<float>() + d * gh * in;
    const float* r = inputs[2].value->dataAs<float>() + d * gh * H;
    p.wp = packTransposed(w, gh, in, p.w);
    p.rp = packTransposed(r, stepColumns(s), H, p.r);
    if (s.gates == 3 && !s.linearBeforeReset) p.rhp = packTransposed(r + 2 * H * H, H, H, p.rh);
  }
  return plan;
}

}  // namespace

Expected<std::shared_ptr<const void>> planRecurrentOnce(const OpContext& ctx, InDescs inputs) {
  CTX_ASSIGN_OR_RETURN(RecurrentPlan plan, planRecurrent(ctx, inputs));
  return std::shared_ptr<const void>(std::make_shared<const RecurrentPlan>(std::move(plan)));
}

Status runRecurrent(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  RecurrentPlan planned;
  if (!ctx.plan) {
    std::vector<ValueDesc> descs = describeInputs(inputs, false);
    CTX_ASSIGN_OR_RETURN(planned.spec, parseSpec(ctx, descs));
  }
  const RecurrentPlan& plan = ctx.plan ? *static_cast<const RecurrentPlan*>(ctx.plan) : planned;
  const RnnSpec& s = plan.spec;
  RecurrentBuffers& buffers = recurrentBuffers();
  std::vector<int64_t>& lens = buffers.lens;
  lens.assign(static_cast<size_t>(s.batch), s.seq);
  if (inputs.size() > 4 && inputs[4]) {
    const int32_t* l = inputs[4]->dataAs<int32_t>();
    for (int64_t b = 0; b < s.batch; ++b) {
      if (l[b] < 0 || l[b] > s.seq)
        return invalid(ctx, "sequence_lens[{}] is {} but must be in [0, {}]", b, l[b], s.seq);
      lens[static_cast<size_t>(b)] = l[b];
    }
  }
  auto out = [&](size_t i) -> float* {
    return i < outputs.size() && outputs[i] ? outputs[i]->mutableDataAs<float>() : nullptr;
  };
  float* y = out(0);
  // Y's element count from the spec's dimensions: making its shape would allocate on every run. Checked at inference
  // (the output was allocated at that size).
  if (y) std::memset(y, 0, static_cast<size_t>(s.seq * s.dirs * s.batch * s.hidden) * sizeof(float));
  // X as [seq, batch, input].
  const float* x = inputs[0]->dataAs<float>();
  std::vector<float>& xTime = buffers.xTime;
  if (s.layout == 1) {
    xTime.resize(static_cast<size_t>(s.seq * s.batch * s.input));
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t t = 0; t < s.seq; ++t)
        std::memcpy(xTime.data() + (t * s.batch + b) * s.input, x + (b * s.seq + t) * s.input,
                    static_cast<size_t>(s.input) * sizeof(float));
    x = xTime.data();
  }
  const int64_t H = s.hidden, gh = s.gates * H;
  const float* initH = dataOrNull(inputs, 5);
  const float* initC = s.lstm ? dataOrNull(inputs, 6) : nullptr;
  for (int64_t d = 0; d < s.dirs; ++d) {
    Direction dir{nullptr, nullptr, nullptr, nullptr, nullptr, false, nullptr, buffers.h, buffers.c};
    dir.panels = plan.dirs.empty() ? nullptr : &plan.dirs[static_cast<size_t>(d)];
    dir.w = inputs[1]->dataAs<float>() + d * gh * s.input;
    dir.r = inputs[2]->dataAs<float>() + d * gh * H;
    const float* bias = dataOrNull(inputs, 3);
    dir.bias = bias ? bias + d * 2 * gh : nullptr;
    const float* p = s.lstm ? dataOrNull(inputs, 7) : nullptr;
    dir.p = p ? p + d * 3 * H : nullptr;
    dir.acts = s.acts.data() + d * static_cast<int64_t>(s.acts.size()) / s.dirs;
    dir.reverse = s.dirs == 2 ? d == 1 : s.reverse;
    dir.h.assign(static_cast<size_t>(s.batch * H), 0.0f);
    dir.c.assign(s.lstm ? static_cast<size_t>(s.batch * H) : 0, 0.0f);
    for (int64_t b = 0; b < s.batch; ++b) {
      if (initH) std::memcpy(dir.h.data() + b * H, initH + s.stateOffset(d, b), static_cast<size_t>(H) * sizeof(float));
      if (initC) std::memcpy(dir.c.data() + b * H, initC + s.stateOffset(d, b), static_cast<size_t>(H) * sizeof(float));
    }
    std::vector<float>& xw = buffers.xw;
    inputProjection(ctx, s, x, dir, xw);
    if (s.batch > 0) {
      if (s.lstm) runLstm(ctx, s, xw, lens, dir, d, y);
      else if (s.gates == 3) runGru(ctx, s, xw, lens, dir, d, y);
      else runRnn(ctx, s, xw, lens, dir, d, y);
    }
    float* yh = out(1);
    float* yc = s.lstm ? out(2) : nullptr;
    for (int64_t b = 0; b < s.batch; ++b) {
      if (yh) std::memcpy(yh + s.stateOffset(d, b), dir.h.data() + b * H, static_cast<size_t>(H) * sizeof(float));
      if (yc) std::memcpy(yc + s.stateOffset(d, b), dir.c.data() + b * H, static_cast<size_t>(H) * sizeof(float));
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
