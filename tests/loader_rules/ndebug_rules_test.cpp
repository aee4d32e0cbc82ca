// Loader rule 12 (docs/bad-input.md#loader-rules: no validation by assert): the container reader and the program
// decoder are compiled into this test with NDEBUG forced, as in a release build, whatever the build type; every rule
// must still reject. A second test reads the loader sources and fails on any assert() in them.
#ifndef NDEBUG
#error "this test must be compiled with NDEBUG (see tests/loader_rules/CMakeLists.txt)"
#endif

#include "../format/container_test_util.h"
#include "program/program.h"

#include <cassert>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

using namespace ctxkit;
using namespace ctxkit::format;
using namespace ctxkit::format::testing;

TEST_CASE("rule 12: assert is compiled out in this test", "[loader_rules][rule12]") {
  bool evaluated = false;
  assert((evaluated = true));
  CHECK_FALSE(evaluated);
}

TEST_CASE("rule 12: with NDEBUG every container rule still rejects", "[loader_rules][rule12]") {
  using Patch = std::function<void(std::vector<std::byte>&)>;
  const std::vector<std::pair<Patch, std::string>> cases = {
      {[](auto& b) { b[0] = std::byte{0}; }, "is not a ctxkit container"},                                         // 10
      {[](auto& b) { auto h = getHeader(b); h.headerSize = 161; setHeader(b, h); }, "header size is 161 bytes"},  // 10
      {[](auto& b) { auto h = getHeader(b); h.stringTableSize = uint64_t{1} << 40; setHeader(b, h); },
       "exceeds the limit"},                                                                                        // 1
      {[](auto& b) { auto h = getHeader(b); h.graphCount = 1000; setHeader(b, h); }, "bytes of table but only"},   // 2
      {[](auto& b) { auto w = getWeight(b, 0); w.dims[0] = int64_t{1} << 62; setWeight(b, 0, w); reseal(b); },
       "more bytes than fit in 64 bits"},                                                                           // 3
      {[](auto& b) { auto w = getWeight(b, 1); w.offset = uint64_t{1} << 63; setWeight(b, 1, w); reseal(b); },
       "extends past the end of the file"},                                                                         // 4, 16
      {[](auto& b) { auto w = getWeight(b, 1); w.offset = getWeight(b, 0).offset; setWeight(b, 1, w); reseal(b); },
       "overlaps weight 0"},                                                                                        // 5
      {[](auto& b) { auto w = getWeight(b, 0); w.size = 20; setWeight(b, 0, w); reseal(b); }, "size is 20 bytes"},  // 6
      {[](auto& b) { auto w = getWeight(b, 0); w.rank = 0xffffffffu; setWeight(b, 0, w); reseal(b); },
       "has rank 4294967295"},                                                                                      // 7
      {[](auto& b) { auto w = getWeight(b, 0); w.elemType = 1000; setWeight(b, 0, w); reseal(b); },
       "has element type 1000"},                                                                                    // 7
      {[](auto& b) { auto h = getHeader(b); h.alignment = 96; setHeader(b, h); }, "alignment is 96"},             // 8
      {[](auto& b) { auto g = getGraph(b, 2); g.name = getGraph(b, 0).name; setGraph(b, 2, g); reseal(b); },
       "appears twice"},                                                                                            // 9
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    auto bytes = sampleBytes();
    cases[i].first(bytes);
    expectRejected(bytes, cases[i].second);
  }
}

TEST_CASE("rule 12: with NDEBUG every truncation and every bit flip is caught", "[loader_rules][rule12]") {
  auto bytes = sampleBytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    if (openBytes(cut).isOk()) FAIL("a truncation to " << n << " bytes opened");
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto copy = bytes;
    copy[i] ^= std::byte{0x40};
    auto view = openBytes(copy);
    if (view.isOk() && view->verify().isOk()) FAIL("a flip of byte " << i << " went unnoticed");
  }
}

TEST_CASE("rule 12: with NDEBUG the program decoder refuses a dangling weight index", "[loader_rules][rule12]") {
  program::Program p;
  p.tensors.push_back({program::TensorKind::Weight, ir::ElemType::Float, {2}, 7, 0, 8, "w", {}});
  auto bytes = program::serialize(p);
  auto decoded = program::deserialize(bytes, 7, "program 'p'");
  REQUIRE_FALSE(decoded.isOk());
  CHECK_THAT(decoded.error().message(), Catch::Contains("weight index 7 but the weight table has 7 entries"));
  CHECK(program::deserialize(bytes, 8, "program 'p'").isOk());
}

TEST_CASE("rule 12: the loader sources validate input with errors, never assert", "[loader_rules][rule12]") {
  const std::filesystem::path root = CTXKIT_SOURCE_DIR;
  const std::regex assertCall(R"((^|[^_A-Za-z0-9])assert\s*\()");
  for (const char* file : {"lib/format/reader.cpp", "lib/format/container.cpp", "lib/format/layout.h",
                           "lib/format/internal.h", "lib/program/program.cpp", "lib/onnx_io/read_model.cpp",
                           "lib/onnx_io/read_tensor.cpp", "lib/runtime/session.cpp", "lib/support/file_io.cpp",
                           "lib/support/bytes.h", "lib/support/checked.h"}) {
    std::ifstream in(root / file);
    REQUIRE(in.good());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      INFO(file << ":" << number << ": " << line);
      CHECK_FALSE(std::regex_search(line, assertCall));
    }
  }
}
