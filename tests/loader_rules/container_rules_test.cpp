// `.bin` loader rules 1-10 and 16 (docs/bad-input.md#loader-rules) through the real tools: a `.bin` written by ctxgen
// is broken one rule at a time and `ctxinspect --verify` and `ctxrun` must both exit 1 naming the file, the field, the
// value found and the value expected. (Library-level twins of several cases live in tests/format/corrupt_test.cpp.)
#include "rules_util.h"

#include <limits>

using namespace ctxkit;
using namespace ctxkit::format::testing;
using namespace ctxkit::loader_rules;

namespace {

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

// First weight with at least one byte, and with a 4-byte element type when `float32` is set.
size_t pickWeight(const std::vector<std::byte>& bytes, bool float32 = false, size_t from = 0) {
  const auto count = static_cast<size_t>(getHeader(bytes).weightCount);
  for (size_t i = from; i < count; ++i) {
    auto w = getWeight(bytes, i);
    if (w.size > 0 && (!float32 || w.elemType == 1)) return i;
  }
  FAIL("the sample .bin has no suitable weight");
  return 0;
}

}  // namespace

TEST_CASE("the unmodified deployment is accepted by both tools", "[loader_rules]") {
  Crafted c;
  REQUIRE(getHeader(c.bytes).graphCount >= 2);
  REQUIRE(getHeader(c.bytes).weightCount >= 2);
  expectToolAccepts(CTXKIT_CTXINSPECT, {c.model().string(), c.model(kDecodeModel).string(), "--verify"});
  expectToolAccepts(CTXKIT_CTXRUN, {c.model().string()});
}

TEST_CASE("rule 1: header and metadata sizes are capped before anything is read or allocated", "[loader_rules][rule1]") {
  SECTION("a file shorter than the fixed header") {
    Crafted c;
    c.bytes.resize(100);
    c.expectRejected({"file is truncated at 100 bytes; expected at least the 160-byte header"});
  }
  SECTION("a string table of 1 TiB") {
    Crafted c;
    c.editHeader([](auto& h) { h.stringTableSize = uint64_t{1} << 40; });
    c.expectRejected({"string table size 1099511627776 exceeds the limit of 67108864 bytes"});
  }
  SECTION("a compatibility block of 2^62 bytes") {
    Crafted c;
    c.editHeader([](auto& h) { h.compatSize = uint64_t{1} << 62; });
    c.expectRejected({"compatibility block size is 4611686018427387904 bytes; expected 96"});
  }
}

TEST_CASE("rule 2: every count is capped by its limit and by the bytes left in the file", "[loader_rules][rule2]") {
  SECTION("graph count at the absolute limit but far beyond the bytes left") {
    Crafted c;
    auto h = c.editHeader([](auto& h) { h.graphCount = uint64_t{1} << 20; });
    c.expectRejected({"graph count 1048576 needs 67108864 bytes of table but only",
                      fmt::format("follow offset {}", h.graphTableOffset)});
  }
  SECTION("weight count at the absolute limit") {
    Crafted c;
    auto h = c.editHeader([](auto& h) { h.weightCount = uint64_t{1} << 24; });
    c.expectRejected({"weight count 16777216 needs 2147483648 bytes of table but only",
                      fmt::format("follow offset {}", h.weightTableOffset)});
  }
  SECTION("a weight count above the absolute limit") {
    Crafted c;
    c.editHeader([](auto& h) { h.weightCount = kMax64; });
    c.expectRejected({"weight count 18446744073709551615 exceeds the limit of 16777216"});
  }
  SECTION("a graph count above the absolute limit") {
    Crafted c;
    c.editHeader([](auto& h) { h.graphCount = uint64_t{1} << 60; });
    c.expectRejected({"graph count 1152921504606846976 exceeds the limit of 1048576"});
  }
}

