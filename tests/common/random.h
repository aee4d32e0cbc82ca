// Seeded random test data: the same numbers on every run and every machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace ctxkit::testing {

// `n` floats drawn uniformly from [-1, 1) by a generator seeded with `seed`.
inline std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace ctxkit::testing
