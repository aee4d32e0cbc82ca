// Ops along one axis: CumSum and CumProd (exclusive, reverse) and TopK (largest or smallest, ties broken by
// the lower index).
#include "kernels/ops.h"
#include "kernels/thread_scratch.h"

#include <algorithm>
#include <numeric>

namespace ctxkit::kernels::detail {

namespace {

// [outer, length, inner] around `axis`.
struct AxisSplit {
  int64_t outer = 1, length = 1, inner = 1;
};

AxisSplit splitAt(std::span<const int64_t> shape, int64_t axis) {
  auto a = static_cast<size_t>(axis);
  return {dimProduct(shape, 0, a), shape[a], dimProduct(shape, a + 1, shape.size())};
}

}  // namespace

// ---- CumSum, CumProd ---------------------------------------------------------------------------------------

InferResult inferCumulative(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kNumericTypes));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, kIndexTypes));
  if (inputs[0].shape.empty()) return invalid(ctx, "input 0 must have rank 1 or more");
  return single(inputs[0].type, inputs[0].shape);
}

Status runCumulative(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const IntView axisValue(*inputs[1]);
  if (axisValue.size() != 1) return invalid(ctx, "input 1 (axis) must hold one value");
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, axisValue[0], static_cast<int64_t>(x.rank()), "axis"));
  const ops::CumulativeAttrs& a = attrsOf<ops::CumulativeAttrs>(ctx);
  const bool prod = ctx.kind == ir::OpKind::CumProd;
  const AxisSplit s = splitAt(x.shape(), axis);
  return visitType<kNativeNumeric>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* py = outputs[0]->mutableDataAs<T>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        T acc = prod ? T(1) : T(0);
        for (int64_t step = 0; step < s.length; ++step) {
          int64_t l = a.reverse ? s.length - 1 - step : step;
          int64_t k = (o * s.length + l) * s.inner + i;
          if (a.exclusive) {
            py[k] = acc;
            acc = prod ? static_cast<T>(acc * px[k]) : static_cast<T>(acc + px[k]);
          } else {
            acc = prod ? static_cast<T>(acc * px[k]) : static_cast<T>(acc + px[k]);
            py[k] = acc;
          }
        }
      }
    return Status::ok();
  });
}

// ---- TopK ------------------------------------------------------------------------------------------------

InferResult inferTopK(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 2, 2));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kNumericTypes));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, typeBit(ElemType::Int64)));
  const auto& x = inputs[0].shape;
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrsOf<ops::TopKAttrs>(ctx).axis,
                                                   static_cast<int64_t>(x.size()), "attribute axis"));
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> k, knownInts(ctx, inputs, 1, "K"));
  if (k.size() != 1 || k[0] < 0 || k[0] > x[static_cast<size_t>(axis)])
    return invalid(ctx, "K must be one value in [0, {}]", x[static_cast<size_t>(axis)]);
  ir::Shape out = x;
  out[static_cast<size_t>(axis)] = k[0];
  return std::vector<OutputDesc>{{inputs[0].type, out}, {ElemType::Int64, out}};
}

Status runTopK(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const ops::TopKAttrs& a = attrsOf<ops::TopKAttrs>(ctx);
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, a.axis, static_cast<int64_t>(x.rank()), "axis"));
  const AxisSplit s = splitAt(x.shape(), axis);
  const int64_t k = outputs[0]->shape()[static_cast<size_t>(axis)];
  int64_t* pi = outputs[1]->mutableDataAs<int64_t>();
  return visitType<kNativeNumeric>(x.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.dataAs<T>();
    T* pv = outputs[0]->mutableDataAs<T>();
    std::vector<int64_t>& order = threadScratch().sortOrder;
    if (k > 0 && k * 4 <= s.length) {
      // Few of many: a heap of the best k (value, index) pairs so far, its worst on top; most elements lose one
      // comparison against that worst value. The same order as below (ties by the lower index).
      using Entry = std::pair<T, int64_t>;
      auto before = [&](const Entry& p, const Entry& q) {
        if (p.first != q.first) return a.largest ? p.first > q.first : p.first < q.first;
        return p.second < q.second;
      };
      thread_local std::vector<Entry> heapScratch;
      Entry* heap = scratchAtLeast(heapScratch, static_cast<size_t>(k));
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t i = 0; i < s.inner; ++i) {
          const T* src = px + o * s.length * s.inner + i;
          for (int64_t j = 0; j < k; ++j) heap[j] = {src[j * s.inner], j};
          std::make_heap(heap, heap + k, before);
          // A later element enters only by value (its index is above every index in the heap), so the scan needs
          // one comparison against the worst value; contiguous rows test a block of 16 at once first.
          T worst = heap[0].first;
          auto enters = [&](T v) { return a.largest ? v > worst : v < worst; };
          auto push = [&](int64_t l) {
            std::pop_heap(heap, heap + k, before);
            heap[k - 1] = {src[l * s.inner], l};
            std::push_heap(heap, heap + k, before);
            worst = heap[0].first;
          };
          int64_t l = k;
          if (s.inner == 1) {
            constexpr int64_t kBlock = 16;
            for (; l + kBlock <= s.length; l += kBlock) {
              bool any = false;
              for (int64_t j = 0; j < kBlock; ++j) any |= enters(src[l + j]);
              if (!any) continue;
              for (int64_t j = 0; j < kBlock; ++j)
                if (enters(src[l + j])) push(l + j);
            }
          }
          for (; l < s.length; ++l)
            if (enters(src[l * s.inner])) push(l);
          std::sort_heap(heap, heap + k, before);
          for (int64_t j = 0; j < k; ++j) {
            const int64_t dst = (o * k + j) * s.inner + i;
            pv[dst] = heap[j].first;
            pi[dst] = heap[j].second;
          }
        }
      return Status::ok();
    }
    order.resize(static_cast<size_t>(s.length));
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        const T* src = px + o * s.length * s.inner + i;
        std::iota(order.begin(), order.end(), int64_t{0});
        auto before = [&](int64_t p, int64_t q) {
          T u = src[p * s.inner], v = src[q * s.inner];
          if (u != v) return a.largest ? u > v : u < v;
          return p < q;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          int64_t dst = (o * k + j) * s.inner + i;
          pv[dst] = src[order[static_cast<size_t>(j)] * s.inner];
          pi[dst] = order[static_cast<size_t>(j)];
        }
      }
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