TEST_CASE("rule 3: products of dimensions and sizes use checked arithmetic", "[loader_rules][rule3]") {
  SECTION("a shape whose byte count wraps to exactly the recorded size") {
    // 4 * (2^62 + n) wraps around 2^64 to 4n, the recorded size: unchecked arithmetic would accept it.
    Crafted c;
    size_t i = pickWeight(c.bytes, true);
    auto w = c.editWeight(i, [](auto& w) {
      const uint64_t n = w.size / 4;
      w.rank = 1;
      w.dims = {};
      w.dims[0] = static_cast<int64_t>((uint64_t{1} << 62) + n);
    });
    c.expectRejected({fmt::format("weight {} shape {} of float32 has more bytes than fit in 64 bits", i, w.dims[0])});
  }
  SECTION("an element count that overflows") {
    Crafted c;
    size_t i = pickWeight(c.bytes);
    c.editWeight(i, [](auto& w) {
      w.rank = 3;
      w.dims = {};
      w.dims[0] = w.dims[1] = w.dims[2] = int64_t{1} << 30;
    });
    c.expectRejected({fmt::format("weight {} shape 1073741824x1073741824x1073741824", i), "more bytes than fit in 64 bits"});
  }
}

TEST_CASE("rule 4: ranges are checked against the real file size without overflow", "[loader_rules][rule4]") {
  SECTION("a weight past the end of the file") {
    Crafted c;
    size_t i = pickWeight(c.bytes);
    auto w = c.editWeight(i, [](auto& w) { w.offset = uint64_t{1} << 20; });
    c.expectRejected({fmt::format("weight {} (offset 1048576, size {}) extends past the end of the file ({} bytes)", i,
                                  w.size, c.bytes.size())});
  }
  SECTION("a weight whose offset + size wraps around 2^64") {
    Crafted c;
    size_t i = pickWeight(c.bytes);
    auto w = c.editWeight(i, [](auto& w) { w.offset = kMax64 - 63; });
    c.expectRejected({fmt::format("weight {} (offset {}, size {}) extends past the end of the file", i, w.offset, w.size)});
  }
  SECTION("a program size of 2^64 - 1") {
    Crafted c;
    auto g = c.editGraph(1, [](auto& g) { g.programSize = kMax64; });
    c.expectRejected({fmt::format("graph 1 program (offset {}, size 18446744073709551615) extends past the end of the "
                                  "file ({} bytes)",
                                  g.programOffset, c.bytes.size())});
  }
  SECTION("a string reference outside the string table") {
    Crafted c;
    const uint64_t tableSize = getHeader(c.bytes).stringTableSize;
    c.editGraph(0, [&](auto& g) { g.name = {tableSize, 1}; });
    c.expectRejected({fmt::format("graph 0 name (offset {}, length 1) lies outside the string table of {} bytes",
                                  tableSize, tableSize)});
  }
  SECTION("a recorded file size that is not the real one") {
    Crafted c;
    c.bytes.resize(c.bytes.size() - 1);
    c.expectRejected({fmt::format("file is {} bytes but its header records {}", c.bytes.size(), c.bytes.size() + 1)});
  }
}

