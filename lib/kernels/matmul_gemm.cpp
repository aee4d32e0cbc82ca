// MatMul (numpy semantics: batched broadcasting, 1-D operands) and Gemm (transposes, alpha, beta, bias C).
#include "cpu/gemm.h"
#include "cpu/vec_math.h"
#include "kernels/ops.h"

namespace ctxkit::kernels::detail {

namespace {

constexpr TypeSet kMatTypes = kFloatTypes | typeBit(ElemType::Int32) | typeBit(ElemType::Int64) |
                              typeBit(ElemType::Uint32) | typeBit(ElemType::Uint64);
constexpr TypeSet kNaiveTypes = typeBit(ElemType::Double) | typeBit(ElemType::Int32) | typeBit(ElemType::Int64) |
                                typeBit(ElemType::Uint32) | typeBit(ElemType::Uint64);

// MatMul's operands viewed as batches of matrices. Planned on every run, so in inline storage (Dims).
struct MatMulPlan {
  Dims batch;                         // broadcast batch dims
  Dims aBatchStrides, bBatchStrides;  // in matrices, per batch dim (0 = broadcast)
  int64_t M = 1, K = 1, N = 1;
  Dims outShape;
};

Expected<MatMulPlan> planMatMul(const OpContext& ctx, std::span<const int64_t> a, std::span<const int64_t> b) {
  if (a.empty() || b.empty())
    return invalid(ctx, "inputs have shapes {} and {} but MatMul needs rank 1 or more", shapeStr(a), shapeStr(b));
  // A 1-D A is a 1 x K row, a 1-D B a K x 1 column; neither has batch dims.
  const bool aVector = a.size() == 1, bVector = b.size() == 1;
  MatMulPlan p;
  p.M = aVector ? 1 : a[a.size() - 2];
  p.K = a.back();
  p.N = bVector ? 1 : b.back();
  const int64_t bK = bVector ? b[0] : b[b.size() - 2];
  if (bK != p.K)
    return invalid(ctx, "inputs have shapes {} and {} whose inner dimensions {} and {} differ", shapeStr(a),
                   shapeStr(b), p.K, bK);
  std::span<const int64_t> aBatch = aVector ? a.first(0) : a.first(a.size() - 2);
  std::span<const int64_t> bBatch = bVector ? b.first(0) : b.first(b.size() - 2);
  const size_t rank = std::max(aBatch.size(), bBatch.size());
  for (size_t d = 0; d < rank; ++d) {
    const size_t aLead = rank - aBatch.size(), bLead = rank - bBatch.size();
    const int64_t da = d < aLead ? 1 : aBatch[d - aLead], db = d < bLead ? 1 : bBatch[d - bLead];
    if (da != db && da != 1 && db != 1)
      return invalid(ctx, "inputs have shapes {} and {} whose batch dimensions do not broadcast", shapeStr(a),
                     shapeStr(b));
    p.batch.push_back(da == 1 ? db : da);
  }
  p.aBatchStrides = broadcastStrides(aBatch, p.batch);
  p.bBatchStrides = broadcastStrides(bBatch, p.batch);
  p.outShape = p.batch;
  if (!aVector) p.outShape.push_back(p.M);
  if (!bVector) p.outShape.push_back(p.N);
  return p;
}

// Per batch: matrix offsets (in matrices) of A and B.
void batchOffsets(const MatMulPlan& p, std::vector<int64_t>& aOff, std::vector<int64_t>& bOff) {
  int64_t count = dimProduct(p.batch);
  aOff.assign(static_cast<size_t>(count), 0);
  bOff.assign(static_cast<size_t>(count), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rem = i, oa = 0, ob = 0;
    for (size_t d = p.batch.size(); d-- > 0;) {
      int64_t idx = rem % p.batch[d];
      rem /= p.batch[d];
      oa += idx * p.aBatchStrides[d];
      ob += idx * p.bBatchStrides[d];
    }
    aOff[static_cast<size_t>(i)] = oa;
    bOff[static_cast<size_t>(i)] = ob;
  }
}

// acc + a * b, wrapping for integers (computed unsigned: signed overflow is undefined in C++).
template <typename T> T mulAdd(T acc, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(acc) + static_cast<U>(static_cast<U>(a) * static_cast<U>(b))));
  } else {
    return acc + a * b;
  }
}

template <typename T> void naiveMatMul(const T* a, const T* b, T* c, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    T* ci = c + i * N;
    for (int64_t j = 0; j < N; ++j) ci[j] = T(0);
    for (int64_t k = 0; k < K; ++k) {
      T av = a[i * K + k];
      const T* bk = b + k * N;
      for (int64_t j = 0; j < N; ++j) ci[j] = mulAdd(ci[j], av, bk[j]);
    }
  }
}

}  // namespace

