// Transpose: any permutation of any rank, copied in cache-sized tiles when the innermost output dimension strides.
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

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
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
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

}  // namespace ctxkit::kernels::detail
