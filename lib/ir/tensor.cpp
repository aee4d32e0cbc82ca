// Tensor storage: aligned owned buffers and checked views.
#include "ir/tensor.h"

#include "support/checked.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>

namespace ctxkit::ir {

namespace {
constexpr size_t kAlignment = 64;

// Freed buffers from 64 KiB to 16 MiB wait here, up to 64 MiB in all, for the next request of the same size. A
// model run repeats the same sizes, and glibc serves these with fresh mappings whose pages fault in again on
// every run; recycled buffers are already resident.
class BufferCache {
public:
  static BufferCache& instance() {
    static BufferCache* cache = new BufferCache;  // never destroyed: tensors in static storage may outlive it
    return *cache;
  }
  static bool cacheable(size_t bytes) { return bytes >= kMinBytes && bytes <= kMaxBytes; }

  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return p;
  }
  void give(void* p, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + bytes <= kBudget) {
        free_[bytes].push_back(p);
        cached_ += bytes;
        return;
      }
    }
    std::free(p);
  }

private:
  static constexpr size_t kMinBytes = size_t{64} << 10, kMaxBytes = size_t{16} << 20, kBudget = size_t{64} << 20;
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

constexpr size_t kHugePage = size_t{2} << 20;

// `size` new bytes aligned to kAlignment. From a few huge pages up, aligned to a huge page and advised to be backed by
// huge pages where the system allows that on request: zeroing a large fresh buffer then takes one page fault per
// 2 MiB instead of one per 4 KiB (a detector's first run allocates tens of MB of activations whose shapes only it
// knows). The unaligned head that glibc's mapping keeps is never touched, so it costs no memory.
void* allocateFresh(size_t size) {
  if (size < 4 * kHugePage) return std::aligned_alloc(kAlignment, size);
  void* p = nullptr;
  if (::posix_memalign(&p, kHugePage, size) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
  ::madvise(p, size / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only: without it, ordinary pages
#endif
  return p;
}

// Null when the system gives no memory.
std::shared_ptr<std::byte> alignedBuffer(size_t size) {
  size_t rounded = alignUp(size == 0 ? 1 : size, kAlignment);
  const bool cacheable = BufferCache::cacheable(rounded);
  void* p = cacheable ? BufferCache::instance().take(rounded) : nullptr;
  if (!p) p = allocateFresh(rounded);
  if (!p) return nullptr;
  std::memset(p, 0, rounded);
  if (!cacheable) return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                    [rounded](std::byte* q) { BufferCache::instance().give(q, rounded); });
}
std::atomic<uint64_t> gMemoryLimit{kDefaultMemoryLimit};

}  // namespace

uint64_t memoryLimit() { return gMemoryLimit.load(std::memory_order_relaxed); }
void setMemoryLimit(uint64_t bytes) { gMemoryLimit.store(bytes, std::memory_order_relaxed); }

Status checkMemoryLimit(uint64_t bytes, std::string_view what) {
  if (bytes <= memoryLimit()) return Status::ok();
  return makeError(ErrorCode::Unsupported,
                   "{} needs {} bytes, more than the memory limit of {} bytes (--memory-limit raises it)", what, bytes,
                   memoryLimit());
}

