// Element conversions: float16/bfloat16 rounding, and buffer casts pivoting through int64 or double.
#include "cpu/convert.h"

#include "cpu/small_types.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace ctxkit::cpu {

using ir::ElemType;

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t floatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (absx < 0x38800000u) {
    // Result is subnormal (or zero) in half: scale so that rounding happens at the right bit.
    if (absx < 0x33000000u) return sign;  // below half of the smallest subnormal
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(absx >> 23);  // 14 + (113 - exp) - 1
    uint32_t value = mant >> (shift);
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (value & 1u))) ++value;
    return static_cast<uint16_t>(sign | value);
  }
  uint32_t value = ((absx >> 13) - (112u << 10));
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (value & 1u))) ++value;
  return static_cast<uint16_t>(sign | value);
}

float bfloat16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t floatToBfloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

bool isConvertible(ElemType t) {
  switch (t) {
    case ElemType::Float:
    case ElemType::Double:
    case ElemType::Float16:
    case ElemType::BFloat16:
    case ElemType::Int8:
    case ElemType::Int16:
    case ElemType::Int32:
    case ElemType::Int64:
    case ElemType::Uint8:
    case ElemType::Uint16:
    case ElemType::Uint32:
    case ElemType::Uint64:
    case ElemType::Bool: return true;
    default: return isSmallType(t);
  }
}

namespace {

constexpr size_t kBlock = 256;

bool isIntegral(ElemType t) {
  return t != ElemType::Float && t != ElemType::Double && t != ElemType::Float16 && t != ElemType::BFloat16;
}

template <typename T> void loadInts(const void* src, int64_t* out, size_t n) {
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(s[i]);
}

template <typename T> void storeInts(const int64_t* in, void* dst, size_t n) {
  T* d = static_cast<T*>(dst);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) d[i] = in[i] != 0;
    else d[i] = static_cast<T>(in[i]);  // wraps modulo 2^bits
  }
}

template <typename T> void loadDoubles(const void* src, double* out, size_t n) {
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(s[i]);
}

// A float value truncated toward zero into an integer type, defined for every input (C++ leaves
// out-of-range conversions undefined; x86 gives the "indefinite" minimum, which we mirror).
template <typename T> T truncateTo(double v) {
  if (std::isnan(v)) return T(0);
  if (v >= -9.2233720368547758e18 && v < 9.2233720368547758e18) return static_cast<T>(static_cast<int64_t>(v));
  if constexpr (std::is_same_v<T, uint64_t>) {
    if (v >= 0 && v < 1.8446744073709552e19) return static_cast<T>(v);
  }
  return static_cast<T>(std::numeric_limits<int64_t>::min());
}

template <typename T> void storeDoubles(const double* in, void* dst, size_t n) {
  T* d = static_cast<T*>(dst);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) d[i] = in[i] != 0.0;
    else if constexpr (std::is_floating_point_v<T>) d[i] = static_cast<T>(in[i]);
    else d[i] = truncateTo<T>(in[i]);
  }
}

void loadIntBlock(ElemType t, const void* src, int64_t* out, size_t n) {
  switch (t) {
    case ElemType::Int8: return loadInts<int8_t>(src, out, n);
    case ElemType::Int16: return loadInts<int16_t>(src, out, n);
    case ElemType::Int32: return loadInts<int32_t>(src, out, n);
    case ElemType::Int64: return loadInts<int64_t>(src, out, n);
    case ElemType::Uint8: return loadInts<uint8_t>(src, out, n);
    case ElemType::Uint16: return loadInts<uint16_t>(src, out, n);
    case ElemType::Uint32: return loadInts<uint32_t>(src, out, n);
    case ElemType::Uint64: return loadInts<uint64_t>(src, out, n);
    case ElemType::Bool: return loadInts<bool>(src, out, n);
    default: return;
  }
}

void storeIntBlock(ElemType t, const int64_t* in, void* dst, size_t n) {
  switch (t) {
    case ElemType::Int8: return storeInts<int8_t>(in, dst, n);
    case ElemType::Int16: return storeInts<int16_t>(in, dst, n);
    case ElemType::Int32: return storeInts<int32_t>(in, dst, n);
    case ElemType::Int64: return storeInts<int64_t>(in, dst, n);
    case ElemType::Uint8: return storeInts<uint8_t>(in, dst, n);
    case ElemType::Uint16: return storeInts<uint16_t>(in, dst, n);
    case ElemType::Uint32: return storeInts<uint32_t>(in, dst, n);
    case ElemType::Uint64: return storeInts<uint64_t>(in, dst, n);
    case ElemType::Bool: return storeInts<bool>(in, dst, n);
    default: return;
  }
}

