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

constexpr int64_t kRangeLimit = int64_t{1} << 31;
constexpr uint64_t kMaxRangeElements = 64;

bool withinLimit(const ValueRanges& r) {
  return std::all_of(r.begin(), r.end(),
                     [](const ValueRange& v) { return v.lo <= v.hi && v.lo >= -kRangeLimit && v.hi <= kRangeLimit; });
}

// The range of input i's values: its own, or a small constant integer's values exactly.
std::optional<ValueRanges> rangesOf(const BoundInputs& in, size_t i) {
  if (i >= in.bound.size() || !in.bound[i].present) return std::nullopt;
  if (i < in.ranges.size() && in.ranges[i]) return *in.ranges[i];
  const ir::Tensor* t = in.bound[i].value;
  if (!t || t->elementCount() > kMaxRangeElements) return std::nullopt;
  ValueRanges r(t->elementCount());
  for (size_t e = 0; e < r.size(); ++e) {
    int64_t v = 0;
    if (t->type() == ir::ElemType::Int64) v = t->dataAs<int64_t>()[e];
    else if (t->type() == ir::ElemType::Int32) v = t->dataAs<int32_t>()[e];
    else if (t->type() == ir::ElemType::Bool) v = t->dataAs<uint8_t>()[e] != 0;
    else return std::nullopt;
    r[e] = ValueRange{v, v};
  }
  return withinLimit(r) ? std::optional<ValueRanges>(std::move(r)) : std::nullopt;
}

// Input i's shape bounds, when the input is there and both have its rank.
bool hasShapes(const BoundInputs& in, size_t i) {
  return i < in.bound.size() && i < in.low.size() && in.bound[i].present &&
         in.bound[i].shape.size() == in.low[i].shape.size();
}

ValueRange mulRange(ValueRange a, ValueRange b) {
  const int64_t p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};  // |ends| <= 2^31: no overflow
  return ValueRange{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
}

// An elementwise op on two ranges; nullopt when the op's result is not bounded by the ends (a divisor that may be 0
// or negative, a dividend that may be negative: integer division truncates).
std::optional<ValueRange> binaryRange(ir::OpKind kind, ValueRange a, ValueRange b) {
  switch (kind) {
    case ir::OpKind::Add: return ValueRange{a.lo + b.lo, a.hi + b.hi};
    case ir::OpKind::Sub: return ValueRange{a.lo - b.hi, a.hi - b.lo};
    case ir::OpKind::Mul: return mulRange(a, b);
    case ir::OpKind::Div:
      if (b.lo != b.hi || b.lo <= 0 || a.lo < 0) return std::nullopt;
      return ValueRange{a.lo / b.lo, a.hi / b.lo};
    case ir::OpKind::Min: return ValueRange{std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    case ir::OpKind::Max: return ValueRange{std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    default: return std::nullopt;
  }
}

// ONNX Slice of a 1-D tensor of n elements: the indices it takes.
std::optional<std::vector<int64_t>> sliceIndices(int64_t n, int64_t start, int64_t end, int64_t step) {
  if (step == 0) return std::nullopt;
  auto clampTo = [](int64_t v, int64_t lo, int64_t hi) { return std::clamp(v, lo, hi); };
  if (start < 0) start = start < -n ? -n - 1 : start;  // (keeps start + n from overflowing)
  if (end < 0) end = end < -n ? -n - 1 : end;
  if (start < 0) start += n;
  if (end < 0) end += n;
  std::vector<int64_t> taken;
  if (step > 0) {
    start = clampTo(start, 0, n);
    end = clampTo(end, 0, n);
    for (int64_t i = start; i<end; i = step> end - i ? end : i + step) taken.push_back(i);
  } else {
    start = clampTo(start, 0, n - 1);
    end = clampTo(end, -1, n - 1);
    for (int64_t i = start; i > end; i = step < end - i ? end : i + step) taken.push_back(i);
  }
  return taken;
}

std::optional<ValueRanges> sliceRange(const BoundInputs& in) {
  auto data = rangesOf(in, 0);
  if (!data || in.bound[0].shape.size() != 1 || in.bound.size() < 3) return std::nullopt;
  std::optional<int64_t> start = constantScalar(in.bound[1]), end = constantScalar(in.bound[2]), axis = 0, step = 1;
  if (in.bound.size() > 3 && in.bound[3].present) axis = constantScalar(in.bound[3]);
  if (in.bound.size() > 4 && in.bound[4].present) step = constantScalar(in.bound[4]);
  if (!start || !end || !axis || !step || (*axis != 0 && *axis != -1)) return std::nullopt;
  const auto taken = sliceIndices(static_cast<int64_t>(data->size()), *start, *end, *step);
  if (!taken) return std::nullopt;
  ValueRanges out;
  for (int64_t i : *taken) out.push_back((*data)[static_cast<size_t>(i)]);
  return out;
}

std::optional<ValueRanges> gatherRange(const ir::Node& node, const BoundInputs& in) {
  auto data = rangesOf(in, 0);
  if (!data || in.bound.size() != 2 || in.bound[0].shape.size() != 1 || !in.bound[1].value) return std::nullopt;
  const int64_t axis = node.attrs.getInt("axis", 0);
  if (axis != 0 && axis != -1) return std::nullopt;
  const ir::Tensor& idx = *in.bound[1].value;
  const auto n = static_cast<int64_t>(data->size());
  ValueRanges out;
  for (uint64_t e = 0; e < idx.elementCount(); ++e) {
    int64_t i = idx.type() == ir::ElemType::Int64   ? idx.dataAs<int64_t>()[e]
                : idx.type() == ir::ElemType::Int32 ? idx.dataAs<int32_t>()[e]
                                                    : n;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return std::nullopt;
    out.push_back((*data)[static_cast<size_t>(i)]);
  }
  return out;
}

std::optional<ValueRanges> shapeRange(const ir::Node& node, const BoundInputs& in) {
  if (!hasShapes(in, 0)) return std::nullopt;
  const ir::Shape& up = in.bound[0].shape;
  const ir::Shape& low = in.low[0].shape;
  const auto rank = static_cast<int64_t>(up.size());
  auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t{0}, rank); };
  const int64_t start = clampAxis(node.attrs.getInt("start", 0)), end = clampAxis(node.attrs.getInt("end", rank));
  ValueRanges out;
  for (int64_t d = start; d < end; ++d)
    out.push_back(ValueRange{low[static_cast<size_t>(d)], up[static_cast<size_t>(d)]});
  return out;
}

