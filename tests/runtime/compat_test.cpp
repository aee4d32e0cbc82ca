// Runtime compatibility and sharing (docs/runtime.md#compatibility): doctored compatibility blocks and development
// format versions give UNSUPPORTED or PREFER_RECOMPILATION, several main_context=1 nodes with their own .bin files run
// in one model, and sessions map a shared .bin once (counted through the library).
#include "container_test_util.h"
#include "rebind_util.h"
#include "epcontext/contract.h"
#include "onnx_io/onnx_io.h"
#include "cpu/gemm.h"
#include "runtime/compatibility.h"
#include "runtime_test_util.h"

#include <catch2/catch.hpp>

#include <fstream>

using namespace ctxkit;
using namespace ctxkit::runtime::testing;
namespace fs = std::filesystem;
namespace layout = ctxkit::format::layout;

namespace {

// A binary rewritten in place: the models beside it are bound to it, as if compiled with it (format::testing::rebind).
void rebindModelsBeside(const fs::path& bin) {
  const auto bytes = format::testing::readAll(bin);
  for (const auto& e : fs::directory_iterator(bin.parent_path()))
    if (e.path().string().ends_with("_ctx.onnx")) format::testing::rebind(e.path(), bytes, bin.filename().string());
}

// Writes the graphs `keep` of `from` (all when empty) with all its weights, in order, under `compat`: weight
// indexes in the programs stay valid.
void rewriteContainer(const fs::path& from, const fs::path& to, const format::CompatInfo& compat,
                      const std::vector<std::string>& keep = {}) {
  auto view = format::ContainerView::openFile(from);
  REQUIRE(view);
  format::ContainerWriter writer(compat, format::WriterOptions{view->alignment()});
  for (size_t i = 0; i < view->weights().size(); ++i) {
    const format::WeightInfo& w = view->weights()[i];
    REQUIRE(writer.addWeight(w.type, w.shape, view->weightBytes(i), w.hash));
  }
  for (size_t i = 0; i < view->graphs().size(); ++i) {
    const format::GraphInfo& g = view->graphs()[i];
    if (!keep.empty() && std::find(keep.begin(), keep.end(), g.name) == keep.end()) continue;
    auto program = view->programBytes(i);
    REQUIRE(writer.addGraph(g.name, g.sourceModel, {program.begin(), program.end()}));
  }
  REQUIRE(writer.write(to));
  if (from == to) rebindModelsBeside(to);
}

format::CompatInfo compatOf(const fs::path& bin) {
  auto view = format::ContainerView::openFile(bin);
  REQUIRE(view);
  return view->compat();
}

// Patches the format version in the header and the compatibility block, and re-seals the checksum.
void setFormatVersion(const fs::path& bin, uint16_t major, uint16_t minor) {
  auto bytes = format::testing::readAll(bin);
  auto h = format::testing::getHeader(bytes);
  h.formatMajor = major;
  h.formatMinor = minor;
  format::testing::setHeader(bytes, h);
  auto c = format::testing::getCompat(bytes);
  c.formatMajor = major;
  c.formatMinor = minor;
  format::testing::setCompat(bytes, c);
  // The checksum is defined per major: under another major there is nothing to seal, and the reader stops at it.
  auto sealed = layout::sealChecksum(bytes, bin.string());
  if (major == format::kFormatMajor) REQUIRE(sealed);
  std::ofstream(bin, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()),
                                                                static_cast<std::streamsize>(bytes.size()));
  rebindModelsBeside(bin);
}

runtime::SessionOptions strictOptions() {
  runtime::SessionOptions o;
  o.failOnSuboptimal = true;
  return o;
}

}  // namespace

