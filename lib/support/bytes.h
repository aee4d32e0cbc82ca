// Little-endian byte encoding for our binary formats: a growable writer and a bounds-checked reader.
#pragma once

#include "support/status.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit {

class ByteWriter {
public:
  void u8(uint8_t v) { raw(&v, 1); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i32(int32_t v) { raw(&v, 4); }
  void i64(int64_t v) { raw(&v, 8); }
  void f32(float v) { raw(&v, 4); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void bytes(std::span<const std::byte> b) {
    u64(b.size());
    raw(b.data(), b.size());
  }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    buffer_.insert(buffer_.end(), b, b + n);
  }
  std::vector<std::byte>& buffer() { return buffer_; }
  std::vector<std::byte> take() { return std::move(buffer_); }

private:
  std::vector<std::byte> buffer_;  // host order is little-endian on every target we build for
};

static_assert(std::endian::native == std::endian::little, "ctxkit formats assume a little-endian host");

// Every read checks the bytes left; the first failure sticks and later reads return zeros.
class ByteReader {
public:
  ByteReader(std::span<const std::byte> data, std::string what) : data_(data), what_(std::move(what)) {}

  uint8_t u8() { return read<uint8_t>(); }
  uint16_t u16() { return read<uint16_t>(); }
  uint32_t u32() { return read<uint32_t>(); }
  uint64_t u64() { return read<uint64_t>(); }
  int32_t i32() { return read<int32_t>(); }
  int64_t i64() { return read<int64_t>(); }
  float f32() { return read<float>(); }
  std::string str(size_t maxLength = 1u << 20) { return std::string(strView(maxLength)); }
  // The string's bytes where they are, valid as long as the data read.
  std::string_view strView(size_t maxLength = 1u << 20) {
    uint32_t n = u32();
    if (!ok_) return {};
    if (n > maxLength) {
      setError(fmt::format("string length {} exceeds the limit of {} bytes, at offset {}", n, maxLength, pos_));
      return {};
    }
    if (n > remaining()) return fail<std::string_view>("string length", n);
    std::string_view s(reinterpret_cast<const char*>(data_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  std::span<const std::byte> bytes() {
    uint64_t n = u64();
    if (!ok_) return {};
    if (n > remaining()) return fail<std::span<const std::byte>>("byte count", n);
    auto s = data_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  // A count of items of at least `minItemBytes` each: capped by the bytes left (rule 2).
  uint32_t count(size_t minItemBytes, const char* what) {
    uint32_t n = u32();
    if (ok_ && minItemBytes > 0 && n > remaining() / minItemBytes) return fail<uint32_t>(what, n);
    return n;
  }

  bool ok() const { return ok_; }
  size_t remaining() const { return data_.size() - pos_; }
  size_t position() const { return pos_; }
  const std::string& failure() const { return failure_; }
  Status status() const {
    if (ok_) return Status::ok();
    return makeError(ErrorCode::InvalidGraph, "{}: {}", what_, failure_);
  }
  void setError(std::string message) {
    if (ok_) {
      ok_ = false;
      failure_ = std::move(message);
    }
  }

private:
  template <typename T> T read() {
    if (!ok_) return T{};
    if (sizeof(T) > remaining()) {
      setError(fmt::format("truncated: {} bytes needed at offset {} but {} left", sizeof(T), pos_, remaining()));
      return T{};
    }
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T> T fail(const char* what, uint64_t value) {
    setError(fmt::format("{} {} exceeds the {} bytes left at offset {}", what, value, remaining(), pos_));
    return T{};
  }

  std::span<const std::byte> data_;
  size_t pos_ = 0;
  bool ok_ = true;
  std::string failure_;
  std::string what_;
};

}  // namespace ctxkit