std::optional<ValueRanges> reduceRange(const ir::Node& node, const BoundInputs& in) {
  auto data = rangesOf(in, 0);
  if (!data || data->empty() || in.bound[0].shape.size() > 1 || node.attrs.getInt("noop_with_empty_axes", 0) != 0)
    return std::nullopt;
  ValueRange acc = (*data)[0];
  for (size_t e = 1; e < data->size(); ++e) {
    const ValueRange v = (*data)[e];
    switch (node.kind) {
      case ir::OpKind::ReduceMin: acc = ValueRange{std::min(acc.lo, v.lo), std::min(acc.hi, v.hi)}; break;
      case ir::OpKind::ReduceMax: acc = ValueRange{std::max(acc.lo, v.lo), std::max(acc.hi, v.hi)}; break;
      case ir::OpKind::ReduceSum: acc = ValueRange{acc.lo + v.lo, acc.hi + v.hi}; break;
      default: acc = mulRange(acc, v); break;
    }
    if (!withinLimit({acc})) return std::nullopt;
  }
  return ValueRanges{acc};
}

// `op` on two ranges element by element, a single element broadcasting (a 1-D shape computation): nullopt when
// either is missing or `op` gives nothing for a pair.
template <typename Op>
std::optional<ValueRanges> pairwise(const std::optional<ValueRanges>& a, const std::optional<ValueRanges>& b,
                                    uint64_t count, Op op) {
  if (!a || !b || a->empty() || b->empty()) return std::nullopt;
  if ((a->size() != count && a->size() != 1) || (b->size() != count && b->size() != 1)) return std::nullopt;
  ValueRanges out(count);
  for (size_t e = 0; e < count; ++e) {
    std::optional<ValueRange> r = op((*a)[a->size() == 1 ? 0 : e], (*b)[b->size() == 1 ? 0 : e]);
    if (!r) return std::nullopt;
    out[e] = *r;
  }
  return out;
}

std::optional<ValueRanges> elementwiseRange(ir::OpKind kind, const BoundInputs& in, uint64_t count) {
  if (in.bound.size() != 2) return std::nullopt;
  return pairwise(rangesOf(in, 0), rangesOf(in, 1), count,
                  [kind](ValueRange x, ValueRange y) { return binaryRange(kind, x, y); });
}

