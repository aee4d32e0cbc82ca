// Shared kernel helpers: node-scoped error text, input checks, axes, broadcasting.
#include "kernels/kernel_util.h"

#include "support/checked.h"

#include <algorithm>
#include <limits>

namespace ctxkit::kernels::detail {

std::string nodeLabel(const OpContext& ctx) {
  if (ctx.nodeName.empty()) return fmt::format("unnamed node ({})", ir::opKindName(ctx.kind));
  return fmt::format("node '{}' ({})", ctx.nodeName, ir::opKindName(ctx.kind));
}

std::string typeSetNames(TypeSet set) {
  std::string s;
  for (int i = 0; i <= ir::kMaxElemType; ++i) {
    if ((set & (TypeSet{1} << i)) == 0) continue;
    if (!s.empty()) s += ", ";
    s += ir::elemTypeName(static_cast<ElemType>(i));
  }
  return s;
}

Status checkInputs(const OpContext& ctx, InDescs inputs, size_t min, size_t max) {
  if (inputs.size() < min || inputs.size() > max) {
    if (min == max) return invalid(ctx, "expected {} inputs but got {}", min, inputs.size());
    return invalid(ctx, "expected {} to {} inputs but got {}", min, max, inputs.size());
  }
  for (size_t i = 0; i < min; ++i)
    if (!inputs[i].present) return invalid(ctx, "required input {} is missing", i);
  return Status::ok();
}

Status checkOutputs(const OpContext& ctx, size_t count, size_t min, size_t max) {
  if (count < min || count > max) {
    if (min == max) return invalid(ctx, "expected {} outputs but got {}", min, count);
    return invalid(ctx, "expected {} to {} outputs but got {}", min, max, count);
  }
  return Status::ok();
}

Status checkType(const OpContext& ctx, InDescs inputs, size_t index, TypeSet allowed) {
  ElemType t = inputs[index].type;
  if (!inSet(allowed, t))
    return invalid(ctx, "input {} has type {} but expected one of {}", index, ir::elemTypeName(t),
                   typeSetNames(allowed));
  return Status::ok();
}

Status checkSameType(const OpContext& ctx, InDescs inputs, size_t a, size_t b) {
  if (inputs[a].type != inputs[b].type)
    return invalid(ctx, "input {} has type {} but input {} has type {}", b, ir::elemTypeName(inputs[b].type), a,
                   ir::elemTypeName(inputs[a].type));
  return Status::ok();
}

Status checkRank(const OpContext& ctx, InDescs inputs, size_t index, size_t rank) {
  if (inputs[index].shape.size() != rank)
    return invalid(ctx, "input {} has shape {} but expected rank {}", index, shapeStr(inputs[index].shape), rank);
  return Status::ok();
}

const ValueDesc* optionalInput(InDescs inputs, size_t index) {
  if (index >= inputs.size() || !inputs[index].present) return nullptr;
  return &inputs[index];
}

Expected<int64_t> normalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    if (rank == 0) return invalid(ctx, "{} {} is out of range for a scalar", what, axis);
    return invalid(ctx, "{} {} is out of range for rank {} (expected {} to {})", what, axis, rank, -rank, rank - 1);
  }
  return axis < 0 ? axis + rank : axis;
}

Expected<std::vector<int64_t>> normalizeAxes(const OpContext& ctx, std::span<const int64_t> listed, int64_t rank,
                                             std::string_view what) {
  std::vector<int64_t> axes(listed.begin(), listed.end());
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& a : axes) {
    CTX_ASSIGN_OR_RETURN(a, normalizeAxis(ctx, a, rank, what));
    if (seen[static_cast<size_t>(a)]) return invalid(ctx, "{} lists axis {} twice", what, a);
    seen[static_cast<size_t>(a)] = true;
  }
  return axes;
}

std::vector<int64_t> tensorInts(const ir::Tensor& t) {
  std::vector<int64_t> v;
  size_t n = static_cast<size_t>(t.elementCount());
  v.reserve(n);
  switch (t.type()) {
    case ElemType::Int64: v.assign(t.dataAs<int64_t>(), t.dataAs<int64_t>() + n); break;
    case ElemType::Int32:
      for (size_t i = 0; i < n; ++i) v.push_back(t.dataAs<int32_t>()[i]);
      break;
    case ElemType::Uint8:
      for (size_t i = 0; i < n; ++i) v.push_back(t.dataAs<uint8_t>()[i]);
      break;
    default: break;
  }
  return v;
}

Expected<std::vector<int64_t>> knownInts(const OpContext& ctx, InDescs inputs, size_t index, std::string_view name) {
  const ValueDesc& in = inputs[index];
  if (!inSet(kIndexTypes, in.type))
    return invalid(ctx, "input {} ({}) has type {} but expected int32 or int64", index, name,
                   ir::elemTypeName(in.type));
  if (in.shape.size() > 1)
    return invalid(ctx, "input {} ({}) has shape {} but expected rank 1", index, name, shapeStr(in.shape));
  if (in.value == nullptr)
    return unsupported(ctx, "input {} ({}) must be a known constant to infer the output shape", index, name);
  if (in.value->type() != in.type || in.value->shape() != in.shape)
    return invalid(ctx, "input {} ({}) value does not match its declared type and shape", index, name);
  return tensorInts(*in.value);
}

