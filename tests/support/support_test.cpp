// Unit tests for support and ir: hashing, checked arithmetic, confined paths, atomic writes, tensors.
#include "ir/tensor.h"
#include "support/bytes.h"
#include "support/checked.h"
#include "support/file_io.h"
#include "support/hash.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <limits>
#include <random>

using namespace ctxkit;
namespace fs = std::filesystem;

TEST_CASE("XXH3-128 of the empty input has the published value", "[support]") {
  CHECK(hash128({}).toHex() == "99aa06d3014798d86001c324468d497f");
  std::string text = "ctxkit";
  auto bytes = std::as_bytes(std::span(text.data(), text.size()));
  Hasher128 h;
  h.update(bytes.first(3));
  h.update(bytes.subspan(3));
  CHECK(h.digest() == hash128(bytes));
}

TEST_CASE("checked arithmetic refuses overflow and out-of-range spans", "[support]") {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  CHECK(!checkedAdd(max, 1));
  CHECK(*checkedAdd(2, 3) == 5);
  CHECK(!checkedMul(max / 2 + 1, 2));
  CHECK(rangeFits(10, 0, 10));
  CHECK(!rangeFits(11, 0, 10));
  CHECK(!rangeFits(8, max, 10));  // off + len would wrap
  std::vector<int64_t> huge = {1 << 30, 1 << 30, 1 << 30};
  CHECK(!checkedElementCount(huge));
  std::vector<int64_t> negative = {2, -1};
  CHECK(!checkedElementCount(negative));
  CHECK(isPowerOfTwo(64));
  CHECK(!isPowerOfTwo(0));
  CHECK(!isPowerOfTwo(96));
}

TEST_CASE("a string over the reader's length limit is refused as too long, not as past the end", "[support]") {
  ByteWriter w;
  w.str(std::string(65537, 'n'));
  w.u64(0);
  ByteReader r(w.buffer(), "program");
  (void)r.str(65536);
  INFO(r.failure());
  CHECK(!r.ok());
  CHECK(r.failure().find("string length 65537 exceeds the limit of 65536 bytes") != std::string::npos);
  CHECK(r.failure().find("bytes left") == std::string::npos);
}

TEST_CASE("paths stay inside their folder", "[support]") {
  CHECK(*resolveInside("m", "a.bin") == fs::path("m/a.bin"));
  CHECK(*resolveInside("m", "sub/../a.bin") == fs::path("m/a.bin"));
  CHECK(!resolveInside("m", "../a.bin"));
  CHECK(!resolveInside("m", "sub/../../a.bin"));
  CHECK(!resolveInside("m", "/etc/passwd"));
  CHECK(!resolveInside("m", ""));
  auto escape = resolveInside("m", "../x");
  REQUIRE(!escape);
  CHECK_THAT(escape.error().message(), Catch::Contains("escapes"));
}

TEST_CASE("an atomic writer leaves nothing under the final name until it commits", "[support]") {
  std::random_device rd;
  fs::path dir = fs::temp_directory_path() / ("ctxkit_support_" + std::to_string(rd()));
  fs::create_directories(dir);
  {
    auto w = AtomicFileWriter::create(dir / "out.bin");
    REQUIRE(w);
    REQUIRE((*w)->write(std::string_view("partial")));
    CHECK(!fs::exists(dir / "out.bin"));
  }  // destroyed without commit
  CHECK(fs::is_empty(dir));
  REQUIRE(writeFileAtomically(dir / "out.bin", std::string_view("complete")));
  CHECK(*readFile(dir / "out.bin") == "complete");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  CHECK(entries == 1);
  auto mapped = MappedFile::open(dir / "out.bin");
  REQUIRE(mapped);
  CHECK((*mapped)->size() == 8);
  CHECK(!MappedFile::open(dir / "missing.bin"));
  fs::remove_all(dir);
}

