// One test per reader rule (docs/bad-input.md#loader-rules): a valid container corrupted on purpose must be rejected
// cleanly with a message that names the file and the problem.
#include "container_test_util.h"

#include <limits>
#include <tuple>

using namespace ctxkit;
using namespace ctxkit::format;
using namespace ctxkit::format::testing;
using layout::FileHeader;

TEST_CASE("the unmodified sample opens and verifies", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto view = openBytes(bytes);
  REQUIRE(view.isOk());
  CHECK(view->verify().isOk());
}

TEST_CASE("rule 10: bad magic is rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  bytes[1] = std::byte{'X'};
  expectRejected(bytes, "is not a ctxkit container: it starts with bytes 89 58");
  std::vector<std::byte> text = toBytes("hello world, not a container at all");
  expectRejected(text, "is not a ctxkit container");
  expectRejected(std::vector<std::byte>(3, std::byte{0}), "is 3 bytes long");
}

TEST_CASE("rule 10: an unknown major is rejected by name", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto h = getHeader(bytes);
  h.formatMajor = 2;
  h.headerSize = 999;  // a new major may change everything after the prefix; the major is checked first
  setHeader(bytes, h);
  expectRejected(bytes, "'t.bin' is container format major 2; this ctxkit reads major 1", ErrorCode::Unsupported);
  h.formatMajor = 0;
  setHeader(bytes, h);
  expectRejected(bytes, "is container format major 0", ErrorCode::Unsupported);
}

TEST_CASE("rule 10: the header size is checked exactly", "[format][corrupt]") {
  for (uint32_t size : {uint32_t{0}, uint32_t{159}, uint32_t{161}, uint32_t{200}, uint32_t{0xffffffff}}) {
    auto bytes = sampleBytes();
    auto h = getHeader(bytes);
    h.headerSize = size;
    setHeader(bytes, h);
    expectRejected(bytes, fmt::format("header size is {} bytes; expected 160", size));
  }
}

TEST_CASE("the recorded file size must equal the real size", "[format][corrupt]") {
  auto bytes = sampleBytes();
  bytes.push_back(std::byte{0});
  expectRejected(bytes, "its header records");
}

TEST_CASE("rule 1: metadata sizes are capped before anything is allocated", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto h = getHeader(bytes);
  h.stringTableSize = uint64_t{1} << 40;
  setHeader(bytes, h);
  expectRejected(bytes, "string table size 1099511627776 exceeds the limit");

  bytes = sampleBytes();
  h = getHeader(bytes);
  h.compatSize = uint64_t{1} << 62;
  setHeader(bytes, h);
  expectRejected(bytes, "compatibility block size is 4611686018427387904 bytes; expected 96");
}

TEST_CASE("rule 2: huge counts are rejected against the limit and the bytes left", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto h = getHeader(bytes);
  h.graphCount = uint64_t{1} << 60;
  setHeader(bytes, h);
  expectRejected(bytes, "graph count 1152921504606846976 exceeds the limit");

  bytes = sampleBytes();
  h = getHeader(bytes);
  h.graphCount = 1000;  // below the absolute limit, but 64000 bytes cannot follow in this small file
  setHeader(bytes, h);
  expectRejected(bytes, "graph count 1000 needs 64000 bytes of table but only");

  bytes = sampleBytes();
  h = getHeader(bytes);
  h.weightCount = std::numeric_limits<uint64_t>::max();
  setHeader(bytes, h);
  expectRejected(bytes, "weight count 18446744073709551615 exceeds the limit");

  bytes = sampleBytes();
  h = getHeader(bytes);
  h.weightCount = 5000;
  setHeader(bytes, h);
  expectRejected(bytes, "weight count 5000 needs 640000 bytes of table but only");
}

