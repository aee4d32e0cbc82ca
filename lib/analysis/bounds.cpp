// Upper bounds of value-dependent shapes (docs/compiler.md#value-dependent-shapes).
#include "analysis/bounds.h"

#include "ops/node_attrs.h"
#include "support/checked.h"

#include <algorithm>
#include <limits>

namespace ctxkit::analysis {

namespace {

using Bounds = std::vector<std::optional<BoundedOutput>>;

std::optional<int64_t> toDim(std::optional<uint64_t> n) {
  if (!n || *n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(*n);
}

// A constant integer scalar (or one-element tensor) input, or nullopt.
std::optional<int64_t> constantScalar(const kernels::ValueDesc& d) {
  if (!d.present || !d.value || d.value->elementCount() != 1) return std::nullopt;
  if (d.value->type() == ir::ElemType::Int64) return d.value->dataAs<int64_t>()[0];
  if (d.value->type() == ir::ElemType::Int32) return d.value->dataAs<int32_t>()[0];
  return std::nullopt;
}

std::optional<BoundedOutput> nonZeroBound(std::span<const kernels::ValueDesc> inputs) {
  if (inputs.size() != 1 || !inputs[0].present) return std::nullopt;
  const auto count = toDim(ir::elementCount(inputs[0].shape));
  if (!count) return std::nullopt;
  return BoundedOutput{ir::ElemType::Int64, {static_cast<int64_t>(inputs[0].shape.size()), *count}};
}

// boxes [batch, boxes, 4], scores [batch, classes, boxes]: at most max_output_boxes_per_class (0 when omitted, as
// ONNX says) of each batch and class, and never more than there are boxes.
std::optional<BoundedOutput> nmsBound(std::span<const kernels::ValueDesc> inputs) {
  if (inputs.size() < 2 || !inputs[0].present || !inputs[1].present) return std::nullopt;
  const ir::Shape& boxes = inputs[0].shape;
  const ir::Shape& scores = inputs[1].shape;
  if (boxes.size() != 3 || scores.size() != 3) return std::nullopt;
  int64_t perClass = boxes[1];
  if (inputs.size() < 3 || !inputs[2].present) perClass = 0;
  else if (auto m = constantScalar(inputs[2])) perClass = std::clamp(*m, int64_t{0}, boxes[1]);
  const std::optional<uint64_t> pairs = checkedMul(static_cast<uint64_t>(scores[0]), static_cast<uint64_t>(scores[1]));
  const auto rows = pairs ? toDim(checkedMul(*pairs, static_cast<uint64_t>(perClass))) : std::nullopt;
  if (!rows) return std::nullopt;
  return BoundedOutput{ir::ElemType::Int64, {*rows, 3}};
}

}  // namespace

bool isValueDependent(const ir::Node& node, std::span<const kernels::ValueDesc> inputs) {
  switch (node.kind) {
    case ir::OpKind::NonZero:
    case ir::OpKind::NonMaxSuppression: return true;
    case ir::OpKind::TopK: return inputs.size() == 2 && inputs[1].present && !inputs[1].value;
    default: return false;
  }
}

Bounds outputBounds(const ir::Node& node, const kernels::OpContext& ctx, std::span<const kernels::ValueDesc> inputs,
                    std::span<const uint8_t> dynamic, size_t outputCount) {
  Bounds out(outputCount);
  switch (node.kind) {
    case ir::OpKind::NonZero:
      if (outputCount == 1) out[0] = nonZeroBound(inputs);
      return out;
    case ir::OpKind::NonMaxSuppression:
      if (outputCount == 1) out[0] = nmsBound(inputs);
      return out;
    case ir::OpKind::TopK:
      // A computed k is at most the axis' extent: both outputs at most the input's shape.
      if (inputs.size() == 2 && inputs[0].present && inputs[1].present && !inputs[1].value && outputCount == 2) {
        out[0] = BoundedOutput{inputs[0].type, inputs[0].shape};
        out[1] = BoundedOutput{ir::ElemType::Int64, inputs[0].shape};
      }
      if (inputs.size() == 2 && inputs[1].value) break;  // a constant k: its own rule
      return out;
    case ir::OpKind::Squeeze:
      // Without axes Squeeze drops every dimension of extent 1, which a bound does not tell.
      if (inputs.size() < 2 || !inputs[1].present) return out;
      break;
    default: break;
  }
  // Past a root only the shapes carry bounds: a node whose shape depends on the values of a dynamic input (a Reshape
  // to a computed shape) has none.
  if (std::none_of(dynamic.begin(), dynamic.end(), [](uint8_t d) { return d != 0; })) return out;
  if (node.kind == ir::OpKind::Unknown || node.kind == ir::OpKind::EPContext || !kernels::hasKernel(node.kind))
    return out;
  auto r = kernels::inferOutputs(ctx, inputs, outputCount);
  if (!r) return out;
  for (size_t o = 0; o < outputCount && o < r->size(); ++o)
    out[o] = BoundedOutput{(*r)[o].type, std::move((*r)[o].shape)};
  return out;
}

}  // namespace ctxkit::analysis