std::string shapeToString(std::span<const int64_t> shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

std::optional<uint64_t> elementCount(std::span<const int64_t> shape) { return checkedElementCount(shape); }

uint64_t Tensor::elementCount() const { return ir::elementCount(shape_).value_or(0); }

Expected<Tensor> Tensor::allocate(ElemType type, Shape shape) { return allocate(type, std::move(shape), 0); }

Expected<Tensor> Tensor::allocate(ElemType type, Shape shape, uint64_t capacity) {
  auto count = ir::elementCount(shape);
  if (!count) return makeError(ErrorCode::InvalidGraph, "invalid tensor shape {}", shapeToString(shape));
  auto bytes = storageBytes(type, *count);
  if (!bytes || !toSize(*bytes))
    return makeError(ErrorCode::Unsupported, "cannot allocate a {} tensor of shape {}", elemTypeName(type),
                     shapeToString(shape));
  const uint64_t room = std::max(*bytes, capacity);
  if (room > memoryLimit())  // the message is made only for an error
    return checkMemoryLimit(room, fmt::format("a {} tensor of shape {}", elemTypeName(type), shapeToString(shape)))
        .error();
  auto buffer =
      room == static_cast<uint64_t>(static_cast<size_t>(room)) ? alignedBuffer(static_cast<size_t>(room)) : nullptr;
  if (!buffer)
    return makeError(ErrorCode::Unsupported, "out of memory for a {} tensor of shape {} ({} bytes)", elemTypeName(type),
                     shapeToString(shape), room);
  Tensor t;
  t.type_ = type;
  t.shape_ = std::move(shape);
  t.data_ = buffer.get();
  t.size_ = static_cast<size_t>(*bytes);
  t.capacity_ = static_cast<size_t>(room);
  t.writable_ = true;
  t.owner_ = std::move(buffer);
  return t;
}

Expected<Tensor> Tensor::view(ElemType type, Shape shape, const std::byte* data, size_t size,
                              std::shared_ptr<const void> owner) {
  auto count = ir::elementCount(shape);
  if (!count) return makeError(ErrorCode::InvalidGraph, "invalid tensor shape {}", shapeToString(shape));
  auto bytes = storageBytes(type, *count);
  if (!bytes || *bytes != size)
    return makeError(ErrorCode::InvalidGraph, "{} tensor of shape {} needs {} bytes but {} are present",
                     elemTypeName(type), shapeToString(shape), bytes ? std::to_string(*bytes) : "?", size);
  Tensor t;
  t.type_ = type;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.size_ = size;
  t.capacity_ = size;
  t.owner_ = std::move(owner);
  return t;
}

Expected<Tensor> Tensor::mutableView(ElemType type, Shape shape, std::byte* data, size_t size) {
  CTX_ASSIGN_OR_RETURN(Tensor t, view(type, std::move(shape), data, size, nullptr));
  t.writable_ = true;
  return t;
}

Expected<Tensor> Tensor::copyOf(ElemType type, Shape shape, std::span<const std::byte> bytes) {
  // The byte count is checked before allocating: a corrupt shape must not allocate what its bytes do not back.
  auto count = ir::elementCount(shape);
  if (!count) return makeError(ErrorCode::InvalidGraph, "invalid tensor shape {}", shapeToString(shape));
  auto needed = storageBytes(type, *count);
  if (!needed || *needed != bytes.size())
    return makeError(ErrorCode::InvalidGraph, "{} tensor of shape {} needs {} bytes but {} were given",
                     elemTypeName(type), shapeToString(shape), needed ? std::to_string(*needed) : "?", bytes.size());
  CTX_ASSIGN_OR_RETURN(Tensor t, allocate(type, std::move(shape)));
  if (!bytes.empty()) std::memcpy(t.mutableData(), bytes.data(), bytes.size());
  return t;
}

Tensor Tensor::strings(Shape shape, std::vector<std::string> values) {
  Tensor t;
  t.type_ = ElemType::String;
  t.shape_ = std::move(shape);
  t.strings_ = std::move(values);
  return t;
}

Expected<Tensor> Tensor::reshaped(Shape shape) const {
  auto count = ir::elementCount(shape);
  if (!count || *count != elementCount())
    return makeError(ErrorCode::InvalidGraph, "cannot view a tensor of shape {} as {}", shapeToString(shape_),
                     shapeToString(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::unbind() {
  type_ = ElemType::Undefined;
  shape_.clear();
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
  writable_ = false;
  owner_.reset();
  strings_.clear();
}

bool Tensor::refit(ElemType type, std::span<const int64_t> shape) {
  if (!writable_ || !owner_ || owner_.use_count() != 1 || type == ElemType::String) return false;
  const auto count = ir::elementCount(shape);
  const auto bytes = count ? storageBytes(type, *count) : std::nullopt;
  if (!bytes || *bytes > capacity_) return false;
  type_ = type;
  shape_.assign(shape.begin(), shape.end());
  size_ = static_cast<size_t>(*bytes);
  return true;
}

Status Tensor::rebindAsPrefix(const Tensor& base, ElemType type, std::span<const int64_t> shape) {
  const auto count = ir::elementCount(shape);
  const auto bytes = count ? storageBytes(type, *count) : std::nullopt;
  if (type == ElemType::String || !bytes || *bytes > base.size_)
    return makeError(ErrorCode::Internal, "cannot view {} bytes as a {} tensor of shape {}", base.size_,
                     elemTypeName(type), shapeToString(shape));
  type_ = type;
  shape_.assign(shape.begin(), shape.end());
  data_ = base.data_;
  size_ = static_cast<size_t>(*bytes);
  capacity_ = base.capacity_;
  writable_ = base.writable_;
  owner_ = base.owner_;
  strings_.clear();
  return Status::ok();
}

Status Tensor::rebindAsView(const Tensor& base, std::span<const int64_t> shape) {
  auto count = ir::elementCount(shape);
  if (!count || *count != base.elementCount())
    return makeError(ErrorCode::InvalidGraph, "cannot view a tensor of shape {} as {}", shapeToString(base.shape_),
                     shapeToString(shape));
  *this = base;
  shape_.assign(shape.begin(), shape.end());
  return Status::ok();
}

}  // namespace ctxkit::ir
