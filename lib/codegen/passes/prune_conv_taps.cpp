// prune-conv-taps: a Conv whose filter has taps that never land inside its input, for any output position, keeps only
// the taps that do: its constant weight is sliced to them along each spatial axis and its pads shifted so that every
// output reads the same inputs through the same weights. A dilated Conv onto a map smaller than its dilation becomes
// a smaller one (DeepLabV3's ASPP, 3x3 at dilation 12-36 onto 6x6: a 1x1 Conv, 1/9 of the work and no padding).
#include "codegen/passes/pass_helpers.h"
#include "codegen/passes/passes.h"

#include <cstring>

namespace ctxkit::codegen {

namespace {

int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The taps [first, last] of one spatial axis that land inside [0, in) for some output position, or nothing when none
// does.
std::optional<std::pair<int64_t, int64_t>> usedTaps(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dil,
                                                    int64_t padBegin) {
  std::optional<std::pair<int64_t, int64_t>> used;
  for (int64_t t = 0; t < k; ++t) {
    const int64_t offset = t * dil - padBegin;  // input position of output 0
    const int64_t lo = std::max<int64_t>(0, -floorDiv(offset, stride));
    const int64_t oLo = offset + lo * stride < 0 ? lo + 1 : lo;  // first output whose input position is >= 0
    const int64_t oHi = std::min(out - 1, floorDiv(in - 1 - offset, stride));
    if (oLo > oHi) continue;
    if (!used) used = std::pair{t, t};
    used->second = t;
  }
  return used;
}

}  // namespace

Expected<ir::PassChange> PruneConvTaps::run(LoweringState& state) const {
  size_t pruned = 0;
  for (size_t i = 0; i < state.ops.size(); ++i) {
    LOp& op = state.ops[i];
    if (op.kind != ir::OpKind::Conv || op.inputs.size() < 2 || op.outputs.size() != 1) continue;
    auto& window = std::get<ops::ConvAttrs>(op.typed).window;
    const ir::Tensor* w = state.constantOf(op.inputs[1]);
    const auto x = state.shapeOf(op.inputs[0]);
    const auto y = state.shapeOf(op.outputs[0]);
    if (!w || !x || !y || w->rank() < 3 || x->size() != w->rank() || y->size() != w->rank() ||
        window.autoPad != ops::AutoPad::NotSet || !window.pads)
      continue;
    const size_t n = w->rank() - 2;
    const ir::Shape& ws = w->shape();
    std::vector<int64_t> first(n), last(n), stride(n, 1), dil(n, 1);
    bool prunes = false, keeps = true;
    for (size_t a = 0; a < n && keeps; ++a) {
      if (window.strides) stride[a] = (*window.strides)[a];
      if (window.dilations) dil[a] = (*window.dilations)[a];
      const int64_t pb = (*window.pads)[a], pe = (*window.pads)[a + n];
      const auto used = usedTaps((*x)[2 + a], (*y)[2 + a], ws[2 + a], stride[a], dil[a], pb);
      // A window wholly in the padding, or a shifted pad that would be negative: left as it is.
      keeps = used && pb - used->first * dil[a] >= 0 && pe - (ws[2 + a] - 1 - used->second) * dil[a] >= 0;
      if (!keeps) break;
      first[a] = used->first;
      last[a] = used->second;
      prunes = prunes || first[a] > 0 || last[a] < ws[2 + a] - 1;
    }
    if (!keeps || !prunes) continue;
    ir::Shape cut = ws;
    for (size_t a = 0; a < n; ++a) cut[2 + a] = last[a] - first[a] + 1;
    CTX_ASSIGN_OR_RETURN(ir::Tensor sliced, ir::Tensor::allocate(w->type(), cut));
    // Copy the kept taps: rows along the last axis, for every leading index.
    const size_t elem = ir::elemSize(w->type());
    const int64_t rowLen = cut.back();
    const uint64_t rows = sliced.elementCount() / static_cast<uint64_t>(rowLen);
    std::vector<int64_t> at(cut.size() - 1, 0);  // index of the row in `cut`, all axes but the last
    for (uint64_t r = 0; r < rows; ++r) {
      int64_t src = 0;
      for (size_t d = 0; d + 1 < cut.size(); ++d) src = src * ws[d] + at[d] + (d >= 2 ? first[d - 2] : 0);
      src = src * ws.back() + first[n - 1];
      std::memcpy(sliced.mutableData() + r * static_cast<uint64_t>(rowLen) * elem,
                  w->data() + static_cast<uint64_t>(src) * elem, static_cast<size_t>(rowLen) * elem);
      for (size_t d = at.size(); d-- > 0;)  // the next row
        if (++at[d] < cut[d]) break;
        else at[d] = 0;
    }
    for (size_t a = 0; a < n; ++a) {
      (*window.pads)[a] -= first[a] * dil[a];
      (*window.pads)[a + n] -= (ws[2 + a] - 1 - last[a]) * dil[a];
      if (cut[2 + a] == 1 && window.dilations) (*window.dilations)[a] = 1;  // one tap: its spacing means nothing
    }
    if (window.kernelShape)
      for (size_t a = 0; a < n; ++a) (*window.kernelShape)[a] = cut[2 + a];
    std::vector<ValueId> inputs = op.inputs;
    inputs[1] = state.addConstant(op.name + ".pruned_w" + std::to_string(state.folds++), std::move(sliced));
    state.setInputs(i, std::move(inputs));
    ++pruned;
  }
  return ir::PassChange{}.count("convs_pruned", pruned);
}

}  // namespace ctxkit::codegen