void loadDoubleBlock(ElemType t, const void* src, double* out, size_t n) {
  switch (t) {
    case ElemType::Float: return loadDoubles<float>(src, out, n);
    case ElemType::Double: return loadDoubles<double>(src, out, n);
    case ElemType::Float16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) out[i] = halfToFloat(s[i]);
      return;
    }
    case ElemType::BFloat16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) out[i] = bfloat16ToFloat(s[i]);
      return;
    }
    case ElemType::Int8: return loadDoubles<int8_t>(src, out, n);
    case ElemType::Int16: return loadDoubles<int16_t>(src, out, n);
    case ElemType::Int32: return loadDoubles<int32_t>(src, out, n);
    case ElemType::Int64: return loadDoubles<int64_t>(src, out, n);
    case ElemType::Uint8: return loadDoubles<uint8_t>(src, out, n);
    case ElemType::Uint16: return loadDoubles<uint16_t>(src, out, n);
    case ElemType::Uint32: return loadDoubles<uint32_t>(src, out, n);
    case ElemType::Uint64: return loadDoubles<uint64_t>(src, out, n);
    case ElemType::Bool: return loadDoubles<bool>(src, out, n);
    default: return;
  }
}

void storeDoubleBlock(ElemType t, const double* in, void* dst, size_t n) {
  switch (t) {
    case ElemType::Float: return storeDoubles<float>(in, dst, n);
    case ElemType::Double: return storeDoubles<double>(in, dst, n);
    case ElemType::Float16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = floatToHalf(static_cast<float>(in[i]));
      return;
    }
    case ElemType::BFloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = floatToBfloat16(static_cast<float>(in[i]));
      return;
    }
    case ElemType::Int8: return storeDoubles<int8_t>(in, dst, n);
    case ElemType::Int16: return storeDoubles<int16_t>(in, dst, n);
    case ElemType::Int32: return storeDoubles<int32_t>(in, dst, n);
    case ElemType::Int64: return storeDoubles<int64_t>(in, dst, n);
    case ElemType::Uint8: return storeDoubles<uint8_t>(in, dst, n);
    case ElemType::Uint16: return storeDoubles<uint16_t>(in, dst, n);
    case ElemType::Uint32: return storeDoubles<uint32_t>(in, dst, n);
    case ElemType::Uint64: return storeDoubles<uint64_t>(in, dst, n);
    case ElemType::Bool: return storeDoubles<bool>(in, dst, n);
    default: return;
  }
}

}  // namespace

Status convertElements(ElemType from, const void* src, ElemType to, void* dst, size_t count, bool saturate) {
  return convertElementRange(from, src, to, dst, 0, count, saturate);
}

Status convertElementRange(ElemType from, const void* src, ElemType to, void* dst, size_t begin, size_t end,
                           bool saturate) {
  if (!isConvertible(from) || !isConvertible(to))
    return makeError(ErrorCode::Unsupported, "conversion from {} to {} is not supported", ir::elemTypeName(from),
                     ir::elemTypeName(to));
  if (end <= begin) return Status::ok();
  const size_t count = end - begin;
  if (isSmallType(from) || isSmallType(to)) {
    // Narrow types go through double, addressed by element index (4-bit types pack two per byte).
    for (size_t done = 0; done < count; done += kBlock) {
      size_t n = std::min(kBlock, count - done);
      double buf[kBlock];
      size_t at = begin + done;
      if (isSmallType(from)) loadSmall(from, src, at, n, buf);
      else loadDoubleBlock(from, static_cast<const std::byte*>(src) + at * ir::elemSize(from), buf, n);
      if (isSmallType(to)) storeSmall(to, buf, dst, at, n, saturate);
      else storeDoubleBlock(to, buf, static_cast<std::byte*>(dst) + at * ir::elemSize(to), n);
    }
    return Status::ok();
  }
  size_t inSize = ir::elemSize(from);
  size_t outSize = ir::elemSize(to);
  const auto* s = static_cast<const std::byte*>(src) + begin * inSize;
  auto* d = static_cast<std::byte*>(dst) + begin * outSize;
  if (from == to) {
    if (count) std::memcpy(d, s, count * inSize);
    return Status::ok();
  }
  // float32 <-> float16 is the hot case (half tensors computed as float): convert directly.
  if (from == ElemType::Float16 && to == ElemType::Float) {
    for (size_t i = 0; i < count; ++i)
      reinterpret_cast<float*>(d)[i] = halfToFloat(reinterpret_cast<const uint16_t*>(s)[i]);
    return Status::ok();
  }
  if (from == ElemType::Float && to == ElemType::Float16) {
    for (size_t i = 0; i < count; ++i)
      reinterpret_cast<uint16_t*>(d)[i] = floatToHalf(reinterpret_cast<const float*>(s)[i]);
    return Status::ok();
  }
  bool viaInts = isIntegral(from) && isIntegral(to);
  for (size_t done = 0; done < count; done += kBlock) {
    size_t n = std::min(kBlock, count - done);
    if (viaInts) {
      int64_t buf[kBlock];
      loadIntBlock(from, s + done * inSize, buf, n);
      storeIntBlock(to, buf, d + done * outSize, n);
    } else {
      double buf[kBlock];
      loadDoubleBlock(from, s + done * inSize, buf, n);
      storeDoubleBlock(to, buf, d + done * outSize, n);
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::cpu