// Where(cond, a, b) with cond not known: each element one of a's or b's (PyTorch writes Expand's shape as
// Where(Equal(shape, -1), ones, shape)).
// Where a condition's element is known (its range one value), that side's alone.
std::optional<ValueRanges> whereRange(const BoundInputs& in, uint64_t count) {
  if (in.bound.size() != 3) return std::nullopt;
  auto either = pairwise(rangesOf(in, 1), rangesOf(in, 2), count, [](ValueRange x, ValueRange y) {
    return std::optional<ValueRange>(ValueRange{std::min(x.lo, y.lo), std::max(x.hi, y.hi)});
  });
  const auto cond = rangesOf(in, 0);
  if (!either || !cond || (cond->size() != count && cond->size() != 1)) return either;
  const auto a = pairwise(rangesOf(in, 1), rangesOf(in, 1), count, [](ValueRange x, ValueRange) { return x; });
  const auto b = pairwise(rangesOf(in, 2), rangesOf(in, 2), count, [](ValueRange x, ValueRange) { return x; });
  for (size_t e = 0; e < count; ++e) {
    const ValueRange c = (*cond)[cond->size() == 1 ? 0 : e];
    if (c.lo == c.hi) (*either)[e] = (c.lo != 0 ? *a : *b)[e];
  }
  return either;
}

// Equal: an element is 1 where both sides are one and the same value, 0 where their ranges do not meet, else either
// (Where(Equal(shape, -1), ones, shape) asks whether a dimension is -1, which a range of extents answers).
std::optional<ValueRanges> equalRange(const BoundInputs& in, uint64_t count) {
  if (in.bound.size() != 2) return std::nullopt;
  return pairwise(rangesOf(in, 0), rangesOf(in, 1), count, [](ValueRange x, ValueRange y) {
    if (x.lo == x.hi && y.lo == y.hi && x.lo == y.lo) return std::optional<ValueRange>(ValueRange{1, 1});
    if (x.hi < y.lo || y.hi < x.lo) return std::optional<ValueRange>(ValueRange{0, 0});
    return std::optional<ValueRange>(ValueRange{0, 1});
  });
}

// Reshape to a shape computed at run time: a copied (0) or inferred (-1) dimension bounded from the input.
std::optional<BoundedOutput> reshapeBound(const ir::Node& node, const BoundInputs& in) {
  auto target = rangesOf(in, 1);
  if (!target || !hasShapes(in, 0)) return std::nullopt;
  const ir::Shape& up = in.bound[0].shape;
  const ir::Shape& low = in.low[0].shape;
  const bool allowZero = node.attrs.getInt("allowzero", 0) != 0;
  ir::Shape b(target->size()), l(target->size());
  std::optional<size_t> inferred;
  for (size_t i = 0; i < target->size(); ++i) {
    const ValueRange r = (*target)[i];
    if (r.lo == -1 && r.hi == -1) {
      if (inferred) return std::nullopt;
      inferred = i;
      continue;
    }
    if (r.lo < 0) return std::nullopt;  // may be -1, or not valid at all: unsure
    b[i] = r.hi;
    l[i] = r.lo;
    if (!allowZero && r.lo == 0) {
      // 0 copies the input's dimension i.
      if (i >= up.size()) return std::nullopt;
      b[i] = std::max(r.hi, up[i]);
      l[i] = r.hi == 0 ? low[i] : 0;
    }
  }
  if (inferred) {
    // The inferred dimension is the input's elements over the others' product: at most the most elements over the
    // least product, at least the least elements over the largest product. A product of 0 leaves nothing to infer
    // (ONNX Runtime refuses it), so each other dimension counts as at least 1.
    std::optional<uint64_t> least = 1, most = 1;
    for (size_t i = 0; i < b.size(); ++i)
      if (i != *inferred) {
        least = least ? checkedMul(*least, static_cast<uint64_t>(std::max<int64_t>(l[i], 1))) : std::nullopt;
        most = most ? checkedMul(*most, static_cast<uint64_t>(b[i])) : std::nullopt;
      }
    const auto upElements = ir::elementCount(up), lowElements = ir::elementCount(low);
    if (!least || *least == 0 || !upElements || !lowElements) return std::nullopt;
    const auto dim = toDim(*upElements / *least);
    if (!dim) return std::nullopt;
    b[*inferred] = *dim;
    l[*inferred] = most && *most != 0 ? static_cast<int64_t>(*lowElements / *most) : 0;
  }
  return BoundedOutput{in.bound[0].type, std::move(b), std::move(l)};
}

