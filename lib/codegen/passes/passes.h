// The lowering passes, one class each, defined one per file in this folder; codegen/lower.cpp runs them in the
// order docs/compiler.md#lowering lists. Each reports what it changed as counts (ir::PassChange).
#pragma once

#include "codegen/lowering_state.h"

namespace ctxkit::codegen {

#define CTXKIT_LOWERING_PASS(Class, passName, isRequired)                                                              \
  class Class final : public LoweringPass {                                                                            \
  public:                                                                                                              \
    std::string_view name() const override { return passName; }                                                        \
    bool required() const override { return isRequired; }                                                              \
    Expected<ir::PassChange> run(LoweringState& state) const override;                                                 \
  };

// QDQ groups (DequantizeLinear on 8-bit activation and weight, Conv/MatMul/Gemm, optional bias and Relu/Clip,
// QuantizeLinear) become QLinearConv or QLinearMatMul on the 8-bit weights. Runs first: fold-constants would turn the
// dequantized weights into float32.
CTXKIT_LOWERING_PASS(FuseQdq, "fuse-qdq", false)
// Ops whose inputs are all constants are evaluated now and become weights.
CTXKIT_LOWERING_PASS(FoldConstants, "fold-constants", false)
// Conv or Gemm followed only by an inference BatchNormalization: one op with rescaled weights and bias.
CTXKIT_LOWERING_PASS(FoldBatchNorm, "fold-batchnorm", false)
// Conv or Gemm followed only by Mul/Add/Sub/Div of a per-channel constant: folded into weights and bias.
CTXKIT_LOWERING_PASS(FoldAffine, "fold-affine", false)
// For a target computing float16 in float32: float16 values become float32 between ops (inputs widened on entry,
// outputs rounded on exit, explicit Casts to float16 still rounding), float16 weights read as float32 and stored as
// float16.
CTXKIT_LOWERING_PASS(WidenFloat16, "widen-float16", false)
// MatMul by a constant [K, N] followed only by Add of a bias [N]: one Gemm between two views.
CTXKIT_LOWERING_PASS(FuseMatMulAdd, "fuse-matmul-add", false)
// Activations spelled out as arithmetic (x * Clip(x + 3, 0, 6) / 6) become the activation op (HardSwish).
CTXKIT_LOWERING_PASS(MatchActivations, "match-activations", false)
// Activations, x * Sigmoid(x) and a scalar scale and shift after Conv/Gemm/MatMul become their epilogue.
CTXKIT_LOWERING_PASS(FuseEpilogue, "fuse-epilogue", false)
// Constant GEMM operands are stored in the target's panel layout.
CTXKIT_LOWERING_PASS(ChooseLayouts, "choose-layouts", false)
// The ops become a program: typed ops, weights interned, reshape-like ops as views.
CTXKIT_LOWERING_PASS(EmitProgram, "emit-program", true)
// Arena buffers get offsets in one arena, reused by lifetime.
CTXKIT_LOWERING_PASS(PlanMemory, "plan-memory", true)

#undef CTXKIT_LOWERING_PASS

}  // namespace ctxkit::codegen
