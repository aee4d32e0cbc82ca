// Overflow-checked arithmetic for sizes and offsets read from files (SPEC §11 rules 3, 4 and 16).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>

namespace ctxkit {

inline std::optional<uint64_t> checkedAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checkedMul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// `off <= size && len <= size - off`: never computes off + len.
inline bool rangeFits(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }

// Product of non-negative dimensions, or nullopt on a negative dimension or overflow.
inline std::optional<uint64_t> checkedElementCount(std::span<const int64_t> dims) {
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    auto next = checkedMul(n, static_cast<uint64_t>(d));
    if (!next) return std::nullopt;
    n = *next;
  }
  return n;
}

inline std::optional<size_t> toSize(uint64_t v) {
  if (v > std::numeric_limits<size_t>::max()) return std::nullopt;
  return static_cast<size_t>(v);
}

inline uint64_t alignUp(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

inline bool isPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace ctxkit