// Expand to a computed shape: each dimension the input's or the shape's (one of them 1). A valid run gives the larger
// of the two, or 0 when one is 0 and the other 0 or 1: at least the larger of their lower bounds unless a 0 can pair
// with a 1.
std::optional<BoundedOutput> expandBound(const BoundInputs& in) {
  auto target = rangesOf(in, 1);
  if (!target || !hasShapes(in, 0)) return std::nullopt;
  const ir::Shape& up = in.bound[0].shape;
  const ir::Shape& low = in.low[0].shape;
  const size_t rank = std::max(up.size(), target->size());
  ir::Shape b(rank), l(rank);
  for (size_t k = 0; k < rank; ++k) {
    const size_t fromEnd = rank - k;
    const int64_t inUp = fromEnd <= up.size() ? up[up.size() - fromEnd] : 1;
    const int64_t inLow = fromEnd <= low.size() ? low[low.size() - fromEnd] : 1;
    const ValueRange s = fromEnd <= target->size() ? (*target)[target->size() - fromEnd] : ValueRange{1, 1};
    if (s.lo < 0) return std::nullopt;
    b[k] = std::max(inUp, s.hi);
    const bool zero = (inLow == 0 && s.lo <= 1) || (s.lo == 0 && inLow <= 1);
    l[k] = zero ? 0 : std::min(std::max(inLow, s.lo), b[k]);
  }
  return BoundedOutput{in.bound[0].type, std::move(b), std::move(l)};
}

std::optional<BoundedOutput> constantOfShapeBound(const ir::Node& node, const BoundInputs& in) {
  auto target = rangesOf(in, 0);
  if (!target) return std::nullopt;
  ir::Shape b(target->size()), l(target->size());
  for (size_t k = 0; k < b.size(); ++k) {
    if ((*target)[k].hi < 0) return std::nullopt;
    b[k] = (*target)[k].hi;
    l[k] = std::max<int64_t>((*target)[k].lo, 0);
  }
  const ir::Attribute* value = node.attrs.find("value");
  return BoundedOutput{value ? value->t.type() : ir::ElemType::Float, std::move(b), std::move(l)};
}

// Range(start, limit, delta) of integers: max(ceil((limit - start) / delta), 0) elements, delta constant.
std::optional<BoundedOutput> rangeBound(const BoundInputs& in) {
  if (in.bound.size() != 3) return std::nullopt;
  auto start = rangesOf(in, 0), limit = rangesOf(in, 1), delta = rangesOf(in, 2);
  if (!start || !limit || !delta || start->size() != 1 || limit->size() != 1 || delta->size() != 1) return std::nullopt;
  const int64_t d = (*delta)[0].lo;
  if (d != (*delta)[0].hi || d == 0) return std::nullopt;
  auto count = [&](int64_t span) { return span <= 0 ? 0 : (span + std::abs(d) - 1) / std::abs(d); };
  const ValueRange s = (*start)[0], e = (*limit)[0];
  const int64_t most = d > 0 ? count(e.hi - s.lo) : count(s.hi - e.lo);
  const int64_t least = d > 0 ? count(e.lo - s.hi) : count(s.lo - e.hi);
  return BoundedOutput{in.bound[0].type, {most}, {least}};
}

