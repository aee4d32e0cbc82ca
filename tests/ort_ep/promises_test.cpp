// ONNX Runtime's promises to an application, kept by ctxkit's plugin EP (issue 30), through ORT's public API only:
// recompiling overwrites, a failed shared group does not poison the next, memory-to-memory compiles, verification
// at load, EPContext node names, an already compiled model, paths and status codes.
#include <catch2/catch.hpp>

#include "../common/material.h"
#include "epcontext/contract.h"
#include "format/container.h"
#include "onnx_io/onnx_io.h"
#include "ort_harness.h"
#include "tool_runner.h"

#include <sys/stat.h>

#include <fstream>

using namespace ctxkit;
using namespace ctxkit::ort_test;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void ctxgen(const std::vector<std::string>& args) { ctxkit::testing::runToolOk(CTXKIT_CTXGEN, args); }

// What CompileModel said: empty when it succeeded.
struct Outcome {
  bool ok = true;
  OrtErrorCode code = ORT_OK;
  std::string message;
};

Outcome compileModel(Ort::ModelCompilationOptions& options) {
  Ort::Status status = Ort::CompileModel(env(), options);
  if (status.IsOK()) return {};
  return {false, status.GetErrorCode(), status.GetErrorMessage()};
}

// What creating a session said: empty when it succeeded.
Outcome sessionOutcome(const std::function<void()>& create) {
  try {
    create();
    return {};
  } catch (const Ort::Exception& e) {
    return {false, e.GetOrtErrorCode(), e.what()};
  }
}

// ctxrun on `ctx` against the sample's expected outputs.
void ctxrunMatches(const fs::path& ctx, const std::string& stem) {
  fs::path data = fs::path(CTXKIT_SAMPLES_DIR) / stem / "test_data_set_0";
  auto r = runTool(CTXKIT_CTXRUN, {ctx.string(), "--inputs", data.string(), "--expected", data.string()});
  INFO(ctx << ": " << r.out << r.err);
  CHECK(r.exitCode == 0);
}

ino_t inodeOf(const fs::path& file) {
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  return st.st_ino;
}

void writeBytes(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

}  // namespace

TEST_CASE("recompiling overwrites the output atomically, refusing only under ERROR_IF_OUTPUT_FILE_EXISTS, and a failed "
          "compile can be retried",
          "[overwrite]") {
  TempDir out("ort_ep_overwrite");
  fs::copy_file(sample("tiny_decode"), out / "decode.onnx");
  const fs::path source = out / "decode.onnx";
  const fs::path ctx = out / "decode_ctx.onnx", bin = out / "decode_ctxkit.bin";
  Ort::SessionOptions session = ctxkitOptions({});
  auto toFile = [&](uint32_t flags) {
    Ort::ModelCompilationOptions options(env(), session);
    options.SetInputModelPath(source.c_str());
    options.SetOutputModelPath(ctx.c_str());
    options.SetEpContextEmbedMode(false);
    options.SetFlags(flags);
    return compileModel(options);
  };
  SECTION("file to file, twice: the second replaces the first (a new file renamed over it), then runs") {
    Outcome first = toFile(0);
    INFO(first.message);
    REQUIRE(first.ok);
    const ino_t before = inodeOf(bin);
    Outcome second = toFile(0);
    INFO(second.message);
    REQUIRE(second.ok);
    CHECK(inodeOf(bin) != before);
    ctxrunMatches(ctx, "tiny_decode");
    Comparison c = matchesCpu(ctx, source);
    INFO(c.detail);
    CHECK(c.ok);
    // ORT checks the flag against the output model itself (the EP never sees it), before the EP compiles: the
    // binary is left alone.
    const ino_t kept = inodeOf(bin);
    Outcome refused = toFile(OrtCompileApiFlags_ERROR_IF_OUTPUT_FILE_EXISTS);
    CHECK(!refused.ok);
    INFO(refused.message);
    CHECK(refused.message.find("exists already") != std::string::npos);
    CHECK(inodeOf(bin) == kept);
    ctxrunMatches(ctx, "tiny_decode");
  }
  SECTION("file to buffer, twice: the binary beside the source is replaced, the source untouched") {
    const std::string sourceBytes = ctxkit::testing::readText(source);
    for (int round = 0; round < 2; ++round) {
      Ort::ModelCompilationOptions options(env(), session);
      options.SetInputModelPath(source.c_str());
      Ort::AllocatorWithDefaultOptions allocator;
      void* buffer = nullptr;
      size_t size = 0;
      options.SetOutputModelBuffer(allocator, &buffer, &size);
      options.SetEpContextEmbedMode(false);
      Outcome o = compileModel(options);
      INFO("round " << round << ": " << o.message);
      REQUIRE(o.ok);
      REQUIRE(buffer != nullptr);
      std::string model(static_cast<const char*>(buffer), size);
      allocator.Free(buffer);
      writeBytes(ctx, model);
      CHECK(fs::exists(bin));
      ctxrunMatches(ctx, "tiny_decode");
    }
    CHECK(ctxkit::testing::readText(source) == sourceBytes);
  }
  SECTION("a failed compile (the binary's place taken by a folder), then a retry once it is free") {
    fs::create_directories(bin / "in_the_way");
    Outcome failed = toFile(0);
    CHECK(!failed.ok);
    INFO(failed.message);
    CHECK(failed.message.find("decode_ctxkit.bin") != std::string::npos);
    fs::remove_all(bin);
    size_t files = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(out.path())) ++files;
    CHECK(files == 1);  // the source alone: nothing half-written stays behind
    Outcome retried = toFile(0);
    INFO(retried.message);
    REQUIRE(retried.ok);
    ctxrunMatches(ctx, "tiny_decode");
  }
}

