// Element and slice indexing: GatherElements, ScatterElements, GatherND, ScatterND (reduction none, add, mul,
// max, min) and OneHot. Indices may be negative (counted from the end) and are checked against the data.
#include "cpu/convert.h"
#include "kernels/ops.h"

#include <atomic>
#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

using ops::ScatterReduction;

Expected<int64_t> checkedIndex(const OpContext& ctx, int64_t i, int64_t dim) {
  if (i < -dim || i >= dim) return invalid(ctx, "index {} is out of range for a dimension of {}", i, dim);
  return i < 0 ? i + dim : i;
}

// The data offset of each element of the indices (row-major): its own position with `axis` replaced by the index
// there. The indices are walked as [outer, along, inner] around `axis`: elements that differ outside `axis` never
// reach the same data element, so the (outer, inner range) pieces run on the pool's threads, each in the order the
// elements come (ScatterElements' duplicates along `axis` combine in that order, as on one thread).
// `f(k, offset)` is called for each element k; false when an index is out of range (the first one met is reported).
template <typename F>
Status forEachElementOffset(const OpContext& ctx, std::span<const int64_t> dataShape, const ir::Tensor& indices,
                            size_t axis, F&& f) {
  const std::span<const int64_t> indexShape = indices.shape();
  const size_t rank = dataShape.size();
  Dims strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * dataShape[d];
  const int64_t outer = dimProduct(indexShape, 0, axis), along = indexShape[axis];
  const int64_t inner = dimProduct(indexShape, axis + 1, rank), dim = dataShape[axis];
  if (outer * along * inner == 0) return Status::ok();
  // With the indices' inner dims the data's, an inner position is its own data offset.
  bool innerDense = true;
  for (size_t d = axis + 1; d < rank; ++d) innerDense = innerDense && indexShape[d] == dataShape[d];
  auto offsetOf = [&](int64_t flat, size_t d0, size_t d1) {  // the data offset of position `flat` over dims [d0, d1)
    int64_t off = 0;
    for (size_t d = d1; d-- > d0;) {
      off += flat % indexShape[d] * strides[d];
      flat /= indexShape[d];
    }
    return off;
  };
  std::atomic<bool> bad{false};
  std::atomic<int64_t> badIndex{0};
  auto walk = [&](const auto* idx) {
    // Pieces of the inner positions: about a chunk of work each (at least kMinParallelWork / 2 elements).
    const int64_t piece = std::max<int64_t>(1, std::min(inner, static_cast<int64_t>(kMinParallelWork / 2) / along));
    const int64_t pieces = (inner + piece - 1) / piece;
    parallelForWork(
        ctx, static_cast<size_t>(outer * pieces), static_cast<size_t>(along * piece), [&](size_t t0, size_t t1) {
          for (size_t t = t0; t < t1 && !bad.load(std::memory_order_relaxed); ++t) {
            const int64_t o = static_cast<int64_t>(t) / pieces, i0 = static_cast<int64_t>(t) % pieces * piece;
            const int64_t i1 = std::min(inner, i0 + piece), base = offsetOf(o, 0, axis);
            for (int64_t j = 0; j < along; ++j) {
              const int64_t row = (o * along + j) * inner;
              for (int64_t i = i0; i < i1; ++i) {
                int64_t a = static_cast<int64_t>(idx[row + i]);
                if (a < -dim || a >= dim) {
                  if (!bad.exchange(true)) badIndex.store(a);
                  return;
                }
                if (a < 0) a += dim;
                const int64_t in = innerDense ? i : offsetOf(i, axis + 1, rank);
                f(static_cast<size_t>(row + i), base + a * strides[axis] + in);
              }
            }
          }
        });
  };
  if (indices.type() == ElemType::Int32) walk(indices.dataAs<int32_t>());
  else walk(indices.dataAs<int64_t>());
  if (bad.load()) return checkedIndex(ctx, badIndex.load(), dim).status();
  return Status::ok();
}

