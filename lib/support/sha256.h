// SHA-256 (FIPS 180-4): the content addresses of model-package shared assets, as ONNX Runtime names them.
#pragma once

#include "support/status.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace ctxkit {

// Incremental SHA-256; digestHex() ends the message (the object is spent afterwards).
class Sha256 {
public:
  Sha256();
  void update(std::span<const std::byte> data);
  void update(std::string_view text) { update(std::as_bytes(std::span(text.data(), text.size()))); }
  std::string digestHex();  // 64 lower-case hex digits

private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes fed so far
};

std::string sha256Hex(std::span<const std::byte> data);
inline std::string sha256Hex(std::string_view text) {
  return sha256Hex(std::as_bytes(std::span(text.data(), text.size())));
}
// A file's SHA-256, read through MappedFile (regular files only); the error names the file.
Expected<std::string> sha256File(const std::filesystem::path& path);

}  // namespace ctxkit
