// A fixed-seed SplitMix64 generator for sample weights and inputs: the same numbers with every compiler and library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ctxkit::samples {

// std::mt19937 is portable but the std distributions are not, so floats are made here from raw bits.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // 24 random bits scaled to [0, 1): every value is exactly representable, so no rounding differs anywhere.
  float unit() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }

  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * unit(); }

  std::vector<float> uniformVector(size_t count, float lo, float hi) {
    std::vector<float> values(count);
    for (float& v : values) v = uniform(lo, hi);
    return values;
  }

private:
  uint64_t state_;
};

}  // namespace ctxkit::samples
