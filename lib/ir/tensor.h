// A dense tensor: element type, concrete shape and bytes that are either owned or a view kept alive by an owner.
#pragma once

#include "ir/elem_type.h"
#include "support/status.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::ir {

using Shape = std::vector<int64_t>;

std::string shapeToString(std::span<const int64_t> shape);  // "1x3x224x224", "scalar" for rank 0
// Equal dimensions, whichever container holds them.
inline bool sameShape(std::span<const int64_t> a, std::span<const int64_t> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}
// Element count of a concrete shape; nullopt on a negative dimension or overflow.
std::optional<uint64_t> elementCount(std::span<const int64_t> shape);

// The most bytes one tensor, or one compiled program's arena, may take: allocations sized from a model, a program or
// an input are checked against it and fail as an error naming what asked, instead of aborting the process or
// letting the system's OOM killer end it. Process-wide; ctxgen and ctxrun set it from --memory-limit.
inline constexpr uint64_t kDefaultMemoryLimit = uint64_t{16} << 30;  // 16 GiB
uint64_t memoryLimit();
void setMemoryLimit(uint64_t bytes);
// An error when `bytes` exceed memoryLimit(): "<what> needs N bytes, more than the memory limit of M bytes".
Status checkMemoryLimit(uint64_t bytes, std::string_view what);

class Tensor {
public:
  Tensor() = default;

  // A zero-filled, 64-byte aligned, writable tensor. Fails on overflow, string type, a size above memoryLimit() or
  // memory the system does not give.
  static Expected<Tensor> allocate(ElemType type, Shape shape);
  // Likewise in a buffer of at least `capacity` bytes (room refit can grow the tensor into).
  static Expected<Tensor> allocate(ElemType type, Shape shape, uint64_t capacity);
  // A read-only view of bytes owned by `owner` (a mapped file, a parsed model...). Checks the byte count.
  static Expected<Tensor> view(ElemType type, Shape shape, const std::byte* data, size_t size,
                               std::shared_ptr<const void> owner);
  // A copy of `bytes` into an owned buffer.
  static Expected<Tensor> copyOf(ElemType type, Shape shape, std::span<const std::byte> bytes);
  static Tensor strings(Shape shape, std::vector<std::string> values);
  // A writable view of memory owned elsewhere (an execution arena); the caller keeps it alive.
  static Expected<Tensor> mutableView(ElemType type, Shape shape, std::byte* data, size_t size);
  template <typename T> static Tensor fromVector(ElemType type, Shape shape, const std::vector<T>& values) {
    return copyOf(type, std::move(shape), std::as_bytes(std::span(values))).value();
  }

  ElemType type() const { return type_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  uint64_t elementCount() const;
  size_t byteSize() const { return size_; }
  bool empty() const { return type_ == ElemType::Undefined; }
  bool isWritable() const { return writable_; }

  const std::byte* data() const { return data_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  // Only for tensors made by allocate/copyOf; views of mapped files are read-only.
  std::byte* mutableData() { return writable_ ? const_cast<std::byte*>(data_) : nullptr; }

  template <typename T> const T* dataAs() const { return reinterpret_cast<const T*>(data_); }
  template <typename T> T* mutableDataAs() { return reinterpret_cast<T*>(mutableData()); }

  const std::vector<std::string>& stringValues() const { return strings_; }
  std::vector<std::string>& mutableStringValues() { return strings_; }

  // Same bytes, another shape with the same element count (Reshape and friends as views).
  Expected<Tensor> reshaped(Shape shape) const;
  // Becomes a view of `base` with `shape` (same element count), reusing this tensor's shape storage: binding a
  // view on every run allocates nothing once the storage has grown.
  Status rebindAsView(const Tensor& base, std::span<const int64_t> shape);
  // Becomes a view of the first bytes of `base` (writable when it is) as `type` and `shape`, reusing this tensor's
  // shape storage: a buffer kept between runs holds values whose sizes vary up to its size without allocating.
  Status rebindAsPrefix(const Tensor& base, ElemType type, std::span<const int64_t> shape);
  // Becomes an empty tensor (no data, no owner) but keeps its shape storage for the next binding.
  void unbind();
  // Becomes `type` and `shape` in its own buffer, when it is writable, holds that buffer alone (no view shares it)
  // and the buffer has room from data() on; the bytes are left as they were. False, and unchanged, otherwise.
  bool refit(ElemType type, std::span<const int64_t> shape);
  // The bytes of its buffer from data() on: what refit may grow it to (its byte size for views of memory kept
  // elsewhere).
  size_t capacity() const { return capacity_; }
  // The owner keeping data() alive (shared with views).
  const std::shared_ptr<const void>& owner() const { return owner_; }

private:
  ElemType type_ = ElemType::Undefined;
  Shape shape_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  bool writable_ = false;
  std::shared_ptr<const void> owner_;
  std::vector<std::string> strings_;
};

}  // namespace ctxkit::ir
