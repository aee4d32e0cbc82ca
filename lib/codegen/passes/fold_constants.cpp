// fold-constants: ops whose results are already constants, or whose inputs all are, are evaluated now and become
// weights (unless a result leaves the partition, which needs a real output).
#include "analysis/analysis.h"
#include "codegen/passes/passes.h"
#include "ir/op_info.h"
#include "kernels/kernels.h"

#include <algorithm>

namespace ctxkit::codegen {

Expected<ir::PassChange> FoldConstants::run(LoweringState& state) const {
  auto& ops = state.ops;
  size_t folded = 0, constants = 0;
  for (size_t i = 0; i < ops.size();) {
    const LOp& op = ops[i];
    bool leaves =
        std::any_of(op.outputs.begin(), op.outputs.end(), [&](const std::string& o) { return state.leaves(o); });
    if (leaves || ir::isControlFlow(op.kind) || !kernels::hasKernel(op.kind) || op.outputs.empty()) {
      ++i;
      continue;
    }
    bool known = std::all_of(op.outputs.begin(), op.outputs.end(),
                             [&](const std::string& o) { return o.empty() || state.constantOf(o) != nullptr; });
    if (!known) {
      std::vector<const ir::Tensor*> ins;
      bool constantInputs = !op.inputs.empty();
      for (const auto& in : op.inputs) {
        ins.push_back(in.empty() ? nullptr : state.constantOf(in));
        constantInputs = constantInputs && (in.empty() || ins.back());
      }
      if (!constantInputs) {
        ++i;
        continue;
      }
      size_t outputCount = op.outputs.size();
      while (outputCount > 0 && op.outputs[outputCount - 1].empty()) --outputCount;
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
        if (!op.outputs[o].empty()) {
          state.addConstant(op.outputs[o], std::move((*outs)[o]));
          ++constants;
        }
    }
    state.eraseOp(i);
    ++folded;
  }
  return ir::PassChange{}.count("ops_folded", folded).count("constants_made", constants);
}

}  // namespace ctxkit::codegen
