// ctxinspect checks what a deployment reads besides the ctxkit .bin: the external data ranges and files of the
// _ctx.onnx itself (fallback initializers in an --external-initializers-file, or in the --share group's .bin).
#include "fixtures.h"

#include <algorithm>

using namespace ctxkit;
using namespace ctxkit::test;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;

namespace {

// Serializes `m` and replaces `from` (found exactly once) by `to` of the same length: how a test writes what our
// writer refuses to write (escaping locations, a length that disagrees with the tensor).
void savePatched(const ir::Model& m, const fs::path& p, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());
  auto bytes = onnx_io::serializeModel(m);
  REQUIRE(bytes);
  std::string& s = *bytes;
  size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  REQUIRE(s.find(from, at + 1) == std::string::npos);
  s.replace(at, from.size(), to);
  std::ofstream f(p, std::ios::binary);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
  REQUIRE(f.good());
}

// y = (x + A) * B over float32[1, 1024]; a target that only takes Add leaves the Mul and its 4 KiB B on the
// fallback path.
void writeFallbackModel(const fs::path& dir) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 13}};
  m.graph.name = "addmul";
  auto shape = std::vector<ir::Dim>{ir::Dim::known(1), ir::Dim::known(1024)};
  m.graph.inputs.push_back(makeValue("x", ir::ElemType::Float, shape));
  m.graph.outputs.push_back(makeValue("y", ir::ElemType::Float, shape));
  m.graph.initializers.push_back({"A", ir::Tensor::fromVector(ir::ElemType::Float, {1, 1024}, iota(1024, 1)), {}});
  m.graph.initializers.push_back({"B", ir::Tensor::fromVector(ir::ElemType::Float, {1, 1024}, iota(1024, 5000)), {}});
  m.graph.nodes.push_back(makeNode(m, "Add", {"x", "A"}, {"t"}));
  m.graph.nodes.push_back(makeNode(m, "Mul", {"t", "B"}, {"y"}));
  save(m, dir / "addmul.onnx");
  std::ofstream(dir / "addonly.json") << R"({"name":"addonly","element_types":["float32"],"ops":[{"op":"Add"}]})";
}

