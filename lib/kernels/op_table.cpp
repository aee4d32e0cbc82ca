// The op table: each op kind's shape rule, kernel and element types, plus the public entry points.
#include "cpu/convert.h"
#include "kernels/op_entry.h"

#include <algorithm>
#include <array>
#include <new>
#include <stdexcept>

namespace ctxkit::kernels {

using namespace detail;
using ir::OpKind;

namespace {

constexpr TypeSet kArith = kNumericTypes;
constexpr TypeSet kFloats = kFloatTypes;
constexpr TypeSet kFloat32 = typeBit(ElemType::Float) | kHalfTypes;
constexpr TypeSet kMatMulTypes = kFloatTypes | typeBit(ElemType::Int32) | typeBit(ElemType::Int64) |
                                 typeBit(ElemType::Uint32) | typeBit(ElemType::Uint64);
constexpr TypeSet kSignedArith = kFloatTypes | kSignedIntTypes;
constexpr TypeSet kMaxPoolTypes = kFloatTypes | typeBit(ElemType::Int8) | typeBit(ElemType::Uint8);
constexpr TypeSet kCastTypes = kNumericTypes | typeBit(ElemType::Bool) | typeBit(ElemType::Float8E4M3FN) |
                               typeBit(ElemType::Float8E4M3FNUZ) | typeBit(ElemType::Float8E5M2) |
                               typeBit(ElemType::Float8E5M2FNUZ) | typeBit(ElemType::Float4E2M1) |
                               typeBit(ElemType::Int4) | typeBit(ElemType::Uint4);
constexpr TypeSet kAnyType = ~TypeSet{0};

}  // namespace

// Each op kind's entry is the one ops.def names in its kernel column.
const OpEntry* detail::findEntry(OpKind kind) {
  static const OpEntry binary{inferBinary, runBinary, kArith, true};
  static const OpEntry pow{inferPow, runPow,
                           typeBit(ElemType::Float) | typeBit(ElemType::Double) | kHalfTypes |
                               typeBit(ElemType::Int32) | typeBit(ElemType::Int64),
                           true};
  static const OpEntry floatUnary{inferUnary, runUnary, kFloats, true};
  static const OpEntry absOp{inferUnary, runUnary, kArith, true};
  static const OpEntry signedUnary{inferUnary, runUnary, kSignedArith, true};
  static const OpEntry matMul{inferMatMul, runMatMul, kMatMulTypes, true};
  static const OpEntry gemm{inferGemm, runGemm, kMatMulTypes, true};
  static const OpEntry softmax{inferSoftmax, runSoftmax, kFloats, true};
  static const OpEntry conv{inferConv, runConv, kFloat32, true, planConvOnce};
  static const OpEntry maxPool{inferPool, runMaxPool, kMaxPoolTypes, true, planPoolOnce};
  static const OpEntry avgPool{inferPool, runAveragePool, kFloats, true, planPoolOnce};
  static const OpEntry globalAvgPool{inferGlobalPool, runGlobalAveragePool, kFloats, true};
  static const OpEntry batchNorm{inferBatchNorm, runBatchNorm, kFloats, true, planBatchNormOnce};
  static const OpEntry layerNorm{inferLayerNorm, runLayerNorm, kFloats, true};
  static const OpEntry skipNorm{inferSkipNorm, runSkipNorm, kFloat32, true};
  static const OpEntry matMulNBits{inferMatMulNBits, runMatMulNBits, kFloat32, true, planMatMulNBitsOnce};
  static const OpEntry groupQueryAttention{inferGroupQueryAttention, runGroupQueryAttention, kFloat32, true};
  static const OpEntry multiHeadAttention{inferMultiHeadAttention, runMultiHeadAttention, kFloat32, true};
  static const OpEntry msAttention{inferMsAttention, runMsAttention, kFloat32, true};
  static const OpEntry embedLayerNorm{inferEmbedLayerNorm, runEmbedLayerNorm, typeBit(ElemType::Int32), true};
  static const OpEntry rotaryMs{inferRotaryMs, runRotaryMs, kFloat32, true};
  static const OpEntry quantMatMulFloat{inferQuantMatMulFloat, runQuantMatMulFloat,
                                        typeBit(ElemType::Float) | typeBit(ElemType::Int8) | typeBit(ElemType::Uint8),
                                        false};
  static const OpEntry biasActivation{inferBiasActivation, runBiasActivation, kFloat32, true};
  static const OpEntry reshape{inferReshape, runCopy, kFixedSizeTypes, false};
  static const OpEntry transpose{inferTranspose, runTranspose, kFixedSizeTypes, false};
  static const OpEntry concat{inferConcat, runConcat, kFixedSizeTypes, false};
  static const OpEntry flatten{inferFlatten, runCopy, kFixedSizeTypes, false};
  static const OpEntry squeeze{inferSqueeze, runCopy, kFixedSizeTypes, false};
  static const OpEntry unsqueeze{inferUnsqueeze, runCopy, kFixedSizeTypes, false};
  static const OpEntry identity{inferIdentity, runCopy, kFixedSizeTypes, false};
  static const OpEntry constant{inferConstant, runConstant, kAnyType, false};
  static const OpEntry gather{inferGather, runGather, kFixedSizeTypes, false};
  static const OpEntry slice{inferSlice, runSlice, kFixedSizeTypes, false, planSliceOnce};
  static const OpEntry reduce{inferReduce, runReduce, kNumericTypes, true, planReduceOnce};
  static const OpEntry reduceMinMax{inferReduce, runReduce, kNumericTypes | typeBit(ElemType::Bool), true,
                                    planReduceOnce};
  static const OpEntry argReduce{inferArgReduce, runArgReduce, kNumericTypes, true};
  static const OpEntry castLike{inferCastLike, runCast, kCastTypes, false};
  static const OpEntry unaryMath{inferUnaryMath, runUnaryMath, kFloats, true};
  static const OpEntry numericUnaryMath{inferUnaryMath, runUnaryMath, kNumericTypes, true};
  static const OpEntry softmaxLike{inferSoftmax, runLogSoftmaxOrHardmax, kFloats, true};
  static const OpEntry mod{inferMod, runMod, kNumericTypes, true};
  static const OpEntry trilu{inferTrilu, runTrilu, kFixedSizeTypes, false};
  static const OpEntry dynamicQuantize{inferDynamicQuantize, runDynamicQuantize, typeBit(ElemType::Float), false};
  static const OpEntry lrn{inferLrn, runLrn, kFloats, true};
  static const OpEntry reverseSequence{inferReverseSequence, runReverseSequence, kFixedSizeTypes, false};
  static const OpEntry det{inferDet, runDet, kFloats, true};
  static constexpr TypeSet k8Bit = typeBit(ElemType::Int8) | typeBit(ElemType::Uint8);
  static const OpEntry integerMatMul{inferIntegerMatMul, runIntegerMatMul, k8Bit, false, planIntegerMatMul};
  static const OpEntry integerConv{inferIntegerConv, runIntegerConv, k8Bit, false, planIntegerConv};
  static constexpr TypeSet kSizeTypes = typeBit(ElemType::Int32) | typeBit(ElemType::Int64);
  static const OpEntry window{inferWindow, runWindow, kSizeTypes, false};
  static const OpEntry melWeightMatrix{inferMelWeightMatrix, runMelWeightMatrix, kSizeTypes, false};
  static const OpEntry upsample{inferUpsample, runUpsample, kFixedSizeTypes, true};
  static const OpEntry nonZero{inferNonZero, runNonZero, kFixedSizeTypes, false, nullptr, evaluateNonZero};
  static const OpEntry compress{inferCompress, runCompress, kFixedSizeTypes, false};
  static const OpEntry nonMaxSuppression{
      inferNonMaxSuppression,   runNonMaxSuppression, typeBit(ElemType::Float), false, nullptr,
      evaluateNonMaxSuppression};
  static const OpEntry lpPool{inferLpPool, runLpPool, kFloats, true};
  static const OpEntry centerCropPad{inferCenterCropPad, runCenterCropPad, kFixedSizeTypes, false};
  static const OpEntry col2Im{inferCol2Im, runCol2Im, kFloats, true};
  static const OpEntry maxUnpool{inferMaxUnpool, runMaxUnpool, kFixedSizeTypes, false};
  static const OpEntry affineGrid{inferAffineGrid, runAffineGrid, kFloats, true};
  static const OpEntry unique{inferUnique, runUnique, kNativeNumeric, false};
  static const OpEntry tensorScatter{inferTensorScatter, runTensorScatter, kFixedSizeTypes, false};
  static const OpEntry deformConv{inferDeformConv, runDeformConv, kFloat32, true};
  static const OpEntry causalConv{inferCausalConv, runCausalConv, kFloat32, true};
  static const OpEntry binarizer{inferBinarizer, runBinarizer, kNativeNumeric, false};
  static const OpEntry arrayFeatureExtractor{inferArrayFeatureExtractor, runArrayFeatureExtractor, kFixedSizeTypes,
                                             false};
  static const OpEntry tfIdfVectorizer{inferTfIdfVectorizer, runTfIdfVectorizer, kIndexTypes, false};
  static const OpEntry roiAlign{inferRoiAlign, runRoiAlign, typeBit(ElemType::Float), false};
  static const OpEntry gridSample{inferGridSample, runGridSample, kFloat32, true};
  static const OpEntry quantize{inferQuantize, runQuantize, kFloats | typeBit(ElemType::Int32), false};
  static const OpEntry dequantize{inferQuantize, runQuantize,
                                  kIntTypes | typeBit(ElemType::Int4) | typeBit(ElemType::Uint4) |
                                      typeBit(ElemType::Float8E4M3FN) | typeBit(ElemType::Float8E4M3FNUZ) |
                                      typeBit(ElemType::Float8E5M2) | typeBit(ElemType::Float8E5M2FNUZ) |
                                      typeBit(ElemType::Float4E2M1),
                                  false};
  static const OpEntry rotary{inferRotary, runRotary, kFloats, true};
  static const OpEntry globalMaxPool{inferGlobalPool, runGlobalAveragePool, kFloats, true};
  static const OpEntry einsum{inferEinsum, runEinsum, kNumericTypes, true};
  static const OpEntry bitCast{inferBitCast, runBitCast, kFixedSizeTypes, false};
  static const OpEntry attention{inferAttention, runAttention, kFloats, true};
  static const OpEntry loss{inferLoss, runLoss, kFloats, true};
  static const OpEntry gatherElements{inferGatherElements, runGatherElements, kFixedSizeTypes, false};
  static const OpEntry scatterElements{inferGatherElements, runGatherElements, kFixedSizeTypes, false};
  static const OpEntry gatherNd{inferGatherNd, runGatherNd, kFixedSizeTypes, false};
  static const OpEntry oneHot{inferOneHot, runOneHot, kNumericTypes, false};
  static const OpEntry cumulative{inferCumulative, runCumulative, kNumericTypes, true};
  static const OpEntry topK{inferTopK, runTopK, kNumericTypes, true};
  static const OpEntry tile{inferTile, runTile, kFixedSizeTypes, false};
  static const OpEntry depthSpace{inferDepthSpace, runDepthSpace, kFixedSizeTypes, false};
  static const OpEntry eyeLike{inferEyeLike, runEyeLike, kNumericTypes | typeBit(ElemType::Bool), false};
  static const OpEntry dropout{inferDropout, runDropout, kFloats, false};
  static const OpEntry groupNorm{inferGroupNorm, runGroupNorm, kFloats, true};
  static const OpEntry lpNorm{inferLpNorm, runLpNorm, kFloats, true};
  static const OpEntry mvn{inferMvn, runMvn, kFloats, true};
  static const OpEntry bitwise{inferBitwise, runBitwise, kIntTypes, false};
  static const OpEntry logicXor{inferBitwise, runBitwise, typeBit(ElemType::Bool), false};
  static const OpEntry prelu{inferPRelu, runPRelu, kNumericTypes, true};
  static const OpEntry cast{inferCast, runCast, kCastTypes, false};
  static const OpEntry shape{inferShape, runShape, kAnyType, false};
  static const OpEntry split{inferSplit, runSplit, kFixedSizeTypes, false};
  static const OpEntry size{inferSize, runSize, kAnyType, false};
  static const OpEntry compare{inferCompare, runCompare, kNumericTypes | typeBit(ElemType::Bool), true};
  static const OpEntry logic{inferLogic, runLogic, typeBit(ElemType::Bool), false};
  static const OpEntry where{inferWhere, runWhere, typeBit(ElemType::Bool), false};
  static const OpEntry minMax{inferMinMax, runMinMax, kArith, true};
  static const OpEntry clip{inferClip, runClip, kArith, true};
  static const OpEntry constantOfShape{inferConstantOfShape, runConstantOfShape, kIndexTypes, false};
  static const OpEntry expand{inferExpand, runExpand, kFixedSizeTypes, false};
  static const OpEntry range{inferRange, runRange,
                             typeBit(ElemType::Float) | typeBit(ElemType::Double) | typeBit(ElemType::Int16) |
                                 typeBit(ElemType::Int32) | typeBit(ElemType::Int64) | kHalfTypes,
                             true};
  static const OpEntry pad{inferPad, runPad, kFixedSizeTypes, false, planPadOnce};
  static const OpEntry convTranspose{inferConvTranspose, runConvTranspose, kFloat32, true, planConvTransposeOnce};
  static const OpEntry resize{inferResize, runResize, kFloats | typeBit(ElemType::Int8) | typeBit(ElemType::Uint8),
                              true, planResizeOnce};
  static const OpEntry recurrent{inferRecurrent, runRecurrent, kFloat32, true, planRecurrentOnce};

  static const OpEntry none{};  // ops.def's "none": no kernel runs the kind

  // The kernel column of ops.def, one generated case per line.
  const OpEntry* entry = &none;
  switch (kind) {
#define CTX_OP(kind, name, domain, family, kernel, flags, ...)                                                         \
  case OpKind::kind:                                                                                                   \
    entry = &kernel;                                                                                                   \
    break;
#include "ir/ops.def"
#undef CTX_OP
    case OpKind::Unknown: break;
  }
  return entry == &none ? nullptr : entry;
}

Error detail::noKernel(const OpContext& ctx) {
  return nodeError(ctx, ErrorCode::Unsupported, "no CPU kernel for op {}", ir::opKindName(ctx.kind));
}

Status detail::runEntry(const OpEntry& entry, const OpContext& ctx, RunIns inputs, RunOuts outputs, bool viaFloat) {
  // A kernel's own buffers are sized from its inputs: running out of memory for them is this node's error, not an
  // abort of the process.
  try {
    return viaFloat ? runViaFloat(entry, ctx, inputs, outputs) : entry.run(ctx, inputs, outputs);
  } catch (const std::bad_alloc&) {
    return nodeError(ctx, ErrorCode::Unsupported, "out of memory for the kernel's buffers");
  } catch (const std::length_error&) {
    return nodeError(ctx, ErrorCode::Unsupported, "the kernel's buffers would exceed the largest possible size");
  }
}

Status detail::runViaFloat(const OpEntry& entry, const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ir::Tensor> wideIns;
  wideIns.reserve(inputs.size());
  std::vector<const ir::Tensor*> ins(inputs.begin(), inputs.end());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i] || !isHalf(inputs[i]->type())) continue;
    CTX_ASSIGN_OR_RETURN(ir::Tensor wide, ir::Tensor::allocate(ElemType::Float, inputs[i]->shape()));
    CTX_RETURN_IF_ERROR(cpu::convertElements(inputs[i]->type(), inputs[i]->data(), ElemType::Float, wide.mutableData(),
                                             static_cast<size_t>(wide.elementCount())));
    wideIns.push_back(std::move(wide));
    ins[i] = &wideIns.back();
  }
  std::vector<ir::Tensor> wideOuts;
  wideOuts.reserve(outputs.size());
  std::vector<ir::Tensor*> outs(outputs.begin(), outputs.end());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i] || !isHalf(outputs[i]->type())) continue;
    CTX_ASSIGN_OR_RETURN(ir::Tensor wide, ir::Tensor::allocate(ElemType::Float, outputs[i]->shape()));
    wideOuts.push_back(std::move(wide));
    outs[i] = &wideOuts.back();
  }
  CTX_RETURN_IF_ERROR(entry.run(ctx, ins, outs));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outs[i] == outputs[i]) continue;
    CTX_RETURN_IF_ERROR(cpu::convertElements(ElemType::Float, outs[i]->data(), outputs[i]->type(),
                                             outputs[i]->mutableData(), static_cast<size_t>(outs[i]->elementCount())));
  }
  return Status::ok();
}

