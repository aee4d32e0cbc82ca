// TensorScatter (opset 24): the KV-cache update. present_cache is past_cache with, per batch entry, the update's
// sequence_length slices written along `axis` from write_indices[b] (0 when absent), wrapping modulo the cache
// length in circular mode.
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

struct ScatterPlan {
  size_t axis = 0;
  bool circular = false;
  int64_t batch = 0, outer = 0, maxSeq = 0, seq = 0, inner = 0;  // past as [outer, maxSeq, inner], outer from batch
};

Expected<ScatterPlan> planTensorScatter(const OpContext& ctx, InDescs inputs) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 3));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  const ir::Shape &past = inputs[0].shape, &update = inputs[1].shape;
  const auto rank = static_cast<int64_t>(past.size());
  if (rank < 2) return invalid(ctx, "input 0 (past_cache) has shape {} but expected rank 2 or more", shapeStr(past));
  ScatterPlan p;
  const auto& attrs = attrsOf<ops::TensorScatterAttrs>(ctx);
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrs.axis, rank, "attribute axis"));
  if (axis == 0) return invalid(ctx, "attribute axis must not be the batch axis 0");
  p.axis = static_cast<size_t>(axis);
  p.circular = attrs.mode == ops::CacheMode::Circular;
  bool matches = update.size() == past.size();
  for (size_t d = 0; matches && d < past.size(); ++d) matches = d == p.axis || update[d] == past[d];
  if (!matches || update[p.axis] > past[p.axis])
    return invalid(ctx, "update has shape {} but expected past_cache's shape {} with at most as long an axis {}",
                   shapeStr(update), shapeStr(past), axis);
  if (const ValueDesc* w = optionalInput(inputs, 2)) {
    CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 2, typeBit(ElemType::Int64)));
    if (w->shape != ir::Shape{past[0]})
      return invalid(ctx, "input 2 (write_indices) has shape {} but expected [{}]", shapeStr(w->shape), past[0]);
  }
  p.batch = past[0];
  p.outer = dimProduct(past, 0, p.axis);
  p.maxSeq = past[p.axis];
  p.seq = update[p.axis];
  p.inner = dimProduct(past, p.axis + 1, past.size());
  return p;
}

}  // namespace

InferResult inferTensorScatter(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(planTensorScatter(ctx, inputs).status());
  return single(inputs[0].type, inputs[0].shape);
}

Status runTensorScatter(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, false);
  CTX_ASSIGN_OR_RETURN(ScatterPlan p, planTensorScatter(ctx, descs));
  const ir::Tensor &past = *inputs[0], &update = *inputs[1];
  ir::Tensor& y = *outputs[0];
  const size_t element = ir::elemSize(past.type());
  if (element == 0) return unsupported(ctx, "input of type {} is not supported", ir::elemTypeName(past.type()));
  if (y.mutableData() != past.data()) std::memcpy(y.mutableData(), past.data(), past.byteSize());
  const int64_t* writeAt = inputs.size() > 2 && inputs[2] ? inputs[2]->dataAs<int64_t>() : nullptr;
  const auto row = static_cast<size_t>(p.inner) * element;
  const int64_t perBatch = p.outer / std::max<int64_t>(p.batch, 1);  // outer rows of one batch entry
  for (int64_t o = 0; o < p.outer; ++o) {
    const int64_t start = writeAt ? writeAt[o / perBatch] : 0;
    for (int64_t s = 0; s < p.seq; ++s) {
      int64_t at = start + s;
      if (p.circular) at = ((at % p.maxSeq) + p.maxSeq) % p.maxSeq;
      if (at < 0 || at >= p.maxSeq)
        return invalid(ctx, "write index {} plus the update's length {} exceeds the cache length {}", start, p.seq,
                       p.maxSeq);
      std::memcpy(y.mutableData() + static_cast<size_t>(o * p.maxSeq + at) * row,
                  update.data() + static_cast<size_t>(o * p.seq + s) * row, row);
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