TEST_CASE("assessCompatibility: producer, format major and minor, target revision", "[runtime][compat]") {
  using runtime::Compatibility;
  format::CompatInfo c{"ctxkit", "0.1.0", "npu-sim", "1", 1, format::kFormatMinor};
  CHECK(runtime::assessCompatibility(c).level == Compatibility::SupportedOptimal);
  format::CompatInfo newer = c;
  newer.formatMinor = format::kFormatMinor + 1;  // a newer minor: optional additions
  CHECK(runtime::assessCompatibility(newer).level == Compatibility::SupportedOptimal);
  format::CompatInfo older = c;
  older.formatMinor = 4;  // the first released minor: loads, a recompile writes 1.5
  auto olderVerdict = runtime::assessCompatibility(older);
  CHECK(olderVerdict.level == Compatibility::PreferRecompilation);
  CHECK(olderVerdict.reason == "container format 1.4 is older than this runtime's 1.5");
  for (uint16_t minor = 0; minor < format::kFirstReleasedMinor; ++minor) {
    format::CompatInfo dev = c;
    dev.formatMinor = minor;
    auto verdict = runtime::assessCompatibility(dev);
    CHECK(verdict.level == Compatibility::Unsupported);
    CHECK(verdict.reason == fmt::format("compiled by ctxkit 0.1.0-dev format 1.{}: recompile", minor));
  }
  format::CompatInfo otherMajor = c;
  otherMajor.formatMajor = 2;
  otherMajor.formatMinor = 0;
  auto major = runtime::assessCompatibility(otherMajor);
  CHECK(major.level == Compatibility::Unsupported);
  CHECK_THAT(major.reason, Catch::Contains("major"));

  format::CompatInfo other = c;
  other.producer = "otherkit";
  auto producer = runtime::assessCompatibility(other);
  CHECK(producer.level == Compatibility::Unsupported);
  CHECK_THAT(producer.reason, Catch::Contains("'otherkit'"));
  other.producer = "CtxKit";  // the source attribute is case-insensitive; the producer recorded in a .bin is not
  CHECK(runtime::assessCompatibility(other).level == Compatibility::Unsupported);

  format::CompatInfo revision = c;
  revision.targetRevision = "7";
  auto rev = runtime::assessCompatibility(revision);
  CHECK(rev.level == Compatibility::PreferRecompilation);
  CHECK_THAT(rev.reason, Catch::Contains("revision '7'"));
  revision.targetId = "my-board";  // a user's target: no revision to expect
  CHECK(runtime::assessCompatibility(revision).level == Compatibility::SupportedOptimal);
  revision.targetId = "cpu";
  CHECK(runtime::assessCompatibility(revision).level == Compatibility::PreferRecompilation);

  CHECK(std::string(runtime::compatibilityName(Compatibility::Unsupported)) == "UNSUPPORTED");
  CHECK(std::string(runtime::compatibilityName(Compatibility::PreferRecompilation)) == "PREFER_RECOMPILATION");
}

TEST_CASE("every verdict names its reasons: code, field, found, expected and what to do", "[runtime][compat]") {
  using runtime::Compatibility;
  auto codes = [](const runtime::CompatibilityVerdict& v) {
    std::vector<std::string> out;
    for (const auto& r : v.reasons) out.push_back(r.code);
    return out;
  };
  format::CompatInfo c{"ctxkit", "0.1.0", "npu-sim", "1", 1, format::kFormatMinor};
  CHECK(runtime::assessCompatibility(c).reasons.empty());
  format::CompatInfo old = c;
  old.formatMinor = 4;
  old.targetRevision = "0";  // two reasons at once, both PREFER_RECOMPILATION
  auto both = runtime::assessCompatibility(old);
  CHECK(both.level == Compatibility::PreferRecompilation);
  REQUIRE(codes(both) == std::vector<std::string>{"COMPAT_FORMAT_OLDER_MINOR", "COMPAT_TARGET_REVISION"});
  CHECK(both.reasons[0].found == "1.4");
  CHECK(both.reasons[0].expected == fmt::format("1.{}", format::kFormatMinor));
  CHECK(both.reasons[1].found == "npu-sim revision 0");
  CHECK(both.reasons[1].expected == "npu-sim revision 1");
  CHECK(both.reasons[1].action == "recompile with ctxgen --target npu-sim");
  format::CompatInfo newer = c;
  newer.formatMajor = 2;
  newer.producerVersion = "0.9.0";
  auto major = runtime::assessCompatibility(newer);
  REQUIRE(codes(major) == std::vector<std::string>{"COMPAT_FORMAT_MAJOR"});
  CHECK_THAT(major.reasons[0].action, Catch::Contains("update ctxkit") && Catch::Contains("0.9.0"));
  format::CompatInfo dev = c;
  dev.formatMinor = 0;
  CHECK(codes(runtime::assessCompatibility(dev)) == std::vector<std::string>{"COMPAT_FORMAT_DEVELOPMENT"});
  format::CompatInfo other = c;
  other.producer = "otherkit";
  CHECK(codes(runtime::assessCompatibility(other)) == std::vector<std::string>{"COMPAT_PRODUCER"});
  auto syntax = runtime::assessCompatibilityInfo("not;a;compatibility;string");
  CHECK(syntax.level == Compatibility::Unsupported);
  CHECK(codes(syntax) == std::vector<std::string>{"COMPAT_INFO_SYNTAX"});

  // Against another device's profile (ctxrun --print-device there): its revisions and format decide.
  runtime::DeviceProfile device = runtime::thisDevice();
  device.targets["npu-sim"] = "2";
  CHECK(codes(runtime::assessCompatibility(c, device)) == std::vector<std::string>{"COMPAT_TARGET_REVISION"});
  device.formatMajor = 2;
  CHECK(runtime::assessCompatibility(c, device).level == Compatibility::Unsupported);
  CHECK_THAT(runtime::assessCompatibility(c, device).reasons[0].action, Catch::Contains("recompile with ctxgen"));
}