TEST_CASE("metadata regions must sit where the sizes before them put them", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto h = getHeader(bytes);
  h.compatOffset = 168;
  setHeader(bytes, h);
  expectRejected(bytes, "compatibility block offset is 168; expected 160");

  bytes = sampleBytes();
  h = getHeader(bytes);
  h.graphTableOffset += 8;
  setHeader(bytes, h);
  expectRejected(bytes, "graph table offset is");

  bytes = sampleBytes();
  h = getHeader(bytes);
  h.weightTableOffset -= 64;
  setHeader(bytes, h);
  expectRejected(bytes, "weight table offset is");

  bytes = sampleBytes();
  h = getHeader(bytes);
  h.dataOffset += 64;
  setHeader(bytes, h);
  expectRejected(bytes, "data region offset is");

  bytes = sampleBytes();
  h = getHeader(bytes);
  h.dataSize -= 1;
  setHeader(bytes, h);
  expectRejected(bytes, "data region size is");
}

TEST_CASE("rule 4: a weight offset past the end of the file is rejected", "[format][corrupt]") {
  for (uint64_t offset : {uint64_t{1} << 20, std::numeric_limits<uint64_t>::max() - 63}) {
    auto bytes = sampleBytes();
    auto e = getWeight(bytes, 1);
    e.offset = offset;
    setWeight(bytes, 1, e);
    reseal(bytes);
    expectRejected(bytes, fmt::format("weight 1 (offset {}, size 5) extends past the end of the file", offset));
  }
}

TEST_CASE("rule 4: a program range past the end of the file is rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto e = getGraph(bytes, 2);
  e.programSize = std::numeric_limits<uint64_t>::max();
  setGraph(bytes, 2, e);
  expectRejected(bytes, "graph 2 program (offset");
}

TEST_CASE("rule 4: a string reference outside the string table is rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto e = getGraph(bytes, 0);
  e.name.offset = getHeader(bytes).stringTableSize;
  e.name.length = 1;
  setGraph(bytes, 0, e);
  reseal(bytes);
  expectRejected(bytes, "graph 0 name (offset");

  bytes = sampleBytes();
  auto c = getCompat(bytes);
  c.targetId.length = 5000;
  setCompat(bytes, c);
  reseal(bytes);
  expectRejected(bytes, "compatibility block target id is 5000 bytes long; the limit is 4096");
}

TEST_CASE("rule 5: overlapping blobs are rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto first = getWeight(bytes, 0);
  auto second = getWeight(bytes, 1);
  second.offset = first.offset;
  setWeight(bytes, 1, second);
  reseal(bytes);
  expectRejected(bytes, "weight 1 (offset");
  expectRejected(bytes, "overlaps weight 0");

  bytes = sampleBytes();
  auto g1 = getGraph(bytes, 1);
  g1.programOffset = getGraph(bytes, 0).programOffset;
  setGraph(bytes, 1, g1);
  reseal(bytes);
  expectRejected(bytes, "graph 1 program (offset");
  expectRejected(bytes, "overlaps graph 0 program");
}

TEST_CASE("rule 5: a gap that alignment does not explain is rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto h = getHeader(bytes);
  size_t last = static_cast<size_t>(h.weightCount - 1);
  auto e = getWeight(bytes, last);
  // Move the last weight one alignment unit later and grow the file to match: only the gap is wrong.
  std::vector<std::byte> moved(bytes.begin() + static_cast<ptrdiff_t>(e.offset), bytes.end());
  bytes.resize(static_cast<size_t>(e.offset));
  bytes.resize(bytes.size() + h.alignment, std::byte{0});
  bytes.insert(bytes.end(), moved.begin(), moved.end());
  e.offset += h.alignment;
  setWeight(bytes, last, e);
  h.fileSize = bytes.size();
  h.dataSize += h.alignment;
  setHeader(bytes, h);
  reseal(bytes);
  expectRejected(bytes, fmt::format("weight {} starts at offset {}, leaving a gap of", last, e.offset));
}

