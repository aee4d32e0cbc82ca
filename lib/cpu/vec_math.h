// Float32 math over arrays, written so that g++ -O2 vectorizes it (fixed-size blocks, no calls, no branches).
#pragma once

#include <cstddef>

namespace ctxkit::cpu {

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
// out[i] = clamp(in[i] + add, lo, hi), the sum rounded once as an Add would: a Conv's bias and Relu/Clip in one pass.
void vecAddClamp(const float* in, float* out, size_t n, float add, float lo, float hi);
void vecLeakyRelu(const float* in, float* out, size_t n, float alpha);                // x < 0 ? alpha x : x
void vecHardSigmoid(const float* in, float* out, size_t n, float alpha, float beta);  // max(0, min(1, alpha x + b))
void vecSwish(const float* in, float* out, size_t n);      // x sigmoid(x), the product rounded as Sigmoid then Mul do
void vecHardSwish(const float* in, float* out, size_t n);  // x max(0, min(1, x / 6 + 1 / 2))

// out[i] = exp(in[i] - shift), returning the sum of the results (softmax's inner loop).
float vecExpShiftSum(const float* in, float* out, size_t n, float shift);

// Elementwise arithmetic; any operand may alias `out`.
enum class BinaryOp { Add, Sub, Mul, Div };
// out[i] = a[i * aStep] op b[i * bStep], steps 0 (broadcast scalar) or 1.
void vecBinary(BinaryOp op, const float* a, size_t aStep, const float* b, size_t bStep, float* out, size_t n);
void vecScaleShift(const float* x, float* y, size_t n, float a, float b);  // y = x * a + b
// Sliding windows over taps: taps[t] points at the inputs of tap t for n consecutive outputs (rows of a
// padded input, see spatial.h), so out[i] reduces taps[t][i] over t; out must not alias any tap row.
// out[i] = init + sum_t weights[t] * taps[t][i], summed in tap order (depthwise Conv, AveragePool).
void vecTapsDot(const float* const* taps, const float* weights, size_t tapCount, float init, float* out, size_t n);
// vecTapsDot for four filters at once, sharing each tap row's loads: for f < 4, out[f][i] = init[f] +
// sum_t weights[f * tapCount + t] * taps[t][i] (a few-channel Conv's output channels).
void vecTapsDot4(const float* const* taps, const float* weights, size_t tapCount, const float* init, float* const* out,
                 size_t n);
// vecTapsDot over `rows` output rows of n outputs at once: output (r, i) reads tap t at taps[t] + r * tapStep +
// i * colStride and is written at out + r * outStep + i (a depthwise Conv's rows in a padded plane, a fixed distance
// apart). colStride is 1 or 2; with 2, kRowTapsOverread float past the last tap read is loaded (and discarded).
// Needs n >= 8 and tapCount <= kMaxRowTaps.
constexpr size_t kMaxRowTaps = 64;
constexpr size_t kRowTapsOverread = 1;
void vecTapsDotRows(const float* const* taps, const float* weights, size_t tapCount, float init, float* out, size_t n,
                    size_t rows, ptrdiff_t tapStep, ptrdiff_t outStep, size_t colStride);
// out[i] = max_t taps[t][i], starting from -inf; NaN taps are skipped (max(acc, x) = acc < x ? x : acc).
void vecTapsMax(const float* const* taps, size_t tapCount, float* out, size_t n);
// out[i] = in[2 i] for i < n (reads in[0 .. 2n-2]): splits a row by stride-2 phase.
void vecGatherEven(const float* in, float* out, size_t n);
float vecMax(const float* x, size_t n);  // -inf for n == 0
// The maximum or minimum of x[0 .. n), NaN when any element is NaN (ReduceMax/Min); -inf or +inf for n == 0.
float vecReduceMax(const float* x, size_t n);
float vecReduceMin(const float* x, size_t n);
double vecSum(const float* x, size_t n);
double vecSumSquaredDiff(const float* x, size_t n, float mean);  // sum (x - mean)^2
// y = (x - mean) * inv * scale + bias (bias may be null).
void vecNormalize(const float* x, float* y, size_t n, float mean, float inv, const float* scale, const float* bias);

}  // namespace ctxkit::cpu
