// ctxinspect and ctxrun on other EPs' deployments (QNN- and OpenVINO-shaped), made by our own writer: another EP's
// context binary is opaque (listed with size and existence, never a problem for not being ctxkit's).
#include "fixtures.h"

#include <algorithm>

using namespace ctxkit;
using namespace ctxkit::test;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;

namespace {

// QNN with weight sharing: the first node of each model carries the context (main_context=1), the others are found
// in it by partition name (main_context=0, no ep_cache_context). Both models point at one .bin in a subfolder.
void writeQnnPair(const fs::path& dir) {
  save(foreignModel({{"qnn_prefill_0", kQnn, 1, 0, "qnn/shared_qnn.bin"},
                     {"qnn_prefill_1", kQnn, 0, 0, std::nullopt},
                     {"qnn_prefill_2", kQnn, 0, 0, std::nullopt}}),
       dir / "prefill_ctx.onnx");
  save(foreignModel({{"qnn_decode_0", kQnn, 1, 0, "qnn/shared_qnn.bin"}, {"qnn_decode_1", kQnn, 0, 0, std::nullopt}}),
       dir / "decode_ctx.onnx");
  writeBytes(dir / "qnn" / "shared_qnn.bin", 4096);
}

} // namespace

TEST_CASE("a QNN-style shared deployment is listed and exits 0", "[inspect][foreign]") {
  TempDir dir("qnn");
  writeQnnPair(dir.path());
  std::vector<std::string> models{(dir / "prefill_ctx.onnx").string(), (dir / "decode_ctx.onnx").string()};

  auto r = inspectJson(models);
  INFO(r.run.out << r.run.err);
  CHECK(r.run.exitCode == 0);
  CHECK(r.json["ok"].get<bool>());
  CHECK(r.json["problems"].empty());
  const auto& nodes = r.json["ep_context_nodes"];
  REQUIRE(nodes.size() == 5);
  CHECK(nodes[0]["name"] == "qnn_prefill_0");
  CHECK(nodes[0]["main_context"] == 1);
  CHECK(nodes[0]["embed_mode"] == 0);
  CHECK(nodes[0]["ep_cache_context"] == "qnn/shared_qnn.bin");
  CHECK(nodes[0]["ep_sdk_version"] == "2.31.0");
  CHECK(nodes[1]["main_context"] == 0);
  CHECK(nodes[1]["ep_cache_context"] == "");
  CHECK(nodes[1]["partition_name"] == std::string(kQnn) + "_qnn_prefill_1");
  CHECK(nodes[3]["model"].get<std::string>().find("decode_ctx.onnx") != std::string::npos);
  for (const auto& n : nodes) {
    CHECK(n["source"] == kQnn);
    REQUIRE(n["inputs"].size() == 1);
    CHECK(n["inputs"][0]["type"] == "float32");
    CHECK(n["inputs"][0]["shape"] == "1x8");
  }
  // Two models and one context binary, listed once, opaque, with its size.
  CHECK(r.json["deployment_files"].size() == 3);
  auto bin = fileEntry(r.json, "qnn/shared_qnn.bin");
  REQUIRE(!bin.is_null());
  CHECK(bin["role"] == "context binary");
  CHECK(bin["format"] == "opaque");
  CHECK(bin["ep"] == kQnn);
  CHECK(bin["bytes"] == 4096);
  CHECK(bin["exists"].get<bool>());
  CHECK(bin["problem"] == "");
  CHECK(fileEntry(r.json, "prefill_ctx.onnx")["format"] == "onnx");
  CHECK(r.json["context_binaries"].empty());

  // --verify reads nothing of another EP's binary, so it has nothing to add.
  auto verified = inspectJson({models[0], models[1], "--verify"});
  CHECK(verified.run.exitCode == 0);
  CHECK(verified.json["problems"].empty());

  auto text = runTool(CTXKIT_CTXINSPECT, models);
  INFO(text.out << text.err);
  CHECK(text.exitCode == 0);
  CHECK(text.out.find("EPContext nodes: 5") != std::string::npos);
  CHECK(text.out.find("shared_qnn.bin  (QNNExecutionProvider context, opaque)") != std::string::npos);
  CHECK(text.out.find("no problems found") != std::string::npos);
  CHECK(text.out.find("not a ctxkit container") == std::string::npos);
  CHECK(text.out.find("    hardware_architecture: -\n") != std::string::npos); // not written by this EP
}