template <typename T> T combine(ScatterReduction r, T a, T b) {
  switch (r) {
    case ScatterReduction::Add: return static_cast<T>(a + b);
    case ScatterReduction::Mul: return static_cast<T>(a * b);
    case ScatterReduction::Max: return a > b ? a : b;
    case ScatterReduction::Min: return a < b ? a : b;
    default: return b;
  }
}

// out[offset_k + j] (op)= updates[k * slice + j] for every k and j < slice, the offsets as `forEachOffset(f)` calls
// f(k, offset_k) in order; out already holds the data.
template <typename ForEachOffset>
Status scatterInto(const OpContext& ctx, ScatterReduction r, ForEachOffset&& forEachOffset, int64_t slice,
                   const ir::Tensor& updates, ir::Tensor& out) {
  if (r == ScatterReduction::None && slice == 1) {
    return visitElemSize(ctx, ir::elemSize(out.type()), [&](auto tag) -> Status {
      using T = decltype(tag);
      T* o = reinterpret_cast<T*>(out.mutableData());
      const T* u = reinterpret_cast<const T*>(updates.data());
      return forEachOffset([&](size_t k, int64_t off) { o[off] = u[k]; });
    });
  }
  if (r == ScatterReduction::None) {
    const size_t es = ir::elemSize(out.type());
    return forEachOffset([&](size_t k, int64_t off) {
      std::memcpy(out.mutableData() + static_cast<size_t>(off) * es,
                  updates.data() + k * static_cast<size_t>(slice) * es, static_cast<size_t>(slice) * es);
    });
  }
  return visitType<kNativeNumeric>(out.type(),
                                   [&](auto tag) -> Status {
                                     using T = decltype(tag);
                                     T* o = out.mutableDataAs<T>();
                                     const T* u = updates.dataAs<T>();
                                     return forEachOffset([&](size_t k, int64_t off) {
                                       for (int64_t j = 0; j < slice; ++j)
                                         o[off + j] = combine(r, o[off + j], u[static_cast<int64_t>(k) * slice + j]);
                                     });
                                   })
      .addContext(nodeLabel(ctx));
}

int64_t axisOf(const OpContext& ctx) { return attrsOf<ops::GatherScatterAttrs>(ctx).axis; }

}  // namespace

// ---- GatherElements, ScatterElements -------------------------------------------------------------------

InferResult inferGatherElements(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  const bool scatter = ctx.kind == ir::OpKind::ScatterElements || ctx.kind == ir::OpKind::Scatter;
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, scatter ? 3 : 2, scatter ? 3 : 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, kIndexTypes));
  const auto& data = inputs[0].shape;
  const auto& idx = inputs[1].shape;
  CTX_RETURN_IF_ERROR(normalizeAxis(ctx, axisOf(ctx), static_cast<int64_t>(data.size()), "attribute axis").status());
  if (idx.size() != data.size())
    return invalid(ctx, "indices have shape {} but expected the rank of data {}", shapeStr(idx), shapeStr(data));
  if (scatter) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
    if (inputs[2].shape != idx)
      return invalid(ctx, "updates have shape {} but expected the indices' shape {}", shapeStr(inputs[2].shape),
                     shapeStr(idx));
    return single(inputs[0].type, data);
  }
  return single(inputs[0].type, idx);
}

Status runGatherElements(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& data = *inputs[0];
  const ir::Tensor& indices = *inputs[1];
  ir::Tensor& y = *outputs[0];
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, axisOf(ctx), static_cast<int64_t>(data.rank()), "axis"));
  if (ctx.kind == ir::OpKind::ScatterElements || ctx.kind == ir::OpKind::Scatter) {
    if (y.byteSize()) std::memcpy(y.mutableData(), data.data(), data.byteSize());
    auto offsets = [&](auto&& f) {
      return forEachElementOffset(ctx, data.shape(), indices, static_cast<size_t>(axis), f);
    };
    return scatterInto(ctx, attrsOf<ops::GatherScatterAttrs>(ctx).reduction, offsets, 1, *inputs[2], y);
  }
  return visitElemSize(ctx, ir::elemSize(data.type()), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* in = reinterpret_cast<const T*>(data.data());
    T* out = reinterpret_cast<T*>(y.mutableData());
    return forEachElementOffset(ctx, data.shape(), indices, static_cast<size_t>(axis),
                                [&](size_t k, int64_t off) { out[k] = in[off]; });
  });
}

