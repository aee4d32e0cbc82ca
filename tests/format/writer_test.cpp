// ContainerWriter refuses input that would produce a container its reader rejects, and writes atomically.
#include "container_test_util.h"

using namespace ctxkit;
using namespace ctxkit::format;
using namespace ctxkit::format::testing;

namespace {

void checkError(const Status& status, const std::string& fragment) {
  REQUIRE_FALSE(status.isOk());
  INFO("message: " << status.error().message());
  CHECK(status.error().code() == ErrorCode::InvalidArgument);
  CHECK(status.error().message().find(fragment) != std::string::npos);
}

// No file under `path`'s final name and no temporary one left in its folder.
void checkNoFile(const std::filesystem::path& path) {
  CHECK_FALSE(std::filesystem::exists(path));
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path()))
    CHECK(entry.path().filename().string().find(path.filename().string() + ".tmp") == std::string::npos);
}

}  // namespace

TEST_CASE("addWeight checks byte length against element type and shape", "[format][writer]") {
  ContainerWriter writer(sampleCompat());
  auto bytes = patternBytes(10, 1);
  checkError(writer.addWeight(ir::ElemType::Float, {3}, bytes, hash128(bytes)).status(), "needs 12 bytes but 10");
  auto packed = patternBytes(2, 1);
  CHECK(writer.addWeight(ir::ElemType::Int4, {3}, packed, hash128(packed)).isOk());
  checkError(writer.addWeight(ir::ElemType::Int4, {5}, packed, hash128(packed)).status(), "needs 3 bytes");
}

TEST_CASE("addWeight rejects string and undefined types, rank above 8 and negative dimensions", "[format][writer]") {
  ContainerWriter writer(sampleCompat());
  auto bytes = patternBytes(4, 1);
  checkError(writer.addWeight(ir::ElemType::String, {1}, bytes, hash128(bytes)).status(), "no fixed byte size");
  checkError(writer.addWeight(ir::ElemType::Undefined, {1}, bytes, hash128(bytes)).status(), "no fixed byte size");
  checkError(writer.addWeight(ir::ElemType::Uint8, {1, 1, 1, 1, 1, 1, 1, 1, 4}, bytes, hash128(bytes)).status(),
             "rank 9");
  checkError(writer.addWeight(ir::ElemType::Uint8, {-4}, bytes, hash128(bytes)).status(), "negative or too large");
  CHECK(writer.addWeight(ir::ElemType::Uint8, {1, 1, 1, 1, 1, 1, 1, 4}, bytes, hash128(bytes)).isOk());
}

TEST_CASE("addWeight rejects a second copy of the same weight", "[format][writer]") {
  ContainerWriter writer(sampleCompat());
  auto bytes = patternBytes(16, 1);
  auto first = writer.addWeight(ir::ElemType::Float, {4}, bytes, hash128(bytes));
  REQUIRE(first.isOk());
  CHECK(*first == 0);
  checkError(writer.addWeight(ir::ElemType::Float, {4}, bytes, hash128(bytes)).status(), "repeats weight 0");
  // Same bytes as another type or shape are another weight.
  auto second = writer.addWeight(ir::ElemType::Float, {2, 2}, bytes, hash128(bytes));
  REQUIRE(second.isOk());
  CHECK(*second == 1);
  CHECK(writer.weightCount() == 2);
}

TEST_CASE("addGraph rejects duplicate, empty and unprintable names", "[format][writer]") {
  ContainerWriter writer(sampleCompat());
  CHECK(writer.addGraph("g", "m.onnx", toBytes("p")).isOk());
  checkError(writer.addGraph("g", "other.onnx", toBytes("q")), "already in the container");
  checkError(writer.addGraph("", "m.onnx", toBytes("q")), "empty");
  checkError(writer.addGraph("bad\nname", "m.onnx", toBytes("q")), "control character");
  checkError(writer.addGraph("bad\xff", "m.onnx", toBytes("q")), "not valid UTF-8");
  checkError(writer.addGraph(std::string(5000, 'a'), "m.onnx", toBytes("q")), "at most 4096");
  CHECK(writer.addGraph("ünïcode_名前", "m.onnx", toBytes("q")).isOk());
  CHECK(writer.graphCount() == 2);
}

TEST_CASE("invalid alignment options fail at output time", "[format][writer]") {
  for (uint64_t alignment : {uint64_t{0}, uint64_t{32}, uint64_t{48}, uint64_t{100}, uint64_t{1} << 17}) {
    INFO("alignment " << alignment);
    ContainerWriter writer(sampleCompat(), WriterOptions{alignment});
    checkError(writer.serialize().status(), "alignment");
  }
}

TEST_CASE("invalid compatibility strings fail at output time", "[format][writer]") {
  CompatInfo compat = sampleCompat();
  compat.targetId = "npu\x01sim";
  ContainerWriter writer(compat);
  checkError(writer.serialize().status(), "target id");
}

