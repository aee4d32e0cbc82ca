// prune-conv-taps: a Conv whose filter has taps that never land inside its input, for any output position, keeps only
// the taps that do: its constant weight is sliced to them along each spatial axis and its pads shifted so that every
// output reads the same inputs through the same weights. A dilated Conv onto a map smaller than its dilation becomes
// a smaller one (DeepLabV3's ASPP, 3x3 at dilation 12-36 onto 6x6: a 1x1 Conv, 1/9 of the work and no padding).
// A weightless context slices a source model's weight at load instead (a load-time Slice), so that the context binary
// keeps only the slice's bounds (docs/weight-sharing.md#derived-weights).
#include "codegen/passes/pass_helpers.h"
#include "codegen/passes/passes.h"

#include <cstring>
#include <span>

namespace ctxkit::codegen {

namespace {

int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The taps [first, last] of one spatial axis that land inside [0, in) for some output position, or nothing when none
// does.
std::optional<std::pair<int64_t, int64_t>> usedTaps(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dil,
                                                    int64_t padBegin) {
  std::optional<std::pair<int64_t, int64_t>> used;
  for (int64_t t = 0; t < k; ++t) {
    const int64_t offset = t * dil - padBegin;                            // input position of output 0
    const int64_t oLo = std::max<int64_t>(0, -floorDiv(offset, stride));  // first output reading position >= 0
    const int64_t oHi = std::min(out - 1, floorDiv(in - 1 - offset, stride));
    if (oLo > oHi) continue;
    if (!used) used = std::pair{t, t};
    used->second = t;
  }
  return used;
}

// The kept taps of weight `w` of op i as a value: sliced now (a constant), or at load by a Slice inserted before op i
// (a weightless context, derivesAtLoad: the source weight stays in the source model). Slicing is a copy either way, so
// both give the same bytes.
Expected<ValueId> slicedWeight(LoweringState& state, size_t i, const ir::Shape& cut, std::span<const int64_t> first) {
  const ValueId w = state.ops[i].inputs[1];
  const size_t n = first.size();
  const std::string base = state.ops[i].name + ".pruned_w" + std::to_string(state.folds++);
  if (derivesAtLoad(state, w)) {
    std::vector<int64_t> starts(first.begin(), first.end()), ends(n), axes(n);
    for (size_t a = 0; a < n; ++a) {
      ends[a] = first[a] + cut[2 + a];
      axes[a] = static_cast<int64_t>(2 + a);
    }
    auto bound = [&](const std::string& name, const std::vector<int64_t>& v) {
      return state.addConstant(base + name, ir::Tensor::fromVector(ir::ElemType::Int64, {static_cast<int64_t>(n)}, v));
    };
    const ValueId out = state.value(base);
    ValueRecord& r = state.record(out);
    r.type = state.typeOf(w);
    r.shape = cut;
    r.loadTime = true;
    std::vector<ValueId> inputs = {w, bound(".starts", starts), bound(".ends", ends), bound(".axes", axes)};
    state.insertOp(i, madeOp(ir::OpKind::Slice, 13, base + ".slice", std::move(inputs), {out}));
    return out;
  }
  const ir::Tensor* wt = state.constantOf(w);
  const ir::Shape& ws = wt->shape();
  CTX_ASSIGN_OR_RETURN(ir::Tensor sliced,
                       ir::Tensor::allocate(wt->type(), cut)
                           .addContext(fmt::format("pruning the taps of Conv '{}'", state.ops[i].name)));
  // Copy the kept taps: rows along the last axis, for every leading index.
  const size_t elem = ir::elemSize(wt->type());
  const int64_t rowLen = cut.back();
  const uint64_t rows = sliced.elementCount() / static_cast<uint64_t>(rowLen);
  std::vector<int64_t> at(cut.size() - 1, 0);  // index of the row in `cut`, all axes but the last
  for (uint64_t r = 0; r < rows; ++r) {
    int64_t src = 0;
    for (size_t d = 0; d + 1 < cut.size(); ++d) src = src * ws[d] + at[d] + (d >= 2 ? first[d - 2] : 0);
    src = src * ws.back() + first[n - 1];
    std::memcpy(sliced.mutableData() + r * static_cast<uint64_t>(rowLen) * elem,
                wt->data() + static_cast<uint64_t>(src) * elem, static_cast<size_t>(rowLen) * elem);
    for (size_t d = at.size(); d-- > 0;)  // the next row
      if (++at[d] < cut[d]) break;
      else at[d] = 0;
  }
  return state.addConstant(base, std::move(sliced));
}

}  // namespace

Expected<ir::PassChange> PruneConvTaps::run(LoweringState& state) const {
  size_t pruned = 0;
  for (size_t i = 0; i < state.ops.size(); ++i) {
    LOp& op = state.ops[i];
    if (op.kind != ir::OpKind::Conv || op.inputs.size() < 2 || op.outputs.size() != 1) continue;
    auto& window = std::get<ops::ConvAttrs>(op.typed).window;
    // A constant weight, or one a weightless context derives at load (sliced at load in turn).
    const ir::Tensor* w = state.constantOf(op.inputs[1]);
    const std::optional<ir::Shape> wShape = w ? std::optional(w->shape()) : derivesAtLoad(state, op.inputs[1]);
    const auto x = state.shapeOf(op.inputs[0]);
    const auto y = state.shapeOf(op.outputs[0]);
    if (!wShape || !x || !y || wShape->size() < 3 || x->size() != wShape->size() || y->size() != wShape->size() ||
        window.autoPad != ops::AutoPad::NotSet || !window.pads)
      continue;
    const ir::Shape& ws = *wShape;
    const size_t n = ws.size() - 2;
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
    for (size_t a = 0; a < n; ++a) {
      (*window.pads)[a] -= first[a] * dil[a];
      (*window.pads)[a + n] -= (ws[2 + a] - 1 - last[a]) * dil[a];
      if (cut[2 + a] == 1 && window.dilations) (*window.dilations)[a] = 1;  // one tap: its spacing means nothing
    }
    if (window.kernelShape)
      for (size_t a = 0; a < n; ++a) (*window.kernelShape)[a] = cut[2 + a];
    const size_t before = state.ops.size();
    CTX_ASSIGN_OR_RETURN(const ValueId sliced, slicedWeight(state, i, cut, first));  // (`op`, `window` stale now)
    i += state.ops.size() - before;  // past a load-time Slice inserted before the Conv
    std::vector<ValueId> inputs = state.ops[i].inputs;
    inputs[1] = sliced;
    state.setInputs(i, std::move(inputs));
    ++pruned;
  }
  return ir::PassChange{}.count("convs_pruned", pruned);
}

}  // namespace ctxkit::codegen
