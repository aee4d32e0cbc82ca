// Tensor element types, numbered exactly as ONNX's TensorProto.DataType so values pass through unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ctxkit::ir {

enum class ElemType : int32_t {
  Undefined = 0,
  Float = 1,
  Uint8 = 2,
  Int8 = 3,
  Uint16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  Uint32 = 12,
  Uint64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  Uint4 = 21,
  Int4 = 22,
  Float4E2M1 = 23,
  Float8E8M0 = 24,
  Uint2 = 25,
  Int2 = 26,
};

inline constexpr int32_t kMaxElemType = 26;

// Bytes per element; 0 for String, Undefined and sub-byte types (which are packed).
size_t elemSize(ElemType type);
std::string_view elemTypeName(ElemType type);  // "float32", "int64", ...
std::optional<ElemType> elemTypeFromInt(int32_t value);
std::optional<ElemType> elemTypeFromName(std::string_view name);
// Bytes needed by `count` elements (handles packed 4-bit and 2-bit types), nullopt for strings or overflow.
std::optional<uint64_t> storageBytes(ElemType type, uint64_t count);

}  // namespace ctxkit::ir