TEST_CASE("a failed write leaves no file under the final name", "[format][writer]") {
  CompatInfo compat = sampleCompat();
  compat.producer = std::string(5000, 'p');  // fails while planning, after the temporary file exists
  ContainerWriter writer(compat);
  auto path = tempPath("failed_write.bin");
  std::filesystem::remove(path);
  CHECK_FALSE(writer.write(path).isOk());
  checkNoFile(path);
}

TEST_CASE("string table shares repeated names", "[format][writer]") {
  ContainerWriter writer(sampleCompat());
  for (int i = 0; i < 10; ++i)
    REQUIRE(writer.addGraph(fmt::format("g{}", i), "a_long_source_model_name.onnx", toBytes("p")).isOk());
  auto bytes = writer.serialize();
  REQUIRE(bytes.isOk());
  auto h = getHeader(*bytes);
  // "ctxkit" "0.1.0" "npu-sim" "1" + ten "gN" + the source name once.
  CHECK(h.stringTableSize == 6 + 5 + 7 + 1 + 10 * 2 + 29);
}

// Weights without a hash are hashed while written and the metadata (weight table, checksum) is written last, at the
// start of the file: the file must be the one the same weights with their hashes given make, byte for byte.
TEST_CASE("weights hashed while written give the bytes of weights added with their hashes", "[format][writer]") {
  Sample given = makeSample(4096);
  auto expected = given.writer->serialize();
  REQUIRE(expected);
  ContainerWriter writer(sampleCompat(), WriterOptions{4096});
  for (size_t i = 0; i < given.weights.size(); ++i) {
    const SampleWeight& w = given.weights[i];
    if (i % 2 == 0) {
      REQUIRE(writer.addWeight(w.type, w.shape, w.bytes));
    } else {  // produced in pieces of 3 bytes, the producer hashing them
      REQUIRE(writer.addWeight(w.type, w.shape, w.bytes.size(), [&w](const auto& sink) -> Expected<Hash128> {
        Hasher128 hasher;
        for (size_t at = 0; at < w.bytes.size(); at += 3) {
          auto piece = std::span(w.bytes).subspan(at, std::min<size_t>(3, w.bytes.size() - at));
          hasher.update(piece);
          CTX_RETURN_IF_ERROR(sink(piece));
        }
        return hasher.digest();
      }));
    }
  }
  for (const SampleGraph& g : given.graphs) REQUIRE(writer.addGraph(g.name, g.source, g.program));
  auto bytes = writer.serialize();
  REQUIRE(bytes);
  CHECK(*bytes == *expected);
  auto path = tempPath("hashed_while_written.bin");
  REQUIRE(writer.write(path));
  auto file = readFile(path);
  REQUIRE(file);
  REQUIRE(file->size() == expected->size());
  CHECK(std::memcmp(file->data(), expected->data(), file->size()) == 0);
  auto view = ContainerView::openFile(path);
  REQUIRE(view);
  CHECK(view->verify());
  for (size_t i = 0; i < given.weights.size(); ++i) CHECK(view->weights()[i].hash == hash128(given.weights[i].bytes));
  std::filesystem::remove(path);
}

TEST_CASE("a weight hashed while written that repeats another fails the write and leaves no file",
          "[format][writer]") {
  auto bytes = patternBytes(16, 1);
  ContainerWriter writer(sampleCompat());
  REQUIRE(writer.addWeight(ir::ElemType::Float, {4}, bytes, hash128(bytes)));
  REQUIRE(writer.addWeight(ir::ElemType::Float, {4}, bytes));  // its hash is known only once written
  checkError(writer.serialize().status(), "repeats weight 0");
  auto path = tempPath("repeated_weight.bin");
  std::filesystem::remove(path);
  checkError(writer.write(path), "repeats weight 0");
  checkNoFile(path);
}

TEST_CASE("a producer failing in the middle of a weight leaves no file", "[format][writer]") {
  auto bytes = patternBytes(1 << 20, 3);
  ContainerWriter writer(sampleCompat());
  REQUIRE(writer.addWeight(ir::ElemType::Uint8, {1 << 20}, bytes));
  REQUIRE(writer.addWeight(ir::ElemType::Uint8, {1 << 20}, bytes.size(), [&](const auto& sink) -> Expected<Hash128> {
    CTX_RETURN_IF_ERROR(sink(std::span(bytes).first(1000)));
    return Error(ErrorCode::IoError, "the source went away");
  }));
  auto path = tempPath("failed_producer.bin");
  std::filesystem::remove(path);
  Status status = writer.write(path);
  REQUIRE_FALSE(status.isOk());
  CHECK(status.error().message().find("the source went away") != std::string::npos);
  checkNoFile(path);
}
