// TensorProto -> ir::Tensor: raw_data views, typed-field decoding and mapped external data, all checked.
#include "onnx_io/proto_convert.h"

#include "support/checked.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ctxkit::onnx_io::detail {

static_assert(std::endian::native == std::endian::little, "ONNX raw_data is little-endian, as is the host");

namespace {

using ir::ElemType;
using ir::Tensor;

// Each ONNX element type carries its values in exactly one typed field (onnx.proto, TensorProto).
enum class Field { Float, Int32, String, Int64, Double, Uint64 };

constexpr Field kAllFields[] = {Field::Float, Field::Int32, Field::String, Field::Int64, Field::Double, Field::Uint64};

std::string_view fieldName(Field f) {
  switch (f) {
    case Field::Float: return "float_data";
    case Field::Int32: return "int32_data";
    case Field::String: return "string_data";
    case Field::Int64: return "int64_data";
    case Field::Double: return "double_data";
    case Field::Uint64: return "uint64_data";
  }
  return "?";
}

int fieldSize(const onnx::TensorProto& p, Field f) {
  switch (f) {
    case Field::Float: return p.float_data_size();
    case Field::Int32: return p.int32_data_size();
    case Field::String: return p.string_data_size();
    case Field::Int64: return p.int64_data_size();
    case Field::Double: return p.double_data_size();
    case Field::Uint64: return p.uint64_data_size();
  }
  return 0;
}

Field fieldFor(ElemType type) {
  switch (type) {
    case ElemType::Float:
    case ElemType::Complex64: return Field::Float;
    case ElemType::Double:
    case ElemType::Complex128: return Field::Double;
    case ElemType::Int64: return Field::Int64;
    case ElemType::Uint32:
    case ElemType::Uint64: return Field::Uint64;
    case ElemType::String: return Field::String;
    default: return Field::Int32;  // every other type, 8-bit and narrower included
  }
}

// How many typed-field entries a tensor of `count` elements needs.
std::optional<uint64_t> entriesFor(ElemType type, uint64_t count) {
  switch (type) {
    case ElemType::Complex64:
    case ElemType::Complex128: return checkedMul(count, 2);
    default: break;
  }
  // Sub-byte types pack into bytes, and each int32_data entry holds one such byte.
  if (fieldFor(type) == Field::Int32 && ir::elemSize(type) == 0) return ir::storageBytes(type, count);
  return count;
}

std::string describe(ElemType type, const ir::Shape& shape) {
  return fmt::format("{} tensor of shape {}", ir::elemTypeName(type), ir::shapeToString(shape));
}

template <typename T> std::span<const std::byte> bytesOf(const google::protobuf::RepeatedField<T>& field) {
  return std::as_bytes(std::span<const T>(field.data(), static_cast<size_t>(field.size())));
}

// Copies typed-field values into an owned tensor; the entry count has been checked by the caller.
Expected<Tensor> decodeTypedField(const onnx::TensorProto& p, ElemType type, ir::Shape shape) {
  switch (fieldFor(type)) {
    case Field::Float: return Tensor::copyOf(type, std::move(shape), bytesOf(p.float_data()));
    case Field::Double: return Tensor::copyOf(type, std::move(shape), bytesOf(p.double_data()));
    case Field::Int64: return Tensor::copyOf(type, std::move(shape), bytesOf(p.int64_data()));
    case Field::String:
      return Tensor::strings(std::move(shape),
                             std::vector<std::string>(p.string_data().begin(), p.string_data().end()));
    case Field::Uint64: {
      if (type == ElemType::Uint64) return Tensor::copyOf(type, std::move(shape), bytesOf(p.uint64_data()));
      CTX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(type, std::move(shape)));
      auto* out = t.mutableDataAs<uint32_t>();
      for (int i = 0; i < p.uint64_data_size(); ++i) out[i] = static_cast<uint32_t>(p.uint64_data(i));
      return t;
    }
    case Field::Int32: {
      if (type == ElemType::Int32) return Tensor::copyOf(type, std::move(shape), bytesOf(p.int32_data()));
      // Narrower types keep the low bytes of each entry (float16 and bfloat16 as their bit patterns).
      size_t width = ir::elemSize(type) == 0 ? 1 : ir::elemSize(type);
      CTX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(type, std::move(shape)));
      std::byte* out = t.mutableData();
      for (int i = 0; i < p.int32_data_size(); ++i) {
        auto v = static_cast<uint32_t>(p.int32_data(i));
        std::memcpy(out + static_cast<size_t>(i) * width, &v, width);
      }
      return t;
    }
  }
  return makeError(ErrorCode::Internal, "unhandled tensor field");
}

Expected<uint64_t> parseDecimal(std::string_view key, const std::string& text) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return makeError(ErrorCode::InvalidGraph, "external data '{}' is '{}'; expected a non-negative decimal integer",
                     key, text);
  return v;
}

Expected<std::shared_ptr<const MappedFile>> mapExternalFile(const std::filesystem::path& path, LoadContext& ctx) {
  auto it = ctx.mappings.find(path);
  if (it != ctx.mappings.end()) return it->second;
  CTX_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
  ctx.mappings.emplace(path, mapped);
  return mapped;
}