TEST_CASE("a device profile round-trips through JSON and its errors name the file and the field", "[runtime][compat]") {
  const std::string json = runtime::deviceProfileJson(runtime::thisDevice());
  auto back = runtime::parseDeviceProfile(json, "device.json");
  REQUIRE(back);
  CHECK(back->targets == runtime::thisDevice().targets);
  CHECK(back->formatMajor == format::kFormatMajor);
  CHECK(back->formatMinor == format::kFormatMinor);
  CHECK(back->cpuFeatures == runtime::thisDevice().cpuFeatures);
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"[]", "not a JSON object"},
           {R"({"format":"1.5","targets":{}})", "'ctxkit_version'"},
           {R"({"ctxkit_version":"0.1.0","format":"one","targets":{}})", "'format' is 'one'"},
           {R"({"ctxkit_version":"0.1.0","format":"1.5","targets":{"npu-sim":1}})", "targets.npu-sim"},
           {R"({"ctxkit_version":"0.1.0","format":"1.5"})", "'targets'"},
           {R"({"ctxkit_version":"0.1.0","format":"1.5","targets":{},"cpu_features":[1]})", "'cpu_features'"}}) {
    auto bad = runtime::parseDeviceProfile(text, "device.json");
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message(), Catch::Contains("device.json") && Catch::Contains(field));
  }
}

TEST_CASE("the _ctx.onnx compatibility metadata matches its .bin", "[runtime][compat]") {
  Workspace ws("compat_meta");
  compile({"tiny_cnn"}, ws.dir, false);
  auto model = onnx_io::loadModel(ws.dir / "tiny_cnn_ctx.onnx");
  REQUIRE(model);
  std::string value;
  for (const auto& [k, v] : model->metadata)
    if (k == "ep_compatibility_info.CtxKitExecutionProvider") value = v;
  auto info = epcontext::parseCompatibilityInfo(value);
  INFO(value);
  REQUIRE(info);
  auto bin = compatOf(ws.dir / "tiny_cnn_ctxkit.bin");
  CHECK(info->producer == bin.producer);
  CHECK(info->version == bin.producerVersion);
  CHECK(info->formatMajor == bin.formatMajor);
  CHECK(info->formatMinor == bin.formatMinor);
  CHECK(info->targetId == bin.targetId);
  CHECK(info->targetRevision == bin.targetRevision);
  CHECK(model->producerName == "ctxkit");
  CHECK(model->producerVersion == bin.producerVersion);

  // The same verdicts from the metadata value, as ONNX Runtime's ValidateCompiledModelCompatibilityInfo gets it.
  using runtime::Compatibility;
  CHECK(runtime::assessCompatibilityInfo(value).level == Compatibility::SupportedOptimal);
  auto doctored = [&](const std::string& from, const std::string& to) {
    std::string v = value;
    auto at = v.find(from);
    REQUIRE(at != std::string::npos);
    return v.replace(at, from.size(), to);
  };
  CHECK(runtime::assessCompatibilityInfo(doctored("ctxkit;", "otherkit;")).level == Compatibility::Unsupported);
  CHECK(runtime::assessCompatibilityInfo(doctored("revision=1", "revision=9")).level == Compatibility::PreferRecompilation);
  const std::string formatField = fmt::format("format={}.", format::kFormatMajor);
  CHECK(runtime::assessCompatibilityInfo(doctored(formatField, fmt::format("format={}.", format::kFormatMajor + 1))).level ==
        Compatibility::Unsupported);
  const std::string version = fmt::format("format={}.{};", format::kFormatMajor, format::kFormatMinor);
  auto dev = runtime::assessCompatibilityInfo(doctored(version, fmt::format("format={}.3;", format::kFormatMajor)));
  CHECK(dev.level == Compatibility::Unsupported);
  CHECK(dev.reason == "compiled by ctxkit 0.1.0-dev format 1.3: recompile");
  auto garbage = runtime::assessCompatibilityInfo("not a compatibility string");
  CHECK(garbage.level == Compatibility::Unsupported);
  CHECK_THAT(garbage.reason, Catch::Contains("compatibility info"));
}