// Slice with computed starts or ends: never more than its input along the sliced axes (over the step).
std::optional<BoundedOutput> computedSliceBound(const BoundInputs& in) {
  if (in.bound.size() < 3 || !hasShapes(in, 0) || in.bound[1].shape.size() != 1) return std::nullopt;
  const ir::Shape& up = in.bound[0].shape;
  const auto rank = static_cast<int64_t>(up.size());
  const int64_t count = in.bound[1].shape[0];
  // The starts' count is exact only when its shape is static.
  if (in.dynamic.size() > 1 && in.dynamic[1]) return std::nullopt;
  std::vector<int64_t> axes(static_cast<size_t>(count)), steps(static_cast<size_t>(count), 1);
  for (int64_t k = 0; k < count; ++k) axes[static_cast<size_t>(k)] = k;
  auto constants = [&](size_t i, std::vector<int64_t>& into) {
    if (i >= in.bound.size() || !in.bound[i].present) return true;
    auto r = rangesOf(in, i);
    if (!r || r->size() != into.size() || !in.bound[i].value) return false;
    for (size_t k = 0; k < into.size(); ++k) into[k] = (*r)[k].lo;
    return true;
  };
  if (!constants(3, axes) || !constants(4, steps)) return std::nullopt;
  ir::Shape b = up, l(up.size(), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (a < 0 || a >= rank || steps[k] == 0) return std::nullopt;
    const int64_t step = std::abs(steps[k]);
    b[static_cast<size_t>(a)] = (up[static_cast<size_t>(a)] + step - 1) / step;
  }
  // Axes not sliced keep their lower bounds.
  for (size_t d = 0; d < up.size(); ++d)
    if (std::find_if(axes.begin(), axes.end(), [&](int64_t a) { return (a < 0 ? a + rank : a) == int64_t(d); }) ==
        axes.end())
      l[d] = in.low[0].shape[d];
  return BoundedOutput{in.bound[0].type, std::move(b), std::move(l)};
}

