// Pins the byte-exact output for the worked example in docs/format/container-v1.md (tests/format/data/
// tiny_container.hex), so the specification and the writer cannot drift apart.
// Run with CTXKIT_UPDATE_GOLDEN=1 to rewrite the hex file after an intended format change.
#include "container_test_util.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace ctxkit;
using namespace ctxkit::format;
using namespace ctxkit::format::testing;

namespace {

const std::filesystem::path kGolden = std::filesystem::path(CTXKIT_FORMAT_TEST_DATA) / "tiny_container.hex";

// Offset, then 16 bytes per line; '#' starts a comment line.
std::string toHexDump(const std::vector<std::byte>& bytes) {
  std::string out = "# ctxkit container v1: the worked example of docs/format/container-v1.md\n";
  for (size_t line = 0; line < bytes.size(); line += 16) {
    out += fmt::format("{:04x} ", line);
    for (size_t i = line; i < std::min(bytes.size(), line + 16); ++i)
      out += fmt::format(" {:02x}", static_cast<unsigned>(bytes[i]));
    out += '\n';
  }
  return out;
}

std::vector<std::byte> fromHexDump(const std::string& text) {
  std::vector<std::byte> bytes;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream tokens(line);
    std::string token;
    tokens >> token;  // the offset
    while (tokens >> token) bytes.push_back(static_cast<std::byte>(std::stoul(token, nullptr, 16)));
  }
  return bytes;
}

}  // namespace

TEST_CASE("the documented tiny container is reproduced byte for byte", "[format][golden]") {
  const std::vector<float> values = {1.0f, 2.0f};
  auto weight = std::as_bytes(std::span(values));
  ContainerWriter writer(sampleCompat());
  auto index = writer.addWeight(ir::ElemType::Float, {2}, weight, hash128(weight));
  REQUIRE(index.isOk());
  REQUIRE(writer.addGraph("g", "m.onnx", toBytes("prog")).isOk());
  auto bytes = writer.serialize();
  REQUIRE(bytes.isOk());
  CHECK(bytes->size() == 584);

  const char* update = std::getenv("CTXKIT_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(kGolden) << toHexDump(*bytes);
    WARN("rewrote " << kGolden.string());
  }
  auto golden = readFile(kGolden);
  REQUIRE(golden.isOk());
  CHECK(fromHexDump(*golden) == *bytes);

  auto view = openBytes(*bytes);
  REQUIRE(view.isOk());
  CHECK(view->verify().isOk());
  CHECK(view->weights()[0].offset == 576);
  CHECK(view->graphs()[0].programOffset == 512);
}