Expected<Tensor> externalTensor(const onnx::TensorProto& p, ElemType type, ir::Shape shape, uint64_t count,
                                LoadContext& ctx) {
  if (type == ElemType::String)
    return makeError(ErrorCode::InvalidGraph, "string tensor uses external data; expected string_data");
  if (p.has_raw_data()) return makeError(ErrorCode::InvalidGraph, "tensor has both external data and raw_data");
  for (Field f : kAllFields)
    if (fieldSize(p, f) > 0)
      return makeError(ErrorCode::InvalidGraph, "tensor has both external data and {}", fieldName(f));

  std::optional<std::string> location;
  std::optional<uint64_t> offset, length;
  std::set<std::string> seen;
  for (const auto& entry : p.external_data()) {
    if (!seen.insert(entry.key()).second)
      return makeError(ErrorCode::InvalidGraph, "external data key '{}' appears twice", entry.key());
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      CTX_ASSIGN_OR_RETURN(offset, parseDecimal("offset", entry.value()));
    } else if (entry.key() == "length") {
      CTX_ASSIGN_OR_RETURN(length, parseDecimal("length", entry.value()));
    }
    // Other keys ("checksum", ...) carry nothing the bytes depend on.
  }
  if (!location) return makeError(ErrorCode::InvalidGraph, "external data has no 'location' entry");

  auto needed = ir::storageBytes(type, count);
  if (!needed || !toSize(*needed)) return makeError(ErrorCode::InvalidGraph, "{} is too large", describe(type, shape));
  if (length && *length != *needed)
    return makeError(ErrorCode::InvalidGraph, "external data length is {} bytes; expected {} for a {}", *length,
                     *needed, describe(type, shape));
  if (!ctx.baseDir)
    return makeError(ErrorCode::InvalidArgument,
                     "external data '{}' cannot be resolved: no folder is known for relative paths", *location);

  auto path = resolveInside(*ctx.baseDir, *location);
  if (!path) return path.takeError().addContext("external data location");
  auto mapped = mapExternalFile(*path, ctx);
  if (!mapped) return mapped.takeError().addContext(fmt::format("external data '{}'", *location));

  const MappedFile& file = **mapped;
  uint64_t off = offset.value_or(0);
  if (!rangeFits(off, *needed, file.size()))
    return makeError(ErrorCode::InvalidGraph, "external data offset {} + length {} exceeds file size {} of '{}'", off,
                     *needed, file.size(), *location);
  // A view into the mapping, which the tensor keeps alive: no copy, and read-only. Kernels read whole elements, so
  // bytes at an offset not aligned for the element type (a hand-made file) are copied into an aligned tensor.
  const std::byte* at = file.data() + off;
  if (reinterpret_cast<uintptr_t>(at) % std::max<size_t>(1, ir::elemSize(type)) != 0)
    return Tensor::copyOf(type, std::move(shape), std::span(at, static_cast<size_t>(*needed)));
  return Tensor::view(type, std::move(shape), at, static_cast<size_t>(*needed), *mapped);
}

}  // namespace

Expected<Tensor> tensorFromProto(const onnx::TensorProto& p, LoadContext& ctx) {
  if (p.has_segment()) return makeError(ErrorCode::Unsupported, "segmented tensors are not supported");
  auto type = ir::elemTypeFromInt(p.data_type());
  if (!type) return makeError(ErrorCode::Unsupported, "element type {} is not a known ONNX type", p.data_type());
  if (*type == ElemType::Undefined) return makeError(ErrorCode::InvalidGraph, "element type is undefined (0)");

  ir::Shape shape(p.dims().begin(), p.dims().end());
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0) return makeError(ErrorCode::InvalidGraph, "dimension {} is {}; expected >= 0", i, shape[i]);
  auto count = checkedElementCount(shape);
  if (!count)
    return makeError(ErrorCode::InvalidGraph, "element count of shape {} overflows", ir::shapeToString(shape));

  if (p.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
    return externalTensor(p, *type, std::move(shape), *count, ctx);

  Field expected = fieldFor(*type);
  for (Field f : kAllFields)
    if (f != expected && fieldSize(p, f) > 0)
      return makeError(ErrorCode::InvalidGraph, "{} carries values in {}; expected {}", describe(*type, shape),
                       fieldName(f), fieldName(expected));

  if (p.has_raw_data()) {
    if (*type == ElemType::String)
      return makeError(ErrorCode::InvalidGraph, "string tensor has raw_data; expected string_data");
    if (fieldSize(p, expected) > 0)
      return makeError(ErrorCode::InvalidGraph, "tensor has both raw_data and {}", fieldName(expected));
    const std::string& raw = p.raw_data();
    auto t =
        Tensor::view(*type, std::move(shape), reinterpret_cast<const std::byte*>(raw.data()), raw.size(), ctx.owner);
    if (!t) return t.takeError().addContext("raw_data");
    return t;
  }

  auto entries = entriesFor(*type, *count);
  if (!entries) return makeError(ErrorCode::InvalidGraph, "{} is too large", describe(*type, shape));
  auto present = static_cast<uint64_t>(fieldSize(p, expected));
  if (present != *entries) {
    if (present == 0)
      return makeError(ErrorCode::InvalidGraph, "{} has no data; expected {} values in {} or raw_data",
                       describe(*type, shape), *entries, fieldName(expected));
    return makeError(ErrorCode::InvalidGraph, "{} has {} values; expected {} for a {}", fieldName(expected), present,
                     *entries, describe(*type, shape));
  }
  return decodeTypedField(p, *type, std::move(shape));
}

}  // namespace ctxkit::onnx_io::detail
