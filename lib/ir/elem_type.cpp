// Element type sizes and names.
#include "ir/elem_type.h"

#include <array>
#include <limits>

namespace ctxkit::ir {

namespace {
struct TypeInfo {
  ElemType type;
  size_t size;
  std::string_view name;
};
constexpr std::array<TypeInfo, 27> kTypes = {{
    {ElemType::Undefined, 0, "undefined"},
    {ElemType::Float, 4, "float32"},
    {ElemType::Uint8, 1, "uint8"},
    {ElemType::Int8, 1, "int8"},
    {ElemType::Uint16, 2, "uint16"},
    {ElemType::Int16, 2, "int16"},
    {ElemType::Int32, 4, "int32"},
    {ElemType::Int64, 8, "int64"},
    {ElemType::String, 0, "string"},
    {ElemType::Bool, 1, "bool"},
    {ElemType::Float16, 2, "float16"},
    {ElemType::Double, 8, "float64"},
    {ElemType::Uint32, 4, "uint32"},
    {ElemType::Uint64, 8, "uint64"},
    {ElemType::Complex64, 8, "complex64"},
    {ElemType::Complex128, 16, "complex128"},
    {ElemType::BFloat16, 2, "bfloat16"},
    {ElemType::Float8E4M3FN, 1, "float8e4m3fn"},
    {ElemType::Float8E4M3FNUZ, 1, "float8e4m3fnuz"},
    {ElemType::Float8E5M2, 1, "float8e5m2"},
    {ElemType::Float8E5M2FNUZ, 1, "float8e5m2fnuz"},
    {ElemType::Uint4, 0, "uint4"},
    {ElemType::Int4, 0, "int4"},
    {ElemType::Float4E2M1, 0, "float4e2m1"},
    {ElemType::Float8E8M0, 1, "float8e8m0"},
    {ElemType::Uint2, 0, "uint2"},
    {ElemType::Int2, 0, "int2"},
}};
}  // namespace

size_t elemSize(ElemType type) {
  auto i = static_cast<size_t>(type);
  return i < kTypes.size() ? kTypes[i].size : 0;
}

std::string_view elemTypeName(ElemType type) {
  auto i = static_cast<size_t>(type);
  return i < kTypes.size() ? kTypes[i].name : std::string_view("unknown");
}

std::optional<ElemType> elemTypeFromInt(int32_t value) {
  if (value < 0 || value > kMaxElemType) return std::nullopt;
  return static_cast<ElemType>(value);
}

std::optional<ElemType> elemTypeFromName(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.name == name) return t.type;
  return std::nullopt;
}

std::optional<uint64_t> storageBytes(ElemType type, uint64_t count) {
  switch (type) {
    case ElemType::Uint4:
    case ElemType::Int4:
    case ElemType::Float4E2M1: return count / 2 + count % 2;
    case ElemType::Uint2:
    case ElemType::Int2: return count / 4 + (count % 4 != 0 ? 1 : 0);
    case ElemType::String:
    case ElemType::Undefined: return std::nullopt;
    default: break;
  }
  size_t size = elemSize(type);
  if (size == 0 || count > std::numeric_limits<uint64_t>::max() / size) return std::nullopt;
  return count * size;
}

}  // namespace ctxkit::ir
