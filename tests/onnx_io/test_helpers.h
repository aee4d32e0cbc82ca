// Helpers for the onnx_io tests: scratch folders, the shared conformance data, byte conversions.
#pragma once

#include "../common/material.h"
#include "support/status.h"

#include <catch2/catch.hpp>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <string_view>

namespace ctxkit::test {

// A fresh folder under the system temp folder, removed with its contents at scope exit.
class TempDir {
public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("ctxkit_onnx_io_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

private:
  std::filesystem::path path_;
};

// ../shared/onnx-node-tests/node beside the project, or empty when it is absent.
inline std::filesystem::path nodeTestsDir() {
  std::filesystem::path dir = std::filesystem::path(CTXKIT_SHARED_DIR) / "onnx-node-tests" / "node";
  return std::filesystem::is_directory(dir) ? dir : std::filesystem::path();
}

inline std::span<const std::byte> asBytes(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

inline void writeFile(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Replaces the only occurrence of `from` by `to` (same length), e.g. to plant a bad path in a serialized model.
inline std::string replaceOnce(std::string bytes, std::string_view from, std::string_view to) {
  REQUIRE(from.size() == to.size());
  size_t at = bytes.find(from);
  REQUIRE(at != std::string::npos);
  REQUIRE(bytes.find(from, at + 1) == std::string::npos);
  bytes.replace(at, from.size(), to);
  return bytes;
}

inline bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace ctxkit::test

#define CTX_SKIP_WITHOUT_NODE_TESTS() \
  CTX_REQUIRE_MATERIAL(!::ctxkit::test::nodeTestsDir().empty(), "ONNX node tests not found under " CTXKIT_SHARED_DIR "/onnx-node-tests")
