// Overflow-checked arithmetic for sizes and offsets read from files (docs/bad-input.md#loader-rules, rules 3, 4 and
// 16).
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

// A signed 64-bit integer that remembers overflow, for shape arithmetic on values read from a model or a program:
// the expression is written as usual and checked once at the end (`ok()`), instead of overflowing silently (which
// C++ leaves undefined). Division by zero and INT64_MIN / -1 count as overflow. Each operator computes before it
// copies its result: the order in which a call's arguments are evaluated is unspecified (g++ goes right to left,
// clang left to right), so `combine(a, b, __builtin_add_overflow(a.v_, b.v_, &a.v_))` returned the left operand
// unchanged under clang.
class CheckedInt {
public:
  constexpr CheckedInt(int64_t v) : v_(v) {}  // NOLINT(google-explicit-constructor): mixes with plain int64_t
  bool ok() const { return ok_; }
  int64_t value() const { return v_; }  // meaningful only when ok()

  friend CheckedInt operator+(CheckedInt a, CheckedInt b) {
    const bool overflowed = __builtin_add_overflow(a.v_, b.v_, &a.v_);
    return combine(a, b, overflowed);
  }
  friend CheckedInt operator-(CheckedInt a, CheckedInt b) {
    const bool overflowed = __builtin_sub_overflow(a.v_, b.v_, &a.v_);
    return combine(a, b, overflowed);
  }
  friend CheckedInt operator*(CheckedInt a, CheckedInt b) {
    const bool overflowed = __builtin_mul_overflow(a.v_, b.v_, &a.v_);
    return combine(a, b, overflowed);
  }
  friend CheckedInt operator/(CheckedInt a, CheckedInt b) {
    if (b.v_ == 0 || (a.v_ == std::numeric_limits<int64_t>::min() && b.v_ == -1)) return combine(a, b, true);
    a.v_ /= b.v_;
    return combine(a, b, false);
  }
  friend CheckedInt operator%(CheckedInt a, CheckedInt b) {
    if (b.v_ == 0) return combine(a, b, true);
    a.v_ = b.v_ == -1 ? 0 : a.v_ % b.v_;  // INT64_MIN % -1 is undefined in C++
    return combine(a, b, false);
  }

private:
  static CheckedInt combine(CheckedInt result, CheckedInt other, bool overflowed) {
    result.ok_ = result.ok_ && other.ok_ && !overflowed;
    return result;
  }
  int64_t v_;
  bool ok_ = true;
};

// The product of `dims` (each must be non-negative), or nullopt on a negative value or overflow past INT64_MAX.
inline std::optional<int64_t> checkedProduct(std::span<const int64_t> dims) {
  auto n = checkedElementCount(dims);
  if (!n || *n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(*n);
}

inline uint64_t alignUp(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

inline bool isPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace ctxkit