TEST_CASE("rule 5: bytes after the last blob are rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto h = getHeader(bytes);
  bytes.resize(bytes.size() + 64, std::byte{0});
  h.fileSize = bytes.size();
  h.dataSize += 64;
  setHeader(bytes, h);
  reseal(bytes);
  expectRejected(bytes, "expected no trailing bytes");
}

TEST_CASE("rule 6: a byte length that does not match the shape is rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto e = getWeight(bytes, 0);
  e.dims[1] = 4;  // float32 2x4 needs 32 bytes, the entry says 24
  setWeight(bytes, 0, e);
  reseal(bytes);
  expectRejected(bytes, "weight 0 size is 24 bytes; a float32 tensor of shape 2x4 needs 32");

  bytes = sampleBytes();
  e = getWeight(bytes, 4);  // uint4 x3: packed into 2 bytes
  e.size = 3;
  setWeight(bytes, 4, e);
  reseal(bytes);
  expectRejected(bytes, "weight 4 size is 3 bytes; a uint4 tensor of shape 3 needs 2");
}

TEST_CASE("rule 3: a shape whose byte count overflows is rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto e = getWeight(bytes, 0);
  e.dims[0] = int64_t{1} << 40;
  e.dims[1] = int64_t{1} << 40;
  setWeight(bytes, 0, e);
  reseal(bytes);
  expectRejected(bytes, "has more bytes than fit in 64 bits");
}

TEST_CASE("rule 7: unknown or sizeless element types are rejected", "[format][corrupt]") {
  for (uint32_t type : {uint32_t{0}, uint32_t{8}, uint32_t{27}, uint32_t{99}, uint32_t{0x80000001}}) {
    INFO("type " << type);
    auto bytes = sampleBytes();
    auto e = getWeight(bytes, 0);
    e.elemType = type;
    setWeight(bytes, 0, e);
    reseal(bytes);
    expectRejected(bytes, "weight 0 has element type");
  }
}

TEST_CASE("rule 7: a rank above 8 is rejected before it indexes anything", "[format][corrupt]") {
  for (uint32_t rank : {uint32_t{9}, uint32_t{0xffffffff}}) {
    auto bytes = sampleBytes();
    auto e = getWeight(bytes, 0);
    e.rank = rank;
    setWeight(bytes, 0, e);
    reseal(bytes);
    expectRejected(bytes, fmt::format("weight 0 has rank {}; expected at most 8", rank));
  }
}

TEST_CASE("rule 7: negative dimensions and stray unused dimension slots are rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto e = getWeight(bytes, 0);
  e.dims[1] = -3;
  setWeight(bytes, 0, e);
  reseal(bytes);
  expectRejected(bytes, "weight 0 dimension 1 is -3; expected a non-negative size");

  bytes = sampleBytes();
  e = getWeight(bytes, 0);
  e.dims[5] = 1;
  setWeight(bytes, 0, e);
  reseal(bytes);
  expectRejected(bytes, "unused dimension slot 5 holds 1");
}

TEST_CASE("rule 8: alignment must be a power of two within bounds", "[format][corrupt]") {
  for (uint32_t alignment :
       {uint32_t{0}, uint32_t{1}, uint32_t{32}, uint32_t{48}, uint32_t{96}, uint32_t{1} << 17, uint32_t{0x80000000}}) {
    auto bytes = sampleBytes();
    auto h = getHeader(bytes);
    h.alignment = alignment;
    setHeader(bytes, h);
    expectRejected(bytes, fmt::format("alignment is {}; expected a power of two from 64 to 65536", alignment));
  }
}

TEST_CASE("rule 8: every blob offset honours the alignment", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto e = getWeight(bytes, 1);
  e.offset += 8;
  setWeight(bytes, 1, e);
  reseal(bytes);
  expectRejected(bytes, fmt::format("weight 1 offset {} is not a multiple of the alignment 64", e.offset));

  bytes = sampleBytes();
  auto g = getGraph(bytes, 1);
  g.programOffset += 1;
  setGraph(bytes, 1, g);
  reseal(bytes);
  expectRejected(bytes, "graph 'm1_ctxkit_1' program offset");
}