TEST_CASE("rule 5: blobs tile the data region", "[loader_rules][rule5]") {
  SECTION("two weights overlap") {
    Crafted c;
    size_t before = pickWeight(c.bytes);
    size_t k = before + 1;
    REQUIRE(k < getHeader(c.bytes).weightCount);
    const uint64_t overlapAt = getWeight(c.bytes, before).offset;
    auto w = c.editWeight(k, [&](auto& w) { w.offset = overlapAt; });
    c.expectRejected({fmt::format("weight {} (offset {}, size {}) overlaps weight {}, which ends at", k, overlapAt,
                                  w.size, before)});
  }
  SECTION("two programs overlap") {
    Crafted c;
    auto g = c.editGraph(1, [&](auto& g) { g.programOffset = getGraph(c.bytes, 0).programOffset; });
    c.expectRejected({fmt::format("graph 1 program (offset {}", g.programOffset), "overlaps graph 0 program"});
  }
  SECTION("a gap that alignment does not explain") {
    // The last weight moves one alignment unit later and the file grows to match: only the gap is wrong.
    Crafted c;
    const auto h = getHeader(c.bytes);
    const size_t last = static_cast<size_t>(h.weightCount - 1);
    const uint64_t expectedOffset = getWeight(c.bytes, last).offset;
    std::vector<std::byte> moved(c.bytes.begin() + static_cast<ptrdiff_t>(expectedOffset), c.bytes.end());
    c.bytes.resize(static_cast<size_t>(expectedOffset) + h.alignment, std::byte{0});
    c.bytes.insert(c.bytes.end(), moved.begin(), moved.end());
    c.editHeader([&](auto& h) {
      h.fileSize = c.bytes.size();
      h.dataSize += h.alignment;
    });
    auto w = c.editWeight(last, [&](auto& w) { w.offset += h.alignment; });
    c.expectRejected({fmt::format("weight {} starts at offset {}, leaving a gap of", last, w.offset),
                      fmt::format("expected offset {}", expectedOffset)});
  }
  SECTION("bytes after the last blob") {
    Crafted c;
    const uint64_t end = c.bytes.size();
    c.bytes.resize(c.bytes.size() + 256, std::byte{0});
    c.editHeader([&](auto& h) {
      h.fileSize = c.bytes.size();
      h.dataSize += 256;
    });
    c.expectRejected({fmt::format("ends at offset {} but the file is {} bytes; expected no trailing bytes", end,
                                  c.bytes.size())});
  }
}

TEST_CASE("rule 6: a weight's byte length equals its shape times its element size", "[loader_rules][rule6]") {
  Crafted c;
  size_t i = pickWeight(c.bytes, true);
  REQUIRE(getWeight(c.bytes, i).rank >= 1);
  auto w = c.editWeight(i, [](auto& w) { w.dims[w.rank - 1] += 1; });
  ir::Shape shape(w.dims.begin(), w.dims.begin() + w.rank);
  uint64_t needed = 4;
  for (int64_t d : shape) needed *= static_cast<uint64_t>(d);
  c.expectRejected({fmt::format("weight {} size is {} bytes; a float32 tensor of shape {} needs {}", i, w.size,
                                ir::shapeToString(shape), needed)});
}

