// Ops that only relabel the shape of their input's bytes: Reshape, Flatten, Squeeze, Unsqueeze, Identity.
#include "kernels/ops.h"

#include <cstring>
#include <numeric>

namespace ctxkit::kernels::detail {

namespace {

Status checkFixedSize(const OpContext& ctx, InDescs inputs, size_t index) {
  return checkType(ctx, inputs, index, kFixedSizeTypes);
}

// Axes from the attribute (before `inputOpset`) or from input 1 (from `inputOpset`); nullopt when absent.
Expected<std::optional<std::vector<int64_t>>> axesOf(const OpContext& ctx, InDescs inputs, int64_t inputOpset) {
  if (ctx.opset >= inputOpset) {
    if (!optionalInput(inputs, 1)) return std::optional<std::vector<int64_t>>();
    CTX_ASSIGN_OR_RETURN(std::vector<int64_t> axes, knownInts(ctx, inputs, 1, "axes"));
    return std::optional<std::vector<int64_t>>(std::move(axes));
  }
  if (inputs.size() > 1) return invalid(ctx, "expected 1 input before opset {} but got {}", inputOpset, inputs.size());
  const auto& axes = attrsOf<ops::AxesAttrs>(ctx).axes;
  if (!axes) return std::optional<std::vector<int64_t>>();
  return std::optional<std::vector<int64_t>>(std::in_place, axes->begin(), axes->end());
}

}  // namespace

InferResult inferReshape(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  std::vector<int64_t> target;
  if (ctx.opset < 5) {
    CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
    const auto& shape = attrsOf<ops::ReshapeAttrs>(ctx).shape;
    if (shape) target.assign(shape->begin(), shape->end());
  } else {
    CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
    if (!inSet(typeBit(ElemType::Int64), inputs[1].type))
      return invalid(ctx, "input 1 (shape) has type {} but expected int64", ir::elemTypeName(inputs[1].type));
    CTX_ASSIGN_OR_RETURN(target, knownInts(ctx, inputs, 1, "shape"));
  }
  CTX_RETURN_IF_ERROR(checkFixedSize(ctx, inputs, 0));
  const auto& in = inputs[0].shape;
  const bool allowZero = attrsOf<ops::ReshapeAttrs>(ctx).allowZero;
  int64_t inferIndex = -1;
  bool anyZero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == -1) {
      if (inferIndex >= 0) return invalid(ctx, "shape {} has more than one -1", shapeStr(target));
      inferIndex = static_cast<int64_t>(i);
    } else if (d == 0) {
      anyZero = true;
      if (!allowZero) {
        if (i >= in.size())
          return invalid(ctx, "shape {} copies dimension {} (0) but input 0 has shape {}", shapeStr(target), i,
                         shapeStr(in));
        target[i] = in[i];
      }
    } else if (d < -1) {
      return invalid(ctx, "shape {} has invalid dimension {}", shapeStr(target), d);
    }
  }
  if (allowZero && anyZero && inferIndex >= 0)
    return invalid(ctx, "shape {} has both 0 and -1, which allowzero = 1 forbids", shapeStr(target));
  int64_t total = dimProduct(in);
  if (inferIndex >= 0) {
    CheckedInt known = 1;
    for (size_t i = 0; i < target.size(); ++i)
      if (static_cast<int64_t>(i) != inferIndex) known = known * target[i];
    if (!known.ok() || known.value() == 0 || total % known.value() != 0)
      return invalid(ctx, "cannot infer the -1 in shape {} for input shape {}", shapeStr(target), shapeStr(in));
    target[static_cast<size_t>(inferIndex)] = total / known.value();
  }
  if (dimProduct(target) != total)
    return invalid(ctx, "input shape {} ({} elements) cannot be reshaped to {}", shapeStr(in), total, shapeStr(target));
  return single(inputs[0].type, std::move(target));
}

InferResult inferFlatten(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkFixedSize(ctx, inputs, 0));
  const auto& in = inputs[0].shape;
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = attrsOf<ops::AxisAttrs>(ctx).axis;
  if (axis < -rank || axis > rank)
    return invalid(ctx, "attribute axis {} is out of range for rank {} (expected {} to {})", axis, rank, -rank, rank);
  if (axis < 0) axis += rank;
  auto a = static_cast<size_t>(axis);
  return single(inputs[0].type, ir::Shape{dimProduct(in, 0, a), dimProduct(in, a, in.size())});
}

InferResult inferSqueeze(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkFixedSize(ctx, inputs, 0));
  const auto& in = inputs[0].shape;
  CTX_ASSIGN_OR_RETURN(auto axes, axesOf(ctx, inputs, 13));
  std::vector<bool> drop(in.size(), false);
  if (!axes) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    CTX_ASSIGN_OR_RETURN(std::vector<int64_t> norm, normalizeAxes(ctx, *axes, static_cast<int64_t>(in.size()), "axes"));
    for (int64_t a : norm) {
      if (in[static_cast<size_t>(a)] != 1)
        return invalid(ctx, "cannot squeeze axis {} of input shape {}: its size is not 1", a, shapeStr(in));
      drop[static_cast<size_t>(a)] = true;
    }
  }
  ir::Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  return single(inputs[0].type, std::move(out));
}

InferResult inferUnsqueeze(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, ctx.opset >= 13 ? 2 : 1, ctx.opset >= 13 ? 2 : 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkFixedSize(ctx, inputs, 0));
  const auto& in = inputs[0].shape;
  CTX_ASSIGN_OR_RETURN(auto axes, axesOf(ctx, inputs, 13));
  if (!axes) return invalid(ctx, "required attribute axes is missing");
  int64_t outRank = static_cast<int64_t>(in.size() + axes->size());
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> norm, normalizeAxes(ctx, *axes, outRank, "axes"));
  std::vector<bool> inserted(static_cast<size_t>(outRank), false);
  for (int64_t a : norm) inserted[static_cast<size_t>(a)] = true;
  ir::Shape out;
  size_t next = 0;
  for (size_t i = 0; i < inserted.size(); ++i) out.push_back(inserted[i] ? 1 : in[next++]);
  return single(inputs[0].type, std::move(out));
}

InferResult inferIdentity(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkFixedSize(ctx, inputs, 0));
  return single(inputs[0].type, inputs[0].shape);
}

Status runCopy(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  if (x.byteSize() != y.byteSize())
    return nodeError(ctx, ErrorCode::Internal, "output holds {} bytes but the input {}", y.byteSize(), x.byteSize());
  if (x.byteSize() > 0 && x.data() != y.data()) std::memcpy(y.mutableData(), x.data(), x.byteSize());
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