TEST_CASE("rule 9: duplicate graph names are rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto g0 = getGraph(bytes, 0);
  auto g2 = getGraph(bytes, 2);
  g2.name = g0.name;
  setGraph(bytes, 2, g2);
  reseal(bytes);
  expectRejected(bytes, "graph name 'm1_ctxkit_0' appears twice (graphs 0 and 2)");
}

TEST_CASE("rule 9: a weight stored twice is rejected", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto w0 = getWeight(bytes, 0);
  auto w6 = getWeight(bytes, 6);
  w6.elemType = w0.elemType;
  w6.dims = w0.dims;
  w6.rank = w0.rank;
  w6.size = w0.size;
  w6.hash = w0.hash;
  setWeight(bytes, 6, w6);
  // Keep the tiling valid: the file shrinks to end where the shortened weight 6 now ends.
  bytes.resize(static_cast<size_t>(w6.offset + w6.size));
  auto h = getHeader(bytes);
  h.fileSize = bytes.size();
  h.dataSize = bytes.size() - h.dataOffset;
  setHeader(bytes, h);
  reseal(bytes);
  expectRejected(bytes, "weight 6 repeats weight 0");
}

TEST_CASE("graph names must be non-empty printable UTF-8", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto g = getGraph(bytes, 0);
  g.name.length = 0;
  setGraph(bytes, 0, g);
  reseal(bytes);
  expectRejected(bytes, "graph 0 has an empty name");

  bytes = sampleBytes();
  auto h = getHeader(bytes);
  g = getGraph(bytes, 0);
  bytes[static_cast<size_t>(h.stringTableOffset + g.name.offset)] = std::byte{0xc0};
  reseal(bytes);
  expectRejected(bytes, "graph 0 name is not valid UTF-8");

  bytes = sampleBytes();
  bytes[static_cast<size_t>(h.stringTableOffset + g.name.offset + 1)] = std::byte{'\n'};
  reseal(bytes);
  expectRejected(bytes, "graph 0 name contains a control character");
}

TEST_CASE("the compatibility block must repeat the header's version", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto c = getCompat(bytes);
  c.formatMinor = format::kFormatMinor - 1;
  setCompat(bytes, c);
  reseal(bytes);
  expectRejected(bytes, fmt::format("compatibility block records format 1.{} but the header records 1.{}",
                                    format::kFormatMinor - 1, format::kFormatMinor));
}

TEST_CASE("a container of a development format (1.0 to 1.3) is refused by name", "[format][corrupt]") {
  for (uint16_t minor = 0; minor < format::kFirstReleasedMinor; ++minor) {
    auto bytes = sampleBytes();
    auto h = getHeader(bytes);
    auto c = getCompat(bytes);
    h.formatMinor = c.formatMinor = minor;
    setHeader(bytes, h);
    setCompat(bytes, c);
    REQUIRE(layout::sealChecksum(bytes, "t.bin"));  // the checksum is defined alike for the development formats
    expectRejected(bytes, fmt::format("'t.bin': compiled by ctxkit 0.1.0-dev format 1.{}: recompile", minor),
                   ErrorCode::Unsupported);
  }
}