// ---- GatherND, ScatterND ----------------------------------------------------------------------------------

namespace {

struct NdPlan {
  int64_t batch = 1;   // product of the batch dims
  int64_t rows = 0;    // index tuples per batch
  int64_t depth = 0;   // indices' last dim
  int64_t slice = 1;   // elements per gathered slice
  ir::Shape outShape;  // GatherND's output
};

// With `withShape` false the output shape is left empty (a run's plan: no allocation).
Expected<NdPlan> planNd(const OpContext& ctx, std::span<const int64_t> data, std::span<const int64_t> idx,
                        bool withShape = true) {
  const int64_t b = attrsOf<ops::GatherScatterAttrs>(ctx).batchDims;
  if (idx.empty()) return invalid(ctx, "indices must have rank 1 or more");
  NdPlan p;
  p.depth = idx.back();
  const auto bs = static_cast<size_t>(b);
  if (b < 0 || bs >= std::min(data.size(), idx.size()) || bs + static_cast<size_t>(p.depth) > data.size())
    return invalid(ctx, "indices of shape {} with batch_dims {} do not fit data of shape {}", shapeStr(idx), b,
                   shapeStr(data));
  for (size_t d = 0; d < bs; ++d)
    if (data[d] != idx[d]) return invalid(ctx, "batch dim {} is {} in data but {} in indices", d, data[d], idx[d]);
  p.batch = dimProduct(data, 0, bs);
  p.rows = dimProduct(idx, bs, idx.size() - 1);
  p.slice = dimProduct(data, bs + static_cast<size_t>(p.depth), data.size());
  if (!withShape) return p;
  p.outShape.assign(idx.begin(), idx.end() - 1);
  p.outShape.insert(p.outShape.end(), data.begin() + static_cast<long>(bs + static_cast<size_t>(p.depth)), data.end());
  return p;
}

// Calls `f(k, offset)` with the element offset in data of each index tuple's slice, k in tuple order. Indices are
// read in place and offsets worked out as they go: no copy, no allocation.
template <typename F>
Status forEachNdOffset(const OpContext& ctx, const NdPlan& p, std::span<const int64_t> data, const ir::Tensor& indices,
                       F&& f) {
  const auto bs = static_cast<size_t>(attrsOf<ops::GatherScatterAttrs>(ctx).batchDims);
  const IntView idx(indices);
  const int64_t batchStride = bs == 0 ? 0 : dimProduct(data, bs, data.size());
  for (int64_t bi = 0; bi < p.batch; ++bi)
    for (int64_t r = 0; r < p.rows; ++r) {
      const auto tuple = static_cast<size_t>((bi * p.rows + r) * p.depth);
      int64_t within = 0;  // the tuple's flat index over data dims [bs, bs + depth), then scaled by the slice
      for (int64_t j = 0; j < p.depth; ++j) {
        const size_t d = bs + static_cast<size_t>(j);
        CTX_ASSIGN_OR_RETURN(int64_t v, checkedIndex(ctx, idx[tuple + static_cast<size_t>(j)], data[d]));
        within = within * data[d] + v;
      }
      f(static_cast<size_t>(bi * p.rows + r), bi * batchStride + within * p.slice);
    }
  return Status::ok();
}

}  // namespace