std::optional<BoundedOutput> nonZeroBound(std::span<const kernels::ValueDesc> inputs) {
  if (inputs.size() != 1 || !inputs[0].present) return std::nullopt;
  const auto count = toDim(ir::elementCount(inputs[0].shape));
  if (!count) return std::nullopt;
  const auto rank = static_cast<int64_t>(inputs[0].shape.size());
  return BoundedOutput{ir::ElemType::Int64, {rank, *count}, {rank, 0}};
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
  return BoundedOutput{ir::ElemType::Int64, {*rows, 3}, {0, 3}};
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

Bounds outputBounds(const ir::Node& node, const kernels::OpContext& ctx, const BoundInputs& in, size_t outputCount) {
  Bounds out(outputCount);
  const std::span<const kernels::ValueDesc> inputs = in.bound;
  auto computed = [&](size_t i) { return i < inputs.size() && inputs[i].present && !inputs[i].value; };
  switch (node.kind) {
    case ir::OpKind::NonZero:
      if (outputCount == 1) out[0] = nonZeroBound(inputs);
      return out;
    case ir::OpKind::NonMaxSuppression:
      if (outputCount == 1) out[0] = nmsBound(inputs);
      return out;
    case ir::OpKind::TopK:
      // A computed k is at most the axis' extent, and at most the most k's range holds.
      if (inputs.size() == 2 && computed(1) && hasShapes(in, 0) && outputCount == 2) {
        const auto rank = static_cast<int64_t>(inputs[0].shape.size());
        int64_t axis = node.attrs.getInt("axis", -1);
        if (axis < 0) axis += rank;
        if (axis < 0 || axis >= rank) return out;
        ir::Shape b = inputs[0].shape, l = in.low[0].shape;
        const auto a = static_cast<size_t>(axis);
        l[a] = 0;
        if (auto k = rangesOf(in, 1); k && k->size() == 1) {
          b[a] = std::min(b[a], std::max<int64_t>((*k)[0].hi, 0));
          l[a] = std::min(in.low[0].shape[a], std::max<int64_t>((*k)[0].lo, 0));
        }
        out[0] = BoundedOutput{inputs[0].type, b, l};
        out[1] = BoundedOutput{ir::ElemType::Int64, std::move(b), std::move(l)};
      }
      if (inputs.size() == 2 && inputs[1].value) break;  // a constant k: its own rule
      return out;
    case ir::OpKind::Reshape:
      if (!computed(1)) break;
      if (outputCount == 1) out[0] = reshapeBound(node, in);
      return out;
    case ir::OpKind::Expand:
      if (!computed(1)) break;
      if (outputCount == 1) out[0] = expandBound(in);
      return out;
    case ir::OpKind::ConstantOfShape:
      if (!computed(0)) break;
      if (outputCount == 1) out[0] = constantOfShapeBound(node, in);
      return out;
    case ir::OpKind::Range:
      if (!computed(0) && !computed(1) && !computed(2)) break;
      if (outputCount == 1) out[0] = rangeBound(in);
      return out;
    case ir::OpKind::Slice:
      if (!computed(1) && !computed(2)) break;
      if (outputCount == 1) out[0] = computedSliceBound(in);
      return out;
    case ir::OpKind::Squeeze:
      // Without axes (an input from opset 13, an attribute before) Squeeze drops every dimension of extent 1, which a
      // bound does not tell.
      if ((inputs.size() < 2 || !inputs[1].present) && !node.attrs.has("axes")) return out;
      break;
    default: break;
  }
  // Past a root only the shapes carry bounds: a node whose shape depends on the values of a dynamic input has none
  // (other than those above).
  if (std::none_of(in.dynamic.begin(), in.dynamic.end(), [](uint8_t d) { return d != 0; })) return out;
  if (node.kind == ir::OpKind::Unknown || node.kind == ir::OpKind::EPContext || !kernels::hasKernel(node.kind))
    return out;
  auto r = kernels::inferOutputs(ctx, inputs, outputCount);
  if (!r) return out;
  // The rule on the lower bounds gives lower bounds (shape rules grow with their inputs' extents); where it cannot
  // run (an extent of 0 it refuses), 0.
  auto lows = kernels::inferOutputs(ctx, in.low, outputCount);
  for (size_t o = 0; o < outputCount && o < r->size(); ++o) {
    ir::Shape low((*r)[o].shape.size(), 0);
    if (lows && o < lows->size() && (*lows)[o].shape.size() == low.size())
      for (size_t d = 0; d < low.size(); ++d) low[d] = std::min((*lows)[o].shape[d], (*r)[o].shape[d]);
    out[o] = BoundedOutput{(*r)[o].type, std::move((*r)[o].shape), std::move(low)};
  }
  return out;
}

std::optional<ValueRanges> outputRange(const ir::Node& node, const BoundInputs& in, uint64_t count) {
  if (count > kMaxRangeElements || in.bound.empty()) return std::nullopt;
  std::optional<ValueRanges> r;
  switch (node.kind) {
    case ir::OpKind::Shape: r = shapeRange(node, in); break;
    case ir::OpKind::Size:
      if (hasShapes(in, 0)) {
        const auto most = ir::elementCount(in.bound[0].shape), least = ir::elementCount(in.low[0].shape);
        if (most && least && *most <= static_cast<uint64_t>(kRangeLimit))
          r = ValueRanges{{static_cast<int64_t>(*least), static_cast<int64_t>(*most)}};
      }
      break;
    case ir::OpKind::Cast: {
      const auto to = static_cast<ir::ElemType>(node.attrs.getInt("to", 0));
      if (to != ir::ElemType::Int64 && to != ir::ElemType::Int32) return std::nullopt;
      r = rangesOf(in, 0);
      // An int32 holds up to 2^31 - 1.
      if (r && to == ir::ElemType::Int32 &&
          std::any_of(r->begin(), r->end(), [](const ValueRange& v) { return v.hi >= kRangeLimit; }))
        return std::nullopt;
      break;
    }
    case ir::OpKind::Identity:
    case ir::OpKind::Squeeze:
    case ir::OpKind::Unsqueeze:
    case ir::OpKind::Reshape:
    case ir::OpKind::Flatten: r = rangesOf(in, 0); break;  // the same elements in the same order
    case ir::OpKind::Gather: r = gatherRange(node, in); break;
    case ir::OpKind::Slice: r = sliceRange(in); break;
    case ir::OpKind::Concat: {
      if (node.attrs.getInt("axis", 0) != 0 && node.attrs.getInt("axis", 0) != -1) return std::nullopt;
      ValueRanges all;
      for (size_t i = 0; i < in.bound.size(); ++i) {
        auto part = rangesOf(in, i);
        if (!part || in.bound[i].shape.size() != 1) return std::nullopt;
        all.insert(all.end(), part->begin(), part->end());
      }
      r = std::move(all);
      break;
    }
    case ir::OpKind::Add:
    case ir::OpKind::Sub:
    case ir::OpKind::Mul:
    case ir::OpKind::Div:
    case ir::OpKind::Min:
    case ir::OpKind::Max: r = elementwiseRange(node.kind, in, count); break;
    case ir::OpKind::ReduceMin:
    case ir::OpKind::ReduceMax:
    case ir::OpKind::ReduceSum:
    case ir::OpKind::ReduceProd: r = reduceRange(node, in); break;
    case ir::OpKind::Where: r = whereRange(in, count); break;
    case ir::OpKind::Equal: r = equalRange(in, count); break;
    default: return std::nullopt;
  }
  if (!r || r->size() != count || !withinLimit(*r)) return std::nullopt;
  return r;
}

}  // namespace ctxkit::analysis
