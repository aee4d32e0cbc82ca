// Ops whose output shape depends on input values: NonZero (the indices of the non-zero elements, row-major) and
// Compress (the slices, along an axis or of the flattened input, where a boolean condition holds). At compile time
// they need constant inputs; otherwise they run on the fallback interpreter, which knows the values.
#include "cpu/convert.h"
#include "kernels/ops.h"

#include <array>
#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

// Calls `f(i)` for each non-zero element i of `t` in order (NaN counts as non-zero, as in C). The elements are
// converted to double a block at a time on the stack: no copy of the whole input.
template <typename F> Status forEachNonZero(const OpContext& ctx, const ir::Tensor& t, F&& f) {
  const auto n = static_cast<size_t>(t.elementCount());
  if (t.type() == ElemType::Bool) {
    for (size_t i = 0; i < n; ++i)
      if (t.dataAs<uint8_t>()[i] != 0) f(i);
    return Status::ok();
  }
  if (!cpu::isConvertible(t.type()) || t.type() == ElemType::Int4 || t.type() == ElemType::Uint4)
    return unsupported(ctx, "input of type {} is not supported", ir::elemTypeName(t.type()));
  constexpr size_t kBlock = 256;  // even: a block of packed 4-bit elements starts on a byte
  std::array<double, kBlock> v;
  for (size_t at = 0; at < n; at += kBlock) {
    const size_t len = std::min(kBlock, n - at);
    const std::byte* src = t.data() + ir::storageBytes(t.type(), at).value_or(0);
    CTX_RETURN_IF_ERROR(cpu::convertElements(t.type(), src, ElemType::Double, v.data(), len));
    for (size_t i = 0; i < len; ++i)
      if (v[i] != 0.0) f(at + i);
  }
  return Status::ok();
}

Expected<int64_t> countNonZero(const OpContext& ctx, const ir::Tensor& t) {
  int64_t count = 0;
  CTX_RETURN_IF_ERROR(forEachNonZero(ctx, t, [&](size_t) { ++count; }));
  return count;
}

// Writes the coordinates of x's non-zero elements into y ([rank, count]).
Status writeNonZero(const OpContext& ctx, const ir::Tensor& x, ir::Tensor& y) {
  const size_t rank = x.rank();
  const auto count = static_cast<size_t>(y.shape()[1]);
  int64_t* out = y.mutableDataAs<int64_t>();
  size_t k = 0;
  return forEachNonZero(ctx, x, [&](size_t i) {
    if (k >= count) return;
    size_t rem = i;
    for (size_t d = rank; d-- > 0;) {
      const auto dim = static_cast<size_t>(x.shape()[d]);
      out[d * count + k] = static_cast<int64_t>(rem % dim);
      rem /= dim;
    }
    ++k;
  });
}

}  // namespace

InferResult inferNonZero(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  if (!inputs[0].value) return unsupported(ctx, "input 0 must be known: NonZero's output shape depends on its values");
  CTX_ASSIGN_OR_RETURN(const int64_t count, countNonZero(ctx, *inputs[0].value));
  return single(ElemType::Int64, {static_cast<int64_t>(inputs[0].shape.size()), count});
}

Status runNonZero(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  return writeNonZero(ctx, *inputs[0], *outputs[0]);
}

Status evaluateNonZero(const OpContext& ctx, RunIns inputs, OutputSink& sink, EvalState&) {
  if (inputs.size() != 1 || !inputs[0]) return invalid(ctx, "takes 1 input but {} were given", inputs.size());
  const ir::Tensor& x = *inputs[0];
  CTX_ASSIGN_OR_RETURN(const int64_t count, countNonZero(ctx, x));
  const std::array<int64_t, 2> shape{static_cast<int64_t>(x.rank()), count};
  CTX_ASSIGN_OR_RETURN(ir::Tensor * y, sink.bind(0, ElemType::Int64, shape));
  return writeNonZero(ctx, x, *y);
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
