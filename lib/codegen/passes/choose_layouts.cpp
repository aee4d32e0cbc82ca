// choose-layouts: constant B operands of MatMul and Gemm (and the weights of Convs the kernels run as a GEMM) are
// stored in the target's GEMM panel layout, packed once at compile time (by the weight table, as it writes them) so
// that runs read them in place. A constant read any other way too (or leaving the partition) stays plain.
#include "codegen/passes/passes.h"
#include "kernels/kernels.h"

#include <vector>

namespace ctxkit::codegen {

namespace {

// Whether prepared ops run this Conv (of a float32 weight) as a GEMM on its weight in panels
// (kernels::convOnPanels, on the static input shape).
bool convOnPanels(const LoweringState& state, const LOp& op, const ir::Shape& w, const ops::ConvAttrs& attrs) {
  if (ir::elementCount(w).value_or(0) == 0 || op.inputs[0] == kNoValue || op.outputs.empty()) return false;
  auto x = state.shapeOf(op.inputs[0]);  // (the data is float32 as the weight is: Conv takes one type)
  return x && kernels::convOnPanels(attrs, *x, w);
}

// The layout a constant read as input `k` of `op` would be stored in: the target's GEMM panels for a 2-D
// float32 B of MatMul or Gemm (transposed panels for Gemm with transB), transposed panels for the weight of a
// Conv the kernels run as a GEMM on it (kernels::convOnPanels), nothing for any other use.
std::optional<cpu::WeightLayout> gemmLayoutFor(const LoweringState& state, const LOp& op, size_t k) {
  const bool conv = op.kind == ir::OpKind::Conv;
  if (k != 1 || (op.kind != ir::OpKind::MatMul && op.kind != ir::OpKind::Gemm && !conv)) return std::nullopt;
  // A constant, or a value computed at load (a dequantized weight), which is packed once it is computed.
  const ValueId bName = op.inputs[1];
  if (!state.constantOf(bName) && !state.isLoadTime(bName)) return std::nullopt;
  auto b = state.shapeOf(bName);
  if (const ir::Tensor* c = state.constantOf(bName)) b = c->shape();
  if (!b || state.typeOf(bName) != ir::ElemType::Float || (conv ? b->size() < 3 : b->size() != 2)) return std::nullopt;
  // A float16 weight read as float32 (widen-float16) is stored as float16; the prepared op packs it once loaded.
  if (state.record(bName).float16Storage) return std::nullopt;
  // choose-kernels' choice when it made one (its cost model is convOnPanels), else the kernels' heuristic.
  if (conv && (op.kernel.recorded() ? op.kernel.algorithm != cpu::ConvAlgorithm::Panels
                                    : !convOnPanels(state, op, *b, std::get<ops::ConvAttrs>(op.typed))))
    return std::nullopt;
  bool transB = conv || (op.kind == ir::OpKind::Gemm && std::get<ops::GemmAttrs>(op.typed).transB);
  cpu::WeightLayout layout = state.options.gemmLayout;
  if (transB) layout.kind = cpu::WeightLayoutKind::GemmPanelsTransposed;
  return layout;
}

}  // namespace

Expected<ir::PassChange> ChooseLayouts::run(LoweringState& state) const {
  if (state.options.gemmLayout.plain()) return ir::PassChange{};
  // By value: whether a constant is read, and its one layout (or none).
  std::vector<char> read(state.valueCount(), 0);
  std::vector<std::optional<cpu::WeightLayout>> uses(state.valueCount());
  for (const LOp& op : state.ops)
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const ValueId in = op.inputs[k];
      if (in == kNoValue || (!state.constantOf(in) && !state.isLoadTime(in))) continue;
      auto layout = gemmLayoutFor(state, op, k);
      if (!read[in]) uses[in] = layout;
      else if (uses[in] != layout) uses[in].reset();
      read[in] = 1;
    }
  size_t packed = 0;
  for (ValueId v = 0; v < uses.size(); ++v)
    if (uses[v] && !state.leaves(v)) {
      state.record(v).layout = *uses[v];
      ++packed;
    }
  return ir::PassChange{}.count("weights_packed", packed);
}

}  // namespace ctxkit::codegen
