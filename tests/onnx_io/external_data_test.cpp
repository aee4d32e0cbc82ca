// External data: written aligned beside the model, loaded as read-only views of one mapping, bad references refused.
#include "ir_compare.h"
#include "model_builder.h"
#include "test_helpers.h"

#include "onnx_io/onnx_io.h"

using namespace ctxkit;

namespace {

// A model whose initializer 'W' (float32, `elements` values) references `location` at `offset`.
ir::Model externalModel(const std::string& location, uint64_t offset, size_t elements) {
  ir::Model m = test::addModel(elements);
  ir::Initializer& w = m.graph.initializers[0];
  w.external = ir::ExternalLocation{location, offset, w.tensor.byteSize()};
  return m;
}

std::string serialized(const ir::Model& m) {
  auto bytes = onnx_io::serializeModel(m);
  REQUIRE(bytes.isOk());
  return *bytes;
}

std::string loadError(const std::filesystem::path& path) {
  auto m = onnx_io::loadModel(path);
  REQUIRE_FALSE(m.isOk());
  return m.error().message();
}

}  // namespace

TEST_CASE("saveModelWithExternalData moves large initializers to an aligned file that loads without copies") {
  test::TempDir dir;
  ir::Model m = test::addModel(16);  // W: 64 bytes
  m.graph.initializers.push_back({"V", ir::Tensor::fromVector(ir::ElemType::Float, {10}, test::iota(10, 100)), {}});
  m.graph.initializers.push_back({"small", ir::Tensor::fromVector(ir::ElemType::Float, {1}, std::vector{9.f}), {}});
  m.graph.initializers.push_back({"text", ir::Tensor::strings({1}, {"a string stays embedded"}), {}});
  auto sub = std::make_shared<ir::Graph>();
  sub->name = "body";
  sub->initializers.push_back({"S", ir::Tensor::fromVector(ir::ElemType::Int64, {3}, std::vector<int64_t>{1, 2, 3}), {}});
  ir::Node holder = test::makeNode(m, "If", {"c"}, {"o"});
  holder.attrs.set(ir::Attribute::makeGraph("then_branch", sub));
  m.graph.nodes.push_back(holder);

  REQUIRE(onnx_io::saveModelWithExternalData(m, dir / "m.onnx", "m.weights", 16).isOk());

  std::string data = test::readFile(dir / "m.weights");
  REQUIRE(data.size() == 128 + 24);  // W at 0, V at 64 (40 bytes, padded), S at 128
  CHECK(std::memcmp(data.data(), m.graph.initializers[0].tensor.data(), 64) == 0);
  CHECK(std::memcmp(data.data() + 64, m.graph.initializers[1].tensor.data(), 40) == 0);
  CHECK(data.substr(104, 24) == std::string(24, '\0'));
  CHECK(std::filesystem::file_size(dir / "m.onnx") < 400);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  CHECK(files == 2);

  auto loaded = onnx_io::loadModel(dir / "m.onnx");
  REQUIRE(loaded.isOk());
  CHECK(test::diffModels(m, *loaded) == "");
  const auto& inits = loaded->graph.initializers;
  const ir::Tensor& w = inits[0].tensor;
  const ir::Tensor& v = inits[1].tensor;
  const ir::Tensor& small = inits[2].tensor;
  const ir::Tensor& s = loaded->graph.nodes[1].attrs.find("then_branch")->g->initializers[0].tensor;
  // Loaders resolve external data into the tensor; `external` stays empty.
  CHECK_FALSE(inits[0].external.has_value());
  // One mapping of the file serves every tensor in it, at the file's offsets, read-only.
  CHECK_FALSE(w.isWritable());
  CHECK_FALSE(v.isWritable());
  CHECK(w.owner() == v.owner());
  CHECK(w.owner() == s.owner());
  CHECK(v.data() - w.data() == 64);
  CHECK(s.data() - w.data() == 128);
  // Embedded tensors live in the parsed message instead.
  CHECK(small.owner() != w.owner());
  CHECK(inits[3].tensor.stringValues() == std::vector<std::string>{"a string stays embedded"});
}