TEST_CASE("a context from another producer is UNSUPPORTED, with or without the strict option", "[runtime][compat]") {
  Workspace ws("compat_producer");
  compile({"tiny_cnn"}, ws.dir, false);
  const fs::path bin = ws.dir / "tiny_cnn_ctxkit.bin";
  format::CompatInfo compat = compatOf(bin);
  compat.producer = "otherkit";
  rewriteContainer(bin, bin, compat);
  for (const runtime::SessionOptions& options : {runtime::SessionOptions{}, strictOptions()}) {
    auto s = runtime::Session::loadFile(ws.dir / "tiny_cnn_ctx.onnx", options);
    REQUIRE_FALSE(s);
    INFO(s.error().message());
    CHECK(s.error().code() == ErrorCode::Unsupported);
    CHECK_THAT(s.error().message(), Catch::Contains("produced by 'otherkit'") && Catch::Contains("UNSUPPORTED") &&
                                        Catch::Contains("tiny_cnn_ctxkit_0"));
  }
}

TEST_CASE("a context of another format major is UNSUPPORTED", "[runtime][compat]") {
  Workspace ws("compat_major");
  compile({"tiny_cnn"}, ws.dir, false);
  const fs::path bin = ws.dir / "tiny_cnn_ctxkit.bin";
  setFormatVersion(bin, format::kFormatMajor + 1, 0);
  for (const runtime::SessionOptions& options : {runtime::SessionOptions{}, strictOptions()}) {
    auto s = runtime::Session::loadFile(ws.dir / "tiny_cnn_ctx.onnx", options);
    REQUIRE_FALSE(s);
    INFO(s.error().message());
    CHECK(s.error().code() == ErrorCode::Unsupported);
    CHECK_THAT(s.error().message(), Catch::Contains(fmt::format("major {}", format::kFormatMajor + 1)));
  }
}

TEST_CASE("another target revision warns and runs, or fails under the strict option", "[runtime][compat]") {
  Workspace ws("compat_revision");
  compile({"tiny_cnn"}, ws.dir, false);
  const fs::path bin = ws.dir / "tiny_cnn_ctxkit.bin";
  format::CompatInfo compat = compatOf(bin);
  REQUIRE(compat.targetId == "npu-sim");
  compat.targetRevision = "7";
  rewriteContainer(bin, bin, compat);

  auto lenient = runtime::Session::loadFile(ws.dir / "tiny_cnn_ctx.onnx");
  INFO((lenient ? std::string() : lenient.error().message()));
  REQUIRE(lenient);
  CHECK((*lenient)->compatibility() == runtime::Compatibility::PreferRecompilation);
  REQUIRE((*lenient)->warnings().size() == 1);
  CHECK_THAT((*lenient)->warnings()[0], Catch::Contains("revision '7'") && Catch::Contains("PREFER_RECOMPILATION"));
  expectMatch(**lenient, "tiny_cnn");

  auto strict = runtime::Session::loadFile(ws.dir / "tiny_cnn_ctx.onnx", strictOptions());
  REQUIRE_FALSE(strict);
  CHECK_THAT(strict.error().message(), Catch::Contains("revision '7'") && Catch::Contains("PREFER_RECOMPILATION"));

  // The untouched compile is optimal and warns about nothing.
  Workspace clean("compat_revision_clean");
  compile({"tiny_cnn"}, clean.dir / "out", false);
  auto optimal = runtime::Session::loadFile(clean.dir / "out" / "tiny_cnn_ctx.onnx", strictOptions());
  REQUIRE(optimal);
  CHECK((*optimal)->compatibility() == runtime::Compatibility::SupportedOptimal);
  CHECK((*optimal)->warnings().empty());
}

