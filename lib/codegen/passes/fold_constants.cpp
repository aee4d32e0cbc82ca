// fold-constants: ops whose results are already constants, or whose inputs all are, are evaluated now and become
// weights (unless a result leaves the partition, which needs a real output); a quantized weight's DequantizeLinear,
// and what is computed from its result alone, are kept as load-time ops instead (run once when the program loads).
#include "analysis/analysis.h"
#include "codegen/passes/passes.h"
#include "ir/op_info.h"
#include "kernels/kernels.h"

#include <algorithm>
#include <span>

namespace ctxkit::codegen {

namespace {

// A dequantized weight this large stays quantized in the context binary and is dequantized at load; a smaller one
// (a scale, a bias, a scalar an epilogue takes) is folded, so that the passes after this one see its value.
constexpr uint64_t kLoadTimeFloorBytes = 4096;

bool isQuantizedType(ir::ElemType t) {
  return t == ir::ElemType::Int8 || t == ir::ElemType::Uint8 || t == ir::ElemType::Int4 || t == ir::ElemType::Uint4 ||
         t == ir::ElemType::Int16 || t == ir::ElemType::Uint16;
}

// DequantizeLinear of a quantized constant whose float result is worth keeping quantized (docs/compiler.md#lowering).
bool keepsQuantized(const LoweringState& state, const LOp& op, std::span<const ir::Tensor* const> ins) {
  if (op.kind != ir::OpKind::DequantizeLinear || ins.empty() || !ins[0] || !isQuantizedType(ins[0]->type()) ||
      op.outputs.size() != 1)
    return false;
  auto shape = state.shapeOf(op.outputs[0]);
  const ir::ElemType type = state.typeOf(op.outputs[0]);
  auto bytes = shape ? ir::storageBytes(type, ir::elementCount(*shape).value_or(0)) : std::nullopt;
  return bytes && *bytes > kLoadTimeFloorBytes;
}

bool isNondeterministic(ir::OpKind kind) {
  const std::string_view name = ir::opKindName(kind);
  return name.rfind("Random", 0) == 0 || name == "Multinomial" || name == "Bernoulli";
}

}  // namespace

Expected<ir::PassChange> FoldConstants::run(LoweringState& state) const {
  auto& ops = state.ops;
  size_t folded = 0, constants = 0, loadTimeOps = 0;
  for (size_t i = 0; i < ops.size();) {
    const LOp& op = ops[i];
    bool leaves = std::any_of(op.outputs.begin(), op.outputs.end(), [&](ValueId o) { return state.leaves(o); });
    if (leaves || ir::isControlFlow(op.kind) || !kernels::hasKernel(op.kind) || op.outputs.empty()) {
      ++i;
      continue;
    }
    // An op the lowering put first to run at load (a weightless context's recipe of a folded constant): left as it is.
    if (std::any_of(op.outputs.begin(), op.outputs.end(), [&](ValueId o) { return state.isLoadTime(o); })) {
      ++loadTimeOps;
      ++i;
      continue;
    }
    bool known = std::all_of(op.outputs.begin(), op.outputs.end(),
                             [&](ValueId o) { return o == kNoValue || state.constantOf(o) != nullptr; });
    if (!known) {
      std::vector<const ir::Tensor*> ins;
      bool constantInputs = !op.inputs.empty(), loadTimeInputs = false, atLoad = !op.inputs.empty();
      for (ValueId in : op.inputs) {
        const bool absent = in == kNoValue;
        ins.push_back(absent ? nullptr : state.constantOf(in));
        constantInputs = constantInputs && (absent || ins.back());
        loadTimeInputs = loadTimeInputs || (!absent && state.isLoadTime(in));
        atLoad = atLoad && (absent || ins.back() || state.isLoadTime(in));
      }
      // A quantized weight's DequantizeLinear, and an op computing from it and constants alone (a Transpose of the
      // dequantized weight), run once at load: the weight stays quantized in the context binary.
      if ((constantInputs && keepsQuantized(state, op, ins)) ||
          (!constantInputs && atLoad && loadTimeInputs && !isNondeterministic(op.kind))) {
        for (ValueId o : op.outputs)
          if (o != kNoValue) state.record(o).loadTime = true;
        ++loadTimeOps;
        ++i;
        continue;
      }
      if (!constantInputs) {
        ++i;
        continue;
      }
      size_t outputCount = op.outputs.size();
      while (outputCount > 0 && op.outputs[outputCount - 1] == kNoValue) --outputCount;
      kernels::OpContext ctx{op.kind, op.opset, op.onnx, op.name, nullptr, &op.typed};
      auto outs = kernels::evaluate(ctx, ins, outputCount);
      uint64_t inputBytes = 0, resultBytes = 0;
      for (const ir::Tensor* in : ins) inputBytes += in ? in->byteSize() : 0;
      for (size_t o = 0; outs && o < outputCount; ++o) resultBytes += (*outs)[o].byteSize();
      // Left to run: a failure is reported by emit-program; a result much larger than its inputs is not stored.
      if (!outs || !analysis::worthFolding(op.kind, inputBytes, resultBytes)) {
        ++i;
        continue;
      }
      for (size_t o = 0; o < outputCount; ++o)
        if (op.outputs[o] != kNoValue) {
          state.addConstant(op.outputs[o], std::move((*outs)[o]));
          ++constants;
        }
    }
    state.eraseOp(i);
    ++folded;
  }
  return ir::PassChange{}
      .count("ops_folded", folded)
      .count("constants_made", constants)
      .count("load_time_ops", loadTimeOps);
}

}  // namespace ctxkit::codegen