TEST_CASE("an OpenVINO-style model with embedded and file contexts exits 0", "[inspect][foreign]") {
  TempDir dir("openvino");
  std::string payload(1500, '\x01');
  payload[0] = 'O'; // an arbitrary blob: never parsed
  save(foreignModel({{"ov_0", kOpenVino, 1, 1, payload}, {"ov_1", kOpenVino, 1, 0, "blobs/ov_1.blob"}}, "2025.1"),
       dir / "ov_ctx.onnx");
  writeBytes(dir / "blobs" / "ov_1.blob", 777);

  auto r = inspectJson({(dir / "ov_ctx.onnx").string(), "--verify"});
  INFO(r.run.out << r.run.err);
  CHECK(r.run.exitCode == 0);
  CHECK(r.json["problems"].empty());
  const auto& nodes = r.json["ep_context_nodes"];
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[0]["embed_mode"] == 1);
  CHECK(nodes[0]["ep_cache_context"] == "embedded, 1500 bytes");
  CHECK(nodes[1]["main_context"] == 1);
  CHECK(nodes[1]["ep_cache_context"] == "blobs/ov_1.blob");
  auto blob = fileEntry(r.json, "blobs/ov_1.blob");
  REQUIRE(!blob.is_null());
  CHECK(blob["format"] == "opaque");
  CHECK(blob["ep"] == kOpenVino);
  CHECK(blob["bytes"] == 777);
  CHECK(r.json["deployment_files"].size() == 2); // the embedded payload needs no file
  CHECK(r.json["context_binaries"].empty());

  auto text = runTool(CTXKIT_CTXINSPECT, {(dir / "ov_ctx.onnx").string()});
  CHECK(text.exitCode == 0);
  CHECK(text.out.find("ep_cache_context: embedded, 1500 bytes") != std::string::npos);
  CHECK(text.out.find("source: OpenVINOExecutionProvider") != std::string::npos);
}

TEST_CASE("another EP's missing context binary is a problem naming node and file", "[inspect][foreign]") {
  TempDir dir("qnn_missing");
  writeQnnPair(dir.path());
  fs::remove(dir / "qnn" / "shared_qnn.bin");

  auto r = inspectJson({(dir / "prefill_ctx.onnx").string()});
  CHECK(r.run.exitCode == 1);
  CHECK_FALSE(r.json["ok"].get<bool>());
  auto bin = fileEntry(r.json, "qnn/shared_qnn.bin");
  REQUIRE(!bin.is_null());
  CHECK_FALSE(bin["exists"].get<bool>());
  CHECK(bin["bytes"].is_null());
  CHECK(bin["problem"] == "missing");
  CHECK(bin["format"] == "opaque");
  CHECK(hasProblem(r.json, {"prefill_ctx.onnx", "qnn_prefill_0", "shared_qnn.bin", "missing"}));
  CHECK(r.json["problems"].size() == 1);

  auto text = runTool(CTXKIT_CTXINSPECT, {(dir / "prefill_ctx.onnx").string()});
  CHECK(text.exitCode == 1);
  CHECK(text.out.find("[missing]") != std::string::npos);
}

TEST_CASE("absolute and escaping context paths are refused even when the file exists", "[inspect][foreign]") {
  TempDir dir("qnn_paths");
  fs::path models = dir / "models";
  writeBytes(dir / "outside.bin", 64);
  std::string absolute = (dir / "outside.bin").string();
  save(foreignModel({{"abs_0", kQnn, 1, 0, absolute}}), models / "abs_ctx.onnx");
  save(foreignModel({{"up_0", kOpenVino, 1, 0, "../outside.bin"}}), models / "up_ctx.onnx");
  save(foreignModel({{"deep_0", kQnn, 1, 0, "sub/../../outside.bin"}}), models / "deep_ctx.onnx");

  auto abs = inspectJson({(models / "abs_ctx.onnx").string()});
  CHECK(abs.run.exitCode == 1);
  CHECK(hasProblem(abs.json, {"abs_ctx.onnx", "abs_0", absolute, "absolute"}));
  auto absEntry = fileEntry(abs.json, "outside.bin");
  REQUIRE(!absEntry.is_null());
  CHECK(absEntry["path"] == absolute);
  CHECK_FALSE(absEntry["exists"].get<bool>()); // never looked at
  CHECK(absEntry["problem"].get<std::string>().find("absolute") != std::string::npos);

  for (const char* model : {"up_ctx.onnx", "deep_ctx.onnx"}) {
    auto up = inspectJson({(models / model).string()});
    INFO(model);
    CHECK(up.run.exitCode == 1);
    CHECK(hasProblem(up.json, {model, "escapes the model folder"}));
    auto entry = fileEntry(up.json, "outside.bin");
    REQUIRE(!entry.is_null());
    CHECK(entry["problem"].get<std::string>().find("escapes") != std::string::npos);
  }
}

