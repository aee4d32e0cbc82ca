// Shared helpers for container tests: a sample container with mixed weights and graphs, raw field patching,
// re-sealing the checksum after a deliberate corruption, and opening bytes under a known display name.
#pragma once

#include "format/container.h"
#include "format/layout.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

namespace ctxkit::format::testing {

inline CompatInfo sampleCompat() {
  CompatInfo c;
  c.producer = "ctxkit";
  c.producerVersion = "0.1.0";
  c.targetId = "npu-sim";
  c.targetRevision = "1";
  return c;
}

inline std::vector<std::byte> patternBytes(size_t n, uint8_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((seed + i * 31 + (i >> 3)) & 0xff);
  return v;
}

inline std::vector<std::byte> toBytes(std::string_view s) {
  auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

struct SampleWeight {
  ir::ElemType type;
  ir::Shape shape;
  std::vector<std::byte> bytes;
};

struct SampleGraph {
  std::string name;
  std::string source;
  std::vector<std::byte> program;
};

// Weight bytes must outlive the writer's output calls, so the sample owns them next to the writer.
struct Sample {
  std::vector<SampleWeight> weights;
  std::vector<SampleGraph> graphs;
  std::unique_ptr<ContainerWriter> writer;
};

// Several element types (including a packed 4-bit type, a scalar and an empty tensor) and graphs from two
// models. The last weight is non-empty so tests can move it.
inline Sample makeSample(uint64_t alignment = 64) {
  Sample s;
  s.weights.push_back({ir::ElemType::Float, {2, 3}, patternBytes(24, 1)});
  s.weights.push_back({ir::ElemType::Int8, {5}, patternBytes(5, 2)});
  s.weights.push_back({ir::ElemType::Float, {0, 4}, {}});
  s.weights.push_back({ir::ElemType::Int64, {}, patternBytes(8, 3)});
  s.weights.push_back({ir::ElemType::Uint4, {3}, patternBytes(2, 4)});
  s.weights.push_back({ir::ElemType::Float16, {4, 4, 2}, patternBytes(64, 5)});
  s.weights.push_back({ir::ElemType::Float, {3, 7}, patternBytes(84, 6)});
  s.graphs.push_back({"m1_ctxkit_0", "m1.onnx", toBytes("program for m1 partition 0")});
  s.graphs.push_back({"m1_ctxkit_1", "m1.onnx", toBytes("program 1")});
  s.graphs.push_back({"m2_ctxkit_0", "m2.onnx", patternBytes(100, 9)});
  s.writer = std::make_unique<ContainerWriter>(sampleCompat(), WriterOptions{alignment});
  for (const SampleWeight& w : s.weights) {
    auto index = s.writer->addWeight(w.type, w.shape, w.bytes, hash128(w.bytes));
    REQUIRE(index.isOk());
  }
  for (const SampleGraph& g : s.graphs) REQUIRE(s.writer->addGraph(g.name, g.source, g.program).isOk());
  return s;
}

inline std::vector<std::byte> sampleBytes(uint64_t alignment = 64) {
  Sample s = makeSample(alignment);
  auto bytes = s.writer->serialize();
  REQUIRE(bytes.isOk());
  return std::move(bytes).value();
}

// Opens a copy of `bytes` that the view owns, under the name "t.bin".
inline Expected<ContainerView> openBytes(const std::vector<std::byte>& bytes, std::string name = "t.bin") {
  auto owned = std::make_shared<std::vector<std::byte>>(bytes);
  std::span<const std::byte> span(*owned);
  return ContainerView::open(span, owned, std::move(name));
}

inline layout::FileHeader getHeader(const std::vector<std::byte>& b) {
  auto h = layout::readStruct<layout::FileHeader>(b, 0);
  REQUIRE(h.has_value());
  return *h;
}
inline void setHeader(std::vector<std::byte>& b, const layout::FileHeader& h) {
  REQUIRE(layout::writeStruct(std::span(b), 0, h));
}

inline layout::CompatBlock getCompat(const std::vector<std::byte>& b) {
  auto c = layout::readStruct<layout::CompatBlock>(b, layout::kHeaderSize);
  REQUIRE(c.has_value());
  return *c;
}
inline void setCompat(std::vector<std::byte>& b, const layout::CompatBlock& c) {
  REQUIRE(layout::writeStruct(std::span(b), layout::kHeaderSize, c));
}

inline uint64_t graphEntryOffset(const std::vector<std::byte>& b, size_t i) {
  return getHeader(b).graphTableOffset + i * layout::kGraphEntrySize;
}
inline layout::GraphEntry getGraph(const std::vector<std::byte>& b, size_t i) {
  auto e = layout::readStruct<layout::GraphEntry>(b, graphEntryOffset(b, i));
  REQUIRE(e.has_value());
  return *e;
}
inline void setGraph(std::vector<std::byte>& b, size_t i, const layout::GraphEntry& e) {
  REQUIRE(layout::writeStruct(std::span(b), graphEntryOffset(b, i), e));
}

inline uint64_t weightEntryOffset(const std::vector<std::byte>& b, size_t i) {
  return getHeader(b).weightTableOffset + i * layout::kWeightEntrySize;
}
inline layout::WeightEntry getWeight(const std::vector<std::byte>& b, size_t i) {
  auto e = layout::readStruct<layout::WeightEntry>(b, weightEntryOffset(b, i));
  REQUIRE(e.has_value());
  return *e;
}
inline void setWeight(std::vector<std::byte>& b, size_t i, const layout::WeightEntry& e) {
  REQUIRE(layout::writeStruct(std::span(b), weightEntryOffset(b, i), e));
}

// Recomputes the checksum where the corruption still lets it be computed, so the reader gets past the
// checksum to the rule under test; where it cannot, the reader fails before the checksum anyway.
inline void reseal(std::vector<std::byte>& b) { (void)layout::sealChecksum(b, "t.bin"); }

// Expects a clean rejection whose message names the file and contains `fragment`.
inline void expectRejected(const std::vector<std::byte>& bytes, const std::string& fragment,
                           ErrorCode code = ErrorCode::InvalidGraph) {
  auto view = openBytes(bytes);
  REQUIRE_FALSE(view.isOk());
  INFO("message: " << view.error().message());
  CHECK(view.error().code() == code);
  CHECK(view.error().message().find("'t.bin'") != std::string::npos);
  CHECK(view.error().message().find(fragment) != std::string::npos);
}

// A file name in a folder of this process's own, removed when the test binary exits.
inline std::filesystem::path tempPath(const std::string& name) {
  struct Folder {
    std::filesystem::path path;
    ~Folder() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Folder folder{[] {
    auto dir = std::filesystem::temp_directory_path() / fmt::format("ctxkit_format_tests_{}", ::getpid());
    std::filesystem::create_directories(dir);
    return dir;
  }()};
  return folder.path / name;
}

inline std::vector<std::byte> readAll(const std::filesystem::path& path) {
  auto mapped = MappedFile::open(path);
  REQUIRE(mapped.isOk());
  auto bytes = (*mapped)->bytes();
  return {bytes.begin(), bytes.end()};
}

}  // namespace ctxkit::format::testing