int64_t dimProduct(std::span<const int64_t> dims, size_t begin, size_t end) {
  // Saturates instead of overflowing: shapes declared in a file can be anything, and a saturated count then fails
  // the caller's size checks instead of wrapping into a plausible one.
  int64_t p = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i)
    if (__builtin_mul_overflow(p, dims[i], &p)) return std::numeric_limits<int64_t>::max();
  return p;
}

std::optional<ir::Shape> broadcastShapes(std::span<const int64_t> a, std::span<const int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  ir::Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else return std::nullopt;
  }
  return out;
}

bool broadcastsTo(std::span<const int64_t> from, std::span<const int64_t> to) {
  if (from.size() > to.size()) return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

std::string shapeStr(std::span<const int64_t> shape) { return ir::shapeToString(shape); }

Status checkShapeSize(const OpContext& ctx, std::span<const int64_t> shape) {
  auto n = checkedElementCount(shape);
  if (!n || *n > (uint64_t{1} << 62)) return invalid(ctx, "output shape {} is too large or negative", shapeStr(shape));
  return Status::ok();
}

Status checkOutputSize(const OpContext& ctx, const OutputDesc& out) {
  CTX_RETURN_IF_ERROR(checkShapeSize(ctx, out.shape));
  if (out.type == ElemType::String) return Status::ok();
  auto bytes = ir::storageBytes(out.type, *checkedElementCount(out.shape));
  if (!bytes) return invalid(ctx, "output shape {} is too large", shapeStr(out.shape));
  if (*bytes <= ir::memoryLimit()) return Status::ok();  // the message is made only for an error (every load checks)
  auto within = ir::checkMemoryLimit(
      *bytes, fmt::format("its {} output of shape {}", ir::elemTypeName(out.type), shapeStr(out.shape)));
  // InvalidGraph: a compiler refuses the model (instead of leaving the node to fail at run time).
  return invalid(ctx, "{}", within.error().message());
}

Dims broadcastStrides(std::span<const int64_t> in, std::span<const int64_t> out) {
  Dims strides(out.size(), 0);
  size_t lead = out.size() - in.size();
  int64_t s = 1;
  for (size_t i = in.size(); i-- > 0;) {
    strides[lead + i] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  return strides;
}

BroadcastWalk BroadcastWalk::make(std::span<const int64_t> outShape, std::span<const std::span<const int64_t>> ins) {
  BroadcastWalk w;
  w.operands = 1 + ins.size();
  w.total = dimProduct(outShape);
  std::array<Dims, kMaxOperands> st;
  st[0] = broadcastStrides(outShape, outShape);
  for (size_t i = 0; i < ins.size(); ++i) st[i + 1] = broadcastStrides(ins[i], outShape);
  // Drop unit output dims, then merge neighbours that every operand walks contiguously (or not at all).
  Dims dims;
  SmallVec<std::array<int64_t, kMaxOperands>, kInlineRank> strides;
  for (size_t d = 0; d < outShape.size(); ++d) {
    if (outShape[d] == 1) continue;
    std::array<int64_t, kMaxOperands> s{};
    for (size_t o = 0; o < w.operands; ++o) s[o] = st[o][d];
    if (!dims.empty()) {
      bool merge = true;
      for (size_t o = 0; o < w.operands; ++o)
        if (strides.back()[o] != s[o] * outShape[d]) merge = false;
      if (merge) {
        dims.back() *= outShape[d];
        strides.back() = s;
        continue;
      }
    }
    dims.push_back(outShape[d]);
    strides.push_back(s);
  }
  if (dims.empty()) return w;  // one element: inner 1, all offsets 0
  w.inner = dims.back();
  w.innerStride = strides.back();
  dims.pop_back();
  strides.pop_back();
  w.outer = std::move(dims);
  w.strides = std::move(strides);
  return w;
}

std::vector<ValueDesc> describeInputs(RunIns inputs, bool withValues) {
  std::vector<ValueDesc> descs;
  describeInputsInto(inputs, withValues, descs);
  return descs;
}

void describeInputsInto(RunIns inputs, bool withValues, std::vector<ValueDesc>& descs) {
  descs.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    ValueDesc& d = descs[i];
    d.present = inputs[i] != nullptr;
    d.type = inputs[i] ? inputs[i]->type() : ElemType::Undefined;
    d.value = inputs[i] && withValues ? inputs[i] : nullptr;
    if (inputs[i]) d.shape.assign(inputs[i]->shape().begin(), inputs[i]->shape().end());
    else d.shape.clear();
  }
}

}  // namespace ctxkit::kernels::detail