TEST_CASE("a container of a development format (1.0 to 1.3) is refused by name, UNSUPPORTED", "[runtime][compat]") {
  Workspace ws("compat_minor");
  compile({"tiny_cnn"}, ws.dir, false);
  const fs::path bin = ws.dir / "tiny_cnn_ctxkit.bin";
  for (uint16_t minor = 0; minor < format::kFirstReleasedMinor; ++minor) {
    setFormatVersion(bin, format::kFormatMajor, minor);
    for (const runtime::SessionOptions& options : {runtime::SessionOptions{}, strictOptions()}) {
      auto s = runtime::Session::loadFile(ws.dir / "tiny_cnn_ctx.onnx", options);
      REQUIRE_FALSE(s);
      INFO(s.error().message());
      CHECK(s.error().code() == ErrorCode::Unsupported);
      CHECK_THAT(s.error().message(),
                 Catch::Contains(fmt::format("'{}': compiled by ctxkit 0.1.0-dev format 1.{}: recompile", bin.string(),
                                             minor)));
    }
  }
}

namespace {

// tiny_cnn compiled for a target without MaxPool: one partition per conv block and one for the head, with the
// pools on the fallback path between them.
struct SplitModel {
  Workspace ws{"compat_split"};
  fs::path model;
  fs::path bin;
  std::vector<std::string> graphs;
  SplitModel() {
    fs::path target = ws.dir / "nopool.json";
    std::ofstream(target) << R"({"name":"nopool","hardware_architecture":"npu-sim","element_types":["float32"],
      "ops":[{"op":"Conv"},{"op":"BatchNormalization"},{"op":"Relu"},{"op":"Flatten"},{"op":"Gemm"}]})";
    compile({"tiny_cnn"}, ws.dir, false, target.string());
    model = ws.dir / "tiny_cnn_ctx.onnx";
    bin = ws.dir / "tiny_cnn_ctxkit.bin";
    auto view = format::ContainerView::openFile(bin);
    REQUIRE(view);
    for (const auto& g : view->graphs()) graphs.push_back(g.name);
    REQUIRE(graphs.size() >= 2);
  }
};

// Gives every EPContext node of `path` main_context=1 and the .bin that `binFor(partition)` names.
template <typename BinFor>
void makeEveryNodeMain(const fs::path& path, BinFor binFor) {
  auto m = onnx_io::loadModel(path);
  REQUIRE(m);
  for (ir::Node& n : m->graph.nodes) {
    if (n.kind != ir::OpKind::EPContext) continue;
    n.attrs.set(ir::Attribute::makeInt("main_context", 1));
    n.attrs.set(ir::Attribute::makeInt("embed_mode", 0));
    n.attrs.set(ir::Attribute::makeString("ep_cache_context", binFor(n.attrs.getString("partition_name"))));
  }
  REQUIRE(onnx_io::saveModel(*m, path));
}

}  // namespace

TEST_CASE("several main_context=1 nodes, each with its own .bin, load and run in one model", "[runtime][compat]") {
  SplitModel split;
  fs::create_directories(split.ws.dir / "ctx");
  for (const auto& g : split.graphs)
    rewriteContainer(split.bin, split.ws.dir / "ctx" / (g + ".bin"), compatOf(split.bin), {g});
  makeEveryNodeMain(split.model, [](const std::string& partition) { return "ctx/" + partition + ".bin"; });
  fs::remove(split.bin);  // nothing may still read the original

  size_t mappedBefore = runtime::mappedContextCount();
  {
    auto s = runtime::Session::loadFile(split.model);
    INFO((s ? std::string() : s.error().message()));
    REQUIRE(s);
    CHECK((*s)->stats().contexts == split.graphs.size());
    CHECK((*s)->stats().compiledNodes == split.graphs.size());
    CHECK((*s)->stats().fallbackNodes >= 1);
    CHECK(runtime::mappedContextCount() == mappedBefore + split.graphs.size());
    expectMatch(**s, "tiny_cnn");
  }
  CHECK(runtime::mappedContextCount() == mappedBefore);

  // One .bin missing: the error names the node and the file.
  fs::remove(split.ws.dir / "ctx" / (split.graphs.back() + ".bin"));
  auto missing = runtime::Session::loadFile(split.model);
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error().message(), Catch::Contains(split.graphs.back() + ".bin"));
}

TEST_CASE("a graph found in two of a model's context binaries is refused", "[runtime][compat]") {
  SplitModel split;
  rewriteContainer(split.bin, split.ws.dir / "copy.bin", compatOf(split.bin));
  bool first = true;
  makeEveryNodeMain(split.model, [&](const std::string&) {
    std::string name = first ? "tiny_cnn_ctxkit.bin" : "copy.bin";
    first = false;
    return name;
  });
  auto s = runtime::Session::loadFile(split.model);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().message(), Catch::Contains("is in both"));
}