TEST_CASE("a shared group whose last compile failed does not poison the next group of the process", "[sharefail]") {
  auto compileGroup = [](const fs::path& dir) {
    return sessionOutcome([&] {
      for (const char* stem : {"tiny_prefill", "tiny_decode"}) {
        SessionConfig config;
        config.entries[epcontext::option::kContextEnable] = "1";
        config.entries[epcontext::option::kContextFilePath] = (dir / (std::string(stem) + "_ctx.onnx")).string();
        config.entries[epcontext::option::kShareEpContexts] = "1";
        if (std::string(stem) == "tiny_decode") config.entries[epcontext::option::kStopShareEpContexts] = "1";
        Ort::Session compiling = ctxkitSession(sample(stem), config);
      }
    });
  };
  TempDir failing("ort_ep_sharefail");
  fs::create_directories(failing / "tiny_prefill_ctxkit.bin" / "in_the_way");
  Outcome first = compileGroup(failing.path());
  CHECK(!first.ok);
  INFO(first.message);
  CHECK(first.message.find("tiny_prefill_ctxkit.bin") != std::string::npos);
  // Before: "graph name 'tiny_prefill_ctxkit_0' is used twice in one shared context" here, and for every later group.
  TempDir next("ort_ep_sharefail_next");
  Outcome second = compileGroup(next.path());
  INFO(second.message);
  REQUIRE(second.ok);
  // Again into the same folder: ORT's session path refuses the existing prefill model, but only after ctxkit's
  // Compile added prefill's graphs to the group. A retry once the models are removed replaces them (and overwrites
  // the binary).
  Outcome refused = compileGroup(next.path());
  CHECK(!refused.ok);
  INFO(refused.message);
  CHECK(refused.message.find("exists already") != std::string::npos);
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) fs::remove(next / (std::string(stem) + "_ctx.onnx"));
  Outcome retried = compileGroup(next.path());
  INFO(retried.message);
  REQUIRE(retried.ok);
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) {
    fs::path ctx = next / (std::string(stem) + "_ctx.onnx");
    ctxrunMatches(ctx, stem);
    SessionConfig share;
    share.entries[epcontext::option::kShareEpContexts] = "1";
    Comparison c = matchesCpu(ctx, sample(stem), share);
    INFO(c.detail);
    CHECK(c.ok);
  }
  CHECK(!fs::exists(next / "tiny_decode_ctxkit.bin"));
}