TEST_CASE("the tensor outlives the model that loaded it") {
  test::TempDir dir;
  REQUIRE(onnx_io::saveModelWithExternalData(test::addModel(32), dir / "m.onnx", "w.bin", 0).isOk());
  ir::Tensor kept;
  {
    auto loaded = onnx_io::loadModel(dir / "m.onnx");
    REQUIRE(loaded.isOk());
    kept = loaded->graph.initializers[0].tensor;
  }
  CHECK(kept.dataAs<float>()[31] == 32.f);
}

TEST_CASE("external references written by serializeModel load from a hand-made data file") {
  test::TempDir dir;
  ir::Model m = externalModel("sub/data.bin", 8, 4);
  test::writeFile(dir / "m.onnx", serialized(m));
  std::filesystem::create_directories(dir / "sub");
  std::string data(8, 'x');
  const auto* w = m.graph.initializers[0].tensor.data();
  data.append(reinterpret_cast<const char*>(w), 16);
  test::writeFile(dir / "sub" / "data.bin", data);

  auto loaded = onnx_io::loadModel(dir / "m.onnx");
  REQUIRE(loaded.isOk());
  CHECK(test::diffTensors(loaded->graph.initializers[0].tensor, m.graph.initializers[0].tensor) == "");

  // From a buffer, relative paths resolve against the folder given.
  std::string bytes = test::readFile(dir / "m.onnx");
  CHECK(onnx_io::loadModelFromBuffer(test::asBytes(bytes), dir.path(), "buffer").isOk());
  auto elsewhere = onnx_io::loadModelFromBuffer(test::asBytes(bytes), dir / "sub", "buffer");
  REQUIRE_FALSE(elsewhere.isOk());
  CHECK(test::contains(elsewhere.error().message(), "loading 'buffer': initializer 'W'"));
}

TEST_CASE("external data at an offset not aligned for its element type is copied, with the same values") {
  test::TempDir dir;
  ir::Model m = externalModel("w.bin", 3, 5);  // float32 at byte 3: a view would read misaligned floats
  test::writeFile(dir / "m.onnx", serialized(m));
  std::string data(3, 'x');
  data.append(reinterpret_cast<const char*>(m.graph.initializers[0].tensor.data()), 20);
  test::writeFile(dir / "w.bin", data);
  auto loaded = onnx_io::loadModel(dir / "m.onnx");
  REQUIRE(loaded.isOk());
  const ir::Tensor& w = loaded->graph.initializers[0].tensor;
  CHECK(reinterpret_cast<uintptr_t>(w.data()) % alignof(float) == 0);
  CHECK(test::diffTensors(w, m.graph.initializers[0].tensor) == "");
}

TEST_CASE("external data outside the file is refused with offset, length and size") {
  test::TempDir dir;
  test::writeFile(dir / "m.onnx", serialized(externalModel("w.bin", 4096, 2048)));
  test::writeFile(dir / "w.bin", std::string(6000, '\0'));
  std::string message = loadError(dir / "m.onnx");
  CHECK(message == fmt::format("loading '{}': initializer 'W': external data offset 4096 + length 8192 exceeds file "
                               "size 6000 of 'w.bin'",
                               (dir / "m.onnx").string()));
  // An offset near 2^64 must not wrap around.
  test::writeFile(dir / "wrap.onnx", serialized(externalModel("w.bin", ~uint64_t(0) - 4, 2)));
  CHECK(test::contains(loadError(dir / "wrap.onnx"), "exceeds file size 6000"));
}

