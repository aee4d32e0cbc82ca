// Encoding of typed attributes by their field lists: bool u8, integers i64, float f32, enums their value as i64,
// strings length-prefixed, lists u32 count then items, optional values u8 presence then the value, nested structs
// their fields.
#include "program/typed_codec.h"

#include "ops/typed_attrs.h"
#include "program/program.h"

#include <type_traits>

namespace ctxkit::program {

namespace {

constexpr uint32_t kMaxListItems = 1u << 20;

template <class T> struct IsVector : std::false_type {};
template <class T, class A> struct IsVector<std::vector<T, A>> : std::true_type {};
template <class T> struct IsOptional : std::false_type {};
template <class T> struct IsOptional<std::optional<T>> : std::true_type {};

template <class T> void writeValue(ByteWriter& w, const T& v) {
  if constexpr (ops::HasFields<T>) {
    v.fields([&](std::string_view, const auto& member) { writeValue(w, member); });
  } else if constexpr (std::is_same_v<T, bool>) {
    w.u8(v ? 1 : 0);
  } else if constexpr (std::is_enum_v<T>) {
    w.i64(static_cast<int64_t>(v));
  } else if constexpr (std::is_integral_v<T>) {
    w.i64(static_cast<int64_t>(v));
  } else if constexpr (std::is_same_v<T, float>) {
    w.f32(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    w.str(v);
  } else if constexpr (IsVector<T>::value) {
    w.u32(static_cast<uint32_t>(v.size()));
    for (const auto& item : v) writeValue(w, item);
  } else if constexpr (IsOptional<T>::value) {
    w.u8(v ? 1 : 0);
    if (v) writeValue(w, *v);
  } else {
    static_assert(sizeof(T) == 0, "a typed attribute field of a type the program encoding does not know");
  }
}

// Reads one value; on failure the reader is left failed (r.ok() false) or `error` is set.
// `path` names the field in errors (null at the top).
// Lists are allocated from `storage`.
template <class T>
void readValue(ByteReader& r, T& v, std::string& error, const ops::FieldPath* path,
               std::pmr::memory_resource* storage) {
  if (!r.ok() || !error.empty()) return;
  if constexpr (ops::HasFields<T>) {
    v.fields([&](std::string_view name, auto& member) {
      const ops::FieldPath nested{name, path};
      readValue(r, member, error, &nested, storage);
    });
  } else if constexpr (std::is_same_v<T, bool>) {
    uint8_t b = r.u8();
    if (r.ok() && b > 1) error = fmt::format("attribute {} has value {} but expected 0 or 1", path->text(), b);
    v = b == 1;
  } else if constexpr (std::is_enum_v<T>) {
    int64_t x = r.i64();
    v = static_cast<T>(x);
    if (r.ok() && (static_cast<int64_t>(v) != x || !ops::isKnown(v)))
      error = fmt::format("attribute {} has unknown value {}", path->text(), x);
  } else if constexpr (std::is_integral_v<T>) {
    int64_t x = r.i64();
    v = static_cast<T>(x);
    if (r.ok() && static_cast<int64_t>(v) != x)
      error = fmt::format("attribute {} value {} is out of range", path->text(), x);
  } else if constexpr (std::is_same_v<T, float>) {
    v = r.f32();
  } else if constexpr (std::is_same_v<T, std::string>) {
    v = r.str(kMaxStringBytes);
  } else if constexpr (IsVector<T>::value) {
    uint32_t n = r.count(1, "attribute list length");
    if (r.ok() && n > kMaxListItems) error = fmt::format("attribute {} has {} values", path->text(), n);
    if (!r.ok() || !error.empty()) return;
    v.resize(n);
    for (auto& item : v) readValue(r, item, error, path, storage);
  } else if constexpr (IsOptional<T>::value) {
    uint8_t present = r.u8();
    if (r.ok() && present > 1) error = fmt::format("attribute {} has presence flag {}", path->text(), present);
    if (!r.ok() || !error.empty() || present == 0) {
      v.reset();
      return;
    }
    using Value = typename T::value_type;
    if constexpr (std::uses_allocator_v<Value, std::pmr::polymorphic_allocator<std::byte>>) {
      v.emplace(std::pmr::polymorphic_allocator<std::byte>(storage));
    } else {
      v.emplace();
    }
    readValue(r, *v, error, path, storage);
  } else {
    static_assert(sizeof(T) == 0, "a typed attribute field of a type the program encoding does not know");
  }
}

}  // namespace

void writeTypedAttrs(ByteWriter& w, const ops::OpAttrs& attrs) {
  std::visit([&](const auto& a) { writeValue(w, a); }, attrs);
}

Status readTypedAttrs(ByteReader& r, ops::OpAttrs& attrs, std::pmr::memory_resource* storage) {
  if (!storage) storage = std::pmr::get_default_resource();
  std::string error;
  std::visit([&](auto& a) { readValue(r, a, error, nullptr, storage); }, attrs);
  CTX_RETURN_IF_ERROR(r.status());
  if (!error.empty()) return makeError(ErrorCode::InvalidGraph, "{}", error);
  return ops::checkAttrs(attrs);
}

}  // namespace ctxkit::program
