// Cache-blocked float32 GEMM used by MatMul, Gemm and Conv; callable by the compiler for constant folding.
#pragma once

#include "kernels/kernels.h"

#include <cstddef>

namespace ctxkit::kernels {

// C = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is M x K (A is K x M when transA), op(B) is
// K x N (B is N x K when transB); lda/ldb/ldc are row strides in elements. beta == 0 ignores C's old
// contents (NaN included). `pool` may be null. C must not overlap A or B.
void sgemm(bool transA, bool transB, size_t M, size_t N, size_t K, float alpha, const float* A, size_t lda,
           const float* B, size_t ldb, float beta, float* C, size_t ldc, ThreadPool* pool);

// The name of the micro-kernel sgemm picked for this CPU ("avx512", "avx2", "sse2"), for logs and tests.
const char* sgemmKernelName();

}  // namespace ctxkit::kernels