TEST_CASE("reserved fields and undefined flags must be zero in a file of a known minor", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto h = getHeader(bytes);
  h.pinCount = 5;  // reserved1 before format 1.5; a pin table only in a weightless file
  setHeader(bytes, h);
  reseal(bytes);
  expectRejected(bytes, "header records a source table (offset 0, 0 entries, 5 pins) but the file is not weightless");

  bytes = sampleBytes();
  h = getHeader(bytes);
  h.flags = uint64_t{1} << 40;
  setHeader(bytes, h);
  reseal(bytes);
  expectRejected(bytes, fmt::format("flags 0x10000000000 are not defined in format 1.{}", format::kFormatMinor));

  bytes = sampleBytes();
  h = getHeader(bytes);
  h.flags |= 2;  // bit 1 is not defined (a development format used it)
  setHeader(bytes, h);
  reseal(bytes);
  expectRejected(bytes, fmt::format("flags 0x2 are not defined in format 1.{}", format::kFormatMinor));

  bytes = sampleBytes();
  auto w = getWeight(bytes, 2);
  w.reserved[0] = 1;
  setWeight(bytes, 2, w);
  reseal(bytes);
  expectRejected(bytes, "weight 2 field reserved[0] is 0x1; expected 0");

  bytes = sampleBytes();
  auto c = getCompat(bytes);
  c.reserved0 = 7;
  setCompat(bytes, c);
  reseal(bytes);
  expectRejected(bytes, "compatibility block field reserved0 is 0x7");
}

TEST_CASE("a newer minor is readable and only unknown required features stop it", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto h = getHeader(bytes);
  auto c = getCompat(bytes);
  h.formatMinor = kFormatMinor + 1;
  c.formatMinor = kFormatMinor + 1;
  h.pinCount = 42;              // read as a newer minor defines it: not at all
  h.flags = uint64_t{1} << 33;  // an optional feature
  setHeader(bytes, h);
  setCompat(bytes, c);
  reseal(bytes);
  auto view = openBytes(bytes);
  REQUIRE(view.isOk());
  CHECK(view->compat().formatMinor == kFormatMinor + 1);
  CHECK(view->verify().isOk());

  h.flags |= 16;  // a required feature this reader does not know
  setHeader(bytes, h);
  reseal(bytes);
  expectRejected(bytes, "needs features this ctxkit does not know (required flags 0x10)", ErrorCode::Unsupported);
}

TEST_CASE("format 1.4 files are read, and the load-time flag is 1.5's", "[format][corrupt]") {
  // A file of the first released minor reads (the sample has no load-time tensor, as every 1.4 file).
  auto bytes = sampleBytes();
  auto h = getHeader(bytes);
  auto c = getCompat(bytes);
  h.formatMinor = c.formatMinor = kFirstReleasedMinor;
  setHeader(bytes, h);
  setCompat(bytes, c);
  reseal(bytes);
  auto view = openBytes(bytes);
  REQUIRE(view.isOk());
  CHECK(!view->loadTimeTensors());
  // Flag bit 3 (load-time tensors) is not defined in 1.4: damage there, a declaration in 1.5.
  h.flags |= 8;
  setHeader(bytes, h);
  reseal(bytes);
  expectRejected(bytes, "flags 0x8 are not defined in format 1.4");
  h.formatMinor = c.formatMinor = kFormatMinor;
  setHeader(bytes, h);
  setCompat(bytes, c);
  reseal(bytes);
  auto declared = openBytes(bytes);
  REQUIRE(declared.isOk());
  CHECK(declared->loadTimeTensors());
}

TEST_CASE("a checksum mismatch is caught on open", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto h = getHeader(bytes);
  bytes[static_cast<size_t>(h.stringTableOffset)] ^= std::byte{0x01};  // "ctxkit" -> "btxkit"
  expectRejected(bytes, "checksum mismatch");

  bytes = sampleBytes();
  bytes[static_cast<size_t>(getGraph(bytes, 0).programOffset)] ^= std::byte{0x20};
  expectRejected(bytes, "checksum mismatch");

  bytes = sampleBytes();
  bytes[static_cast<size_t>(layout::kChecksumOffset + 15)] ^= std::byte{0x80};
  expectRejected(bytes, "checksum mismatch");
}

TEST_CASE("every truncation of a container is rejected without crashing", "[format][corrupt]") {
  auto bytes = sampleBytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    auto view = openBytes(cut);
    REQUIRE_FALSE(view.isOk());
    CHECK(view.error().message().find("'t.bin'") != std::string::npos);
  }
}