InferResult inferMatMul(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kMatTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  CTX_ASSIGN_OR_RETURN(MatMulPlan p, planMatMul(ctx, inputs[0].shape, inputs[1].shape));
  return single(inputs[0].type, ir::Shape(p.outShape.begin(), p.outShape.end()));
}

Status runMatMul(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& a = *inputs[0];
  const ir::Tensor& b = *inputs[1];
  ir::Tensor& y = *outputs[0];
  // B in panels is bound as its stored 1-D tensor: plan with its logical K x N.
  std::array<int64_t, 2> panelShape{};
  if (ctx.panelsB) panelShape = {static_cast<int64_t>(ctx.panelsB->k), static_cast<int64_t>(ctx.panelsB->n)};
  const std::span<const int64_t> bShape = ctx.panelsB ? std::span<const int64_t>(panelShape) : b.shape();
  CTX_ASSIGN_OR_RETURN(MatMulPlan p, planMatMul(ctx, a.shape(), bShape));
  const ops::Epilogue& act = attrsOf<ops::MatMulAttrs>(ctx).epilogue;
  const int64_t M = p.M, N = p.N, K = p.K;
  const int64_t batches = dimProduct(p.batch);
  if (batches == 0 || M == 0 || N == 0) return Status::ok();
  // Grow once per thread. Bound to references because the lambdas below run on pool threads too, where the
  // names of thread_local variables would denote those threads' own (empty) copies.
  thread_local std::vector<int64_t> aOffScratch, bOffScratch;
  std::vector<int64_t>& aOff = aOffScratch;
  std::vector<int64_t>& bOff = bOffScratch;
  batchOffsets(p, aOff, bOff);
  if (a.type() != ElemType::Float) {
    return visitType<kNaiveTypes>(a.type(), [&](auto tag) -> Status {
      using T = decltype(tag);
      parallelFor(ctx, static_cast<size_t>(batches), 1, [&](size_t b0, size_t b1) {
        for (size_t i = b0; i < b1; ++i)
          naiveMatMul<T>(a.dataAs<T>() + aOff[i] * M * K, b.dataAs<T>() + bOff[i] * K * N,
                         y.mutableDataAs<T>() + static_cast<int64_t>(i) * M * N, M, N, K);
      });
      return Status::ok();
    });
  }
  const float* pa = a.dataAs<float>();
  const float* pb = b.dataAs<float>();
  float* py = y.mutableDataAs<float>();
  bool bShared = true;  // every batch uses the same B matrix and A's batches are consecutive
  for (int64_t i = 0; i < batches; ++i)
    if (bOff[static_cast<size_t>(i)] != 0 || aOff[static_cast<size_t>(i)] != i) bShared = false;
  if (ctx.panelsB) {
    // B was prepared in panels (a 2-D constant, so A's batches are consecutive rows): one tall GEMM.
    cpu::sgemmPanels(false, static_cast<size_t>(batches * M), 1.0f, pa, static_cast<size_t>(K), *ctx.panelsB, 0.0f, py,
                     static_cast<size_t>(N), ctx.pool);
  } else if (bShared) {
    // One tall GEMM: (batches * M) x K times K x N.
    cpu::sgemm(false, false, static_cast<size_t>(batches * M), static_cast<size_t>(N), static_cast<size_t>(K), 1.0f, pa,
               static_cast<size_t>(K), pb, static_cast<size_t>(N), 0.0f, py, static_cast<size_t>(N), ctx.pool);
  } else {
    int threads = ctx.pool ? ctx.pool->threads() : 1;
    // Many small products (attention heads): one thread per product; few large ones: threads inside cpu::sgemm.
    bool perBatch = batches >= 2 * threads;
    auto one = [&](size_t i, ThreadPool* pool) {
      cpu::sgemm(false, false, static_cast<size_t>(M), static_cast<size_t>(N), static_cast<size_t>(K), 1.0f,
                 pa + aOff[i] * M * K, static_cast<size_t>(K), pb + bOff[i] * K * N, static_cast<size_t>(N), 0.0f,
                 py + static_cast<int64_t>(i) * M * N, static_cast<size_t>(N), pool);
    };
    if (perBatch) {
      parallelForWork(ctx, static_cast<size_t>(batches), static_cast<size_t>(M * N * K), [&](size_t b0, size_t b1) {
        for (size_t i = b0; i < b1; ++i) one(i, nullptr);
      });
    } else {
      for (size_t i = 0; i < static_cast<size_t>(batches); ++i) one(i, ctx.pool);
    }
  }
  applyFusedActivation(act, py, static_cast<size_t>(y.elementCount()));
  return Status::ok();
}

// ---- Gemm --------------------------------------------------------------------------------------------