bool hasKernel(OpKind kind) { return findEntry(kind) != nullptr; }

OpContext nodeContext(const ir::Node& node, ThreadPool* pool) {
  OpContext ctx{node.kind, node.opset, node.attrs, node.name, pool};
  // A node whose kind or opset changed since it was decoded gets neither: entry points decode it then.
  if (ops::isDecoded(node)) {
    const auto& decoded = node.typed->attrs;
    if (decoded) ctx.typed = &decoded.value();
    else ctx.decodeError = &decoded.error();
  }
  return ctx;
}

bool supportsType(OpKind kind, ElemType type) {
  const OpEntry* entry = findEntry(kind);
  return entry != nullptr && inSet(entry->types, type);
}

Expected<std::vector<OutputDesc>> inferOutputs(const OpContext& ctx, std::span<const ValueDesc> inputs,
                                               size_t outputCount) {
  const OpEntry* entry = findEntry(ctx.kind);
  if (!entry) return noKernel(ctx);
  if (!ctx.typed)
    return withTypedAttrs(ctx, [&](const OpContext& typed) { return inferOutputs(typed, inputs, outputCount); });
  if (!inputs.empty() && inputs[0].present && !inSet(entry->types, inputs[0].type))
    return nodeError(ctx, ErrorCode::Unsupported, "input 0 has type {} but the kernel supports {}",
                     ir::elemTypeName(inputs[0].type), typeSetNames(entry->types));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].present) continue;
    for (int64_t d : inputs[i].shape)
      if (d < 0) return invalid(ctx, "input {} has a negative dimension in shape {}", i, shapeStr(inputs[i].shape));
  }
  auto result = entry->infer(ctx, inputs, outputCount);
  if (!result) return result;
  for (const OutputDesc& out : *result) CTX_RETURN_IF_ERROR(checkOutputSize(ctx, out));
  return result;
}