TEST_CASE("rule 7: element types, ranks and indices are checked before they index anything", "[loader_rules][rule7]") {
  SECTION("an element type beyond the table") {
    Crafted c;
    c.editWeight(0, [](auto& w) { w.elemType = 0x80000001u; });
    c.expectRejected({"weight 0 has element type 2147483649; expected an ONNX tensor type from 1 to 26"});
  }
  SECTION("an element type without a fixed size (string)") {
    Crafted c;
    c.editWeight(0, [](auto& w) { w.elemType = 8; });
    c.expectRejected({"weight 0 has element type string, which has no fixed byte size"});
  }
  SECTION("a rank of 2^32 - 1") {
    Crafted c;
    c.editWeight(0, [](auto& w) { w.rank = 0xffffffffu; });
    c.expectRejected({"weight 0 has rank 4294967295; expected at most 8"});
  }
  SECTION("a program op input index beyond the program's tensors") {
    Crafted c;
    int32_t tensorCount = 0;
    c.bytes = rebuild(c.bytes, [&](GraphEdit& g) {
      if (g.index != 0) return;
      auto p = program::deserialize(g.program, 1u << 20, "program");
      REQUIRE(p.isOk());
      REQUIRE(!p->ops.empty());
      tensorCount = static_cast<int32_t>(p->tensors.size());
      p->ops[0].inputs[0] = tensorCount + 1000;
      g.program = program::serialize(*p);
    });
    c.expectRejected({fmt::format("input refers to tensor {} of {}", tensorCount + 1000, tensorCount)});
  }
  SECTION("a program op output recorded with a shape the kernels do not compute") {
    // The kernels write what they infer: a recorded shape is checked against it at every load (a later session on
    // the same container skips inference only after a load found every recorded shape right).
    Crafted c;
    std::string recorded;
    c.bytes = rebuild(c.bytes, [&](GraphEdit& g) {
      if (g.index != 0) return;
      auto p = program::deserialize(g.program, 1u << 20, "program");
      REQUIRE(p.isOk());
      for (const program::Op& op : p->ops) {
        program::TensorDesc& t = p->tensors[op.outputs[0]];
        ir::Shape reversed(t.shape.rbegin(), t.shape.rend());
        if (t.kind != program::TensorKind::Arena || ir::sameShape(reversed, t.shape)) continue;
        t.shape = program::toDims(reversed);  // the same element count and size: only the kernels can tell
        recorded = fmt::format("{} {}", ir::elemTypeName(t.type), ir::shapeToString(reversed));
        break;
      }
      REQUIRE(!recorded.empty());
      g.program = program::serialize(*p);
    });
    c.writeBin();
    expectToolRejects(CTXKIT_CTXRUN, {c.model().string(), "--sessions", "2"},
                      {fmt::format("is recorded as {} but computes", recorded)});
  }
  SECTION("a program with more inputs than its EPContext node binds") {
    // ctxrun compares the program's input list with the node before binding anything. (ctxinspect --verify
    // does not cross-check programs against nodes; it only decodes each program on its own.)
    Crafted c;
    std::string graph;
    size_t inputs = 0;
    c.bytes = rebuild(c.bytes, [&](GraphEdit& g) {
      if (g.index != 0) return;
      auto p = program::deserialize(g.program, 1u << 20, "program");
      REQUIRE(p.isOk());
      graph = g.name;
      inputs = p->inputs.size();
      p->tensors.push_back({program::TensorKind::Input, ir::ElemType::Float, {4}, static_cast<uint32_t>(inputs), 0, 16, "extra", {}});
      p->inputs.push_back(static_cast<int32_t>(p->tensors.size() - 1));
      g.program = program::serialize(*p);
    });
    c.writeBin();
    expectToolRejects(CTXKIT_CTXRUN, {c.model().string()},
                      {fmt::format("node has {} inputs", inputs), fmt::format("but graph '{}' has {} and", graph, inputs + 1)});
  }
}

TEST_CASE("rule 8: alignment is a bounded power of two and every offset honours it", "[loader_rules][rule8]") {
  for (uint32_t alignment : {uint32_t{0}, uint32_t{96}, uint32_t{1} << 17}) {
    DYNAMIC_SECTION("alignment " << alignment) {
      Crafted c;
      c.editHeader([&](auto& h) { h.alignment = alignment; });
      c.expectRejected({fmt::format("alignment is {}; expected a power of two from 64 to 65536", alignment)});
    }
  }
  SECTION("a weight offset off the alignment") {
    Crafted c;
    size_t i = pickWeight(c.bytes);
    auto w = c.editWeight(i, [](auto& w) { w.offset += 8; });
    c.expectRejected({fmt::format("weight {} offset {} is not a multiple of the alignment {}", i, w.offset,
                                  getHeader(c.bytes).alignment)});
  }
  SECTION("a program offset off the alignment") {
    Crafted c;
    auto g = c.editGraph(1, [](auto& g) { g.programOffset += 1; });
    c.expectRejected({fmt::format("program offset {} is not a multiple of the alignment", g.programOffset)});
  }
}