std::vector<std::string> ctxgenArgs(const fs::path& dir, std::vector<std::string> extra) {
  std::vector<std::string> args{(dir / "addmul.onnx").string(), "--target", (dir / "addonly.json").string(), "-o",
                                (dir / "out").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The one external data reference to initializer `name`.
nlohmann::json externalRef(const nlohmann::json& report, const std::string& name) {
  nlohmann::json found;
  for (const auto& e : report["external_data"])
    if (e["initializer"] == name) {
      CHECK(found.is_null());
      found = e;
    }
  return found;
}

} // namespace

TEST_CASE("external data past the end of its file is reported with initializer, offset, length and size",
          "[inspect][external]") {
  TempDir dir("ext_range");
  ir::Model m = addModel(6); // W: float32[6], 24 bytes
  m.graph.initializers[0].external = ir::ExternalLocation{"w.data", 8, 24};
  save(m, dir / "m_ctx.onnx");
  writeBytes(dir / "w.data", 16);
  std::string model = (dir / "m_ctx.onnx").string();

  for (bool verify : {false, true}) {
    INFO("--verify " << verify);
    auto r = inspectJson(verify ? std::vector<std::string>{model, "--verify"} : std::vector<std::string>{model});
    CHECK(r.run.exitCode == 1);
    CHECK(
        hasProblem(r.json, {"m_ctx.onnx", "initializer 'W'", "'w.data'", "offset 8 + length 24 exceeds file size 16"}));
    CHECK(r.json["problems"].size() == 1); // --verify does not report the same fault twice
    auto ref = externalRef(r.json, "W");
    REQUIRE(!ref.is_null());
    CHECK(ref["location"] == "w.data");
    CHECK(ref["offset"] == 8);
    CHECK(ref["length"] == 24);
    CHECK(ref["file_bytes"] == 16);
    CHECK(ref["problem"].get<std::string>().find("exceeds") != std::string::npos);
    auto file = fileEntry(r.json, "w.data");
    REQUIRE(!file.is_null());
    CHECK(file["role"] == "external data");
    CHECK(file["format"] == "raw");
  }
  auto text = runTool(CTXKIT_CTXINSPECT, {model, "--verify"});
  CHECK(text.exitCode == 1);
  CHECK(text.out.find("External data: 1 initializer, 24 bytes, 1 broken reference") != std::string::npos);
  CHECK(text.out.find("no problems found") == std::string::npos);

  // Grown to hold the range, the same deployment is fine.
  writeBytes(dir / "w.data", 32);
  auto fixed = inspectJson({model, "--verify"});
  CHECK(fixed.run.exitCode == 0);
  CHECK(fixed.json["problems"].empty());
  CHECK(externalRef(fixed.json, "W")["problem"] == "");
  CHECK(externalRef(fixed.json, "W")["file_bytes"] == 32);
}

TEST_CASE("a missing external data file is a problem naming model, initializer and file", "[inspect][external]") {
  TempDir dir("ext_missing");
  ir::Model m = addModel(6);
  m.graph.initializers[0].external = ir::ExternalLocation{"data/w.data", 0, 24};
  save(m, dir / "m_ctx.onnx");

  auto r = inspectJson({(dir / "m_ctx.onnx").string(), "--verify"});
  CHECK(r.run.exitCode == 1);
  CHECK(hasProblem(r.json, {"m_ctx.onnx", "initializer 'W'", "data/w.data", "missing"}));
  auto file = fileEntry(r.json, "data/w.data");
  REQUIRE(!file.is_null());
  CHECK_FALSE(file["exists"].get<bool>());
  CHECK(file["problem"] == "missing");
  auto ref = externalRef(r.json, "W");
  CHECK(ref["problem"] == "missing");
  CHECK(ref["file_bytes"].is_null());
}

TEST_CASE("absolute and escaping external data locations are refused", "[inspect][external]") {
  TempDir dir("ext_paths");
  fs::path models = dir / "models";
  fs::create_directories(models);
  writeBytes(dir / "w.data", 64); // exists, so only the path itself can be the problem
  ir::Model m = addModel(6);

  m.graph.initializers[0].external = ir::ExternalLocation{"xx/w.data", 0, 24};
  savePatched(m, models / "up_ctx.onnx", "xx/w.data", "../w.data");
  std::string absolute = (dir / "w.data").string();
  std::string placeholder(absolute.size(), 'a');
  m.graph.initializers[0].external = ir::ExternalLocation{placeholder, 0, 24};
  savePatched(m, models / "abs_ctx.onnx", placeholder, absolute);

  auto up = inspectJson({(models / "up_ctx.onnx").string(), "--verify"});
  CHECK(up.run.exitCode == 1);
  CHECK(hasProblem(up.json, {"up_ctx.onnx", "initializer 'W'", "'../w.data'", "escapes the model folder"}));
  CHECK(externalRef(up.json, "W")["path"] == "");
  CHECK(fileEntry(up.json, "../w.data")["problem"].get<std::string>().find("escapes") != std::string::npos);

  auto abs = inspectJson({(models / "abs_ctx.onnx").string(), "--verify"});
  CHECK(abs.run.exitCode == 1);
  CHECK(hasProblem(abs.json, {"abs_ctx.onnx", "initializer 'W'", absolute, "absolute"}));
  CHECK_FALSE(fileEntry(abs.json, "w.data")["exists"].get<bool>());
}

TEST_CASE("verify loads external initializers: a length that disagrees with the tensor is a problem",
          "[inspect][external]") {
  TempDir dir("ext_length");
  ir::Model m = addModel(6);
  m.graph.initializers[0].external = ir::ExternalLocation{"w.data", 0, 24};
  // "length" -> "16" in the model: the range fits the 32-byte file, but W is a float32[6] (24 bytes).
  savePatched(m, dir / "m_ctx.onnx", std::string("length\x12\x02", 8) + "24", std::string("length\x12\x02", 8) + "16");
  writeBytes(dir / "w.data", 32);

  auto listed = inspectJson({(dir / "m_ctx.onnx").string()});
  CHECK(listed.run.exitCode == 0); // the listing checks ranges only
  CHECK(externalRef(listed.json, "W")["length"] == 16);

  auto verified = inspectJson({(dir / "m_ctx.onnx").string(), "--verify"});
  CHECK(verified.run.exitCode == 1);
  CHECK(hasProblem(verified.json, {"m_ctx.onnx", "initializer 'W'", "length is 16 bytes; expected 24"}));
}

TEST_CASE("a truncated --external-initializers-file of a ctxgen output is reported", "[inspect][external]") {
  TempDir dir("ext_ctxgen");
  writeFallbackModel(dir.path());
  auto gen = runTool(CTXKIT_CTXGEN, ctxgenArgs(dir.path(), {"--external-initializers-file", "weights.data"}));
  INFO(gen.out << gen.err);
  REQUIRE(gen.exitCode == 0);
  std::string model = (dir / "out" / "addmul_ctx.onnx").string();

  auto good = inspectJson({model, "--verify"});
  INFO(good.run.out);
  REQUIRE(good.run.exitCode == 0);
  auto ref = externalRef(good.json, "B");
  REQUIRE(!ref.is_null());
  CHECK(ref["length"] == 4096);
  CHECK(ref["problem"] == "");
  // Wherever ctxgen put the file, ctxinspect names it.
  fs::path data = ref["path"].get<std::string>();
  REQUIRE(fs::exists(data));
  CHECK(fileEntry(good.json, data.filename().string())["role"] == "external data");

  // What a second model writing the same file name leaves behind: a shorter file.
  uint64_t offset = ref["offset"].get<uint64_t>();
  fs::resize_file(data, offset + 100);
  auto cut = inspectJson({model, "--verify"});
  CHECK(cut.run.exitCode == 1);
  CHECK(hasProblem(cut.json, {"addmul_ctx.onnx", "initializer 'B'",
                              fmt::format("offset {} + length 4096 exceeds file size {}", offset, offset + 100)}));
}

TEST_CASE("share-group fallback initializers in the .bin must be exactly one of its weights", "[inspect][external]") {
  TempDir dir("ext_share");
  writeFallbackModel(dir.path());
  auto gen = runTool(CTXKIT_CTXGEN, ctxgenArgs(dir.path(), {"--share"}));
  INFO(gen.out << gen.err);
  REQUIRE(gen.exitCode == 0);
  fs::path out = dir / "out";

  auto good = inspectJson({(out / "addmul_ctx.onnx").string(), "--verify"});
  INFO(good.run.out);
  REQUIRE(good.run.exitCode == 0);
  auto ref = externalRef(good.json, "B");
  REQUIRE(!ref.is_null());
  CHECK(fs::path(ref["path"].get<std::string>()).filename() == "addmul_ctxkit.bin");
  auto bin = fileEntry(good.json, "addmul_ctxkit.bin");
  CHECK(bin["role"] == "context binary");
  CHECK(bin["format"] == "ctxkit");
  CHECK(good.json["deployment_files"].size() == 2);
  uint64_t offset = ref["offset"].get<uint64_t>();
  uint64_t binBytes = bin["bytes"].get<uint64_t>();

  // Rewrites the model with B's reference moved to `newOffset`, every other initializer as it was.
  auto moveB = [&](uint64_t newOffset, const std::string& name) {
    onnx_io::LoadOptions refsOnly;
    refsOnly.resolveExternalData = false;
    auto refs = onnx_io::loadModel(out / "addmul_ctx.onnx", refsOnly);
    auto full = onnx_io::loadModel(out / "addmul_ctx.onnx");
    REQUIRE(refs);
    REQUIRE(full);
    for (auto& init : full->graph.initializers)
      if (const ir::Initializer* r = refs->graph.findInitializer(init.name); r && r->external)
        init.external = r->external;
    auto b = std::find_if(full->graph.initializers.begin(), full->graph.initializers.end(),
                          [](const ir::Initializer& i) { return i.name == "B"; });
    REQUIRE(b != full->graph.initializers.end());
    REQUIRE(b->external);
    b->external->offset = newOffset;
    save(*full, out / name);
  };

  // Inside the file but not on a weight: the range straddles two blobs, and no hash covers it.
  REQUIRE(offset >= 4);
  moveB(offset - 4, "shifted_ctx.onnx");
  auto shifted = inspectJson({(out / "shifted_ctx.onnx").string()});
  INFO(shifted.run.out);
  CHECK(shifted.run.exitCode == 1);
  CHECK(
      hasProblem(shifted.json, {"shifted_ctx.onnx", "initializer 'B'", fmt::format("offset {} length 4096", offset - 4),
                                "is not one weight of ctxkit context binary"}));

  // Past the end of the .bin.
  moveB(binBytes - 100, "past_ctx.onnx");
  auto past = inspectJson({(out / "past_ctx.onnx").string(), "--verify"});
  INFO(past.run.out);
  CHECK(past.run.exitCode == 1);
  CHECK(hasProblem(past.json, {"past_ctx.onnx", "initializer 'B'",
                               fmt::format("offset {} + length 4096 exceeds file size {}", binBytes - 100, binBytes)}));
  CHECK(past.json["problems"].size() == 1);
}

TEST_CASE("external data of a subgraph initializer is checked too", "[inspect][external]") {
  TempDir dir("ext_subgraph");
  ir::Model m = addModel(6);
  auto sub = std::make_shared<ir::Graph>();
  sub->name = "then";
  sub->initializers.push_back({"S", ir::Tensor::fromVector(ir::ElemType::Int64, {3}, std::vector<int64_t>{1, 2, 3}),
                               ir::ExternalLocation{"sub.data", 100, 24}});
  ir::Node holder = makeNode(m, "If", {"c"}, {"o"});
  holder.attrs.set(ir::Attribute::makeGraph("then_branch", sub));
  m.graph.nodes.push_back(holder);
  save(m, dir / "m_ctx.onnx");
  writeBytes(dir / "sub.data", 64);

  auto r = inspectJson({(dir / "m_ctx.onnx").string()});
  CHECK(r.run.exitCode == 1);
  CHECK(hasProblem(r.json, {"initializer 'If_o/then_branch/S'", "offset 100 + length 24 exceeds file size 64"}));
  CHECK(externalRef(r.json, "If_o/then_branch/S")["file_bytes"] == 64);
}