InferResult inferGatherNd(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  const bool scatter = ctx.kind == ir::OpKind::ScatterND;
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, scatter ? 3 : 2, scatter ? 3 : 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, typeBit(ElemType::Int64)));
  CTX_ASSIGN_OR_RETURN(NdPlan p, planNd(ctx, inputs[0].shape, inputs[1].shape));
  if (!scatter) return single(inputs[0].type, std::move(p.outShape));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
  if (inputs[2].shape != p.outShape)
    return invalid(ctx, "updates have shape {} but expected {}", shapeStr(inputs[2].shape), shapeStr(p.outShape));
  return single(inputs[0].type, inputs[0].shape);
}

Status runGatherNd(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& data = *inputs[0];
  ir::Tensor& y = *outputs[0];
  CTX_ASSIGN_OR_RETURN(NdPlan p, planNd(ctx, data.shape(), inputs[1]->shape(), false));
  if (ctx.kind == ir::OpKind::ScatterND) {
    if (y.byteSize()) std::memcpy(y.mutableData(), data.data(), data.byteSize());
    auto offsets = [&](auto&& f) { return forEachNdOffset(ctx, p, data.shape(), *inputs[1], f); };
    return scatterInto(ctx, attrsOf<ops::GatherScatterAttrs>(ctx).reduction, offsets, p.slice, *inputs[2], y);
  }
  const size_t es = ir::elemSize(data.type());
  const size_t bytes = static_cast<size_t>(p.slice) * es;
  return forEachNdOffset(ctx, p, data.shape(), *inputs[1], [&](size_t k, int64_t off) {
    std::memcpy(y.mutableData() + k * bytes, data.data() + static_cast<size_t>(off) * es, bytes);
  });
}

// ---- OneHot --------------------------------------------------------------------------------------------

namespace {

Expected<double> scalarValue(const OpContext& ctx, const ValueDesc& v, std::string_view name) {
  if (!v.value) return unsupported(ctx, "input {} must be a constant to know the output shape", name);
  if (v.value->elementCount() != 1) return invalid(ctx, "input {} must hold one value", name);
  double d = 0;
  CTX_RETURN_IF_ERROR(cpu::convertElements(v.type, v.value->data(), ElemType::Double, &d, 1));
  return d;
}

}  // namespace

InferResult inferOneHot(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kNumericTypes));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 2, kFixedSizeTypes));
  if (dimProduct(inputs[2].shape) != 2) return invalid(ctx, "input 2 (values) must hold [off, on]");
  CTX_ASSIGN_OR_RETURN(double depth, scalarValue(ctx, inputs[1], "depth"));
  const int64_t rank = static_cast<int64_t>(inputs[0].shape.size()) + 1;
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrsOf<ops::GatherScatterAttrs>(ctx).axis, rank, "axis"));
  ir::Shape out = inputs[0].shape;
  out.insert(out.begin() + axis, static_cast<int64_t>(depth));
  return single(inputs[2].type, std::move(out));
}

Status runOneHot(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& indices = *inputs[0];
  ir::Tensor& y = *outputs[0];
  const int64_t rank = static_cast<int64_t>(y.rank());
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrsOf<ops::GatherScatterAttrs>(ctx).axis, rank, "axis"));
  const int64_t depth = y.shape()[static_cast<size_t>(axis)];
  const int64_t outer = dimProduct(y.shape(), 0, static_cast<size_t>(axis));
  const int64_t inner = dimProduct(y.shape(), static_cast<size_t>(axis) + 1, y.rank());
  std::vector<double> idx(static_cast<size_t>(indices.elementCount()));
  CTX_RETURN_IF_ERROR(cpu::convertElements(indices.type(), indices.data(), ElemType::Double, idx.data(), idx.size()));
  const size_t es = ir::elemSize(y.type());
  const std::byte* off = inputs[2]->data();
  const std::byte* on = off + es;
  std::byte* py = y.mutableData();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t d = 0; d < depth; ++d)
      for (int64_t i = 0; i < inner; ++i) {
        auto k = static_cast<int64_t>(idx[static_cast<size_t>(o * inner + i)]);
        if (k < 0) k += depth;
        std::memcpy(py + static_cast<size_t>((o * depth + d) * inner + i) * es, k == d ? on : off, es);
      }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