InferResult inferGemm(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kMatTypes));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 0, 2));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 1, 2));
  const ops::GemmAttrs& attrs = attrsOf<ops::GemmAttrs>(ctx);
  const bool transA = attrs.transA, transB = attrs.transB;
  const auto& as = inputs[0].shape;
  const auto& bs = inputs[1].shape;
  int64_t M = transA ? as[1] : as[0], K = transA ? as[0] : as[1];
  int64_t Kb = transB ? bs[1] : bs[0], N = transB ? bs[0] : bs[1];
  if (K != Kb)
    return invalid(ctx, "inputs have shapes {} and {} (transA={}, transB={}) whose inner dimensions {} and {} differ",
                   shapeStr(as), shapeStr(bs), transA ? 1 : 0, transB ? 1 : 0, K, Kb);
  ir::Shape out{M, N};
  if (const ValueDesc* c = optionalInput(inputs, 2)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
    if (!broadcastsTo(c->shape, out))
      return invalid(ctx, "input 2 has shape {} which does not broadcast to the output shape {}", shapeStr(c->shape),
                     shapeStr(out));
  }
  return single(inputs[0].type, std::move(out));
}

Status runGemm(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& a = *inputs[0];
  const ir::Tensor& b = *inputs[1];
  const ir::Tensor* c = inputs.size() > 2 ? inputs[2] : nullptr;
  ir::Tensor& y = *outputs[0];
  const ops::GemmAttrs& attrs = attrsOf<ops::GemmAttrs>(ctx);
  const bool transA = attrs.transA, transB = attrs.transB;
  const float alpha = attrs.alpha, beta = attrs.beta;
  const ops::Epilogue& act = attrs.epilogue;
  const int64_t M = y.shape()[0], N = y.shape()[1];
  const int64_t K = transA ? a.shape()[0] : a.shape()[1];
  if (M == 0 || N == 0) return Status::ok();
  Dims cStrides;
  if (c) cStrides = broadcastStrides(c->shape(), y.shape());
  auto cIndex = [&](int64_t i, int64_t j) { return i * cStrides[0] + j * cStrides[1]; };

  if (a.type() == ElemType::Float) {
    float* py = y.mutableDataAs<float>();
    bool useC = c && beta != 0.0f;
    if (useC) {
      const float* pc = c->dataAs<float>();
      for (int64_t i = 0; i < M; ++i)  // each row: beta times C's row (or its one broadcast value)
        cpu::vecBinary(cpu::BinaryOp::Mul, pc + i * cStrides[0], static_cast<size_t>(cStrides[1]), &beta, 0, py + i * N,
                       static_cast<size_t>(N));
    }
    if (ctx.panelsB)
      cpu::sgemmPanels(transA, static_cast<size_t>(M), alpha, a.dataAs<float>(), static_cast<size_t>(a.shape()[1]),
                       *ctx.panelsB, useC ? 1.0f : 0.0f, py, static_cast<size_t>(N), ctx.pool);
    else
      cpu::sgemm(transA, transB, static_cast<size_t>(M), static_cast<size_t>(N), static_cast<size_t>(K), alpha,
                 a.dataAs<float>(), static_cast<size_t>(a.shape()[1]), b.dataAs<float>(),
                 static_cast<size_t>(b.shape()[1]), useC ? 1.0f : 0.0f, py, static_cast<size_t>(N), ctx.pool);
    applyFusedActivation(act, py, static_cast<size_t>(M * N));
    return Status::ok();
  }
  return visitType<kNaiveTypes>(a.type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* pa = a.dataAs<T>();
    const T* pb = b.dataAs<T>();
    T* py = y.mutableDataAs<T>();
    const int64_t lda = a.shape()[1], ldb = b.shape()[1];
    bool exact = alpha == 1.0f && beta == 1.0f;  // integers stay exact when no scaling is asked for
    parallelFor(ctx, static_cast<size_t>(M), 1, [&](size_t i0, size_t i1) {
      for (int64_t i = static_cast<int64_t>(i0); i < static_cast<int64_t>(i1); ++i) {
        for (int64_t j = 0; j < N; ++j) {
          T sum = T(0);
          for (int64_t k = 0; k < K; ++k) {
            T av = transA ? pa[k * lda + i] : pa[i * lda + k];
            T bv = transB ? pb[j * ldb + k] : pb[k * ldb + j];
            sum = mulAdd(sum, av, bv);
          }
          T cv = c ? c->dataAs<T>()[cIndex(i, j)] : T(0);
          if (exact) py[i * N + j] = mulAdd(sum, cv, T(1));
          else
            py[i * N + j] = static_cast<T>(static_cast<double>(alpha) * static_cast<double>(sum) +
                                           static_cast<double>(beta) * static_cast<double>(cv));
        }
      }
    });
    return Status::ok();
  });
}

}  // namespace ctxkit::kernels::detail
