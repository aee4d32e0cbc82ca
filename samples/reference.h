// Plain-loop reference implementations of the ops the sample models use, to compute their expected outputs.
// Written apart from lib/kernels on purpose: these are the values the kernels are tested against.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ctxkit::samples::ref {

// A dense float32 array in row-major order.
struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;

  Array() = default;
  Array(std::vector<int64_t> shape, std::vector<float> data);
  static Array zeros(std::vector<int64_t> shape);

  size_t size() const { return data.size(); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t dim(int64_t axis) const { return shape[static_cast<size_t>(axis < 0 ? axis + rank() : axis)]; }
};

// Normalizes each row of the last axis to mean 0 and variance 1, then y = x̂ * scale + bias.
Array layerNorm(const Array& x, std::span<const float> scale, std::span<const float> bias, float epsilon);

// [..., M, K] x [K, N] (weight shared by every batch) or [..., M, K] x [..., K, N] (same batch dims).
Array matMul(const Array& a, const Array& b);

// Gemm with transB=1, alpha=beta=1: [M, K] x [N, K]^T + c[N].
Array gemmTransB(const Array& a, const Array& b, std::span<const float> c);

Array addLastAxis(const Array& x, std::span<const float> bias);  // bias broadcast along the last axis
Array add(const Array& a, const Array& b);                       // same shapes
Array mulScalar(const Array& x, float s);
Array reshape(Array x, std::vector<int64_t> shape);
Array transpose(const Array& x, std::span<const int64_t> perm);
Array softmaxLastAxis(const Array& x);
// 0.5 * x * (1 + erf(x / sqrt(2))), rounded to float after each step as the ONNX graph does.
Array geluErf(const Array& x);
Array relu(const Array& x);
Array flatten2d(const Array& x);  // [N, ...] -> [N, rest]

// NCHW convolution, square kernel from w [Cout, Cin, kH, kW], symmetric padding, no dilation, one group.
Array conv2d(const Array& x, const Array& w, std::span<const float> bias, int64_t pad, int64_t stride);
// Inference-mode batch normalization over channel axis 1.
Array batchNorm(const Array& x, std::span<const float> scale, std::span<const float> bias,
                std::span<const float> mean, std::span<const float> var, float epsilon);
// NCHW max pooling, no padding, floor rounding.
Array maxPool2d(const Array& x, int64_t kernel, int64_t stride);

}  // namespace ctxkit::samples::ref