TEST_CASE("a flipped weight byte passes open but fails verify", "[format][corrupt]") {
  auto bytes = sampleBytes();
  auto e = getWeight(bytes, 5);
  bytes[static_cast<size_t>(e.offset + 7)] ^= std::byte{0x10};
  auto view = openBytes(bytes);
  REQUIRE(view.isOk());
  Status status = view->verify();
  REQUIRE_FALSE(status.isOk());
  CHECK(status.error().code() == ErrorCode::InvalidGraph);
  CHECK(status.error().message().find("'t.bin': weight 5 (float16 4x4x2 at offset") != std::string::npos);
  CHECK(status.error().message().find("fails its hash") != std::string::npos);
}

TEST_CASE("nonzero padding passes open but fails verify", "[format][corrupt]") {
  auto bytes = sampleBytes();
  // Between graph 0's program and graph 1's program.
  auto g0 = getGraph(bytes, 0);
  uint64_t at = g0.programOffset + g0.programSize + 3;
  REQUIRE(at < getGraph(bytes, 1).programOffset);
  bytes[static_cast<size_t>(at)] = std::byte{0x55};
  auto view = openBytes(bytes);
  REQUIRE(view.isOk());
  Status status = view->verify();
  REQUIRE_FALSE(status.isOk());
  CHECK(status.error().message().find(fmt::format("padding byte at offset {} is 0x55; expected 0", at)) !=
        std::string::npos);

  // Padding inside the metadata is also under the checksum: a writer that put garbage there and sealed
  // it still fails verify.
  bytes = sampleBytes();
  auto h = getHeader(bytes);
  uint64_t metaPad = h.weightTableOffset + h.weightCount * layout::kWeightEntrySize;
  REQUIRE(metaPad < h.dataOffset);
  bytes[static_cast<size_t>(metaPad)] = std::byte{1};
  CHECK_FALSE(openBytes(bytes).isOk());
  reseal(bytes);
  view = openBytes(bytes);
  REQUIRE(view.isOk());
  CHECK_FALSE(view->verify().isOk());
}

TEST_CASE("a change to any single byte is caught by open or verify", "[format][corrupt]") {
  auto bytes = sampleBytes();
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}}) {
      auto copy = bytes;
      copy[i] ^= std::byte{mask};
      auto view = openBytes(copy);
      bool caught = !view.isOk() || !view->verify().isOk();
      if (!caught) FAIL("a flip of byte " << i << " with mask " << int(mask) << " went unnoticed");
    }
  }
}

namespace {

// A weightless container: one weight in source model m1.onnx, one stored, and pins of m1.onnx and its data file.
std::vector<std::byte> pinnedBytes() {
  static const auto stored = patternBytes(24, 1);
  ContainerWriter writer(sampleCompat(), WriterOptions{64, true});
  REQUIRE(writer.addWeight(ir::ElemType::Float, {2, 3}, stored, hash128(stored)).isOk());
  REQUIRE(writer.addSourceWeight(ir::ElemType::Float, {4}, hash128(patternBytes(16, 2)), {{"m1.onnx", "w"}}).isOk());
  REQUIRE(writer.addGraph("m1_ctxkit_0", "m1.onnx", toBytes("program")).isOk());
  // Added out of order: the table is sorted by (model, file).
  REQUIRE(writer.addSourcePin({"m1.onnx", "m1.data", 4096, hash128(patternBytes(4, 7))}).isOk());
  REQUIRE(writer.addSourcePin({"m1.onnx", "", 300, hash128(patternBytes(4, 8))}).isOk());
  auto bytes = writer.serialize();
  REQUIRE(bytes.isOk());
  return std::move(bytes).value();
}

uint64_t pinOffset(const std::vector<std::byte>& b, size_t i) {
  const auto h = getHeader(b);
  return h.sourceTableOffset + h.sourceCount * layout::kSourceEntrySize + i * layout::kSourcePinEntrySize;
}
layout::SourcePinEntry getPin(const std::vector<std::byte>& b, size_t i) {
  auto e = layout::readStruct<layout::SourcePinEntry>(b, pinOffset(b, i));
  REQUIRE(e.has_value());
  return *e;
}
void setPin(std::vector<std::byte>& b, size_t i, const layout::SourcePinEntry& e) {
  REQUIRE(layout::writeStruct(std::span(b), pinOffset(b, i), e));
}

}  // namespace

