// Shape rules and kernels of every op family, as the op table (op_table.cpp) wires them to op kinds.
#pragma once

#include "kernels/kernel_util.h"

#include <memory>

namespace ctxkit::kernels::detail {

using InferFn = InferResult (*)(const OpContext&, InDescs, size_t);
using RunFn = Status (*)(const OpContext&, RunIns, RunOuts);
// Works out, once for a prepared op's input shapes (and constant inputs), what its kernel would otherwise work out
// on every run; the kernel finds it in OpContext::plan. Fails when the plan needs an input known only at run time.
using PlanFn = Expected<std::shared_ptr<const void>> (*)(const OpContext&, InDescs);
// Computes a value-dependent op's outputs and binds them through the sink (kernels.h, evaluateInto).
using EvaluateFn = Status (*)(const OpContext&, RunIns, OutputSink&, EvalState&);

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
// Packs a constant weight for the grouped-blocks kernel once, when the op runs on it (else no plan).
Expected<std::shared_ptr<const void>> planConvOnce(const OpContext& ctx, InDescs inputs);
// Raises the ThreadScratch marks to what a run of this prepared Conv (ctx as its runs see it, input x and the weight's
// logical shape) will size, so that the pool reserves it on every thread when it starts, at load.
Status noteConvScratch(const OpContext& ctx, std::span<const int64_t> x, std::span<const int64_t> weight);

// pool.cpp: MaxPool and AveragePool share a shape rule.
InferResult inferPool(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMaxPool(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Status runAveragePool(const OpContext& ctx, RunIns inputs, RunOuts outputs);
// The window, divisors and scratch layout of a pool, at prepare (they depend only on the attributes and the shape).
Expected<std::shared_ptr<const void>> planPoolOnce(const OpContext& ctx, InDescs inputs);
InferResult inferGlobalPool(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runGlobalAveragePool(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// normalization.cpp
InferResult inferBatchNorm(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runBatchNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Expected<std::shared_ptr<const void>> planBatchNormOnce(const OpContext& ctx, InDescs inputs);
InferResult inferLayerNorm(const OpContext& ctx, InDescs inputs, size_t outputCount);
InferResult inferSkipNorm(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runSkipNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferMatMulNBits(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMatMulNBits(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Expected<std::shared_ptr<const void>> planMatMulNBitsOnce(const OpContext& ctx, InDescs inputs);
InferResult inferGroupQueryAttention(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runGroupQueryAttention(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferMultiHeadAttention(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMultiHeadAttention(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferMsAttention(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMsAttention(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferEmbedLayerNorm(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runEmbedLayerNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferRotaryMs(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runRotaryMs(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferQuantMatMulFloat(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runQuantMatMulFloat(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferBiasActivation(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runBiasActivation(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Status runLayerNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// softmax_reduce.cpp: Softmax; LogSoftmax and Hardmax share Softmax's shape rule.
InferResult inferSoftmax(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runSoftmax(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Status runLogSoftmaxOrHardmax(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// reduce.cpp: the Reduce* family (one pair for all) and ArgMax/ArgMin.
InferResult inferReduce(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runReduce(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Expected<std::shared_ptr<const void>> planReduceOnce(const OpContext& ctx, InDescs inputs);
InferResult inferArgReduce(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runArgReduce(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// unary_math.cpp: trigonometric, rounding, Sign, IsNaN/IsInf and parameterized activations (Elu ... Swish).
InferResult inferUnaryMath(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runUnaryMath(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// binary_ops.cpp: Mod, PRelu.
InferResult inferMod(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMod(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferPRelu(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runPRelu(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// loss.cpp: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
InferResult inferLoss(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runLoss(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// gather_scatter.cpp: GatherElements/ScatterElements, GatherND/ScatterND (one pair each) and OneHot.
InferResult inferGatherElements(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runGatherElements(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferGatherNd(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runGatherNd(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferOneHot(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runOneHot(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// scan_sort.cpp: CumSum and CumProd (one pair), TopK.
InferResult inferCumulative(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runCumulative(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferTopK(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runTopK(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// tile.cpp, depth_space.cpp (one pair), eye_like.cpp, dropout.cpp (inference): Tile, DepthToSpace/SpaceToDepth,
// EyeLike, Dropout.
InferResult inferTile(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runTile(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferDepthSpace(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runDepthSpace(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferEyeLike(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runEyeLike(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferDropout(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runDropout(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// group_normalization.cpp: Instance/GroupNormalization (one pair), LpNormalization, MeanVarianceNormalization.
InferResult inferGroupNorm(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runGroupNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferLpNorm(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runLpNorm(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferMvn(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMvn(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// bitwise.cpp: Xor, BitShift and Bitwise* (one pair).
InferResult inferBitwise(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runBitwise(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// attention.cpp: Attention.
InferResult inferAttention(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runAttention(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// causal_conv.cpp: CausalConvWithState.
InferResult inferCausalConv(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runCausalConv(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// linear_algebra.cpp: Einsum.
InferResult inferEinsum(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runEinsum(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// rotary.cpp: RotaryEmbedding.
InferResult inferRotary(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runRotary(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// quantize.cpp: QuantizeLinear and DequantizeLinear (one pair).
InferResult inferQuantize(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runQuantize(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// quantize.cpp, group_normalization.cpp, reverse_sequence.cpp, linear_algebra.cpp: DynamicQuantizeLinear, LRN,
// ReverseSequence, Det.
InferResult inferDynamicQuantize(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runDynamicQuantize(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferLrn(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runLrn(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferReverseSequence(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runReverseSequence(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferDet(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runDet(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// quant_linear.cpp: MatMulInteger and QLinearMatMul; ConvInteger and QLinearConv.
InferResult inferIntegerMatMul(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runIntegerMatMul(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Expected<std::shared_ptr<const void>> planIntegerMatMul(const OpContext& ctx, InDescs inputs);
InferResult inferIntegerConv(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runIntegerConv(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Expected<std::shared_ptr<const void>> planIntegerConv(const OpContext& ctx, InDescs inputs);

// resize.cpp: Upsample (Resize of opset 10).
InferResult inferUpsample(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runUpsample(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// select_ops.cpp: NonZero, Compress (output shapes from input values).
InferResult inferNonZero(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runNonZero(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Status evaluateNonZero(const OpContext& ctx, RunIns inputs, OutputSink& sink, EvalState& state);
InferResult inferCompress(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runCompress(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// nms.cpp: NonMaxSuppression (output shape from input values).
InferResult inferNonMaxSuppression(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runNonMaxSuppression(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Status evaluateNonMaxSuppression(const OpContext& ctx, RunIns inputs, OutputSink& sink, EvalState& state);

// roi_align.cpp: RoiAlign.
InferResult inferRoiAlign(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runRoiAlign(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// lp_pool.cpp: LpPool.
InferResult inferLpPool(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runLpPool(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// crop_pad.cpp: CenterCropPad.
InferResult inferCenterCropPad(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runCenterCropPad(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// col2im.cpp: Col2Im, MaxUnpool.
InferResult inferCol2Im(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runCol2Im(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferMaxUnpool(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMaxUnpool(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// unique.cpp: Unique (output shapes from input values).
InferResult inferUnique(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runUnique(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// tensor_scatter.cpp: TensorScatter.
InferResult inferTensorScatter(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runTensorScatter(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// deform_conv.cpp: DeformConv.
InferResult inferDeformConv(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runDeformConv(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// ml_ops.cpp: Binarizer, ArrayFeatureExtractor (domain ai.onnx.ml).
InferResult inferBinarizer(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runBinarizer(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferArrayFeatureExtractor(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runArrayFeatureExtractor(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// tfidf.cpp: TfIdfVectorizer.
InferResult inferTfIdfVectorizer(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runTfIdfVectorizer(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// grid_sample.cpp: GridSample, AffineGrid.
InferResult inferAffineGrid(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runAffineGrid(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferGridSample(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runGridSample(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// signal_ops.cpp: HannWindow, HammingWindow, BlackmanWindow; MelWeightMatrix.
InferResult inferWindow(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runWindow(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferMelWeightMatrix(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runMelWeightMatrix(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// index_ops.cpp: Trilu.
InferResult inferTrilu(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runTrilu(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// reshape_ops.cpp: ops that only relabel their input's bytes.
InferResult inferReshape(const OpContext& ctx, InDescs inputs, size_t outputCount);
InferResult inferFlatten(const OpContext& ctx, InDescs inputs, size_t outputCount);
InferResult inferSqueeze(const OpContext& ctx, InDescs inputs, size_t outputCount);
InferResult inferUnsqueeze(const OpContext& ctx, InDescs inputs, size_t outputCount);
InferResult inferIdentity(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runCopy(const OpContext& ctx, RunIns inputs, RunOuts outputs);  // output 0 = bytes of input 0
// shape_size.cpp
InferResult inferShape(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runShape(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferSize(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runSize(const OpContext& ctx, RunIns inputs, RunOuts outputs);
// split.cpp
InferResult inferSplit(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runSplit(const OpContext& ctx, RunIns inputs, RunOuts outputs);
// transpose.cpp
InferResult inferTranspose(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runTranspose(const OpContext& ctx, RunIns inputs, RunOuts outputs);
// concat.cpp
InferResult inferConcat(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runConcat(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// gather_slice.cpp
InferResult inferGather(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runGather(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferSlice(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runSlice(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Expected<std::shared_ptr<const void>> planSliceOnce(const OpContext& ctx, InDescs inputs);

// cast.cpp
InferResult inferCast(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runCast(const OpContext& ctx, RunIns inputs, RunOuts outputs);
InferResult inferCastLike(const OpContext& ctx, InDescs inputs, size_t outputCount);  // runs as runCast
InferResult inferBitCast(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runBitCast(const OpContext& ctx, RunIns inputs, RunOuts outputs);
// constant.cpp
InferResult inferConstant(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runConstant(const OpContext& ctx, RunIns inputs, RunOuts outputs);

// compare_logic.cpp, where.cpp, variadic.cpp, clip.cpp: comparisons, Not/And/Or, Where, variadic Max/Min/Sum/Mean,
// Clip.
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
Expected<std::shared_ptr<const void>> planPadOnce(const OpContext& ctx, InDescs inputs);

// conv_transpose.cpp
InferResult inferConvTranspose(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runConvTranspose(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Expected<std::shared_ptr<const void>> planConvTransposeOnce(const OpContext& ctx, InDescs inputs);

// resize.cpp: nearest and linear modes.
InferResult inferResize(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runResize(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Expected<std::shared_ptr<const void>> planResizeOnce(const OpContext& ctx, InDescs inputs);

// recurrent.cpp: LSTM, GRU and RNN share a shape rule and a kernel.
InferResult inferRecurrent(const OpContext& ctx, InDescs inputs, size_t outputCount);
Status runRecurrent(const OpContext& ctx, RunIns inputs, RunOuts outputs);
Expected<std::shared_ptr<const void>> planRecurrentOnce(const OpContext& ctx, InDescs inputs);

// Applies a fused activation (the compiler folds a following activation into Conv, Gemm and MatMul) to
// float32 results in place. activations.cpp.
void applyFusedActivation(const ops::Epilogue& act, float* data, size_t count);
// data[i] = act(data[i] + bias): one pass for no activation, Relu and Clip (a Conv's output channel after its GEMM),
// else the bias added and then applyFusedActivation.
void applyBiasActivation(const ops::Epilogue& act, float bias, float* data, size_t count);

}  // namespace ctxkit::kernels::detail