namespace {
bool anyHalf(std::span<const ir::Tensor* const> inputs) {
  return std::any_of(inputs.begin(), inputs.end(), [](const ir::Tensor* t) { return t && isHalf(t->type()); });
}
}  // namespace

Status run(const OpContext& ctx, std::span<const ir::Tensor* const> inputs, std::span<ir::Tensor* const> outputs) {
  const OpEntry* entry = findEntry(ctx.kind);
  if (!entry) return noKernel(ctx);
  if (!ctx.typed) return withTypedAttrs(ctx, [&](const OpContext& typed) { return run(typed, inputs, outputs); });
  // The shape rule runs again on the real inputs: a kernel can then trust every shape it indexes with.
  std::vector<ValueDesc> descs = describeInputs(inputs, true);
  CTX_ASSIGN_OR_RETURN(std::vector<OutputDesc> expected, inferOutputs(ctx, descs, outputs.size()));
  if (expected.size() != outputs.size())
    return nodeError(ctx, ErrorCode::Internal, "kernel produced {} output descriptions for {} outputs", expected.size(),
                     outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i]) {
      // LSTM, GRU and RNN may omit Y and keep only the final states.
      bool optionalY = ctx.kind == OpKind::LSTM || ctx.kind == OpKind::GRU || ctx.kind == OpKind::RNN;
      if (i == 0 && !optionalY) return nodeError(ctx, ErrorCode::InvalidArgument, "output 0 is missing");
      continue;
    }
    const ir::Tensor& out = *outputs[i];
    if (out.type() != expected[i].type || out.shape() != expected[i].shape)
      return nodeError(ctx, ErrorCode::InvalidArgument,
                       "output {} is a {} tensor of shape {} but expected {} of shape {}", i,
                       ir::elemTypeName(out.type()), shapeStr(out.shape()), ir::elemTypeName(expected[i].type),
                       shapeStr(expected[i].shape));
    if (!out.isWritable() && out.byteSize() > 0)
      return nodeError(ctx, ErrorCode::InvalidArgument, "output {} is not writable", i);
  }
  return runEntry(*entry, ctx, inputs, outputs, entry->halfViaFloat && anyHalf(inputs));
}

