// Unique: the distinct elements (or slices along `axis`) of X, sorted ascending or in order of first occurrence,
// with the first index of each, the inverse map and the counts. The output length depends on the values, so the
// input must be constant at compile time; otherwise the node runs on the fallback interpreter.
#include "kernels/ops.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace ctxkit::kernels::detail {

namespace {

constexpr TypeSet kUniqueTypes = kNativeNumeric;

struct UniquePlan {
  bool flatten = true;
  size_t axis = 0;
  int64_t outer = 1, length = 0, inner = 1;  // X viewed as [outer, length, inner]; slices are along `length`
  std::vector<int64_t> first;                // per unique slice: its first index, in output order
  std::vector<int64_t> inverse;              // per input slice: its unique slice's output position
  std::vector<int64_t> counts;
};

// Orders slices a and b of X (as [outer, length, inner]) lexicographically.
template <typename T> int compareSlices(const UniquePlan& p, const T* x, int64_t a, int64_t b) {
  for (int64_t o = 0; o < p.outer; ++o)
    for (int64_t i = 0; i < p.inner; ++i) {
      const T va = x[(o * p.length + a) * p.inner + i], vb = x[(o * p.length + b) * p.inner + i];
      if (va < vb) return -1;
      if (vb < va) return 1;
    }
  return 0;
}

template <typename T> void groupSlices(UniquePlan& p, const T* x, bool sorted) {
  std::vector<int64_t> order(static_cast<size_t>(p.length));
  std::iota(order.begin(), order.end(), 0);
  // Stable: equal slices stay in input order, so each group starts at its first occurrence.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compareSlices(p, x, a, b) < 0; });
  std::vector<int64_t> group(static_cast<size_t>(p.length));  // sorted group of each slice
  std::vector<int64_t> groupFirst, groupCount;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || compareSlices(p, x, order[k - 1], order[k]) != 0) {
      groupFirst.push_back(order[k]);
      groupCount.push_back(0);
    }
    group[static_cast<size_t>(order[k])] = static_cast<int64_t>(groupFirst.size()) - 1;
    ++groupCount.back();
  }
  // Output position of each group: its sorted rank, or the rank of its first occurrence.
  std::vector<int64_t> position(groupFirst.size());
  std::iota(position.begin(), position.end(), 0);
  if (!sorted) {
    std::vector<int64_t> byFirst(groupFirst.size());
    std::iota(byFirst.begin(), byFirst.end(), 0);
    std::sort(byFirst.begin(), byFirst.end(), [&](int64_t a, int64_t b) {
      return groupFirst[static_cast<size_t>(a)] < groupFirst[static_cast<size_t>(b)];
    });
    for (size_t k = 0; k < byFirst.size(); ++k) position[static_cast<size_t>(byFirst[k])] = static_cast<int64_t>(k);
  }
  p.first.assign(groupFirst.size(), 0);
  p.counts.assign(groupFirst.size(), 0);
  for (size_t g = 0; g < groupFirst.size(); ++g) {
    p.first[static_cast<size_t>(position[g])] = groupFirst[g];
    p.counts[static_cast<size_t>(position[g])] = groupCount[g];
  }
  p.inverse.resize(static_cast<size_t>(p.length));
  for (size_t s = 0; s < group.size(); ++s) p.inverse[s] = position[static_cast<size_t>(group[s])];
}

Expected<UniquePlan> planUnique(const OpContext& ctx, const ir::Tensor& x) {
  UniquePlan p;
  const ops::UniqueAttrs& attrs = attrsOf<ops::UniqueAttrs>(ctx);
  p.flatten = !attrs.axis;
  if (p.flatten) {
    p.length = static_cast<int64_t>(x.elementCount());
  } else {
    CTX_ASSIGN_OR_RETURN(int64_t a, normalizeAxis(ctx, *attrs.axis, static_cast<int64_t>(x.rank()), "attribute axis"));
    p.axis = static_cast<size_t>(a);
    p.outer = dimProduct(x.shape(), 0, p.axis);
    p.length = x.shape()[p.axis];
    p.inner = dimProduct(x.shape(), p.axis + 1, x.rank());
  }
  const bool sorted = attrs.sorted;
  CTX_RETURN_IF_ERROR(visitType<kUniqueTypes>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    groupSlices<T>(p, x.dataAs<T>(), sorted);
    return Status::ok();
  }));
  return p;
}

}  // namespace

InferResult inferUnique(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 4));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kUniqueTypes));
  if (!inputs[0].value) return unsupported(ctx, "input 0 must be known: Unique's output shape depends on its values");
  CTX_ASSIGN_OR_RETURN(UniquePlan p, planUnique(ctx, *inputs[0].value));
  const auto unique = static_cast<int64_t>(p.first.size());
  ir::Shape y{unique};
  if (!p.flatten) {
    y = inputs[0].shape;
    y[p.axis] = unique;
  }
  std::vector<OutputDesc> outs{
      {inputs[0].type, y}, {ElemType::Int64, {unique}}, {ElemType::Int64, {p.length}}, {ElemType::Int64, {unique}}};
  outs.resize(outputCount);
  return outs;
}

Status runUnique(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  CTX_ASSIGN_OR_RETURN(UniquePlan p, planUnique(ctx, x));
  const size_t element = ir::elemSize(x.type());
  const auto row = static_cast<size_t>(p.inner) * element;
  const auto unique = static_cast<int64_t>(p.first.size());
  std::byte* y = outputs[0]->mutableData();
  for (int64_t o = 0; o < p.outer; ++o)
    for (int64_t u = 0; u < unique; ++u)
      std::memcpy(y + static_cast<size_t>(o * unique + u) * row,
                  x.data() + static_cast<size_t>(o * p.length + p.first[static_cast<size_t>(u)]) * row, row);
  const std::vector<int64_t>* lists[] = {&p.first, &p.inverse, &p.counts};
  for (size_t i = 1; i < outputs.size(); ++i)
    if (outputs[i]) std::copy(lists[i - 1]->begin(), lists[i - 1]->end(), outputs[i]->mutableDataAs<int64_t>());
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
