// Shape rules and kernels of every op family, as the op table (op_table.cpp) wires them to op kinds.
#pragma once

#include "kernels/kernel_util.h"

namespace ctxkit::kernels::detail {

using InferFn = InferResult (*)(const OpContext&, InDescs, size_t);
using RunFn = Status (*)(const OpContext&, RunIns, RunOuts);

// elementwise.cpp: Add, Sub, Mul, Div (one pair for all four), Pow.
InferResult inferBinary(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runBinary(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferPow(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runPow(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// activations.cpp: one-input elementwise ops (Sqrt ... Gelu).
InferResult inferUnary(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runUnary(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// matmul_gemm.cpp
InferResult inferMatMul(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMatMul(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferGemm(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runGemm(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// conv.cpp
InferResult inferConv(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runConv(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// pool.cpp: MaxPool and AveragePool share a shape rule.
InferResult inferPool(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMaxPool(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Status runAveragePool(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferGlobalPool(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runGlobalAveragePool(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// normalization.cpp
InferResult inferBatchNorm(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runBatchNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferLayerNorm(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runLayerNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// softmax_reduce.cpp: Softmax; LogSoftmax and Hardmax share Softmax's shape rule.
InferResult inferSoftmax(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runSoftmax(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Status runLogSoftmaxOrHardmax(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// reduce.cpp: the Reduce* family (one pair for all) and ArgMax/ArgMin.
InferResult inferReduce(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runReduce(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferArgReduce(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runArgReduce(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// unary_math.cpp: trigonometric, rounding, Sign, IsNaN/IsInf and parameterized activations (Elu ... Swish).
InferResult inferUnaryMath(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runUnaryMath(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// binary_ops.cpp: Mod.
InferResult inferMod(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMod(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// index_ops.cpp: Trilu.
InferResult inferTrilu(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runTrilu(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// shape_ops.cpp: ops that only move or relabel bytes.
InferResult inferReshape(const OpContext& ctx, InDescs inputs, size_t outputCount);
InferResult inferFlatten(const OpContext& ctx, InDescs inputs, size_t outputCount);
InferResult inferSqueeze(const OpContext& ctx, InDescs inputs, size_t outputCount);
InferResult inferUnsqueeze(const OpContext& ctx, InDescs inputs, size_t outputCount);
InferResult inferIdentity(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runCopy(const OpContext& ctx, RunIns inputs, RunOuts outputs);  // output 0 = bytes of input 0
InferResult inferShape(const OpContext& ctx, InDescs inputs, size_t outputCount);
// split_size.cpp
InferResult inferSplit(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runSplit(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferSize(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runSize(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Status runShape(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferTranspose(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runTranspose(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferConcat(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runConcat(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// gather_slice.cpp
InferResult inferGather(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runGather(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferSlice(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runSlice(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// cast_constant.cpp
InferResult inferCast(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runCast(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferCastLike(const OpContext& ctx, InDescs inputs, size_t outputCount);  // runs as runCast
InferResult inferConstant(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runConstant(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// compare_logic.cpp: comparisons, Not/And/Or, Where, variadic Max/Min and Clip.
InferResult inferCompare(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runCompare(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferLogic(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runLogic(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferWhere(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runWhere(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferMinMax(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMinMax(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferClip(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runClip(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// pad_expand.cpp
InferResult inferConstantOfShape(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runConstantOfShape(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferExpand(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runExpand(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferRange(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runRange(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferPad(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runPad(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// conv_transpose.cpp
InferResult inferConvTranspose(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runConvTranspose(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// resize.cpp: nearest and linear modes.
InferResult inferResize(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runResize(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// recurrent.cpp: LSTM and GRU share a shape rule and a kernel.
InferResult inferRecurrent(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runRecurrent(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// Applies a fused activation (the compiler folds a following activation into Conv, Gemm and MatMul) to
// float32 results in place. activations.cpp.
void applyFusedActivation(const ops::Epilogue& act, float* data, size_t count);

}  // namespace ctxkit::kernels::detail