Expected<std::vector<ir::Tensor>> evaluate(const OpContext& ctx, std::span<const ir::Tensor* const> inputs,
                                           size_t outputCount) {
  if (!ctx.typed)
    return withTypedAttrs(ctx, [&](const OpContext& typed) { return evaluate(typed, inputs, outputCount); });
  std::vector<ValueDesc> descs = describeInputs(inputs, true);
  CTX_ASSIGN_OR_RETURN(std::vector<OutputDesc> outs, inferOutputs(ctx, descs, outputCount));
  std::vector<ir::Tensor> tensors;
  tensors.reserve(outs.size());
  for (OutputDesc& d : outs) {
    auto t = ir::Tensor::allocate(d.type, std::move(d.shape));
    if (!t) return t.takeError().addContext(nodeLabel(ctx));
    tensors.push_back(std::move(*t));
  }
  std::vector<ir::Tensor*> ptrs;
  for (auto& t : tensors) ptrs.push_back(&t);
  // The outputs were just made to the shapes the rule gave for these inputs: the kernel runs without run()'s second
  // pass of the rule (which, for ops whose output shapes depend on values, is the op's whole work again).
  const OpEntry& entry = *findEntry(ctx.kind);
  CTX_RETURN_IF_ERROR(runEntry(entry, ctx, inputs, ptrs, entry.halfViaFloat && anyHalf(inputs)));
  return tensors;
}

