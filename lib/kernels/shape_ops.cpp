// Ops that only relabel or move bytes: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Shape, Size, Transpose,
// Concat.
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

// ---- Shape -------------------------------------------------------------------------------------------

namespace {
std::pair<int64_t, int64_t> shapeRange(const OpContext& ctx, int64_t rank) {
  const auto& a = attrsOf<ops::ShapeAttrs>(ctx);
  int64_t start = a.start;
  int64_t end = a.end.value_or(rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {start, std::max(start, end)};
}
}  // namespace

InferResult inferShape(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  auto [start, end] = shapeRange(ctx, static_cast<int64_t>(inputs[0].shape.size()));
  return single(ElemType::Int64, ir::Shape{end - start});
}

Status runShape(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const auto& shape = inputs[0]->shape();
  auto [start, end] = shapeRange(ctx, static_cast<int64_t>(shape.size()));
  int64_t* out = outputs[0]->mutableDataAs<int64_t>();
  for (int64_t i = start; i < end; ++i) out[i - start] = shape[static_cast<size_t>(i)];
  return Status::ok();
}

// ---- Transpose ---------------------------------------------------------------------------------------

namespace {
// Read in place from the attribute, into inline storage: Transpose runs call this on every run.
Expected<Dims> permOf(const OpContext& ctx, size_t rank) {
  Dims perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
  const auto& given = attrsOf<ops::TransposeAttrs>(ctx).perm;
  if (!given) return perm;
  if (given->size() != rank)
    return invalid(ctx, "attribute perm has {} values but input 0 has rank {}", given->size(), rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = (*given)[i];
  Dims seen(rank, 0);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)])
      return invalid(ctx, "attribute perm {} is not a permutation of 0..{}", shapeStr(perm), rank - 1);
    seen[static_cast<size_t>(p)] = 1;
  }
  return perm;
}

template <typename E>
void transposeTyped(const OpContext& ctx, const E* x, E* y, std::span<const int64_t> inShape,
                    std::span<const int64_t> perm) {
  size_t rank = inShape.size();
  Dims inStrides(rank, 1);
  for (size_t i = rank; i-- > 1;) inStrides[i - 1] = inStrides[i] * inShape[i];
  Dims outShape(rank), srcStride(rank);
  for (size_t i = 0; i < rank; ++i) {
    outShape[i] = inShape[static_cast<size_t>(perm[i])];
    srcStride[i] = inStrides[static_cast<size_t>(perm[i])];
  }
  int64_t total = dimProduct(outShape);
  if (total == 0) return;
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  int64_t inner = outShape[rank - 1];
  int64_t innerStride = srcStride[rank - 1];
  // When the output's last dim walks the source with a stride, copy 2-D tiles between it and the output dim
  // that walks the source contiguously, so both sides stay in cache.
  size_t q = rank;
  for (size_t d = 0; d + 1 < rank; ++d)
    if (srcStride[d] == 1 && outShape[d] > 1) q = d;
  if (innerStride != 1 && q < rank && inner > 1) {
    constexpr int64_t kTileQ = 8;
    constexpr int64_t kTileJ = 8;  // small tiles: power-of-two row strides would overflow the L1 ways
    Dims outStrides(rank, 1);
    for (size_t i = rank; i-- > 1;) outStrides[i - 1] = outStrides[i] * outShape[i];
    SmallVec<size_t, kInlineRank> others;
    for (size_t d = 0; d + 1 < rank; ++d)
      if (d != q) others.push_back(d);
    const int64_t lq = outShape[q];
    const int64_t qTiles = (lq + kTileQ - 1) / kTileQ;
    const int64_t otherCount = total / (lq * inner);
    const int64_t dstQ = outStrides[q];
    parallelFor(ctx, static_cast<size_t>(otherCount * qTiles), 16, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) {
        int64_t o = static_cast<int64_t>(t) / qTiles, qt = static_cast<int64_t>(t) % qTiles;
        int64_t rem = o, src = 0, dst = 0;
        for (size_t k = others.size(); k-- > 0;) {
          size_t d = others[k];
          int64_t i = rem % outShape[d];
          rem /= outShape[d];
          src += i * srcStride[d];
          dst += i * outStrides[d];
        }
        int64_t i0 = qt * kTileQ, i1 = std::min(lq, i0 + kTileQ);
        for (int64_t j0 = 0; j0 < inner; j0 += kTileJ) {
          int64_t j1 = std::min(inner, j0 + kTileJ);
          for (int64_t i = i0; i < i1; ++i) {
            E* drow = y + dst + i * dstQ;
            const E* scol = x + src + i;
            for (int64_t j = j0; j < j1; ++j) drow[j] = scol[j * innerStride];
          }
        }
      }
    });
    return;
  }
  int64_t rows = total / inner;
  parallelFor(ctx, static_cast<size_t>(rows), std::max<size_t>(1, 32768 / static_cast<size_t>(inner)),
              [&](size_t r0, size_t r1) {
                for (size_t r = r0; r < r1; ++r) {
                  int64_t rem = static_cast<int64_t>(r), src = 0;
                  for (size_t d = rank - 1; d-- > 0;) {
                    src += (rem % outShape[d]) * srcStride[d];
                    rem /= outShape[d];
                  }
                  E* dst = y + static_cast<int64_t>(r) * inner;
                  const E* s = x + src;
                  if (innerStride == 1) std::memcpy(dst, s, static_cast<size_t>(inner) * sizeof(E));
                  else
                    for (int64_t i = 0; i < inner; ++i) dst[i] = s[i * innerStride];
                }
              });
}