TEST_CASE("external paths that leave the model folder are refused") {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "inner");
  test::writeFile(dir / "escape.bin", std::string(64, '\0'));
  std::string good = serialized(externalModel("abcescape.bin", 0, 4));

  test::writeFile(dir / "inner" / "up.onnx", test::replaceOnce(good, "abcescape.bin", "../escape.bin"));
  std::string message = loadError(dir / "inner" / "up.onnx");
  CHECK(test::contains(message, "up.onnx"));
  CHECK(test::contains(message, "initializer 'W'"));
  CHECK(test::contains(message, "'../escape.bin' escapes"));

  std::string absolute = "/" + (dir / "escape.bin").relative_path().string();
  std::string placeholder = std::string(absolute.size() - 10, 'a') + "escape.bin";
  test::writeFile(dir / "abs.onnx", test::replaceOnce(serialized(externalModel(placeholder, 0, 4)), placeholder, absolute));
  message = loadError(dir / "abs.onnx");
  CHECK(test::contains(message, "initializer 'W'"));
  CHECK(test::contains(message, "is absolute"));

  test::writeFile(dir / "sneaky.onnx", test::replaceOnce(good, "abcescape.bin", "a/../../e.bin"));
  CHECK(test::contains(loadError(dir / "sneaky.onnx"), "escapes"));
}

TEST_CASE("a missing external file names the tensor and the path") {
  test::TempDir dir;
  test::writeFile(dir / "m.onnx", serialized(externalModel("missing.bin", 0, 4)));
  std::string message = loadError(dir / "m.onnx");
  CHECK(test::contains(message, "initializer 'W'"));
  CHECK(test::contains(message, "missing.bin"));
  CHECK(test::contains(message, (dir / "missing.bin").string()));
}

TEST_CASE("external length and offset entries are checked") {
  test::TempDir dir;
  test::writeFile(dir / "w.bin", std::string(256, '\0'));
  std::string good = serialized(externalModel("w.bin", 0, 16));  // length "64"
  test::writeFile(dir / "ok.onnx", good);
  REQUIRE(onnx_io::loadModel(dir / "ok.onnx").isOk());

  test::writeFile(dir / "len.onnx", test::replaceOnce(good, "\x12\x02" "64", "\x12\x02" "60"));
  CHECK(test::contains(loadError(dir / "len.onnx"), "external data length is 60 bytes; expected 64"));

  test::writeFile(dir / "num.onnx", test::replaceOnce(good, "\x12\x02" "64", "\x12\x02" "6x"));
  CHECK(test::contains(loadError(dir / "num.onnx"), "'length' is '6x'; expected a non-negative decimal integer"));

  test::writeFile(dir / "key.onnx", test::replaceOnce(good, "location", "locatiom"));
  CHECK(test::contains(loadError(dir / "key.onnx"), "no 'location' entry"));
}

TEST_CASE("saveModelWithExternalData refuses bad file names and leaves nothing behind") {
  test::TempDir dir;
  Status up = onnx_io::saveModelWithExternalData(test::addModel(), dir / "m.onnx", "../w.bin", 0);
  REQUIRE_FALSE(up.isOk());
  CHECK(test::contains(up.error().message(), "escapes"));
  Status self = onnx_io::saveModelWithExternalData(test::addModel(), dir / "m.onnx", "m.onnx", 0);
  REQUIRE_FALSE(self.isOk());
  CHECK(test::contains(self.error().message(), "the model file itself"));
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("the writer refuses external references it would not load back") {
  auto escaping = onnx_io::serializeModel(externalModel("../w.bin", 0, 4));
  REQUIRE_FALSE(escaping.isOk());
  CHECK(test::contains(escaping.error().message(), "initializer 'W'"));
  ir::Model wrongLength = externalModel("w.bin", 0, 4);
  wrongLength.graph.initializers[0].external->length = 12;
  auto r = onnx_io::serializeModel(wrongLength);
  REQUIRE_FALSE(r.isOk());
  CHECK(test::contains(r.error().message(), "external data length is 12 bytes; expected 16"));
}