Status evaluateInto(const OpContext& ctx, std::span<const ir::Tensor* const> inputs, size_t outputCount,
                    OutputSink& sink, EvalState& state) {
  const OpEntry* entry = findEntry(ctx.kind);
  if (!entry) return noKernel(ctx);
  if (!ctx.typed)
    return withTypedAttrs(
        ctx, [&](const OpContext& typed) { return evaluateInto(typed, inputs, outputCount, sink, state); });
  if (entry->evaluate && !(entry->halfViaFloat && anyHalf(inputs))) return entry->evaluate(ctx, inputs, sink, state);
  describeInputsInto(inputs, true, state.descs);
  CTX_ASSIGN_OR_RETURN(std::vector<OutputDesc> outs, inferOutputs(ctx, state.descs, outputCount));
  // At most kMaxOutputs outputs: bound without a vector of pointers.
  constexpr size_t kMaxOutputs = 8;
  if (outs.size() > kMaxOutputs) return nodeError(ctx, ErrorCode::Unsupported, "more than {} outputs", kMaxOutputs);
  std::array<ir::Tensor*, kMaxOutputs> ptrs{};
  for (size_t o = 0; o < outs.size(); ++o) {
    auto t = sink.bind(o, outs[o].type, outs[o].shape);
    if (!t) return t.takeError().addContext(nodeLabel(ctx));
    ptrs[o] = *t;
  }
  return runEntry(*entry, ctx, inputs, std::span(ptrs.data(), outs.size()), entry->halfViaFloat && anyHalf(inputs));
}

}  // namespace ctxkit::kernels
