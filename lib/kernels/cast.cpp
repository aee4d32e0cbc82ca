// Cast and CastLike (numeric types, bool, float16, bfloat16) and BitCast (reinterpreting bytes as another type of
// the same size).
#include "cpu/convert.h"
#include "kernels/ops.h"

#include <cstring>
#include <mutex>

namespace ctxkit::kernels::detail {

namespace {

Expected<ElemType> castTarget(const OpContext& ctx) {
  const ElemType type = attrsOf<ops::CastAttrs>(ctx).to;  // the decoder checked it is an element type
  if (type == ElemType::Undefined) return invalid(ctx, "required attribute to is missing");
  if (!cpu::isConvertible(type)) return unsupported(ctx, "cast to {} is not supported", ir::elemTypeName(type));
  return type;
}

}  // namespace

InferResult inferCast(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_ASSIGN_OR_RETURN(ElemType to, castTarget(ctx));
  if (!cpu::isConvertible(inputs[0].type))
    return unsupported(ctx, "cast from {} is not supported", ir::elemTypeName(inputs[0].type));
  return single(to, inputs[0].shape);
}

Status runCast(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  const size_t n = static_cast<size_t>(x.elementCount());
  const bool saturate = ctx.kind == ir::OpKind::CastLike ? attrsOf<ops::CastLikeAttrs>(ctx).saturate
                                                         : attrsOf<ops::CastAttrs>(ctx).saturate;
  // Work in pairs of elements so that no two threads write one byte of a packed 4-bit output.
  const size_t pairs = (n + 1) / 2;
  Status status;
  std::mutex mutex;
  parallelFor(ctx, pairs, 16384, [&](size_t b, size_t e) {
    Status s =
        cpu::convertElementRange(x.type(), x.data(), y.type(), y.mutableData(), 2 * b, std::min(n, 2 * e), saturate);
    if (!s) {
      std::lock_guard<std::mutex> lock(mutex);
      status = std::move(s);
    }
  });
  if (!status) return status.takeError().addContext(nodeLabel(ctx));
  return Status::ok();
}

// CastLike: Cast to the element type of input 1.
InferResult inferCastLike(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  for (size_t i = 0; i < 2; ++i)
    if (!cpu::isConvertible(inputs[i].type))
      return unsupported(ctx, "cast {} {} is not supported", i == 0 ? "from" : "to", ir::elemTypeName(inputs[i].type));
  return single(inputs[1].type, inputs[0].shape);
}

// ---- BitCast -----------------------------------------------------------------------------------------------

InferResult inferBitCast(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  const ElemType to = attrsOf<ops::BitCastAttrs>(ctx).to;
  if (!inSet(kFixedSizeTypes, to) || !inSet(kFixedSizeTypes, inputs[0].type))
    return unsupported(ctx, "bit cast from {} to {} is not supported", ir::elemTypeName(inputs[0].type),
                       ir::elemTypeName(to));
  if (ir::elemSize(to) != ir::elemSize(inputs[0].type))
    return unsupported(ctx, "bit cast between {} and {} changes the element size", ir::elemTypeName(inputs[0].type),
                       ir::elemTypeName(to));
  return single(to, inputs[0].shape);
}

Status runBitCast(const OpContext&, RunIns inputs, RunOuts outputs) {
  if (inputs[0]->byteSize()) std::memcpy(outputs[0]->mutableData(), inputs[0]->data(), inputs[0]->byteSize());
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