struct Bytes16 {
  uint64_t lo, hi;
};
}  // namespace

InferResult inferTranspose(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkFixedSize(ctx, inputs, 0));
  const auto& in = inputs[0].shape;
  CTX_ASSIGN_OR_RETURN(Dims perm, permOf(ctx, in.size()));
  ir::Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = in[static_cast<size_t>(perm[i])];
  return single(inputs[0].type, std::move(out));
}

Status runTranspose(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  CTX_ASSIGN_OR_RETURN(Dims perm, permOf(ctx, x.rank()));
  switch (ir::elemSize(x.type())) {
    case 1: transposeTyped(ctx, x.dataAs<uint8_t>(), y.mutableDataAs<uint8_t>(), x.shape(), perm); break;
    case 2: transposeTyped(ctx, x.dataAs<uint16_t>(), y.mutableDataAs<uint16_t>(), x.shape(), perm); break;
    case 4: transposeTyped(ctx, x.dataAs<uint32_t>(), y.mutableDataAs<uint32_t>(), x.shape(), perm); break;
    case 8: transposeTyped(ctx, x.dataAs<uint64_t>(), y.mutableDataAs<uint64_t>(), x.shape(), perm); break;
    case 16: transposeTyped(ctx, x.dataAs<Bytes16>(), y.mutableDataAs<Bytes16>(), x.shape(), perm); break;
    default: return unsupported(ctx, "element type {} is not supported", ir::elemTypeName(x.type()));
  }
  return Status::ok();
}

// ---- Concat ------------------------------------------------------------------------------------------

InferResult inferConcat(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, SIZE_MAX));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkFixedSize(ctx, inputs, 0));
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (!inputs[i].present) return invalid(ctx, "input {} is missing", i);
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
  }
  const auto& first = inputs[0].shape;
  int64_t rank = static_cast<int64_t>(first.size());
  if (rank == 0) return invalid(ctx, "input 0 is a scalar but Concat needs rank 1 or more");
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrsOf<ops::AxisAttrs>(ctx).axis, rank, "attribute axis"));
  ir::Shape out = first;
  for (size_t i = 1; i < inputs.size(); ++i) {
    const auto& s = inputs[i].shape;
    bool ok = s.size() == first.size();
    for (size_t d = 0; ok && d < s.size(); ++d)
      if (static_cast<int64_t>(d) != axis && s[d] != first[d]) ok = false;
    if (!ok)
      return invalid(ctx, "input {} has shape {} which does not match input 0 shape {} outside axis {}", i, shapeStr(s),
                     shapeStr(first), axis);
    out[static_cast<size_t>(axis)] += s[static_cast<size_t>(axis)];
  }
  return single(inputs[0].type, std::move(out));
}

Status runConcat(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  int64_t rank = static_cast<int64_t>(y.rank());
  CTX_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx, attrsOf<ops::AxisAttrs>(ctx).axis, rank, "attribute axis"));
  auto a = static_cast<size_t>(axis);
  size_t elem = ir::elemSize(y.type());
  int64_t inner = dimProduct(y.shape(), a + 1, y.rank());
  size_t outRow = static_cast<size_t>(y.shape()[a] * inner) * elem;
  std::byte* dst = y.mutableData();
  const size_t total = y.byteSize();
  if (total == 0 || outRow == 0) return Status::ok();
  // Copies output bytes [begin, end): each output row is the inputs' rows side by side. The output is split by
  // bytes, not by input, so that threads get equal shares however unequal the inputs (a DenseNet block's concat of
  // a wide running tensor and a narrow new one).
  auto copyRange = [&](size_t begin, size_t end) {
    for (size_t p = begin, advanced = 1; p < end && advanced > 0;) {  // (inference made the rows add up to outRow)
      const size_t o = p / outRow, r = p % outRow;
      size_t offset = 0;
      advanced = 0;
      for (const ir::Tensor* in : inputs) {
        const size_t row = static_cast<size_t>(in->shape()[a] * inner) * elem;
        if (r < offset + row) {
          const size_t n = std::min(end - p, offset + row - r);
          std::memcpy(dst + p, in->data() + o * row + (r - offset), n);
          p += n;
          advanced = n;
          break;
        }
        offset += row;
      }
    }
  };
  constexpr size_t kBlock = 4096;  // bytes a chunk item copies; about kBlock / 4 units of work
  parallelForWork(ctx, (total + kBlock - 1) / kBlock, kBlock / 4,
                  [&](size_t b0, size_t b1) { copyRange(b0 * kBlock, std::min(total, b1 * kBlock)); });
  return Status::ok();
}

// ---- Size ------------------------------------------------------------------------------------------------

InferResult inferSize(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  return std::vector<OutputDesc>{OutputDesc{ElemType::Int64, {}}};
}

Status runSize(const OpContext&, RunIns inputs, RunOuts outputs) {
  outputs[0]->mutableDataAs<int64_t>()[0] = dimProduct(inputs[0]->shape());
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
