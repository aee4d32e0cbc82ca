// match-layer-norm: LayerNorm as PyTorch exports it before opset 17, spelled out over the last axes:
// d = x - ReduceMean(x), y = d / Sqrt(ReduceMean(Pow(d, 2)) + eps) [* gamma] [+ beta], becomes one
// LayerNormalization(x, gamma, beta) (a scale of ones when there is no gamma). The values between the ops must have
// no other reader (d exactly the Pow and the Div). The kernel takes the mean and variance in double, as ONNX Runtime's
// fused LayerNorm does in float; the spelled-out ops round each step to float32.
#include "codegen/passes/pass_helpers.h"
#include "codegen/passes/passes.h"

#include <algorithm>

namespace ctxkit::codegen {

namespace {

// The first axis of a ReduceMean over the trailing axes of its `rank`-D input with keepdims, or nothing.
std::optional<int64_t> trailingMeanAxis(const LoweringState& state, const LOp& op, size_t rank) {
  if (op.kind != ir::OpKind::ReduceMean || op.outputs.size() != 1 || rank == 0) return std::nullopt;
  const auto& reduce = std::get<ops::ReduceAttrs>(op.typed);
  if (!reduce.keepdims) return std::nullopt;
  std::vector<int64_t> axes;
  if (reduce.axesFromInput) {
    const ir::Tensor* c = op.inputs.size() > 1 ? state.constantOf(op.inputs[1]) : nullptr;
    if (!c || c->type() != ir::ElemType::Int64 || c->elementCount() == 0) return std::nullopt;
    axes.assign(c->dataAs<int64_t>(), c->dataAs<int64_t>() + c->elementCount());
  } else {
    if (!reduce.axes || reduce.axes->empty()) return std::nullopt;
    axes.assign(reduce.axes->begin(), reduce.axes->end());
  }
  const auto r = static_cast<int64_t>(rank);
  for (int64_t& a : axes) {
    if (a < -r || a >= r) return std::nullopt;
    if (a < 0) a += r;
  }
  std::sort(axes.begin(), axes.end());
  for (size_t k = 0; k < axes.size(); ++k)
    if (axes[k] != r - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(k)) return std::nullopt;
  return axes.front();
}

// The float32 constant operand of a two-input `op` reading `v`, as a tensor of the normalized shape `norm` (one
// value spread over it, or its values when its dims aligned to the other axes are all 1), or nothing.
std::optional<ir::Tensor> affineOperand(const LoweringState& state, const LOp& op, ValueId v, const ir::Shape& norm,
                                        size_t rank) {
  if (op.inputs.size() != 2 || op.outputs.size() != 1 || (op.inputs[0] == v) == (op.inputs[1] == v))
    return std::nullopt;
  const ir::Tensor* c = state.constantOf(op.inputs[op.inputs[0] == v ? 1 : 0]);
  if (!c || c->type() != ir::ElemType::Float || c->rank() > rank) return std::nullopt;
  const int64_t count = ir::elementCount(norm).value_or(0);
  std::vector<float> values(static_cast<size_t>(count));
  if (c->elementCount() == 1) {
    std::fill(values.begin(), values.end(), c->dataAs<float>()[0]);
  } else {
    // Right-aligned: dims before the normalized axes must be 1, the normalized ones equal.
    const size_t lead = rank - norm.size();
    for (size_t d = 0; d < c->rank(); ++d) {
      const size_t axis = rank - c->rank() + d;
      const int64_t dim = c->shape()[d];
      if (axis < lead ? dim != 1 : dim != norm[axis - lead]) return std::nullopt;
    }
    if (static_cast<int64_t>(c->elementCount()) != count) return std::nullopt;
    std::copy(c->dataAs<float>(), c->dataAs<float>() + count, values.begin());
  }
  return ir::Tensor::fromVector(ir::ElemType::Float, norm, values);
}

// Matches the spelled-out LayerNorm whose Div is op `div`; returns the ops removed.
size_t matchLayerNorm(LoweringState& state, size_t div) {
  auto& ops = state.ops;
  const LOp& n = ops[div];
  if (n.kind != ir::OpKind::Div || n.inputs.size() != 2 || n.outputs.size() != 1) return 0;
  const ValueId d = n.inputs[0], s = n.inputs[1];
  // d = Sub(x, mean), mean = ReduceMean(x) over the trailing axes
  auto sub = state.producerOf(d, ir::OpKind::Sub);
  if (!sub || ops[*sub].inputs.size() != 2 || state.leaves(d) || state.readers(d) != 2) return 0;
  const ValueId x = ops[*sub].inputs[0], mean = ops[*sub].inputs[1];
  const auto xShape = state.shapeOf(x);
  auto mean1 = state.producerOf(mean, ir::OpKind::ReduceMean);
  if (!xShape || state.typeOf(x) != ir::ElemType::Float || !mean1 || ops[*mean1].inputs.empty() ||
      ops[*mean1].inputs[0] != x || onlyReaderOf(state, mean) != *sub)
    return 0;
  const size_t rank = xShape->size();
  const auto axis = trailingMeanAxis(state, ops[*mean1], rank);
  if (!axis) return 0;
  // s = Sqrt(ReduceMean(Pow(d, 2)) + eps)
  auto sqrt = state.producerOf(s, ir::OpKind::Sqrt);
  if (!sqrt || onlyReaderOf(state, s) != div) return 0;
  const ValueId ve = ops[*sqrt].inputs[0];
  auto add = state.producerOf(ve, ir::OpKind::Add);
  if (!add || onlyReaderOf(state, ve) != *sqrt || ops[*add].inputs.size() != 2) return 0;
  const bool varFirst = state.producerOf(ops[*add].inputs[0], ir::OpKind::ReduceMean).has_value();
  const ValueId var = ops[*add].inputs[varFirst ? 0 : 1];
  auto eps = state.scalarOf(ops[*add].inputs[varFirst ? 1 : 0]);
  auto mean2 = state.producerOf(var, ir::OpKind::ReduceMean);
  if (!eps || *eps < 0.0f || !mean2 || onlyReaderOf(state, var) != *add || ops[*mean2].inputs.empty() ||
      trailingMeanAxis(state, ops[*mean2], rank) != axis)
    return 0;
  const ValueId sq = ops[*mean2].inputs[0];
  auto pow = state.producerOf(sq, ir::OpKind::Pow);
  if (!pow || onlyReaderOf(state, sq) != *mean2 || ops[*pow].inputs.size() != 2 || ops[*pow].inputs[0] != d ||
      state.scalarOf(ops[*pow].inputs[1]) != 2.0f)
    return 0;
  // [* gamma] [+ beta]
  const ir::Shape norm(xShape->begin() + *axis, xShape->end());
  std::vector<size_t> gone{*mean1, *sub, *pow, *mean2, *add, *sqrt, div};
  size_t last = div;
  std::optional<ir::Tensor> gamma, beta;
  if (auto mul = onlyReaderOf(state, n.outputs[0]); mul && ops[*mul].kind == ir::OpKind::Mul) {
    gamma = affineOperand(state, ops[*mul], n.outputs[0], norm, rank);
    if (gamma) gone.push_back(last = *mul);
  }
  if (auto plus = onlyReaderOf(state, ops[last].outputs[0]); plus && ops[*plus].kind == ir::OpKind::Add) {
    beta = affineOperand(state, ops[*plus], ops[last].outputs[0], norm, rank);
    if (beta) gone.push_back(last = *plus);
  }
  if (!gamma)
    gamma = ir::Tensor::fromVector(ir::ElemType::Float, norm,
                                   std::vector<float>(static_cast<size_t>(ir::elementCount(norm).value_or(0)), 1.0f));
  const std::string name = ops[last].name + ".layer_norm";
  std::vector<ValueId> inputs{x, state.addConstant(name + ".scale", std::move(*gamma))};
  if (beta) inputs.push_back(state.addConstant(name + ".bias", std::move(*beta)));
  LOp ln = madeOp(ir::OpKind::LayerNormalization, 17, name, std::move(inputs), ops[last].outputs);
  auto& attrs = std::get<ops::LayerNormAttrs>(ln.typed);
  attrs.axis = *axis;
  attrs.epsilon = *eps;
  return replaceOpsAt(state, std::move(gone), last, std::move(ln));
}

}  // namespace

Expected<ir::PassChange> MatchLayerNorm::run(LoweringState& state) const {
  size_t matches = 0, removed = 0;
  for (size_t i = 0; i < state.ops.size(); ++i) {
    if (state.touchesBounded(state.ops[i])) continue;
    if (size_t n = matchLayerNorm(state, i)) {
      ++matches, removed += n;
      i = 0;  // indices moved; start over (each match removes ops, so this ends)
    }
  }
  return ir::PassChange{}.count("layer_norms_matched", matches).count("ops_removed", removed);
}

}  // namespace ctxkit::codegen
