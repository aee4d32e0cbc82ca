// match-activations: activations that a model spells out as arithmetic become the activation op, which
// fuse-epilogue can then fold: 0.5 x (1 + erf(x / sqrt 2)) (PyTorch's GELU before opset 20) becomes Gelu(x);
// x * Clip(x + 3, 0, 6) / 6 (the HardSwish of PyTorch/Paddle exports) and
// x * HardSigmoid(x) with alpha 1/6 and beta 1/2 (PyTorch's export before opset 14; float32) become HardSwish(x), and
// the intermediate values must have no other reader. The second form computes the same float32 operations in the same
// order as HardSwish, so its results are unchanged bit for bit.
#include "codegen/passes/pass_helpers.h"
#include "codegen/passes/passes.h"

#include <algorithm>
#include <cmath>

namespace ctxkit::codegen {

namespace {

// Mul(x, HardSigmoid(x)) or Mul(HardSigmoid(x), x), alpha exactly 1/6 and beta 1/2: replaced by HardSwish(x).
bool matchHardSigmoidProduct(LoweringState& state, size_t d) {
  auto& ops = state.ops;
  const LOp& mul = ops[d];
  if (mul.kind != ir::OpKind::Mul || mul.inputs.size() != 2) return false;
  for (int side = 0; side < 2; ++side) {
    const ValueId x = mul.inputs[side];
    const ValueId s = mul.inputs[1 - side];
    auto hs = state.producerOf(s, ir::OpKind::HardSigmoid);
    if (!hs || ops[*hs].inputs.size() != 1 || ops[*hs].inputs[0] != x || state.readers(s) != 1 || state.leaves(s))
      continue;
    const auto& unary = std::get<ops::UnaryAttrs>(ops[*hs].typed);
    if (unary.alpha != 1.0f / 6.0f || unary.beta != 0.5f || state.typeOf(x) != ir::ElemType::Float) continue;
    const size_t gone = *hs;
    state.replaceOp(d, madeOp(ir::OpKind::HardSwish, 14, mul.name + ".hardswish", {x}, mul.outputs));
    state.eraseOp(gone);
    return true;
  }
  return false;
}

// The other operand of a two-input `op` reading `v` once, when it is a float32 one-value constant.
std::optional<float> otherScalar(const LoweringState& state, const LOp& op, ValueId v) {
  if (op.inputs.size() != 2 || op.outputs.size() != 1 || (op.inputs[0] == v) == (op.inputs[1] == v))
    return std::nullopt;
  return state.scalarOf(op.inputs[op.inputs[0] == v ? 1 : 0]);
}

bool near(float v, double want) { return std::abs(static_cast<double>(v) - want) <= 1e-6 * want; }

// GELU as PyTorch exports it before opset 20: 0.5 x (1 + erf(x / sqrt 2)), the x / sqrt 2 as Div by sqrt 2 or Mul by
// 1 / sqrt 2, the halving as Mul(Mul(x, 1 + erf), 0.5), Mul(Mul(x, 0.5), 1 + erf) or Mul(x, Mul(1 + erf, 0.5)); the
// values between the ops read by nothing else. Becomes Gelu(x) at the place of the last op. Returns the ops removed.
size_t matchGelu(LoweringState& state, size_t e) {
  auto& ops = state.ops;
  const LOp& erf = ops[e];
  if (erf.kind != ir::OpKind::Erf || erf.inputs.size() != 1 || erf.outputs.size() != 1) return 0;
  // t = x / sqrt 2
  const ValueId t = erf.inputs[0];
  std::optional<size_t> scale = state.producerOf(t, ir::OpKind::Div);
  if (!scale) scale = state.producerOf(t, ir::OpKind::Mul);
  if (!scale || onlyReaderOf(state, t) != e || ops[*scale].inputs.size() != 2) return 0;
  const LOp& sc = ops[*scale];
  const ValueId x = sc.inputs[0];
  auto k = state.scalarOf(sc.inputs[1]);
  if (!k || state.typeOf(x) != ir::ElemType::Float ||
      !near(*k, sc.kind == ir::OpKind::Div ? std::sqrt(2.0) : std::sqrt(0.5)))
    return 0;
  // a = erf + 1
  auto add = onlyReaderOf(state, erf.outputs[0]);
  if (!add || ops[*add].kind != ir::OpKind::Add || otherScalar(state, ops[*add], erf.outputs[0]) != 1.0f) return 0;
  const ValueId a = ops[*add].outputs[0];
  auto m1 = onlyReaderOf(state, a);
  if (!m1 || ops[*m1].kind != ir::OpKind::Mul || ops[*m1].inputs.size() != 2 || ops[*m1].outputs.size() != 1) return 0;
  const LOp& first = ops[*m1];
  const ValueId other = first.inputs[0] == a ? first.inputs[1] : first.inputs[0];
  std::vector<size_t> gone{*scale, e, *add, *m1};
  size_t last = *m1;
  if (other == x) {  // Mul(Mul(x, a), 0.5)
    auto m2 = onlyReaderOf(state, first.outputs[0]);
    if (!m2 || ops[*m2].kind != ir::OpKind::Mul || otherScalar(state, ops[*m2], first.outputs[0]) != 0.5f) return 0;
    gone.push_back(last = *m2);
  } else if (auto half = state.producerOf(other, ir::OpKind::Mul);
             half && onlyReaderOf(state, other) == *m1 && otherScalar(state, ops[*half], x) == 0.5f) {
    gone.push_back(*half);                            // Mul(Mul(x, 0.5), a)
  } else if (otherScalar(state, first, a) == 0.5f) {  // Mul(x, Mul(a, 0.5))
    auto m2 = onlyReaderOf(state, first.outputs[0]);
    if (!m2 || ops[*m2].kind != ir::OpKind::Mul || ops[*m2].inputs.size() != 2 ||
        (ops[*m2].inputs[0] == x ? ops[*m2].inputs[1] : ops[*m2].inputs[0]) != first.outputs[0] ||
        (ops[*m2].inputs[0] != x && ops[*m2].inputs[1] != x))
      return 0;
    gone.push_back(last = *m2);
  } else {
    return 0;
  }
  // x is defined before the ops (it is read by the first of them), so Gelu may take the last one's place.
  return replaceOpsAt(state, std::move(gone), last,
                      madeOp(ir::OpKind::Gelu, 20, ops[last].name + ".gelu", {x}, ops[last].outputs));
}

}  // namespace

Expected<ir::PassChange> MatchActivations::run(LoweringState& state) const {
  auto& ops = state.ops;
  size_t matches = 0, removed = 0, gelus = 0;
  for (size_t d = 0; d < ops.size(); ++d) {
    if (state.touchesBounded(ops[d])) continue;  // (the ops it matches before it read the same x)
    if (size_t n = matchGelu(state, d)) {
      ++gelus, removed += n;
      d = 0;
      continue;
    }
    if (matchHardSigmoidProduct(state, d)) {
      ++matches, ++removed;
      d = 0;
      continue;
    }
    // y = Div(m, 6) or Mul(m, 1/6)
    const LOp& last = ops[d];
    if ((last.kind != ir::OpKind::Div && last.kind != ir::OpKind::Mul) || last.inputs.size() != 2) continue;
    auto six = state.scalarOf(last.inputs[1]);
    if (!six || (last.kind == ir::OpKind::Div ? *six != 6.0f : std::abs(*six - 1.0f / 6.0f) > 1e-7f)) continue;
    auto mul = state.producerOf(last.inputs[0], ir::OpKind::Mul);
    if (!mul || state.readers(last.inputs[0]) != 1 || state.leaves(last.inputs[0])) continue;
    // m = Mul(x, c) in either order, c = Clip(t, 0, 6), t = Add(x, 3)
    const LOp& m = ops[*mul];
    bool matched = false;
    for (int side = 0; side < 2 && !matched; ++side) {
      const ValueId x = m.inputs[side];
      const ValueId c = m.inputs[1 - side];
      auto clip = state.producerOf(c, ir::OpKind::Clip);
      if (!clip || state.readers(c) != 1 || state.leaves(c)) continue;
      auto bounds = clipBounds(state, ops[*clip]);
      if (!bounds || (*bounds)[0] != 0.0f || (*bounds)[1] != 6.0f) continue;
      const ValueId t = ops[*clip].inputs[0];
      auto add = state.producerOf(t, ir::OpKind::Add);
      if (!add || state.readers(t) != 1 || state.leaves(t)) continue;
      const LOp& a = ops[*add];
      const bool xFirst = a.inputs[0] == x;
      auto three = state.scalarOf(a.inputs[xFirst ? 1 : 0]);
      if ((!xFirst && a.inputs[1] != x) || !three || *three != 3.0f) continue;
      // Replace the four ops by HardSwish at the place of the last one (x is defined before all of them).
      replaceOpsAt(state, {*add, *clip, *mul, d}, d,
                   madeOp(ir::OpKind::HardSwish, 14, last.name + ".hardswish", {x}, last.outputs));
      matched = true;
    }
    if (matched) {
      ++matches, removed += 3;
      d = 0;  // indices moved; start over (each match removes three ops, so this ends)
    }
  }
  return ir::PassChange{}
      .count("hardswish_matched", matches)
      .count("gelu_matched", gelus)
      .count("ops_removed", removed);
}

}  // namespace ctxkit::codegen
