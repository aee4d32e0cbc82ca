// Reference ops as direct nested loops: float32 storage, double accumulation, no tricks.
#include "samples/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

namespace ctxkit::samples::ref {

namespace {

// The generator itself builds every shape passed here, so a mismatch is a bug in it: stop loudly,
// also in release builds where assert is compiled out.
void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "reference: internal shape error: %s\n", what);
  std::abort();
}

size_t product(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

template <typename F>
Array map(const Array& x, F f) {
  Array y = x;
  for (float& v : y.data) v = f(v);
  return y;
}

}  // namespace

Array::Array(std::vector<int64_t> s, std::vector<float> d) : shape(std::move(s)), data(std::move(d)) {
  require(product(shape) == data.size(), "array data does not match its shape");
}

Array Array::zeros(std::vector<int64_t> s) {
  Array a;
  a.data.assign(product(s), 0.0f);
  a.shape = std::move(s);
  return a;
}

Array layerNorm(const Array& x, std::span<const float> scale, std::span<const float> bias, float epsilon) {
  const size_t cols = static_cast<size_t>(x.dim(-1));
  require(scale.size() == cols && bias.size() == cols, "layerNorm scale/bias length");
  Array y = Array::zeros(x.shape);
  for (size_t row = 0; row < x.size() / cols; ++row) {
    const float* in = &x.data[row * cols];
    float* out = &y.data[row * cols];
    double mean = 0;
    for (size_t c = 0; c < cols; ++c) mean += in[c];
    mean /= static_cast<double>(cols);
    double var = 0;
    for (size_t c = 0; c < cols; ++c) var += (in[c] - mean) * (in[c] - mean);
    var /= static_cast<double>(cols);
    const double inv = 1.0 / std::sqrt(var + epsilon);
    for (size_t c = 0; c < cols; ++c) out[c] = static_cast<float>((in[c] - mean) * inv * scale[c] + bias[c]);
  }
  return y;
}

Array matMul(const Array& a, const Array& b) {
  require(a.rank() >= 2 && b.rank() >= 2, "matMul rank");
  const int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  require(b.dim(-2) == k, "matMul inner dimensions");
  const bool sharedB = b.rank() == 2;
  if (!sharedB) {
    require(a.rank() == b.rank(), "matMul batch ranks");
    for (int64_t i = 0; i + 2 < a.rank(); ++i) require(a.dim(i) == b.dim(i), "matMul batch dimensions");
  }
  std::vector<int64_t> shape = a.shape;
  shape.back() = n;
  Array y = Array::zeros(shape);
  const size_t batches = a.size() / static_cast<size_t>(m * k);
  for (size_t bi = 0; bi < batches; ++bi) {
    const float* pa = &a.data[bi * static_cast<size_t>(m * k)];
    const float* pb = &b.data[sharedB ? 0 : bi * static_cast<size_t>(k * n)];
    float* py = &y.data[bi * static_cast<size_t>(m * n)];
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t t = 0; t < k; ++t) sum += static_cast<double>(pa[i * k + t]) * pb[t * n + j];
        py[i * n + j] = static_cast<float>(sum);
      }
  }
  return y;
}

Array gemmTransB(const Array& a, const Array& b, std::span<const float> c) {
  require(a.rank() == 2 && b.rank() == 2 && a.dim(1) == b.dim(1), "gemm shapes");
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(0);
  require(c.size() == static_cast<size_t>(n), "gemm bias length");
  Array y = Array::zeros({m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t t = 0; t < k; ++t) sum += static_cast<double>(a.data[i * k + t]) * b.data[j * k + t];
      y.data[i * n + j] = static_cast<float>(sum + c[j]);
    }
  return y;
}

Array addLastAxis(const Array& x, std::span<const float> bias) {
  const size_t cols = static_cast<size_t>(x.dim(-1));
  require(bias.size() == cols, "bias length");
  Array y = x;
  for (size_t i = 0; i < y.size(); ++i) y.data[i] += bias[i % cols];
  return y;
}

Array add(const Array& a, const Array& b) {
  require(a.shape == b.shape, "add shapes");
  Array y = a;
  for (size_t i = 0; i < y.size(); ++i) y.data[i] += b.data[i];
  return y;
}

Array mulScalar(const Array& x, float s) {
  return map(x, [s](float v) { return v * s; });
}

Array reshape(Array x, std::vector<int64_t> shape) {
  require(product(shape) == x.size(), "reshape element count");
  x.shape = std::move(shape);
  return x;
}

