// Float32 math over arrays, written so that g++ -O2 vectorizes it (fixed-size blocks, no calls, no branches).
#pragma once

#include <cstddef>

namespace ctxkit::kernels {

// Each reads n floats from `in` and writes n to `out`; `in == out` is allowed.
// Accuracy: exp within 2 ulp (subnormal results rounded through gradual underflow); tanh, sigmoid and erf
// within about 2e-7 absolute.
void vecExp(const float* in, float* out, size_t n);
void vecSigmoid(const float* in, float* out, size_t n);
void vecTanh(const float* in, float* out, size_t n);
void vecErf(const float* in, float* out, size_t n);
void vecGeluErf(const float* in, float* out, size_t n);   // 0.5 x (1 + erf(x / sqrt 2))
void vecGeluTanh(const float* in, float* out, size_t n);  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void vecClamp(const float* in, float* out, size_t n, float lo, float hi);  // NaN stays NaN

// out[i] = exp(in[i] - shift), returning the sum of the results (softmax's inner loop).
float vecExpShiftSum(const float* in, float* out, size_t n, float shift);

// Elementwise arithmetic; any operand may alias `out`.
enum class BinaryOp { Add, Sub, Mul, Div };
// out[i] = a[i * aStep] op b[i * bStep], steps 0 (broadcast scalar) or 1.
void vecBinary(BinaryOp op, const float* a, size_t aStep, const float* b, size_t bStep, float* out, size_t n);
void vecAxpy(float* y, const float* x, float alpha, size_t n);  // y += alpha * x
void vecMaxInto(float* y, const float* x, size_t n);            // y = max(y, x)
// Strided reads, for pooling and depthwise convolution with stride > 1: y[i] op= x[i * stride].
void vecAxpyStrided(float* y, const float* x, size_t stride, float alpha, size_t n);
void vecMaxIntoStrided(float* y, const float* x, size_t stride, size_t n);
void vecScaleShift(const float* x, float* y, size_t n, float a, float b);  // y = x * a + b
float vecMax(const float* x, size_t n);                                    // -inf for n == 0
double vecSum(const float* x, size_t n);
double vecSumSquaredDiff(const float* x, size_t n, float mean);  // sum (x - mean)^2
// y = (x - mean) * inv * scale + bias (bias may be null).
void vecNormalize(const float* x, float* y, size_t n, float mean, float inv, const float* scale, const float* bias);

}  // namespace ctxkit::kernels