TEST_CASE("memory to memory: an embedded context needs no path, a context file asks for "
          "SetEpContextBinaryInformation",
          "[memory]") {
  TempDir out("ort_ep_memory");
  const std::string source = ctxkit::testing::readText(sample("tiny_cnn"));
  Ort::SessionOptions session = ctxkitOptions({});
  Ort::AllocatorWithDefaultOptions allocator;
  auto compile = [&](bool embed, const fs::path& binDir, std::string& model) {
    Ort::ModelCompilationOptions options(env(), session);
    options.SetInputModelFromBuffer(source.data(), source.size());
    void* buffer = nullptr;
    size_t size = 0;
    options.SetOutputModelBuffer(allocator, &buffer, &size);
    options.SetEpContextEmbedMode(embed);
    // ORT takes a folder without a trailing separator for a file name and refuses it.
    if (!binDir.empty()) options.SetEpContextBinaryInformation((binDir / "").c_str(), "cnn_ctx.onnx");
    Outcome o = compileModel(options);
    if (buffer != nullptr) {
      model.assign(static_cast<const char*>(buffer), size);
      allocator.Free(buffer);
    }
    return o;
  };
  std::string embedded;
  Outcome o = compile(true, {}, embedded);
  INFO(o.message);
  REQUIRE(o.ok);
  CHECK(fs::is_empty(out.path()));
  Ort::Session reference = cpuSession(sample("tiny_cnn"));
  Ort::Session ours = ctxkitSessionFromBytes(embedded);
  Feeds feeds = makeFeeds(reference, 3);
  Comparison c = compare(run(ours, feeds), run(reference, feeds));
  INFO(c.detail);
  CHECK(c.ok);

  std::string unused;
  Outcome noPlace = compile(false, {}, unused);
  CHECK(!noPlace.ok);
  INFO(noPlace.message);
  CHECK(noPlace.message.find("SetEpContextBinaryInformation") != std::string::npos);

  std::string referencing;
  Outcome placed = compile(false, out.path(), referencing);
  INFO(placed.message);
  REQUIRE(placed.ok);
  CHECK(fs::exists(out / "cnn_ctxkit.bin"));
  writeBytes(out / "cnn_ctx.onnx", referencing);
  ctxrunMatches(out / "cnn_ctx.onnx", "tiny_cnn");
}

TEST_CASE("EP option verify=1 checks every weight hash at load: a flipped weight byte is a clear error", "[verify]") {
  TempDir out("ort_ep_verify");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "-q"});
  const fs::path ctx = out / "tiny_cnn_ctx.onnx", bin = out / "tiny_cnn_ctxkit.bin";
  SessionConfig verify;
  verify.epOptions["verify"] = "1";
  Comparison intact = matchesCpu(ctx, sample("tiny_cnn"), verify);
  INFO(intact.detail);
  CHECK(intact.ok);

  // One byte of the largest weight flipped, where the header's checksum (metadata and programs) does not look.
  std::string bytes = ctxkit::testing::readText(bin);
  {
    auto view = format::ContainerView::open(std::as_bytes(std::span(bytes)), nullptr, "tiny_cnn");
    REQUIRE(view.isOk());
    size_t largest = 0;
    for (size_t w = 0; w < view->weights().size(); ++w)
      if (view->weightBytes(w).size() > view->weightBytes(largest).size()) largest = w;
    auto weight = view->weightBytes(largest);
    REQUIRE(weight.size() > 0);
    const size_t at = static_cast<size_t>(weight.data() - std::as_bytes(std::span(bytes)).data()) + weight.size() / 2;
    bytes[at] = static_cast<char>(bytes[at] ^ 0x40);
  }
  writeBytes(bin, bytes);
  // Without verify the changed bytes load (hashing every weight at load is opt-in, as in ctxrun --verify).
  Outcome unverified = sessionOutcome([&] { Ort::Session s = ctxkitSession(ctx); });
  INFO(unverified.message);
  CHECK(unverified.ok);
  Outcome verified = sessionOutcome([&] { Ort::Session s = ctxkitSession(ctx, verify); });
  CHECK(!verified.ok);
  CHECK(verified.code == ORT_INVALID_GRAPH);
  INFO(verified.message);
  CHECK(verified.message.find("hash") != std::string::npos);

  SessionConfig bad;
  bad.epOptions["verify"] = "yes";
  Outcome badValue = sessionOutcome([&] { Ort::Session s = ctxkitSession(ctx, bad); });
  INFO(badValue.message);
  CHECK(badValue.message.find("option verify 'yes'") != std::string::npos);
}