TEST_CASE("rule 9: duplicate names and duplicate weight keys are rejected", "[loader_rules][rule9]") {
  SECTION("two graphs with one name") {
    Crafted c;
    auto view = openBytes(c.bytes);
    REQUIRE(view.isOk());
    const std::string name = view->graphs()[0].name;
    c.editGraph(1, [&](auto& g) { g.name = getGraph(c.bytes, 0).name; });
    c.expectRejected({fmt::format("graph name '{}' appears twice (graphs 0 and 1); expected unique names", name)});
  }
  SECTION("one weight stored twice") {
    // The last weight takes the key (type, shape, hash) of an earlier one; the file ends where it now ends.
    Crafted c;
    const size_t last = static_cast<size_t>(getHeader(c.bytes).weightCount - 1);
    std::optional<size_t> twin;
    for (size_t i = 0; i < last && !twin; ++i)
      if (getWeight(c.bytes, i).size <= getWeight(c.bytes, last).size) twin = i;
    REQUIRE(twin.has_value());
    const auto t = getWeight(c.bytes, *twin);
    auto w = c.editWeight(last, [&](auto& w) {
      w.elemType = t.elemType;
      w.rank = t.rank;
      w.dims = t.dims;
      w.size = t.size;
      w.hash = t.hash;
    });
    c.bytes.resize(static_cast<size_t>(w.offset + w.size));
    c.editHeader([&](auto& h) {
      h.fileSize = c.bytes.size();
      h.dataSize = c.bytes.size() - h.dataOffset;
    });
    c.expectRejected({fmt::format("weight {} repeats weight {} (same element type, shape and hash", last, *twin),
                      "expected each unique weight once"});
  }
}

TEST_CASE("rule 10: magic, major version and header size are checked exactly", "[loader_rules][rule10]") {
  SECTION("another file type") {
    Crafted c;
    c.bytes[1] = std::byte{'X'};
    c.expectRejected({"is not a ctxkit container: it starts with bytes 89 58 54 58 4b 49 54 0a; expected the magic 89 43 "
                      "54 58 4b 49 54 0a"});
  }
  SECTION("an unknown major, named") {
    Crafted c;
    c.editHeader([](auto& h) {
      h.formatMajor = 2;
      h.headerSize = 4096;
    });
    c.expectRejected({"is container format major 2; this ctxkit reads major 1"});
  }
  SECTION("a development format (1.0 to 1.3), named: recompile") {
    for (uint16_t minor = 0; minor < format::kFirstReleasedMinor; ++minor) {
      Crafted c;
      auto compat = format::testing::getCompat(c.bytes);
      compat.formatMinor = minor;
      format::testing::setCompat(c.bytes, compat);
      c.editHeader([minor](auto& h) { h.formatMinor = minor; });
      c.expectRejected({fmt::format("': compiled by ctxkit 0.1.0-dev format 1.{}: recompile", minor)});
    }
  }
  SECTION("a header size one byte off") {
    Crafted c;
    c.editHeader([](auto& h) { h.headerSize = 161; });
    c.expectRejected({"header size is 161 bytes; expected 160 for format major 1"});
  }
}

TEST_CASE("rule 16: 64-bit offsets beyond the host's size type are rejected, not truncated", "[loader_rules][rule16]") {
  // On a 64-bit host size_t holds every u64, so the size_t check itself cannot fire; what must hold is that
  // values above 2^63 (negative as signed, huge as pointers) are refused by the range checks before any
  // pointer arithmetic.
  SECTION("weight offset 2^63") {
    Crafted c;
    size_t i = pickWeight(c.bytes);
    auto w = c.editWeight(i, [](auto& w) { w.offset = uint64_t{1} << 63; });
    c.expectRejected({fmt::format("weight {} (offset 9223372036854775808, size {}) extends past the end of the file", i,
                                  w.size)});
  }
  SECTION("program offset 2^64 - 64") {
    Crafted c;
    c.editGraph(0, [](auto& g) { g.programOffset = kMax64 - 63; });
    c.expectRejected({"graph 0 program (offset 18446744073709551552"});
  }
  SECTION("recorded file size 2^64 - 1") {
    Crafted c;
    c.editHeader([](auto& h) { h.fileSize = kMax64; });
    c.expectRejected({fmt::format("file is {} bytes but its header records 18446744073709551615", c.bytes.size())});
  }
  SECTION("string reference offset 2^64 - 1") {
    Crafted c;
    c.editGraph(0, [](auto& g) { g.name = {kMax64, 1}; });
    c.expectRejected({"graph 0 name (offset 18446744073709551615, length 1) lies outside the string table"});
  }
}