Array transpose(const Array& x, std::span<const int64_t> perm) {
  const size_t rank = x.shape.size();
  require(perm.size() == rank, "transpose perm length");
  std::vector<int64_t> outShape(rank);
  for (size_t i = 0; i < rank; ++i) outShape[i] = x.shape[static_cast<size_t>(perm[i])];
  std::vector<size_t> inStrides(rank, 1);
  for (size_t i = rank; i-- > 1;) inStrides[i - 1] = inStrides[i] * static_cast<size_t>(x.shape[i]);
  Array y = Array::zeros(outShape);
  std::vector<int64_t> index(rank, 0);  // position in the output
  for (size_t flat = 0; flat < y.size(); ++flat) {
    size_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += static_cast<size_t>(index[i]) * inStrides[static_cast<size_t>(perm[i])];
    y.data[flat] = x.data[src];
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < outShape[i]) break;
      index[i] = 0;
    }
  }
  return y;
}

Array softmaxLastAxis(const Array& x) {
  const size_t cols = static_cast<size_t>(x.dim(-1));
  Array y = Array::zeros(x.shape);
  for (size_t row = 0; row < x.size() / cols; ++row) {
    const float* in = &x.data[row * cols];
    float* out = &y.data[row * cols];
    float maxValue = -std::numeric_limits<float>::infinity();
    for (size_t c = 0; c < cols; ++c) maxValue = std::max(maxValue, in[c]);
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(in[c]) - maxValue);
    for (size_t c = 0; c < cols; ++c)
      out[c] = static_cast<float>(std::exp(static_cast<double>(in[c]) - maxValue) / sum);
  }
  return y;
}

Array geluErf(const Array& x) {
  const float sqrt2 = static_cast<float>(std::sqrt(2.0));
  return map(x, [sqrt2](float v) {
    const float e = std::erf(v / sqrt2);
    return (v * (e + 1.0f)) * 0.5f;
  });
}

Array relu(const Array& x) {
  return map(x, [](float v) { return v > 0.0f ? v : 0.0f; });
}

Array flatten2d(const Array& x) {
  const int64_t n = x.dim(0);
  return reshape(x, {n, static_cast<int64_t>(x.size()) / n});
}

Array conv2d(const Array& x, const Array& w, std::span<const float> bias, int64_t pad, int64_t stride) {
  require(x.rank() == 4 && w.rank() == 4 && w.dim(1) == x.dim(1), "conv shapes");
  const int64_t batch = x.dim(0), cin = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t cout = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  require(bias.size() == static_cast<size_t>(cout), "conv bias length");
  const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (wd + 2 * pad - kw) / stride + 1;
  Array y = Array::zeros({batch, cout, oh, ow});
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = bias[static_cast<size_t>(co)];
          for (int64_t ci = 0; ci < cin; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                sum += static_cast<double>(x.data[((n * cin + ci) * h + iy) * wd + ix]) *
                       w.data[((co * cin + ci) * kh + ky) * kw + kx];
              }
          y.data[((n * cout + co) * oh + oy) * ow + ox] = static_cast<float>(sum);
        }
  return y;
}

Array batchNorm(const Array& x, std::span<const float> scale, std::span<const float> bias,
                std::span<const float> mean, std::span<const float> var, float epsilon) {
  const size_t channels = static_cast<size_t>(x.dim(1));
  require(scale.size() == channels && bias.size() == channels && mean.size() == channels && var.size() == channels,
          "batchNorm parameter lengths");
  const size_t inner = x.size() / static_cast<size_t>(x.dim(0)) / channels;
  Array y = x;
  for (size_t i = 0; i < y.size(); ++i) {
    const size_t c = (i / inner) % channels;
    const double normalized =
        (x.data[i] - static_cast<double>(mean[c])) / std::sqrt(static_cast<double>(var[c]) + epsilon);
    y.data[i] = static_cast<float>(normalized * scale[c] + bias[c]);
  }
  return y;
}

Array maxPool2d(const Array& x, int64_t kernel, int64_t stride) {
  require(x.rank() == 4, "maxPool rank");
  const int64_t batch = x.dim(0), channels = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t oh = (h - kernel) / stride + 1, ow = (w - kernel) / stride + 1;
  Array y = Array::zeros({batch, channels, oh, ow});
  for (int64_t nc = 0; nc < batch * channels; ++nc)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t ky = 0; ky < kernel; ++ky)
          for (int64_t kx = 0; kx < kernel; ++kx)
            best = std::max(best, x.data[(nc * h + oy * stride + ky) * w + ox * stride + kx]);
        y.data[(nc * oh + oy) * ow + ox] = best;
      }
  return y;
}

}  // namespace ctxkit::samples::ref
