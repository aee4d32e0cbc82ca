// Ops whose output shape depends on input values: NonZero (the indices of the non-zero elements, row-major) and
// Compress (the slices, along an axis or of the flattened input, where a boolean condition holds). At compile time
// they need constant inputs; otherwise they run on the fallback interpreter, which knows the values.
#include "cpu/convert.h"
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

// Whether each element of `t` is non-zero (NaN counts as non-zero, as in C).
Expected<std::vector<bool>> nonZeroMask(const OpContext& ctx, const ir::Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.elementCount()));
  if (t.type() == ElemType::Bool) {
    std::vector<bool> m(v.size());
    for (size_t i = 0; i < m.size(); ++i) m[i] = t.dataAs<uint8_t>()[i] != 0;
    return m;
  }
  if (!cpu::isConvertible(t.type()) || t.type() == ElemType::Int4 || t.type() == ElemType::Uint4)
    return unsupported(ctx, "input of type {} is not supported", ir::elemTypeName(t.type()));
  CTX_RETURN_IF_ERROR(cpu::convertElements(t.type(), t.data(), ElemType::Double, v.data(), v.size()));
  std::vector<bool> m(v.size());
  for (size_t i = 0; i < m.size(); ++i) m[i] = v[i] != 0.0;
  return m;
}

}  // namespace

InferResult inferNonZero(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  if (!inputs[0].value) return unsupported(ctx, "input 0 must be known: NonZero's output shape depends on its values");
  CTX_ASSIGN_OR_RETURN(auto mask, nonZeroMask(ctx, *inputs[0].value));
  const auto count = static_cast<int64_t>(std::count(mask.begin(), mask.end(), true));
  return single(ElemType::Int64, {static_cast<int64_t>(inputs[0].shape.size()), count});
}

Status runNonZero(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  CTX_ASSIGN_OR_RETURN(auto mask, nonZeroMask(ctx, x));
  const size_t rank = x.rank();
  const auto count = static_cast<size_t>(y.shape()[1]);
  int64_t* out = y.mutableDataAs<int64_t>();
  size_t k = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) continue;
    size_t rem = i;
    for (size_t d = rank; d-- > 0;) {
      const auto dim = static_cast<size_t>(x.shape()[d]);
      out[d * count + k] = static_cast<int64_t>(rem % dim);
      rem /= dim;
    }
    ++k;
  }
  return Status::ok();
}

// Compress (input, condition) with optional attribute axis.
namespace {

struct CompressPlan {
  bool flatten = false;
  size_t axis = 0;
  std::vector<int64_t> kept;  // indices along the axis (or of the flattened input) that are selected
};

Expected<CompressPlan> planCompress(const OpContext& ctx, std::span<const int64_t> shape, const ir::Tensor& condition) {
  CompressPlan p;
  const std::optional<int64_t>& axis = attrsOf<ops::OptionalAxisAttrs>(ctx).axis;
  p.flatten = !axis;
  int64_t length = dimProduct(shape);
  if (!p.flatten) {
    CTX_ASSIGN_OR_RETURN(int64_t a, normalizeAxis(ctx, *axis, static_cast<int64_t>(shape.size()), "attribute axis"));
    p.axis = static_cast<size_t>(a);
    length = shape[p.axis];
  }
  if (condition.rank() != 1)
    return invalid(ctx, "input 1 (condition) has shape {} but expected rank 1", shapeStr(condition.shape()));
  const auto n = std::min<int64_t>(length, condition.shape()[0]);  // a shorter condition selects from the start
  for (int64_t i = 0; i < n; ++i)
    if (condition.dataAs<uint8_t>()[i] != 0) p.kept.push_back(i);
  return p;
}

}  // namespace

InferResult inferCompress(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, typeBit(ElemType::Bool)));
  if (!inputs[1].value) return unsupported(ctx, "input 1 (condition) must be known: the output shape depends on it");
  CTX_ASSIGN_OR_RETURN(CompressPlan p, planCompress(ctx, inputs[0].shape, *inputs[1].value));
  ir::Shape out = p.flatten ? ir::Shape{} : inputs[0].shape;
  if (p.flatten) out.push_back(static_cast<int64_t>(p.kept.size()));
  else out[p.axis] = static_cast<int64_t>(p.kept.size());
  return single(inputs[0].type, std::move(out));
}

Status runCompress(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  CTX_ASSIGN_OR_RETURN(CompressPlan p, planCompress(ctx, x.shape(), *inputs[1]));
  const size_t element = ir::elemSize(x.type());
  if (element == 0) return unsupported(ctx, "input of type {} is not supported", ir::elemTypeName(x.type()));
  const int64_t outer = p.flatten ? 1 : dimProduct(x.shape(), 0, p.axis);
  const int64_t inner = p.flatten ? 1 : dimProduct(x.shape(), p.axis + 1, x.rank());
  const int64_t length = p.flatten ? static_cast<int64_t>(x.elementCount()) : x.shape()[p.axis];
  const auto row = static_cast<size_t>(inner) * element;
  std::byte* out = y.mutableData();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k : p.kept) {
      std::memcpy(out, x.data() + static_cast<size_t>((o * length + k) * inner) * element, row);
      out += row;
    }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
