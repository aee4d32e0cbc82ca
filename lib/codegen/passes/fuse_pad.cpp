// fuse-pad: a constant zero Pad of the spatial axes read only by a Conv or an AveragePool becomes that op's own pads.
// PyTorch writes `avg_pool2d(x, 3, stride=1, padding=1)` with count_include_pad (Inception's pool branches) as Pad +
// AveragePool, and TensorFlow-converted models pad explicitly before a Conv: the padded copy of the map is then never
// made. The op reads the same inputs through the same window:
// - Conv: its pads grow by the Pad's (the padded zeros and the Conv's implicit ones are the same zeros);
// - AveragePool: the padded zeros were ordinary elements of its input, counted in every window's divisor, so the
//   fused op counts its pads (count_include_pad = 1). Taken when the pool has no pads of its own or already counts
//   them, and not in ceil mode (a window running past the padded input divides by what it covers).
// MaxPool is left alone: its implicit pads are -inf, not zero.
#include "codegen/passes/passes.h"
#include "cpu/convert.h"

namespace ctxkit::codegen {

namespace {

// The Pad's begin/end pads over all axes when it pads with zeros in constant mode by constant amounts (attributes
// before opset 11, constant inputs after; no axes input), else nothing.
std::optional<std::vector<int64_t>> zeroPads(const LoweringState& state, const LOp& pad, size_t rank) {
  const auto& attrs = std::get<ops::PadAttrs>(pad.typed);
  if (attrs.mode != ops::PadMode::Constant) return std::nullopt;
  std::vector<int64_t> pads;
  if (pad.opset < 11) {
    if (!attrs.pads || attrs.value != 0) return std::nullopt;
    pads.assign(attrs.pads->begin(), attrs.pads->end());
  } else {
    if (pad.inputs.size() > 3 && pad.inputs[3] != kNoValue) return std::nullopt;  // axes
    const ir::Tensor* p = pad.inputs.size() > 1 ? state.constantOf(pad.inputs[1]) : nullptr;
    if (!p || p->type() != ir::ElemType::Int64 || p->rank() != 1) return std::nullopt;
    const int64_t* v = p->dataAs<int64_t>();
    pads.assign(v, v + p->elementCount());
    if (pad.inputs.size() > 2 && pad.inputs[2] != kNoValue) {
      const ir::Tensor* c = state.constantOf(pad.inputs[2]);
      double value = 1;
      if (!c || c->elementCount() != 1 ||
          !cpu::convertElements(c->type(), c->data(), ir::ElemType::Double, &value, 1).isOk() || value != 0)
        return std::nullopt;
    }
  }
  if (pads.size() != 2 * rank) return std::nullopt;
  for (int64_t v : pads)
    if (v < 0) return std::nullopt;  // a crop is not a pad
  if (pads[0] != 0 || pads[1] != 0 || pads[rank] != 0 || pads[rank + 1] != 0) return std::nullopt;  // N and C
  return pads;
}

// Fuses the Pad at op i into its sole reader when it can; true when it did (op i is then gone).
bool fusePadAt(LoweringState& state, size_t i) {
  const LOp& pad = state.ops[i];
  if (pad.kind != ir::OpKind::Pad || pad.outputs.size() != 1) return false;
  const auto j = state.soleReader(i);
  if (!j) return false;
  LOp& reader = state.ops[*j];
  if (reader.inputs.empty() || reader.inputs[0] != pad.outputs[0]) return false;
  ops::WindowAttrs* window = nullptr;
  if (reader.kind == ir::OpKind::Conv) {
    window = &std::get<ops::ConvAttrs>(reader.typed).window;
  } else if (reader.kind == ir::OpKind::AveragePool) {
    auto& pool = std::get<ops::PoolAttrs>(reader.typed);
    const bool ownPads = pool.window.pads && std::any_of(pool.window.pads->begin(), pool.window.pads->end(),
                                                         [](int64_t v) { return v != 0; });
    if (pool.ceilMode || (ownPads && !pool.countIncludePad)) return false;
    window = &pool.window;
  } else {
    return false;
  }
  const auto shape = state.shapeOf(pad.inputs[0]);
  if (!shape || shape->size() < 3 || window->autoPad != ops::AutoPad::NotSet) return false;
  const size_t rank = shape->size(), n = rank - 2;
  const auto pads = zeroPads(state, pad, rank);
  if (!pads) return false;
  if (window->pads && window->pads->size() != 2 * n) return false;
  if (!window->pads) window->pads.emplace(2 * n, 0);
  for (size_t a = 0; a < n; ++a) {
    (*window->pads)[a] += (*pads)[2 + a];
    (*window->pads)[a + n] += (*pads)[rank + 2 + a];
  }
  if (reader.kind == ir::OpKind::AveragePool) std::get<ops::PoolAttrs>(reader.typed).countIncludePad = true;
  std::vector<ValueId> inputs = reader.inputs;
  inputs[0] = pad.inputs[0];
  state.setInputs(*j, std::move(inputs));
  state.eraseOp(i);
  return true;
}

}  // namespace

Expected<ir::PassChange> FusePad::run(LoweringState& state) const {
  size_t fused = 0;
  for (size_t i = 0; i < state.ops.size();) {
    if (fusePadAt(state, i)) {
      ++fused;  // the next op moved to i
    } else {
      ++i;
    }
  }
  return ir::PassChange{}.count("pads_fused", fused);
}

}  // namespace ctxkit::codegen