TEST_CASE("ep.context_node_name_prefix: the graphs carry it, the EPContext nodes keep the fused node names ORT "
          "gives them, which ORT matches by name",
          "[names]") {
  TempDir out("ort_ep_names");
  const fs::path ctx = out / "prefill_ctx.onnx";
  Ort::SessionOptions session = ctxkitOptions({{{epcontext::option::kContextNodeNamePrefix, "app1_"}}, {}});
  Ort::ModelCompilationOptions options(env(), session);
  const std::string source = sample("tiny_prefill");
  options.SetInputModelPath(source.c_str());
  options.SetOutputModelPath(ctx.c_str());
  Outcome o = compileModel(options);
  INFO(o.message);
  REQUIRE(o.ok);
  auto m = onnx_io::loadModel(ctx);
  REQUIRE(m.isOk());
  size_t nodes = 0;
  for (const auto& node : m->graph.nodes) {
    if (node.kind != ir::OpKind::EPContext) continue;
    ++nodes;
    INFO(node.name);
    CHECK(epcontext::readNodeAttributes(node).partitionName.rfind("app1_", 0) == 0);
    // ORT 1.30 names a plugin EP's fused nodes <EP>_<model hash>_<n> and puts each EPContext node in place of the
    // fused node of the same name; a renamed node fails the compile ("Encountered an invalid node while compiling a
    // model").
    CHECK(node.name.rfind(std::string(epcontext::kEpName) + "_", 0) == 0);
  }
  CHECK(nodes >= 1);
  ctxrunMatches(ctx, "tiny_prefill");
  Comparison c = matchesCpu(ctx, source);
  INFO(c.detail);
  CHECK(c.ok);
}

TEST_CASE("compiling an already compiled model is refused with a message saying so", "[recompile]") {
  TempDir out("ort_ep_recompile");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "-q"});
  const fs::path ctx = out / "tiny_cnn_ctx.onnx";
  fs::create_directories(out / "elsewhere");
  for (const fs::path& target : {out / "again_ctx.onnx", out / "elsewhere" / "again_ctx.onnx"}) {
    Ort::SessionOptions session = ctxkitOptions({});
    Ort::ModelCompilationOptions options(env(), session);
    options.SetInputModelPath(ctx.c_str());
    options.SetOutputModelPath(target.c_str());
    Outcome o = compileModel(options);
    CHECK(!o.ok);
    CHECK(o.code == ORT_INVALID_GRAPH);
    INFO(o.message);
    CHECK(o.message.find("already compiled") != std::string::npos);
    CHECK(o.message.find("tiny_cnn_ctxkit_0") != std::string::npos);
    CHECK(!fs::exists(target));
  }
}

TEST_CASE("paths and codes: a model file's .bin beside it whatever ep.context_file_path says, load failures are "
          "ORT_INVALID_GRAPH, unknown EP options are refused",
          "[codes]") {
  TempDir out("ort_ep_codes");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "-q"});
  const fs::path ctx = out / "tiny_cnn_ctx.onnx", bin = out / "tiny_cnn_ctxkit.bin";
  fs::create_directories(out / "elsewhere");
  SessionConfig elsewhere;
  elsewhere.entries[epcontext::option::kContextFilePath] = (out / "elsewhere" / "x_ctx.onnx").string();
  Comparison c = matchesCpu(ctx, sample("tiny_cnn"), elsewhere);
  INFO(c.detail);
  CHECK(c.ok);

  SessionConfig unknown;
  unknown.epOptions["treads"] = "2";
  Outcome misspelled = sessionOutcome([&] { Ort::Session s = ctxkitSession(ctx, unknown); });
  CHECK(!misspelled.ok);  // ORT reports every CreateEp failure as ORT_FAIL ("Error creating execution provider")
  INFO(misspelled.message);
  CHECK(misspelled.message.find("unknown EP option 'treads'") != std::string::npos);

  const std::string intact = ctxkit::testing::readText(bin);
  std::string otherMajor = intact;
  otherMajor[8] = static_cast<char>(99);  // FileHeader::formatMajor, little-endian
  otherMajor[9] = 0;
  writeBytes(bin, otherMajor);
  Outcome version = sessionOutcome([&] { Ort::Session s = ctxkitSession(ctx); });
  CHECK(!version.ok);
  CHECK(version.code == ORT_INVALID_GRAPH);  // was ORT_NOT_IMPLEMENTED
  INFO(version.message);
  CHECK(version.message.find("99") != std::string::npos);

  fs::remove(bin);
  fs::create_directories(bin);
  Outcome folder = sessionOutcome([&] { Ort::Session s = ctxkitSession(ctx); });
  CHECK(!folder.ok);
  CHECK(folder.code == ORT_INVALID_GRAPH);  // was ORT_FAIL
  INFO(folder.message);
  CHECK(folder.message.find("tiny_cnn_ctxkit.bin") != std::string::npos);
}