TEST_CASE("main_context=1 nodes naming one .bin map it once per session, even with sharing off", "[runtime][compat]") {
  SplitModel split;
  makeEveryNodeMain(split.model, [](const std::string&) { return std::string("tiny_cnn_ctxkit.bin"); });
  runtime::SessionOptions unshared;
  unshared.shareContexts = false;
  size_t mappedBefore = runtime::mappedContextCount();
  auto s = runtime::Session::loadFile(split.model, unshared);
  INFO((s ? std::string() : s.error().message()));
  REQUIRE(s);
  CHECK((*s)->stats().contexts == 1);
  CHECK(runtime::mappedContextCount() == mappedBefore + 1);
  expectMatch(**s, "tiny_cnn");
}

TEST_CASE("two sessions on one .bin map it once with sharing on, twice with it off", "[runtime][compat]") {
  Workspace ws("compat_share");
  compile({"tiny_prefill", "tiny_decode"}, ws.dir, true);
  for (bool share : {true, false}) {
    INFO("share " << share);
    runtime::SessionOptions options;
    options.shareContexts = share;
    size_t mappedBefore = runtime::mappedContextCount();
    size_t sharedBefore = runtime::sharedContextCount();
    {
      auto prefill = runtime::Session::loadFile(ws.dir / "tiny_prefill_ctx.onnx", options);
      auto decode = runtime::Session::loadFile(ws.dir / "tiny_decode_ctx.onnx", options);
      REQUIRE(prefill);
      REQUIRE(decode);
      CHECK(runtime::mappedContextCount() == mappedBefore + (share ? 1 : 2));
      CHECK(runtime::sharedContextCount() == sharedBefore + (share ? 1 : 0));
      CHECK((*prefill)->stats().contexts == 1);
      CHECK((*decode)->stats().contexts == 1);
      expectMatch(**prefill, "tiny_prefill");
      expectMatch(**decode, "tiny_decode");
    }
    CHECK(runtime::mappedContextCount() == mappedBefore);
    CHECK(runtime::sharedContextCount() == sharedBefore);
  }
}

TEST_CASE("weights packed in panels narrower than this CPU's kernel run, with PREFER_RECOMPILATION", "[runtime][compat]") {
  // A width narrower than this CPU's GEMM kernel: the program still reads the stored panels in place, and says that
  // recompiling would use the CPU better. (Wider panels run at full speed: see the built-in target below.)
  const size_t natural = cpu::sgemmNaturalPanelWidth();
  REQUIRE(natural >= 16);  // x86-64 with AVX2 or AVX-512: the kernels this project builds for CI and users
  const size_t other = natural / 2;
  Workspace ws("compat_panels");
  fs::path target = ws.dir / "panels.json";
  // (The built-in cpu target's id and revision: another revision would warn too.)
  std::ofstream(target) << fmt::format(R"({{"name":"panels","hardware_architecture":"cpu","revision":"{}",
    "preferred_layouts":{{"gemm":"panels-{}"}},"ops":"all-kernels"}})", epcontext::kCpu.revision, other);
  compile({"tiny_prefill"}, ws.dir, false, target.string());
  auto lenient = runtime::Session::loadFile(ws.dir / "tiny_prefill_ctx.onnx");
  INFO((lenient ? std::string() : lenient.error().message()));
  REQUIRE(lenient);
  CHECK((*lenient)->compatibility() == runtime::Compatibility::PreferRecompilation);
  REQUIRE((*lenient)->warnings().size() == 1);
  CHECK_THAT((*lenient)->warnings()[0], Catch::Contains(fmt::format("packed in {}-wide panels", other)));
  expectMatch(**lenient, "tiny_prefill");
  auto strict = runtime::Session::loadFile(ws.dir / "tiny_prefill_ctx.onnx", strictOptions());
  REQUIRE_FALSE(strict);
  CHECK_THAT(strict.error().message(), Catch::Contains("PREFER_RECOMPILATION"));
  // The built-in target's 32-wide panels are at least this CPU's width (AVX2: 16, AVX-512: 32): optimal.
  Workspace builtin("compat_panels_builtin");
  compile({"tiny_prefill"}, builtin.dir, false, "cpu");
  auto wide = runtime::Session::loadFile(builtin.dir / "tiny_prefill_ctx.onnx");
  REQUIRE(wide);
  CHECK((*wide)->compatibility() == runtime::Compatibility::SupportedOptimal);
  CHECK((*wide)->warnings().empty());
  expectMatch(**wide, "tiny_prefill");
}