TEST_CASE("a weightless container's pin table reads back sorted", "[format][corrupt]") {
  auto view = openBytes(pinnedBytes());
  REQUIRE(view);
  REQUIRE(view->sourcePins().size() == 2);
  CHECK(view->sourcePins()[0] == SourcePin{"m1.onnx", "", 300, hash128(patternBytes(4, 8))});
  CHECK(view->sourcePins()[1] == SourcePin{"m1.onnx", "m1.data", 4096, hash128(patternBytes(4, 7))});
  CHECK(getHeader(pinnedBytes()).pinCount == 2);
  ContainerWriter plain(sampleCompat());
  CHECK_FALSE(plain.addSourcePin({"m1.onnx", "", 1, {}}).isOk());  // only a weightless container pins
  ContainerWriter weightless(sampleCompat(), WriterOptions{64, true});
  REQUIRE(weightless.addSourcePin({"m1.onnx", "", 1, {}}).isOk());
  auto twice = weightless.addSourcePin({"m1.onnx", "", 2, {}});
  REQUIRE_FALSE(twice.isOk());
  CHECK(twice.error().message().find("pinned twice") != std::string::npos);
}

TEST_CASE("a damaged pin table is refused by name", "[format][corrupt]") {
  // Out of order, or the same file twice.
  auto bytes = pinnedBytes();
  auto first = getPin(bytes, 0), second = getPin(bytes, 1);
  setPin(bytes, 0, second);
  setPin(bytes, 1, first);
  reseal(bytes);
  expectRejected(bytes, "source pin 1 ('' of 'm1.onnx') does not follow pin 0 ('m1.data' of 'm1.onnx')");
  bytes = pinnedBytes();
  setPin(bytes, 1, getPin(bytes, 0));
  reseal(bytes);
  expectRejected(bytes, "expected entries sorted by model and file, each once");

  // A reserved field, an empty model name, a string outside the table.
  bytes = pinnedBytes();
  auto pin = getPin(bytes, 1);
  pin.reserved = 3;
  setPin(bytes, 1, pin);
  reseal(bytes);
  expectRejected(bytes, "source pin 1 field reserved is 0x3; expected 0");
  bytes = pinnedBytes();
  pin = getPin(bytes, 0);
  pin.sourceModel.length = 0;
  setPin(bytes, 0, pin);
  reseal(bytes);
  expectRejected(bytes, "source pin 0 has an empty model name");
  bytes = pinnedBytes();
  pin = getPin(bytes, 1);
  pin.file.offset = ~uint64_t{0} - 2;
  setPin(bytes, 1, pin);
  reseal(bytes);
  expectRejected(bytes, "source pin 1 file");

  // Counts past the limit, past the file, and one that would overflow the table's size.
  for (uint64_t count : {layout::kMaxSourcePins + 1, uint64_t{1000}, ~uint64_t{0} / 8}) {
    bytes = pinnedBytes();
    auto h = getHeader(bytes);
    h.pinCount = count;
    setHeader(bytes, h);
    reseal(bytes);
    INFO(count);
    auto view = openBytes(bytes);
    REQUIRE_FALSE(view.isOk());
    CHECK(view.error().message().find("source pin") != std::string::npos);
  }

  // Fewer pins than written: the table no longer ends where the data region starts.
  bytes = pinnedBytes();
  auto h = getHeader(bytes);
  h.pinCount = 1;
  setHeader(bytes, h);
  reseal(bytes);
  expectRejected(bytes, "data region offset");
}
