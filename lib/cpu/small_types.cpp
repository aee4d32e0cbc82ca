// Float8/float4 encodings (round to nearest even, saturation per ONNX Cast) and packed 4-bit integers.
#include "cpu/small_types.h"

#include <cmath>
#include <limits>

namespace ctxkit::cpu {

using ir::ElemType;

namespace {

// A small binary float format. `fnuz` formats have no negative zero and encode NaN as the sign bit alone;
// the others put the sign in the top bit and NaN (and E5M2's infinity) at the top of the exponent range.
struct MiniFloat {
  int expBits;
  int mantBits;
  int bias;
  bool fnuz;
  bool hasInf;       // E5M2: exponent all ones with zero mantissa
  bool hasNaN;       // float4 has none
  uint32_t maxCode;  // largest finite magnitude code
};

constexpr MiniFloat kE4M3FN{4, 3, 7, false, false, true, 0x7E};
constexpr MiniFloat kE4M3FNUZ{4, 3, 8, true, false, true, 0x7F};
constexpr MiniFloat kE5M2{5, 2, 15, false, true, true, 0x7B};
constexpr MiniFloat kE5M2FNUZ{5, 2, 16, true, false, true, 0x7F};
constexpr MiniFloat kE2M1{2, 1, 1, false, false, false, 0x7};

const MiniFloat* formatOf(ElemType t) {
  switch (t) {
    case ElemType::Float8E4M3FN: return &kE4M3FN;
    case ElemType::Float8E4M3FNUZ: return &kE4M3FNUZ;
    case ElemType::Float8E5M2: return &kE5M2;
    case ElemType::Float8E5M2FNUZ: return &kE5M2FNUZ;
    case ElemType::Float4E2M1: return &kE2M1;
    default: return nullptr;
  }
}

uint32_t signBit(const MiniFloat& f) { return 1u << (f.expBits + f.mantBits); }

double decode(const MiniFloat& f, uint32_t code) {
  const uint32_t sign = code & signBit(f);
  const uint32_t mag = code & (signBit(f) - 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (f.fnuz && f.hasNaN && code == signBit(f)) return nan;
  if (!f.fnuz && f.hasNaN) {
    uint32_t expAllOnes = ((1u << f.expBits) - 1) << f.mantBits;
    if (f.hasInf && (mag & expAllOnes) == expAllOnes) return (mag == expAllOnes) ? (sign ? -INFINITY : INFINITY) : nan;
    if (!f.hasInf && mag == (signBit(f) - 1)) return nan;  // E4M3FN: S.1111.111
  }
  const uint32_t e = mag >> f.mantBits;
  const uint32_t m = mag & ((1u << f.mantBits) - 1);
  double v = e == 0 ? std::ldexp(static_cast<double>(m), 1 - f.bias - f.mantBits)
                    : std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.mantBits), static_cast<int>(e) - f.bias);
  return sign ? -v : v;
}

uint32_t encode(const MiniFloat& f, double x, bool saturate) {
  const uint32_t sb = signBit(f);
  const bool negative = std::signbit(x);
  auto withSign = [&](uint32_t mag) -> uint32_t {
    if (f.fnuz && mag == 0) return 0;  // no negative zero
    return negative ? (mag | sb) : mag;
  };
  // NaN codes as ONNX writes them: E4M3FN S.1111.111, E5M2 S.11111.10, FNUZ formats the lone sign bit.
  const uint32_t nanCode = f.fnuz ? sb : (f.hasInf ? sb - 2 : sb - 1);
  if (std::isnan(x)) {
    if (!f.hasNaN) return sb;  // float4 has no NaN; ONNX's reference gives the negative-zero code
    return f.fnuz ? nanCode : withSign(nanCode);
  }
  auto overflow = [&]() -> uint32_t {
    if (saturate || !f.hasNaN) return withSign(f.maxCode);
    if (f.hasInf) return withSign(((1u << f.expBits) - 1) << f.mantBits);
    return f.fnuz ? nanCode : withSign(nanCode);
  };
  if (std::isinf(x)) return overflow();
  double a = std::fabs(x);
  if (a == 0) return withSign(0);
  int e2;
  std::frexp(a, &e2);  // a = frac * 2^e2, frac in [0.5, 1)
  const int unbiased = e2 - 1;
  const int biased = unbiased + f.bias;
  int64_t code;
  if (biased < 1) {
    // Subnormal: units of 2^(1 - bias - mantBits); a carry into the exponent field lands on the right code.
    code = static_cast<int64_t>(std::nearbyint(std::ldexp(a, f.bias - 1 + f.mantBits)));
  } else {
    if (biased > 64) return overflow();
    double q = std::nearbyint(std::ldexp(a, f.mantBits - unbiased));  // in [2^m, 2^(m+1)]
    code = (static_cast<int64_t>(biased) << f.mantBits) + static_cast<int64_t>(q) - (int64_t{1} << f.mantBits);
  }
  if (code > static_cast<int64_t>(f.maxCode)) return overflow();
  return withSign(static_cast<uint32_t>(code));
}

// Like every integer cast: truncation toward zero, then wrapping to 4 bits (ONNX's test data agrees).
uint8_t encodeInt4(double x) {
  if (std::isnan(x) || !(std::fabs(x) < 9.2e18)) return 0;
  return static_cast<uint8_t>(static_cast<uint64_t>(static_cast<int64_t>(x)) & 0xFu);
}

double decodeInt4(uint8_t nibble, bool isSigned) {
  int v = nibble & 0xF;
  if (isSigned && v >= 8) v -= 16;
  return v;
}

bool isFourBit(ElemType t) { return t == ElemType::Int4 || t == ElemType::Uint4 || t == ElemType::Float4E2M1; }

}  // namespace

bool isSmallType(ElemType t) { return formatOf(t) != nullptr || t == ElemType::Int4 || t == ElemType::Uint4; }

void loadSmall(ElemType t, const void* base, size_t begin, size_t n, double* out) {
  const auto* bytes = static_cast<const uint8_t*>(base);
  const MiniFloat* f = formatOf(t);
  for (size_t k = 0; k < n; ++k) {
    size_t i = begin + k;
    uint32_t code = isFourBit(t) ? (bytes[i / 2] >> (4 * (i % 2))) & 0xFu : bytes[i];
    if (f) out[k] = decode(*f, code);
    else out[k] = decodeInt4(static_cast<uint8_t>(code), t == ElemType::Int4);
  }
}

void storeSmall(ElemType t, const double* in, void* base, size_t begin, size_t n, bool saturate) {
  auto* bytes = static_cast<uint8_t*>(base);
  const MiniFloat* f = formatOf(t);
  for (size_t k = 0; k < n; ++k) {
    size_t i = begin + k;
    uint32_t code = f ? encode(*f, in[k], saturate) : encodeInt4(in[k]);
    if (isFourBit(t)) {
      unsigned shift = 4 * static_cast<unsigned>(i % 2);
      bytes[i / 2] = static_cast<uint8_t>((bytes[i / 2] & ~(0xFu << shift)) | ((code & 0xFu) << shift));
    } else {
      bytes[i] = static_cast<uint8_t>(code);
    }
  }
}

}  // namespace ctxkit::cpu