TEST_CASE("a model mixing ctxkit and QNN nodes: ours is checked, theirs is opaque", "[inspect][foreign]") {
  TempDir dir("mixed");
  // Our part: y = x + W compiled by ctxgen.
  ir::Model source = addModel(8);
  save(source, dir / "add.onnx");
  auto gen = runTool(CTXKIT_CTXGEN, {(dir / "add.onnx").string(), "-o", (dir / "out").string()});
  INFO(gen.out << gen.err);
  REQUIRE(gen.exitCode == 0);
  auto compiled = onnx_io::loadModel(dir / "out" / "add_ctx.onnx");
  REQUIRE(compiled);
  // Their part: a QNN node on the same input, its context in a subfolder.
  ir::Model mixed = std::move(compiled).value();
  REQUIRE(mixed.opsetFor("com.microsoft") == 1); // ctxgen imported the domain
  ir::Node qnn = makeNode(mixed, "EPContext", {"x"}, {"qnn_y"}, "com.microsoft");
  qnn.name = "qnn_side_0";
  qnn.attrs.set(ir::Attribute::makeInt("main_context", 1));
  qnn.attrs.set(ir::Attribute::makeInt("embed_mode", 0));
  qnn.attrs.set(ir::Attribute::makeString("ep_cache_context", "qnn/side.bin"));
  qnn.attrs.set(ir::Attribute::makeString("source", kQnn));
  mixed.graph.nodes.push_back(std::move(qnn));
  mixed.graph.outputs.push_back(makeValue("qnn_y", ir::ElemType::Float, {ir::Dim::known(8)}));
  save(mixed, dir / "out" / "mixed_ctx.onnx");
  writeBytes(dir / "out" / "qnn" / "side.bin", 300);

  auto r = inspectJson({(dir / "out" / "mixed_ctx.onnx").string(), "--verify"});
  INFO(r.run.out << r.run.err);
  CHECK(r.run.exitCode == 0);
  CHECK(r.json["problems"].empty());
  REQUIRE(r.json["ep_context_nodes"].size() == 2);
  CHECK(r.json["ep_context_nodes"][0]["source"] == "CtxKitExecutionProvider");
  CHECK(r.json["ep_context_nodes"][1]["source"] == kQnn);
  auto ours = fileEntry(r.json, "add_ctxkit.bin");
  REQUIRE(!ours.is_null());
  CHECK(ours["format"] == "ctxkit");
  CHECK(ours["ep"] == "CtxKitExecutionProvider");
  auto theirs = fileEntry(r.json, "qnn/side.bin");
  REQUIRE(!theirs.is_null());
  CHECK(theirs["format"] == "opaque");
  CHECK(theirs["bytes"] == 300);
  REQUIRE(r.json["context_binaries"].size() == 1); // only ours is read
  CHECK(r.json["context_binaries"][0]["verified"].get<bool>());

  // Our binary is still checked: corrupting it is a problem, theirs never is.
  fs::copy_file(dir / "out" / "add_ctxkit.bin", dir / "add_ctxkit.bin.good");
  {
    std::fstream f(dir / "out" / "add_ctxkit.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  auto broken = inspectJson({(dir / "out" / "mixed_ctx.onnx").string(), "--verify"});
  CHECK(broken.run.exitCode == 1);
  CHECK(hasProblem(broken.json, {"add_ctxkit.bin"}));
  CHECK_FALSE(hasProblem(broken.json, {"side.bin"}));
  fs::copy_file(dir / "add_ctxkit.bin.good", dir / "out" / "add_ctxkit.bin", fs::copy_options::overwrite_existing);

  // One file named first by a QNN node, then by ours, is read as ours.
  ir::Model both = mixed;
  std::rotate(both.graph.nodes.begin(), both.graph.nodes.end() - 1, both.graph.nodes.end());
  REQUIRE(both.graph.nodes.front().name == "qnn_side_0");
  both.graph.nodes.front().attrs.set(ir::Attribute::makeString("ep_cache_context", "add_ctxkit.bin"));
  save(both, dir / "out" / "both_ctx.onnx");
  auto shared = inspectJson({(dir / "out" / "both_ctx.onnx").string(), "--verify"});
  INFO(shared.run.out);
  CHECK(shared.run.exitCode == 0);
  auto entry = fileEntry(shared.json, "add_ctxkit.bin");
  REQUIRE(!entry.is_null());
  CHECK(entry["format"] == "ctxkit");
  CHECK(shared.json["deployment_files"].size() == 2);
  REQUIRE(shared.json["context_binaries"].size() == 1);
  CHECK(shared.json["context_binaries"][0]["verified"].get<bool>());
}

TEST_CASE("ctxrun refuses a foreign EPContext node, naming node and source", "[inspect][foreign][ctxrun]") {
  TempDir dir("qnn_run");
  writeQnnPair(dir.path());
  auto run = runTool(CTXKIT_CTXRUN, {(dir / "prefill_ctx.onnx").string()});
  INFO(run.out << run.err);
  CHECK(run.exitCode == 1);
  CHECK(run.err.find("qnn_prefill_0") != std::string::npos);
  CHECK(run.err.find(kQnn) != std::string::npos);
  CHECK(run.err.find("prefill_ctx.onnx") != std::string::npos);
}
