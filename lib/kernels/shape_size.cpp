// Ops that describe their input's shape: Shape (a range of its dimensions) and Size (its element count).
#include "kernels/ops.h"

namespace ctxkit::kernels::detail {

// ---- Shape -------------------------------------------------------------------------------------------

namespace {
std::pair<int64_t, int64_t> shapeRange(const OpContext& ctx, int64_t rank) {
  const auto& a = attrsOf<ops::ShapeAttrs>(ctx);
  int64_t start = a.start;
  int64_t end = a.end.value_or(rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {start, std::max(start, end)};
}
}  // namespace

InferResult inferShape(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  auto [start, end] = shapeRange(ctx, static_cast<int64_t>(inputs[0].shape.size()));
  return single(ElemType::Int64, ir::Shape{end - start});
}

Status runShape(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const auto& shape = inputs[0]->shape();
  auto [start, end] = shapeRange(ctx, static_cast<int64_t>(shape.size()));
  int64_t* out = outputs[0]->mutableDataAs<int64_t>();
  for (int64_t i = start; i < end; ++i) out[i - start] = shape[static_cast<size_t>(i)];
  return Status::ok();
}

// ---- Size ------------------------------------------------------------------------------------------------

InferResult inferSize(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  return std::vector<OutputDesc>{OutputDesc{ElemType::Int64, {}}};
}

Status runSize(const OpContext&, RunIns inputs, RunOuts outputs) {
  outputs[0]->mutableDataAs<int64_t>()[0] = dimProduct(inputs[0]->shape());
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