TEST_CASE("tensors check their byte counts and views share their owner", "[ir]") {
  auto t = ir::Tensor::allocate(ir::ElemType::Float, {2, 3});
  REQUIRE(t);
  CHECK(t->byteSize() == 24);
  CHECK(reinterpret_cast<uintptr_t>(t->data()) % 64 == 0);
  CHECK(t->isWritable());
  auto reshaped = t->reshaped({3, 2});
  REQUIRE(reshaped);
  CHECK(reshaped->data() == t->data());
  CHECK(!t->reshaped({4, 2}));
  std::vector<std::byte> bytes(23);
  CHECK(!ir::Tensor::view(ir::ElemType::Float, {2, 3}, bytes.data(), bytes.size(), nullptr));
  CHECK(!ir::Tensor::allocate(ir::ElemType::Float, {-1}));
  auto shortCopy = ir::Tensor::copyOf(ir::ElemType::Float, {2, 3}, bytes);
  REQUIRE(!shortCopy);
  CHECK(shortCopy.error().message().find("needs 24 bytes but 23 were given") != std::string::npos);
  CHECK(*ir::storageBytes(ir::ElemType::Int4, 3) == 2);
  CHECK(ir::elemTypeName(ir::ElemType::Float16) == "float16");
  CHECK(*ir::elemTypeFromName("int64") == ir::ElemType::Int64);
  CHECK(!ir::elemTypeFromInt(99));
}

TEST_CASE("copyOf checks the byte count before it allocates", "[ir]") {
  // 4 TiB of floats backed by 4 bytes: refused without trying the allocation (which would throw or abort).
  std::vector<std::byte> four(4);
  auto huge = ir::Tensor::copyOf(ir::ElemType::Float, {int64_t{1} << 20, int64_t{1} << 20}, four);
  REQUIRE(!huge);
  CHECK(huge.error().message().find("needs 4398046511104 bytes but 4 were given") != std::string::npos);
  CHECK(!ir::Tensor::copyOf(ir::ElemType::Float, {int64_t{1} << 62, 4}, four));  // element count overflows
  auto ok = ir::Tensor::copyOf(ir::ElemType::Float, {1}, four);
  REQUIRE(ok);
  CHECK(ok->byteSize() == 4);
}

TEST_CASE("a recycled tensor buffer comes back zero-filled, and live buffers are never shared", "[ir]") {
  // 256 KiB: a size the allocator recycles between runs.
  const ir::Shape shape{256, 256};
  const std::byte* first = nullptr;
  {
    auto t = ir::Tensor::allocate(ir::ElemType::Float, shape);
    REQUIRE(t);
    first = t->data();
    std::fill(t->mutableDataAs<float>(), t->mutableDataAs<float>() + t->elementCount(), 1.5f);
  }
  auto again = ir::Tensor::allocate(ir::ElemType::Float, shape);
  REQUIRE(again);
  for (uint64_t i = 0; i < again->elementCount(); ++i) REQUIRE(again->dataAs<float>()[i] == 0.0f);
  auto other = ir::Tensor::allocate(ir::ElemType::Float, shape);
  REQUIRE(other);
  CHECK(other->data() != again->data());
  (void)first;  // whether the first buffer came back is the allocator's business; its contents are not
}

TEST_CASE("small files are read, large ones mapped: the same bytes, page-aligned either way", "[support]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ctxkit_mapped_{}", std::random_device{}());
  fs::create_directories(dir);
  for (size_t size : {size_t{1}, size_t{4095}, MappedFile::kReadLimit, MappedFile::kReadLimit + 1, size_t{300000}}) {
    CAPTURE(size);
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + size) % 251);
    const fs::path file = dir / fmt::format("f{}.bin", size);
    {
      std::ofstream out(file, std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(size));
    }
    auto mapped = MappedFile::open(file);
    REQUIRE(mapped);
    REQUIRE((*mapped)->size() == size);
    CHECK(std::memcmp((*mapped)->data(), bytes.data(), size) == 0);
    CHECK(reinterpret_cast<uintptr_t>((*mapped)->data()) % 4096 == 0);
  }
  auto empty = dir / "empty.bin";
  std::ofstream(empty).close();
  auto none = MappedFile::open(empty);
  REQUIRE(none);
  CHECK((*none)->size() == 0);
  fs::remove_all(dir);
}
