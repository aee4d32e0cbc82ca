// The rotary-embedding rotation ONNX Runtime's GroupQueryAttention and com.microsoft RotaryEmbedding share.
#pragma once

#include <cstdint>

namespace ctxkit::kernels::detail {

// Rotates the first 2 x `half` elements of one head's row from `in` into `out` (which may be `in`) by the angles whose
// cosines and sines are `c` and `s`: as halves (x1 | x2), or as interleaved pairs.
inline void rotateHead(const float* in, float* out, const float* c, const float* s, int64_t half, bool interleaved) {
  for (int64_t i = 0; i < half; ++i) {
    const int64_t p = interleaved ? 2 * i : i, r = interleaved ? 2 * i + 1 : i + half;
    const float a = in[p], b = in[r];
    out[p] = a * c[i] - b * s[i];
    out[r] = b * c[i] + a * s[i];
  }
}

}  // namespace ctxkit::kernels::detail
