// match-activations: activations that a model spells out as arithmetic become the activation op, which
// fuse-epilogue can then fold: x * Clip(x + 3, 0, 6) / 6 (the HardSwish of PyTorch/Paddle exports) and
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

}  // namespace

Expected<ir::PassChange> MatchActivations::run(LoweringState& state) const {
  auto& ops = state.ops;
  size_t matches = 0, removed = 0;
  for (size_t d = 0; d < ops.size(); ++d) {
    if (state.touchesBounded(ops[d])) continue;  // (the ops it matches before it read the same x)
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
      LOp hs = madeOp(ir::OpKind::HardSwish, 14, last.name + ".hardswish", {x}, last.outputs);
      std::vector<size_t> gone{*add, *clip, *mul, d};
      std::sort(gone.begin(), gone.end());
      state.replaceOp(d, std::move(hs));
      for (auto it = gone.rbegin(); it != gone.rend(); ++it)
        if (*it != d) state.eraseOp(*it);
      matched = true;
    }
    if (matched) {
      ++matches, removed += 3;
      d = 0;  // indices moved; start over (each match removes three ops, so this ends)
    }
  }
  return ir::PassChange{}.count("hardswish_matched", matches).count("ops_removed", removed);
}

}  // namespace ctxkit::codegen
