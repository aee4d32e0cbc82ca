// fuse-matmul-add: MatMul by a constant [K, N] followed only by Add of a constant bias [N] becomes one Gemm with the
// bias as C; leading dimensions of A are flattened and restored with views (no copies).
#include "codegen/passes/passes.h"

namespace ctxkit::codegen {

Expected<ir::PassChange> FuseMatMulAdd::run(LoweringState& state) const {
  auto& ops = state.ops;
  size_t fused = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    LOp& mm = ops[i];
    if (mm.kind != ir::OpKind::MatMul || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
    const ValueId out = mm.outputs[0];
    // B a constant, or a value computed at load (a dequantized weight).
    const ValueId bName = mm.inputs[1];
    auto bShape = state.shapeOf(bName);
    if (const ir::Tensor* c = state.constantOf(bName)) bShape = c->shape();
    const bool bKnown = state.constantOf(bName) || state.isLoadTime(bName);
    auto aShape = state.shapeOf(mm.inputs[0]);
    if (!bKnown || !bShape || state.typeOf(bName) != ir::ElemType::Float || bShape->size() != 2 || !aShape ||
        aShape->size() < 2 || state.typeOf(mm.inputs[0]) != ir::ElemType::Float || state.leaves(out) ||
        state.readers(out) != 1)
      continue;
    auto next = state.soleReader(i);
    if (!next || ops[*next].kind != ir::OpKind::Add || ops[*next].inputs.size() != 2 || ops[*next].outputs.size() != 1)
      continue;
    const size_t j = *next;
    const LOp& add = ops[j];
    const ValueId other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
    const ir::Tensor* bias = state.constantOf(other);
    const int64_t k = (*bShape)[0], n = (*bShape)[1];
    if (!bias || bias->type() != ir::ElemType::Float || bias->elementCount() != static_cast<uint64_t>(n) ||
        bias->rank() > aShape->size() || (bias->rank() > 0 && bias->shape().back() != n) || aShape->back() != k)
      continue;
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < aShape->size(); ++d) rows *= (*aShape)[d];
    ir::Shape outShape(aShape->begin(), aShape->end() - 1);
    outShape.push_back(n);
    std::string base = mm.name + ".gemm";
    std::vector<int64_t> inDims = {rows, k};
    CTX_ASSIGN_OR_RETURN(ir::Tensor c, bias->reshaped({n}));
    const ValueId inShape =
        state.addConstant(base + ".a_shape", ir::Tensor::fromVector(ir::ElemType::Int64, {2}, inDims));
    const ValueId outShapeName =
        state.addConstant(base + ".y_shape", ir::Tensor::fromVector(ir::ElemType::Int64,
                                                                    {static_cast<int64_t>(outShape.size())}, outShape));
    const ValueId cName = state.addConstant(base + ".c", std::move(c));
    // A float16 bias read as float32 (widen-float16) stays float16 in the .bin.
    if (const auto& half = state.record(other).float16Storage) {
      CTX_ASSIGN_OR_RETURN(ir::Tensor h, half->reshaped({n}));
      state.record(cName).float16Storage = std::make_unique<ir::Tensor>(std::move(h));
    }
    const ValueId a2 = state.value(base + ".a"), y2 = state.value(base + ".y"), finalOut = add.outputs[0];
    state.record(a2).shape = ir::Shape{rows, k};
    state.record(y2).shape = ir::Shape{rows, n};
    LOp flatten = madeOp(ir::OpKind::Reshape, 14, base + ".flatten", {mm.inputs[0], inShape}, {a2});
    LOp gemm = madeOp(ir::OpKind::Gemm, 13, mm.name, {a2, mm.inputs[1], cName}, {y2});
    LOp restore = madeOp(ir::OpKind::Reshape, 14, base + ".restore", {y2, outShapeName}, {finalOut});
    state.eraseOp(j);
    state.replaceOp(i, std::move(gemm));
    state.insertOp(i + 1, std::move(restore));
    state.insertOp(i, std::move(flatten));
    i += 2;
    ++fused;
  }
  return ir::PassChange{}.count("matmul_adds_fused", fused);
}

}  // namespace ctxkit::codegen
