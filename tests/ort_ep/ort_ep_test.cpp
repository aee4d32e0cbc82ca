// ONNX Runtime 1.30 with ctxkit as a plugin EP (docs/ort-ep.md): the factory and its devices, sessions on _ctx.onnx
// models written by ctxgen (embed modes, --share, fallback nodes, several EPContext nodes) against ORT's CPU EP on the
// source models, concurrent Run(), and another EP's EPContext node left unclaimed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "../common/graph_builder.h"
#include "../common/material.h"
#include "epcontext/contract.h"
#include "format/container.h"
#include "onnx_io/onnx_io.h"
#include "ort_harness.h"
#include "tool_runner.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

using namespace ctxkit;
using namespace ctxkit::ort_test;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// ctxgen with `args`; the test fails with ctxgen's output when it does.
void ctxgen(const std::vector<std::string>& args) { ctxkit::testing::runToolOk(CTXKIT_CTXGEN, args); }

// The nodes ORT gave ctxkit are exactly the model's ctxkit EPContext nodes; the rest ran on ORT's CPU EP.
void claimsExactlyOurNodes(const Ort::Session& session, size_t epContextNodes, size_t otherNodes) {
  auto byEp = assignment(session);
  std::vector<std::string> expected(epContextNodes, epcontext::kOpType);
  CHECK(byEp[epcontext::kEpName] == expected);
  size_t cpu = 0;
  for (const auto& [ep, ops] : byEp)
    if (ep != epcontext::kEpName) {
      CHECK(ep == "CPUExecutionProvider");
      for (const auto& op : ops) CHECK(op != epcontext::kOpType);
      cpu += ops.size();
    }
  CHECK(cpu == otherNodes);
}

// ORT + ctxkit on `ctx` against ORT's CPU EP on `model` at each seed; the seeds must select at least two row counts
// (output 0's first dimension), so that the extents a bounded program meets do vary.
void matchesAtSeeds(const fs::path& ctx, const fs::path& model, std::initializer_list<uint32_t> seeds,
                    const std::string& what) {
  std::set<size_t> rows;
  for (uint32_t seed : seeds) {
    Comparison c = matchesCpu(ctx, model, {}, seed);
    INFO(what << ", seed " << seed << ": " << c.detail);
    CHECK(c.ok);
    Ort::Session session = cpuSession(model);
    Feeds feeds = makeFeeds(session, seed);
    rows.insert(static_cast<size_t>(run(session, feeds)[0].GetTensorTypeAndShapeInfo().GetShape()[0]));
    std::cout << "ort_ep: " << what << ", seed " << seed << ": " << c.elements
              << " output values match ORT's CPU EP, max |diff| " << c.maxAbsDiff << "\n";
  }
  CHECK(rows.size() >= 2);
}

}  // namespace

TEST_CASE("factory: name, vendor, version, the host CPU and a virtual NPU", "[factory]") {
  auto devices = ctxkitDevices();
  REQUIRE(devices.size() == 2);
  bool cpu = false, npu = false;
  for (const auto& d : devices) {
    CHECK(std::string(d.EpVendor()) == epcontext::kProducer);
    CHECK(std::string(d.EpMetadata().GetValue("version")) == epcontext::kVersion);
    CHECK(std::string(d.EpMetadata().GetValue("ctxkit.target")) == epcontext::kNpuSim.id);
    CHECK(std::string(d.EpMetadata().GetValue("weightless_support")) == "all");
    if (d.Device().Type() == OrtHardwareDeviceType_CPU) cpu = true;
    if (d.Device().Type() == OrtHardwareDeviceType_NPU) {
      npu = true;
      const char* isVirtual = d.Device().Metadata().GetValue("is_virtual");
      REQUIRE(isVirtual != nullptr);
      CHECK(std::string(isVirtual) == "1");
    }
  }
  CHECK(cpu);
  CHECK(npu);
}

TEST_CASE("the samples: ORT + ctxkit on ctxgen's _ctx.onnx matches ORT's CPU EP on the source", "[samples]") {
  for (const char* stem : {"tiny_prefill", "tiny_decode", "tiny_cnn"})
    for (int embed : {0, 1}) {
      DYNAMIC_SECTION(stem << " embed_mode=" << embed) {
        TempDir out(std::string("ort_ep_") + stem);
        ctxgen({sample(stem), "-o", out.path().string(), "--embed-mode", std::to_string(embed), "-q"});
        fs::path ctx = out / (std::string(stem) + "_ctx.onnx");
        CHECK(fs::exists(out / (std::string(stem) + "_ctxkit.bin")) == (embed == 0));
        Comparison c = matchesCpu(ctx, sample(stem));
        INFO(c.detail);
        CHECK(c.ok);
        std::cout << "ort_ep: " << stem << " embed_mode=" << embed << ": " << c.elements
                  << " output values match ORT's CPU EP, max |diff| " << c.maxAbsDiff << "\n";
        Ort::Session session = ctxkitSession(ctx);
        claimsExactlyOurNodes(session, countNodes(ctx, true), countNodes(ctx, false));
      }
    }
}

TEST_CASE("--share: prefill and decode from one .bin, and the virtual NPU device", "[share]") {
  TempDir out("ort_ep_share");
  ctxgen({sample("tiny_prefill") + "," + sample("tiny_decode"), "--share", "-o", out.path().string(), "-q"});
  SessionConfig config;
  config.entries[epcontext::option::kShareEpContexts] = "1";
  config.device = OrtHardwareDeviceType_NPU;
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) {
    Comparison c = matchesCpu(out / (std::string(stem) + "_ctx.onnx"), sample(stem), config);
    INFO(stem << ": " << c.detail);
    CHECK(c.ok);
  }
}

TEST_CASE("a bounded program in ORT: the detector head's outputs come back at each run's extent", "[bounded]") {
  // make_detector_head (tests/oracle): NonMaxSuppression, NonZero and TopK with a computed k, and the ops behind them.
  // On cpu every node compiles into one program planned at the bounds (docs/compiler.md#bounded-programs); its
  // outputs are declared with a symbolic dimension where a run computes the extent, so ORT takes what the run gives.
  TempDir out("ort_ep_bounded");
  const fs::path model = out / "detector_head.onnx";
  ctxkit::testing::runToolOk(CTXKIT_MAKE_DETECTOR_HEAD, {model.string(), (out / "inputs").string()});
  ctxgen({model.string(), "--target", "cpu", "-o", (out / "cpu").string(), "-q"});
  const fs::path ctx = out / "cpu" / "detector_head_ctx.onnx";
  REQUIRE(countNodes(ctx, true) == 1);
  REQUIRE(countNodes(ctx, false) == 0);
  matchesAtSeeds(ctx, model, {7u, 8u, 9u, 10u}, "detector head (bounded program)");
}

TEST_CASE("a bounded program input in ORT: the ops behind an If on ORT's CPU EP read its result at each run's extent",
          "[bounded]") {
  // make_detector_head --rows-behind-if: NonZero's rows pass through an If (control flow, left to ORT's CPU EP) to the
  // row ops behind it. On cpu those compile into programs whose input is bounded
  // (docs/format/program.md#bounded-tensors), declared in the _ctx.onnx with a symbolic dimension, so ORT hands the
  // If's result over at the extent it has.
  TempDir out("ort_ep_bounded_input");
  const fs::path model = out / "rows_behind_if.onnx";
  ctxkit::testing::runToolOk(CTXKIT_MAKE_DETECTOR_HEAD,
                             {"--rows-behind-if", model.string(), (out / "inputs").string()});
  ctxgen({model.string(), "--target", "cpu", "-o", (out / "cpu").string(), "-q"});
  const fs::path ctx = out / "cpu" / "rows_behind_if_ctx.onnx";
  // Before the If (NonZero, TopK); behind it the row ops and, apart from them, RoiAlign on the selected boxes.
  REQUIRE(countNodes(ctx, true) == 3);
  REQUIRE(countNodes(ctx, false) == 1);  // the If
  matchesAtSeeds(ctx, model, {7u, 8u, 9u, 10u, 11u}, "rows behind an If (bounded program input)");
  // ctxkit runs the three EPContext nodes; ORT's CPU EP the If (and what its branches hold), no EPContext node.
  auto byEp = assignment(ctxkitSession(ctx));
  CHECK(byEp[epcontext::kEpName] == std::vector<std::string>(3, epcontext::kOpType));
  const std::vector<std::string>& cpu = byEp["CPUExecutionProvider"];
  CHECK(std::count(cpu.begin(), cpu.end(), "If") == 1);
  CHECK(std::count(cpu.begin(), cpu.end(), epcontext::kOpType) == 0);
  // The plain model, partitioned and lowered by ctxkit through ORT's graph API for cpu: the same bounded inputs.
  SessionConfig plain;
  plain.epOptions["target"] = "cpu";
  for (uint32_t seed : {7u, 9u}) {
    Comparison c = matchesCpu(model, model, plain, seed);
    INFO("plain, seed " << seed << ": " << c.detail);
    CHECK(c.ok);
  }
  auto plainByEp = assignment(ctxkitSession(model, plain));
  CHECK(plainByEp[epcontext::kEpName].size() == 19);  // every node but the If
  std::cout << "ort_ep: rows behind an If, plain model on cpu: ctxkit runs " << plainByEp[epcontext::kEpName].size()
            << " nodes\n";
}

TEST_CASE("fallback nodes run on ORT's CPU EP between several ctxkit EPContext nodes", "[fallback]") {
  TempDir out("ort_ep_fallback");
  fs::path target = writeNoSoftmaxTarget(out.path());
  for (bool share : {false, true}) {
    DYNAMIC_SECTION((share ? "--share (fallback weights in the shared .bin)" : "one model")) {
      fs::path o = out / (share ? "shared" : "single");
      std::vector<std::string> args{share ? sample("tiny_prefill") + "," + sample("tiny_decode") : sample("tiny_prefill"),
                                    "--target", target.string(), "-o", o.string(), "-q"};
      if (share) args.push_back("--share");
      ctxgen(args);
      fs::path ctx = o / "tiny_prefill_ctx.onnx";
      size_t epNodes = countNodes(ctx, true), fallback = countNodes(ctx, false);
      REQUIRE(epNodes >= 2);  // main_context=0 nodes find their graphs in the main node's context
      REQUIRE(fallback >= 1);
      Comparison c = matchesCpu(ctx, sample("tiny_prefill"));
      INFO(c.detail);
      CHECK(c.ok);
      std::cout << "ort_ep: tiny_prefill with " << epNodes << " EPContext nodes and " << fallback
                << " fallback nodes" << (share ? " (--share)" : "") << ": " << c.elements
                << " output values match, max |diff| " << c.maxAbsDiff << "\n";
      Ort::Session session = ctxkitSession(ctx);
      claimsExactlyOurNodes(session, epNodes, fallback);
    }
  }
}

TEST_CASE("Run() from 4 threads at once on one session gives every call its own correct result", "[concurrency]") {
  TempDir out("ort_ep_threads");
  fs::path target = writeNoSoftmaxTarget(out.path());
  ctxgen({sample("tiny_prefill"), "--target", target.string(), "-o", out.path().string(), "-q"});
  fs::path ctx = out / "tiny_prefill_ctx.onnx";
  Ort::Session reference = cpuSession(sample("tiny_prefill"));
  Ort::Session shared = ctxkitSession(ctx);
  constexpr int kThreads = 4, kRunsPerThread = 25;
  // Distinct inputs per call, expected outputs from ORT's CPU EP computed up front.
  std::vector<Feeds> feeds;
  std::vector<std::vector<Ort::Value>> expected;
  for (int i = 0; i < kThreads * kRunsPerThread; ++i) {
    feeds.push_back(makeFeeds(reference, 1000 + static_cast<uint32_t>(i)));
    expected.push_back(run(reference, feeds.back()));
  }
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRunsPerThread; ++r) {
        int i = t * kRunsPerThread + r;
        try {
          if (!compare(run(shared, feeds[i]), expected[i]).ok) ++wrong;
        } catch (const std::exception&) {
          ++failed;
        }
      }
    });
  for (auto& th : threads) th.join();
  std::cout << "ort_ep: " << kThreads << " threads x " << kRunsPerThread << " runs on one session: " << wrong
            << " wrong, " << failed << " failed\n";
  CHECK(wrong == 0);
  CHECK(failed == 0);
}

TEST_CASE("another EP's EPContext node is left unclaimed: ORT reports it has no implementation", "[foreign]") {
  TempDir out("ort_ep_foreign");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "--embed-mode", "1", "-q"});
  auto model = onnx_io::loadModel(out / "tiny_cnn_ctx.onnx");
  REQUIRE(model.isOk());
  for (auto& node : model->graph.nodes)
    if (node.kind == ir::OpKind::EPContext) node.attrs.set(ir::Attribute::makeString(epcontext::attr::kSource, "QNNExecutionProvider"));
  fs::path foreign = out / "foreign_ctx.onnx";
  REQUIRE(onnx_io::saveModel(*model, foreign).isOk());
  std::string message;
  try {
    Ort::Session session = ctxkitSession(foreign);
  } catch (const Ort::Exception& e) {
    message = e.what();
  }
  INFO(message);
  // Nobody runs the node and ORT itself says so, naming the node's EP; ctxkit's runtime (which would refuse the
  // node as "belongs to another execution provider") never saw it.
  CHECK(message.find("not compatible with any execution provider") != std::string::npos);
  CHECK(message.find("QNNExecutionProvider") != std::string::npos);
  CHECK(message.find("belongs to another execution provider") == std::string::npos);
}

TEST_CASE("a PREFER_NPU policy picks ctxkit's virtual NPU", "[policy]") {
  TempDir out("ort_ep_policy");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "-q"});
  Ort::SessionOptions options;
  options.AddConfigEntry("session.record_ep_graph_assignment_info", "1");
  options.SetEpSelectionPolicy(OrtExecutionProviderDevicePolicy_PREFER_NPU);
  Ort::Session session(env(), (out / "tiny_cnn_ctx.onnx").c_str(), options);
  auto byEp = assignment(session);
  CHECK(byEp[epcontext::kEpName] == std::vector<std::string>{epcontext::kOpType});
  Ort::Session reference = cpuSession(sample("tiny_cnn"));
  Feeds feeds = makeFeeds(reference, 3);
  Comparison c = compare(run(session, feeds), run(reference, feeds));
  INFO(c.detail);
  CHECK(c.ok);
}

TEST_CASE("EP options: target and threads are checked and name themselves when wrong", "[options]") {
  TempDir out("ort_ep_options");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "-q"});
  fs::path ctx = out / "tiny_cnn_ctx.onnx";
  SessionConfig good;
  good.epOptions = {{"target", "npu-sim"}, {"threads", "2"}};
  Comparison c = matchesCpu(ctx, sample("tiny_cnn"), good);
  CHECK(c.ok);
  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{{"target", "tpu-9000"}, {"threads", "zero"}}) {
    SessionConfig bad;
    bad.epOptions[key] = value;
    std::string message;
    try {
      Ort::Session session = ctxkitSession(ctx, bad);
    } catch (const Ort::Exception& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.find("option " + key + " '" + value + "'") != std::string::npos);
  }
}

namespace {

// Threads of this process (/proc/self/task lists one entry per thread).
size_t processThreads() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// The threads a live session of `model` with EP option threads=`threads` adds to the process beyond one with
// threads=1 (ORT's own threads are the same in both), and whether its outputs match ORT's CPU EP on `source`.
std::pair<long, bool> workersOfSession(const fs::path& model, const fs::path& source, int threads) {
  SessionConfig one, many;
  one.epOptions["threads"] = "1";
  many.epOptions["threads"] = std::to_string(threads);
  const size_t before = processThreads();
  long withOne = 0;
  {
    Ort::Session session = ctxkitSession(model, one);
    withOne = static_cast<long>(processThreads()) - static_cast<long>(before);
  }
  Ort::Session session = ctxkitSession(model, many);
  const long withMany = static_cast<long>(processThreads()) - static_cast<long>(before);
  Ort::Session reference = cpuSession(source);
  Feeds feeds = makeFeeds(reference, 21), again = makeFeeds(reference, 21);
  Comparison c = compare(run(session, feeds), run(reference, again));
  INFO(c.detail);
  return {withMany - withOne, c.ok};
}

}  // namespace

// The EP's own pool runs a plain model's lowered partitions only: it is made by the Compile that lowers them, so a
// session on a _ctx.onnx starts only its runtime session's workers (before, both pools were started per session).
TEST_CASE("EP option threads=N: a session starts N-1 workers, on a _ctx.onnx and on a plain model, and runs right",
          "[options][threads]") {
  TempDir out("ort_ep_workers");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "-q"});
  for (int threads : {2, 3}) {
    auto [compiled, compiledOk] = workersOfSession(out / "tiny_cnn_ctx.onnx", sample("tiny_cnn"), threads);
    auto [plain, plainOk] = workersOfSession(sample("tiny_cnn"), sample("tiny_cnn"), threads);
    std::cout << "ort_ep: threads=" << threads << ": a _ctx.onnx session adds " << compiled
              << " workers, a plain model's " << plain << "\n";
    CHECK(compiled == threads - 1);
    CHECK(plain == threads - 1);
    CHECK(compiledOk);
    CHECK(plainOk);
  }
}

namespace {

// Number of mappings of `file` in this process (/proc/self/maps lists one line per mapped range).
size_t mappingsOf(const fs::path& file) {
  std::ifstream maps("/proc/self/maps");
  std::string line, canonical = fs::canonical(file).string();
  size_t n = 0;
  while (std::getline(maps, line))
    if (line.size() >= canonical.size() && line.compare(line.size() - canonical.size(), canonical.size(), canonical) == 0) ++n;
  return n;
}

}  // namespace

TEST_CASE("ep.share_ep_contexts=1: sessions on one .bin map it once, with it 0 each session maps its own", "[share]") {
  TempDir out("ort_ep_sharemap");
  ctxgen({sample("tiny_prefill") + "," + sample("tiny_decode"), "--share", "-o", out.path().string(), "-q"});
  fs::path bin = out / "tiny_prefill_ctxkit.bin";
  REQUIRE(fs::exists(bin));
  for (bool share : {true, false}) {
    SessionConfig config;
    config.entries[epcontext::option::kShareEpContexts] = share ? "1" : "0";
    size_t before = mappingsOf(bin);
    CHECK(before == 0);
    {
      Ort::Session prefill = ctxkitSession(out / "tiny_prefill_ctx.onnx", config);
      size_t one = mappingsOf(bin);
      Ort::Session decode = ctxkitSession(out / "tiny_decode_ctx.onnx", config);
      size_t two = mappingsOf(bin);
      INFO("share=" << share << ": " << one << " mapping(s) with one session, " << two << " with two");
      CHECK(one >= 1);
      if (share) CHECK(two == one);
      else CHECK(two == 2 * one);
    }
    CHECK(mappingsOf(bin) == 0);  // gone with the last session
  }
}

TEST_CASE("sessions share a loaded .bin by default, and a later session sees the file replaced under it",
          "[share]") {
  TempDir out("ort_ep_sharedefault");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "-q"});
  const fs::path ctx = out / "tiny_cnn_ctx.onnx";
  const fs::path bin = out / "tiny_cnn_ctxkit.bin";
  REQUIRE(fs::exists(bin));
  Ort::Session reference = cpuSession(sample("tiny_cnn"));
  Feeds feeds = makeFeeds(reference, 11);
  const std::vector<Ort::Value> expected = run(reference, feeds);
  auto matches = [&](Ort::Session& session) {
    Comparison c = compare(run(session, feeds), expected);
    INFO(c.detail);
    CHECK(c.ok);
  };
  Ort::Session first = ctxkitSession(ctx);  // no ep.share_ep_contexts: shared
  const size_t one = mappingsOf(bin);
  CHECK(one >= 1);
  {
    Ort::Session second = ctxkitSession(ctx);
    CHECK(mappingsOf(bin) == one);
    matches(second);
  }
  // The binary replaced (written aside and renamed over it, as ctxgen and ORT's compile API write): a truncated copy.
  // A session created now reads the new file and refuses it; the live session keeps the one it mapped.
  const fs::path good = out / "good.bin";
  fs::copy_file(bin, good);
  {
    const fs::path broken = out / "broken.bin";
    fs::copy_file(bin, broken);
    fs::resize_file(broken, fs::file_size(bin) / 2);
    fs::rename(broken, bin);
  }
  std::string message;
  try {
    Ort::Session replaced = ctxkitSession(ctx);
  } catch (const Ort::Exception& e) {
    message = e.what();
    CHECK(e.GetOrtErrorCode() == ORT_INVALID_GRAPH);
  }
  INFO(message);
  CHECK(message.find("tiny_cnn_ctxkit.bin") != std::string::npos);
  matches(first);
  // The good bytes back (renamed over it again): a new session maps the file as it is now, not the first session's
  // mapping (whose file, unlinked, /proc/self/maps no longer lists under this path).
  fs::rename(good, bin);
  CHECK(mappingsOf(bin) == 0);
  Ort::Session again = ctxkitSession(ctx);
  CHECK(mappingsOf(bin) == one);
  matches(again);
  matches(first);
  // ep.share_ep_contexts=0 given explicitly: the session maps its own.
  SessionConfig alone;
  alone.entries[epcontext::option::kShareEpContexts] = "0";
  Ort::Session own = ctxkitSession(ctx, alone);
  CHECK(mappingsOf(bin) == 2 * one);
  matches(own);
}

TEST_CASE("compatibility info: ORT asks ctxkit, and acts on prefer-recompilation and unsupported", "[compatibility]") {
  TempDir out("ort_ep_compat");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "-q"});
  fs::path ctx = out / "tiny_cnn_ctx.onnx";
  auto model = onnx_io::loadModel(ctx);
  REQUIRE(model.isOk());
  auto info = epcontext::parseCompatibilityInfo(*model->findMetadata(epcontext::compatibilityMetadataKey()));
  REQUIRE(info.isOk());
  auto sessionError = [&](const fs::path& m, bool strict) {
    SessionConfig config;
    if (strict) config.entries["session.fail_on_suboptimal_compiled_model"] = "1";
    try {
      Ort::Session s = ctxkitSession(m, config);
    } catch (const Ort::Exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // What an application asks ORT before loading (GetModelCompatibilityForEpDevices), for ctxkit's devices.
  auto verdict = [&](const epcontext::CompatibilityInfo& i) {
    std::string text = epcontext::formatCompatibilityInfo(i);
    return Ort::GetModelCompatibilityForEpDevices(ctxkitDevices(), text.c_str());
  };
  SECTION("as written: optimal, the session loads even when strict") {
    CHECK(verdict(*info) == OrtCompiledModelCompatibility_EP_SUPPORTED_OPTIMAL);
    CHECK(sessionError(ctx, true).empty());
  }
  SECTION("another target revision: prefer recompilation, an error only when strict") {
    epcontext::CompatibilityInfo doctored = *info;
    doctored.targetRevision = "99";
    CHECK(verdict(doctored) == OrtCompiledModelCompatibility_EP_SUPPORTED_PREFER_RECOMPILATION);
    fs::path m = withCompatibilityInfo(ctx, epcontext::formatCompatibilityInfo(doctored), out / "revision_ctx.onnx");
    CHECK(sessionError(m, false).empty());
    std::string strict = sessionError(m, true);
    INFO(strict);
    CHECK(strict.find("suboptimal for execution provider: CtxKitExecutionProvider") != std::string::npos);
  }
  SECTION("a development format: unsupported, the session fails") {
    epcontext::CompatibilityInfo doctored = *info;
    doctored.formatMinor = 3;
    CHECK(verdict(doctored) == OrtCompiledModelCompatibility_EP_UNSUPPORTED);
    fs::path m = withCompatibilityInfo(ctx, epcontext::formatCompatibilityInfo(doctored), out / "dev_ctx.onnx");
    std::string message = sessionError(m, false);
    INFO(message);
    CHECK(message.find("not supported by execution provider: CtxKitExecutionProvider") != std::string::npos);
  }
  SECTION("another format major: unsupported, the session fails") {
    epcontext::CompatibilityInfo doctored = *info;
    doctored.formatMajor = static_cast<uint16_t>(info->formatMajor + 1);
    CHECK(verdict(doctored) == OrtCompiledModelCompatibility_EP_UNSUPPORTED);
    fs::path m = withCompatibilityInfo(ctx, epcontext::formatCompatibilityInfo(doctored), out / "major_ctx.onnx");
    std::string message = sessionError(m, false);
    INFO(message);
    CHECK(message.find("not supported by execution provider: CtxKitExecutionProvider") != std::string::npos);
  }
}

TEST_CASE("a model from memory finds its .bin through ep.context_file_path, a missing .bin is a clear error", "[paths]") {
  TempDir out("ort_ep_paths");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "-q"});
  fs::path ctx = out / "tiny_cnn_ctx.onnx";
  std::string bytes = ctxkit::testing::readText(ctx);
  auto sessionError = [&](const SessionConfig& config) {
    try {
      Ort::Session s = ctxkitSessionFromBytes(bytes, config);
      Ort::Session reference = cpuSession(sample("tiny_cnn"));
      Feeds feeds = makeFeeds(reference, 5);
      Comparison c = compare(run(s, feeds), run(reference, feeds));
      return c.ok ? std::string() : "outputs differ: " + c.detail;
    } catch (const Ort::Exception& e) {
      return std::string(e.what());
    }
  };
  SessionConfig withPath;
  withPath.entries[epcontext::option::kContextFilePath] = ctx.string();
  CHECK(sessionError(withPath).empty());
  // Without it the .bin resolves against the working folder, where it is not: the error names the node and file.
  std::string message = sessionError({});
  INFO(message);
  CHECK(message.find("tiny_cnn_ctxkit_0") != std::string::npos);
  CHECK(message.find("tiny_cnn_ctxkit.bin") != std::string::npos);
  // A missing .bin beside a model loaded from its file: the same kind of error, from the file's folder.
  fs::remove(out / "tiny_cnn_ctxkit.bin");
  std::string missing;
  try {
    Ort::Session s = ctxkitSession(ctx);
  } catch (const Ort::Exception& e) {
    missing = e.what();
  }
  INFO(missing);
  CHECK(missing.find("tiny_cnn_ctxkit.bin") != std::string::npos);
}

TEST_CASE("several main contexts in one model: two EPContext nodes, each with its own embedded context", "[fallback]") {
  TempDir out("ort_ep_mains");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "--embed-mode", "1", "-q"});
  ctxgen({sample("tiny_decode"), "-o", out.path().string(), "--embed-mode", "1", "-q"});
  auto cnn = onnx_io::loadModel(out / "tiny_cnn_ctx.onnx");
  auto decode = onnx_io::loadModel(out / "tiny_decode_ctx.onnx");
  REQUIRE(cnn.isOk());
  REQUIRE(decode.isOk());
  // One graph running both models side by side; both nodes have main_context=1.
  ir::Model both = *cnn;
  for (const auto& in : decode->graph.inputs) both.graph.inputs.push_back(in);
  for (const auto& o : decode->graph.outputs) both.graph.outputs.push_back(o);
  for (const auto& n : decode->graph.nodes) both.graph.nodes.push_back(n);
  for (const auto& i : decode->graph.initializers) both.graph.initializers.push_back(i);
  fs::path combined = out / "both_ctx.onnx";
  REQUIRE(onnx_io::saveModel(both, combined).isOk());
  REQUIRE(countNodes(combined, true) == 2);

  Ort::Session session = ctxkitSession(combined);
  claimsExactlyOurNodes(session, 2, countNodes(combined, false));
  Ort::Session cnnRef = cpuSession(sample("tiny_cnn"));
  Ort::Session decodeRef = cpuSession(sample("tiny_decode"));
  Feeds cnnFeeds = makeFeeds(cnnRef, 11), decodeFeeds = makeFeeds(decodeRef, 12);
  Feeds all = makeFeeds(session, 0);  // names and buffers of the combined model, values replaced below
  all.values.clear();
  for (auto& v : cnnFeeds.values) all.values.push_back(std::move(v));
  for (auto& v : decodeFeeds.values) all.values.push_back(std::move(v));
  std::vector<Ort::Value> outputs = run(session, all);
  REQUIRE(outputs.size() == 2);
  cnnFeeds = makeFeeds(cnnRef, 11);
  decodeFeeds = makeFeeds(decodeRef, 12);
  std::vector<Ort::Value> cnnOut, decodeOut;
  cnnOut.push_back(std::move(outputs[0]));
  decodeOut.push_back(std::move(outputs[1]));
  Comparison c1 = compare(cnnOut, run(cnnRef, cnnFeeds)), c2 = compare(decodeOut, run(decodeRef, decodeFeeds));
  INFO(c1.detail << " / " << c2.detail);
  CHECK(c1.ok);
  CHECK(c2.ok);
}

TEST_CASE("a plain model: ctxkit partitions and lowers it through ORT's graph API, ORT's CPU EP runs the rest", "[plain]") {
  auto byEpCount = [](const Ort::Session& s) {
    auto byEp = assignment(s);
    std::pair<size_t, size_t> counts{byEp[epcontext::kEpName].size(), 0};
    for (const auto& [ep, ops] : byEp)
      if (ep != epcontext::kEpName) counts.second += ops.size();
    for (const auto& op : byEp[epcontext::kEpName]) CHECK(op != epcontext::kOpType);
    return counts;
  };
  for (const char* stem : {"tiny_prefill", "tiny_decode", "tiny_cnn"}) {
    DYNAMIC_SECTION(stem << " on npu-sim") {
      Comparison c = matchesCpu(sample(stem), sample(stem));
      INFO(c.detail);
      CHECK(c.ok);
      Ort::Session session = ctxkitSession(sample(stem));
      auto [ours, cpu] = byEpCount(session);
      std::cout << "ort_ep: plain " << stem << ": ctxkit runs " << ours << " nodes, ORT's CPU EP " << cpu << "; "
                << c.elements << " output values match, max |diff| " << c.maxAbsDiff << "\n";
      CHECK(ours > 0);
      CHECK(cpu == 0);
    }
  }
  SECTION("a target without Softmax and Erf: several partitions with CPU nodes between them") {
    TempDir out("ort_ep_plain");
    SessionConfig config;
    config.epOptions["target"] = writeNoSoftmaxTarget(out.path()).string();
    Comparison c = matchesCpu(sample("tiny_prefill"), sample("tiny_prefill"), config);
    INFO(c.detail);
    CHECK(c.ok);
    Ort::Session session = ctxkitSession(sample("tiny_prefill"), config);
    auto [ours, cpu] = byEpCount(session);
    std::cout << "ort_ep: plain tiny_prefill on a target without Softmax/Erf: ctxkit runs " << ours
              << " nodes, ORT's CPU EP " << cpu << "; max |diff| " << c.maxAbsDiff << "\n";
    CHECK(ours > 0);
    CHECK(cpu >= 2);
  }
  SECTION("4 threads Run the lowered partitions of one session at once") {
    Ort::Session reference = cpuSession(sample("tiny_prefill"));
    Ort::Session shared = ctxkitSession(sample("tiny_prefill"));
    std::vector<Feeds> feeds;
    std::vector<std::vector<Ort::Value>> expected;
    for (uint32_t i = 0; i < 40; ++i) {
      feeds.push_back(makeFeeds(reference, 500 + i));
      expected.push_back(run(reference, feeds.back()));
    }
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int r = 0; r < 10; ++r) {
          try {
            if (!compare(run(shared, feeds[t * 10 + r]), expected[t * 10 + r]).ok) ++wrong;
          } catch (const std::exception&) {
            ++wrong;
          }
        }
      });
    for (auto& th : threads) th.join();
    CHECK(wrong == 0);
  }
}

namespace {

// y = (x + W) * V on 1x8 floats, W's and V's values from `start`: models with equal node, value and file names whose
// only difference is their weights.
ir::Model addMulModel(float start) {
  using namespace ctxkit::testing;
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  m.graph.name = "addmul";
  m.graph.inputs.push_back(floatValue("x", dims({1, 8})));
  m.graph.outputs.push_back(floatValue("y", dims({1, 8})));
  m.graph.initializers.push_back(floatInit("W", {1, 8}, start));
  m.graph.initializers.push_back(floatInit("V", {1, 8}, -start));
  m.graph.nodes.push_back(node("Add", {"x", "W"}, {"t"}));
  m.graph.nodes.push_back(node("Mul", {"t", "V"}, {"y"}));
  return m;
}

}  // namespace

TEST_CASE("two plain models with equal names but other weights, in two live sessions of one process, each runs its "
          "own partitions",
          "[plain]") {
  TempDir out("ort_ep_plain_identity");
  std::vector<fs::path> models;
  for (const char* dir : {"a", "b"}) {
    fs::create_directories(out.path() / dir);
    models.push_back(out.path() / dir / "m.onnx");
    REQUIRE(onnx_io::saveModel(addMulModel(dir[0] == 'a' ? 0.5f : 3.0f), models.back()));
  }
  auto check = [&](Ort::Session& a, Ort::Session& b) {
    Ort::Session referenceA = cpuSession(models[0]);
    Ort::Session referenceB = cpuSession(models[1]);
    Feeds feeds = makeFeeds(referenceA, 11);
    auto expectedA = run(referenceA, feeds);
    auto expectedB = run(referenceB, feeds);
    REQUIRE(!compare(expectedA, expectedB).ok);  // the two models compute different values
    for (int round = 0; round < 2; ++round) {   // interleaved: both sessions stay live
      Comparison ca = compare(run(a, feeds), expectedA);
      Comparison cb = compare(run(b, feeds), expectedB);
      INFO(ca.detail << " / " << cb.detail);
      CHECK(ca.ok);
      CHECK(cb.ok);
    }
    for (Ort::Session* s : {&a, &b}) {
      auto byEp = assignment(*s);
      CHECK(byEp[epcontext::kEpName].size() == 2);
    }
  };
  SECTION("from files: a/m.onnx and b/m.onnx") {
    Ort::Session a = ctxkitSession(models[0]);
    Ort::Session b = ctxkitSession(models[1]);
    check(a, b);
  }
  SECTION("from memory: no model path at all") {
    std::vector<std::string> bytes;
    for (float start : {0.5f, 3.0f}) {
      auto serialized = onnx_io::serializeModel(addMulModel(start));
      REQUIRE(serialized);
      bytes.push_back(std::move(serialized).value());
    }
    Ort::Session a = ctxkitSessionFromBytes(bytes[0]);
    Ort::Session b = ctxkitSessionFromBytes(bytes[1]);
    check(a, b);
  }
}

TEST_CASE("ep.context_enable=1: ORT + ctxkit write _ctx.onnx + .bin that ctxrun and ORT + ctxkit both run", "[compile]") {
  TempDir out("ort_ep_compile");
  fs::path target = writeNoSoftmaxTarget(out.path());
  struct Case {
    const char* stem;
    int embed;
    bool noSoftmax;
  };
  for (Case k : {Case{"tiny_prefill", 0, false}, Case{"tiny_cnn", 1, false}, Case{"tiny_prefill", 0, true}}) {
    DYNAMIC_SECTION(k.stem << " embed_mode=" << k.embed << (k.noSoftmax ? " with fallback nodes" : "")) {
      fs::path dir = out / (std::string(k.stem) + std::to_string(k.embed) + (k.noSoftmax ? "f" : ""));
      fs::create_directories(dir);
      fs::path ctx = dir / (std::string(k.stem) + "_ctx.onnx");
      SessionConfig config;
      config.entries[epcontext::option::kContextEnable] = "1";
      config.entries[epcontext::option::kContextFilePath] = ctx.string();
      config.entries[epcontext::option::kContextEmbedMode] = std::to_string(k.embed);
      config.entries[epcontext::option::kContextNodeNamePrefix] = "ort_";
      if (k.noSoftmax) config.epOptions["target"] = target.string();
      { Ort::Session compiling = ctxkitSession(sample(k.stem), config); }
      REQUIRE(fs::exists(ctx));
      fs::path bin = dir / (std::string(k.stem) + "_ctxkit.bin");
      CHECK(fs::exists(bin) == (k.embed == 0));
      size_t epNodes = countNodes(ctx, true), fallback = countNodes(ctx, false);
      CHECK(epNodes >= 1);
      if (k.noSoftmax) CHECK(fallback >= 2);
      auto model = onnx_io::loadModel(ctx);
      REQUIRE(model.isOk());
      for (const auto& n : model->graph.nodes)
        if (n.kind == ir::OpKind::EPContext) {
          CHECK(epcontext::readNodeAttributes(n).partitionName.rfind("ort_", 0) == 0);
          CHECK(epcontext::isOurNode(n));
        }
      CHECK(model->findMetadata(epcontext::compatibilityMetadataKey()) != nullptr);
      // ctxrun runs what ORT compiled, against the sample's expected output.
      fs::path data = fs::path(CTXKIT_SAMPLES_DIR) / k.stem / "test_data_set_0";
      auto r = runTool(CTXKIT_CTXRUN, {ctx.string(), "--inputs", data.string(), "--expected", data.string()});
      INFO(r.out << r.err);
      CHECK(r.exitCode == 0);
      // ORT + ctxkit run it too, matching ORT's CPU EP on the source.
      Comparison c = matchesCpu(ctx, sample(k.stem));
      INFO(c.detail);
      CHECK(c.ok);
      std::cout << "ort_ep: compiled through ORT: " << k.stem << " embed_mode=" << k.embed << ": " << epNodes
                << " EPContext + " << fallback << " fallback nodes; ctxrun exit " << r.exitCode
                << "; ORT + ctxkit max |diff| " << c.maxAbsDiff << "\n";
    }
  }
}

TEST_CASE("ORT's compile API (ModelCompilationOptions + CompileModel) with ctxkit, a compiled model is not compiled again",
          "[compile]") {
  TempDir out("ort_ep_compile_api");
  fs::path ctx = out / "decode_ctx.onnx";
  Ort::SessionOptions options = ctxkitOptions({});
  Ort::ModelCompilationOptions compile(env(), options);
  std::string source = sample("tiny_decode");
  compile.SetInputModelPath(source.c_str());
  compile.SetOutputModelPath(ctx.c_str());
  compile.SetEpContextEmbedMode(false);
  Ort::Status status = Ort::CompileModel(env(), compile);
  INFO((status.IsOK() ? std::string() : status.GetErrorMessage()));
  REQUIRE(status.IsOK());
  REQUIRE(fs::exists(ctx));
  CHECK(fs::exists(out / "decode_ctxkit.bin"));
  CHECK(countNodes(ctx, true) == 1);
  fs::path data = fs::path(CTXKIT_SAMPLES_DIR) / "tiny_decode" / "test_data_set_0";
  auto r = runTool(CTXKIT_CTXRUN, {ctx.string(), "--inputs", data.string(), "--expected", data.string()});
  INFO(r.out << r.err);
  CHECK(r.exitCode == 0);
  Comparison c = matchesCpu(ctx, source);
  INFO(c.detail);
  CHECK(c.ok);

  Ort::ModelCompilationOptions again(env(), options);
  again.SetInputModelPath(ctx.c_str());
  fs::path twice = out / "twice_ctx.onnx";
  again.SetOutputModelPath(twice.c_str());
  Ort::Status second = Ort::CompileModel(env(), again);
  REQUIRE(!second.IsOK());  // ORT refuses to compile an EPContext model again
  INFO(second.GetErrorMessage());
  CHECK(!fs::exists(twice));
}

TEST_CASE("weight sharing the ORT way: ep.share_ep_contexts=1 sessions, the last with ep.stop_share_ep_contexts=1, "
          "write one .bin holding every identical weight once", "[compile]") {
  TempDir out("ort_ep_sharecompile");
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) {
    SessionConfig config;
    config.entries[epcontext::option::kContextEnable] = "1";
    config.entries[epcontext::option::kContextFilePath] = (out / (std::string(stem) + "_ctx.onnx")).string();
    config.entries[epcontext::option::kShareEpContexts] = "1";
    if (std::string(stem) == "tiny_decode") config.entries[epcontext::option::kStopShareEpContexts] = "1";
    Ort::Session compiling = ctxkitSession(sample(stem), config);
  }
  fs::path bin = out / "tiny_prefill_ctxkit.bin";
  REQUIRE(fs::exists(bin));
  CHECK(!fs::exists(out / "tiny_decode_ctxkit.bin"));
  // The same two models compiled apart: the shared .bin holds the block's weights once, not twice.
  TempDir apart("ort_ep_sharecompile_apart");
  uint64_t apartBytes = 0;
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) {
    SessionConfig config;
    config.entries[epcontext::option::kContextEnable] = "1";
    config.entries[epcontext::option::kContextFilePath] = (apart / (std::string(stem) + "_ctx.onnx")).string();
    { Ort::Session compiling = ctxkitSession(sample(stem), config); }
    apartBytes += fs::file_size(apart / (std::string(stem) + "_ctxkit.bin"));
  }
  uint64_t sharedBytes = fs::file_size(bin);
  std::cout << "ort_ep: shared compile through ORT: one .bin of " << sharedBytes << " bytes; compiled apart: "
            << apartBytes << " bytes in two\n";
  CHECK(sharedBytes * 10 < apartBytes * 6);  // the block's weights (about 131 KiB) are stored once
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) {
    fs::path ctx = out / (std::string(stem) + "_ctx.onnx");
    fs::path data = fs::path(CTXKIT_SAMPLES_DIR) / stem / "test_data_set_0";
    auto r = runTool(CTXKIT_CTXRUN, {ctx.string(), "--inputs", data.string(), "--expected", data.string()});
    INFO(stem << ": " << r.out << r.err);
    CHECK(r.exitCode == 0);
    SessionConfig share;
    share.entries[epcontext::option::kShareEpContexts] = "1";
    Comparison c = matchesCpu(ctx, sample(stem), share);
    INFO(c.detail);
    CHECK(c.ok);
  }
}

TEST_CASE("weightless: ctxgen --weightless and ORT's weightless compile both keep the weights in the source model, "
          "ORT + ctxkit and ctxrun read them from it", "[weightless]") {
  TempDir out("ort_ep_weightless");
  const fs::path src = out / "src";
  fs::create_directories(src);
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) fs::copy_file(sample(stem), src / (std::string(stem) + ".onnx"));
  const fs::path prefill = src / "tiny_prefill.onnx", decode = src / "tiny_decode.onnx";

  // ctxgen's weightless pair, the sources beside: onnx_model_filename finds them.
  ctxgen({prefill.string() + "," + decode.string(), "--share", "--weightless", "-o", src.string(), "-q"});
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) {
    Comparison c = matchesCpu(src / (std::string(stem) + "_ctx.onnx"), sample(stem));
    INFO(stem << ": " << c.detail);
    CHECK(c.ok);
  }
  // Moved away from its sources: ep.context_source_model_path, or the model's bytes, point at the weights.
  const fs::path moved = out / "moved";
  fs::create_directories(moved);
  for (const char* name : {"tiny_prefill_ctx.onnx", "tiny_prefill_ctxkit.bin"}) fs::copy_file(src / name, moved / name);
  SessionConfig byPath;
  byPath.entries[epcontext::option::kContextSourceModelPath] = prefill.string();
  Comparison viaPath = matchesCpu(moved / "tiny_prefill_ctx.onnx", prefill, byPath);
  INFO(viaPath.detail);
  CHECK(viaPath.ok);
  {
    std::ifstream in(prefill, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Ort::SessionOptions options = ctxkitOptions({});
    Ort::ThrowOnError(Ort::GetApi().SessionOptionsSetWeightlessSourceModelBuffer(options, bytes.data(), bytes.size()));
    Ort::Session ours(env(), (moved / "tiny_prefill_ctx.onnx").c_str(), options);
    Ort::Session reference = cpuSession(prefill);
    Feeds feeds = makeFeeds(reference, 11);
    Comparison viaBuffer = compare(run(ours, feeds), run(reference, feeds));
    INFO(viaBuffer.detail);
    CHECK(viaBuffer.ok);
  }
  bool refused = false;
  try {
    Ort::Session lost = ctxkitSession(moved / "tiny_prefill_ctx.onnx");
  } catch (const Ort::Exception& e) {
    refused = std::string(e.what()).find("the context is weightless") != std::string::npos;
    INFO(e.what());
  }
  CHECK(refused);

  // ORT's compile API with weightless mode: ORT asks GetWeightlessSupport, ctxkit writes a weightless context.
  for (bool weightless : {false, true}) {
    const fs::path ctx = out / (weightless ? "wl" : "full") / "decode_ctx.onnx";
    fs::create_directories(ctx.parent_path());
    Ort::ModelCompilationOptions compile(env(), ctxkitOptions({}));
    compile.SetInputModelPath(decode.c_str());
    compile.SetOutputModelPath(ctx.c_str());
    compile.SetEpContextEmbedMode(false);
    compile.SetWeightlessEnabled(weightless);
    Ort::Status status = Ort::CompileModel(env(), compile);
    INFO((status.IsOK() ? std::string() : status.GetErrorMessage()));
    REQUIRE(status.IsOK());
  }
  const fs::path wlBin = out / "wl" / "decode_ctxkit.bin", fullBin = out / "full" / "decode_ctxkit.bin";
  auto view = format::ContainerView::openFile(wlBin);
  REQUIRE(view);
  CHECK(view->weightless());
  size_t inSource = 0;
  for (const auto& w : view->weights()) inSource += w.inSource();
  CHECK(inSource > 0);
  std::cout << "ort_ep: weightless compile through ORT: .bin " << fs::file_size(wlBin) << " bytes vs "
            << fs::file_size(fullBin) << " bytes with the weights; " << inSource << " of " << view->weights().size()
            << " weights read from the source model\n";
  CHECK(fs::file_size(wlBin) * 4 < fs::file_size(fullBin));
  const fs::path data = fs::path(CTXKIT_SAMPLES_DIR) / "tiny_decode" / "test_data_set_0";
  auto r = runTool(CTXKIT_CTXRUN, {(out / "wl" / "decode_ctx.onnx").string(), "--source-model", decode.string(), "--inputs",
                                   data.string(), "--expected", data.string(), "--verify"});
  INFO(r.out << r.err);
  CHECK(r.exitCode == 0);
  SessionConfig source;
  source.entries[epcontext::option::kContextSourceModelPath] = decode.string();
  Comparison c = matchesCpu(out / "wl" / "decode_ctx.onnx", decode, source);
  INFO(c.detail);
  CHECK(c.ok);

  // ORT's sharing flow in weightless mode: one shared .bin whose weights all stay in the two source models.
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) {
    SessionConfig config;
    config.entries[epcontext::option::kContextEnable] = "1";
    config.entries[epcontext::option::kContextFilePath] = (src / (std::string(stem) + "_shared_ctx.onnx")).string();
    config.entries[epcontext::option::kShareEpContexts] = "1";
    config.entries[epcontext::option::kEnableWeightless] = "1";
    if (std::string(stem) == "tiny_decode") config.entries[epcontext::option::kStopShareEpContexts] = "1";
    Ort::Session compiling = ctxkitSession(src / (std::string(stem) + ".onnx"), config);
  }
  auto shared = format::ContainerView::openFile(src / "tiny_prefill_shared_ctxkit.bin");
  REQUIRE(shared);
  CHECK(shared->weightless());
  for (const auto& w : shared->weights()) CHECK(w.sources.size() == 2);  // each weight found in both models
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) {
    const fs::path sdata = fs::path(CTXKIT_SAMPLES_DIR) / stem / "test_data_set_0";
    auto run = runTool(CTXKIT_CTXRUN, {(src / (std::string(stem) + "_shared_ctx.onnx")).string(), "--inputs", sdata.string(),
                                       "--expected", sdata.string(), "--verify"});
    INFO(stem << ": " << run.out << run.err);
    CHECK(run.exitCode == 0);
  }
}

TEST_CASE("weightless: the EP option weightless_scope=external_only is ORT's EXTERNAL_ONLY: initializers inside the "
          ".onnx file are copied into the context, external data stays in the source model",
          "[weightless]") {
  TempDir out("ort_ep_weightless_scope");
  const fs::path src = out / "src";
  fs::create_directories(src);
  auto model = onnx_io::loadModel(sample("tiny_decode"));
  REQUIRE(model);
  std::vector<uint64_t> sizes;
  for (const auto& init : model->graph.initializers) sizes.push_back(init.tensor.byteSize());
  std::sort(sizes.begin(), sizes.end());
  const uint64_t threshold = sizes[sizes.size() / 2] + 1;  // the larger half external, the rest inside
  const fs::path decode = src / "tiny_decode.onnx";
  REQUIRE(onnx_io::saveModelWithExternalData(std::move(model).value(), decode, "tiny_decode.data", threshold));
  std::map<std::string, std::pair<size_t, uint64_t>> found;  // scope: weights in the source, .bin bytes
  for (const char* scope : {"all", "external_only"}) {
    const fs::path ctx = out / scope / "decode_ctx.onnx";
    fs::create_directories(ctx.parent_path());
    SessionConfig config;
    config.epOptions["weightless_scope"] = scope;
    Ort::ModelCompilationOptions compile(env(), ctxkitOptions(config));
    compile.SetInputModelPath(decode.c_str());
    compile.SetOutputModelPath(ctx.c_str());
    compile.SetEpContextEmbedMode(false);
    compile.SetWeightlessEnabled(true);
    Ort::Status status = Ort::CompileModel(env(), compile);
    INFO((status.IsOK() ? std::string() : status.GetErrorMessage()));
    REQUIRE(status.IsOK());
    auto view = format::ContainerView::openFile(ctx.parent_path() / "decode_ctxkit.bin");
    REQUIRE(view);
    size_t inSource = 0;
    for (const auto& w : view->weights())
      if (w.inSource()) {
        ++inSource;
        if (std::string(scope) == "external_only") CHECK(w.size >= threshold);  // only external data stays there
      }
    CHECK(view->sourcePins().size() == 2);  // the model and its data file
    found[scope] = {inSource, fs::file_size(ctx.parent_path() / "decode_ctxkit.bin")};
    SessionConfig load;
    load.entries[epcontext::option::kContextSourceModelPath] = decode.string();
    Comparison c = matchesCpu(ctx, decode, load);
    INFO(scope << ": " << c.detail);
    CHECK(c.ok);
  }
  CHECK(found["external_only"].first > 0);
  CHECK(found["external_only"].first < found["all"].first);
  CHECK(found["external_only"].second > found["all"].second);

  SessionConfig bad;
  bad.epOptions["weightless_scope"] = "some";
  bool refused = false;
  try {
    Ort::Session s = ctxkitSession(decode, bad);
  } catch (const Ort::Exception& e) {
    refused = std::string(e.what()).find("weightless_scope 'some': expected all or external_only") != std::string::npos;
    INFO(e.what());
  }
  CHECK(refused);
}

TEST_CASE("a corpus model (PP-OCR direction classifier) with free dimension overrides, where ctxkit sees the static shapes, "
          "runs the graph and compiles it through ORT", "[corpus]") {
  fs::path model = fs::path(CTXKIT_MODELS_DIR) / "ch_ppocr_mobile_v2.0_cls_infer.onnx";
  CTX_REQUIRE_MATERIAL(fs::exists(model),
                       "corpus model not in the cache (" << model.string() << "): run scripts/fetch_test_assets.sh");
  SessionConfig config;
  config.entries["session.record_ep_graph_assignment_info"] = "1";
  auto sessionWithOverrides = [&](const fs::path& m, SessionConfig c) {
    Ort::SessionOptions options = ctxkitOptions(c);
    options.AddFreeDimensionOverrideByName("p2o.DynamicDimension.0", 1);
    options.AddFreeDimensionOverrideByName("p2o.DynamicDimension.1", 48);
    options.AddFreeDimensionOverrideByName("p2o.DynamicDimension.2", 192);
    return Ort::Session(env(), m.c_str(), options);
  };
  Ort::Session ours = sessionWithOverrides(model, config);
  auto byEp = assignment(ours);
  size_t onCtxkit = byEp[epcontext::kEpName].size(), onCpu = 0;
  for (const auto& [ep, ops] : byEp)
    if (ep != epcontext::kEpName) onCpu += ops.size();
  Ort::Session reference = cpuSession(model);
  Feeds feeds = makeFeeds(ours, 21);  // the overridden, static input shape
  Comparison c = compare(run(ours, feeds), run(reference, feeds));
  INFO(c.detail);
  CHECK(c.ok);
  CHECK(onCtxkit > 100);
  std::cout << "ort_ep: PP-OCR cls in ORT + ctxkit: " << onCtxkit << " nodes on ctxkit, " << onCpu
            << " on ORT's CPU EP; max |diff| " << c.maxAbsDiff << "\n";

  TempDir out("ort_ep_corpus");
  fs::path ctx = out / "cls_ctx.onnx";
  SessionConfig compile;
  compile.entries[epcontext::option::kContextEnable] = "1";
  compile.entries[epcontext::option::kContextFilePath] = ctx.string();
  { Ort::Session compiling = sessionWithOverrides(model, compile); }
  REQUIRE(fs::exists(ctx));
  Ort::Session loaded = ctxkitSession(ctx);
  Comparison l = compare(run(loaded, feeds), run(reference, feeds));
  INFO(l.detail);
  CHECK(l.ok);
  auto r = runTool(CTXKIT_CTXRUN, {ctx.string()});
  INFO(r.out << r.err);
  CHECK(r.exitCode == 0);
}

TEST_CASE("the development corpus through the load path: ctxgen's _ctx.onnx in ORT + ctxkit matches ORT's CPU EP on "
          "the source", "[corpus]") {
  // Models whose inputs need no particular values (the other silero variants take a sample rate that picks a branch).
  struct CorpusModel {
    std::string path;  // under the npm models cache
    std::vector<std::string> shapes;
  };
  const fs::path models = fs::path(CTXKIT_MODELS_DIR).parent_path().parent_path().parent_path();
  const std::vector<CorpusModel> corpus = {
      {"ocr-models-1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x=1x3x48x192"}},
      {"ocr-models-1.4.2/package/assets/ch_PP-OCRv4_rec_infer.onnx", {"x=1x3x48x320"}},
      {"ocr-models-1.4.2/package/assets/ch_PP-OCRv4_det_infer.onnx", {"x=1x3x320x320"}},
      {"silero-vad-1.0.3/package/weights/silero_vad_half.onnx", {"input=1x512", "state=2x1x128"}},
      {"openwakeword-js-0.1.27/package/models/hello_deepa.onnx", {}},
      {"openwakeword-js-0.1.27/package/models/hello_deepa_old.onnx", {}},
      {"openwakeword-js-0.1.27/package/models/namaste_deepa.onnx", {}},
  };
  TempDir out("ort_ep_corpus_load");
  size_t ran = 0;
  for (const auto& m : corpus) {
    fs::path model = models / m.path;
    if (!fs::exists(model)) {
      if (ctxkit::test::materialRequired()) FAIL(model.string() << " is not in the cache and CI is set");
      std::cout << "ort_ep: corpus model not in the cache (" << model << "): run scripts/fetch_test_assets.sh\n";
      continue;
    }
    std::vector<std::string> args = {model.string(), "-o", out.path().string(), "-q"};
    for (const auto& s : m.shapes) args.insert(args.end(), {"--shape", s});
    ctxgen(args);
    fs::path ctx = out / (model.stem().string() + "_ctx.onnx");
    Ort::Session ours = ctxkitSession(ctx);
    Ort::Session reference = cpuSession(model);
    Feeds feeds = makeFeeds(ours, 11);  // the compiled model's static input shapes
    Comparison c = compare(run(ours, feeds), run(reference, feeds));
    INFO(model.filename().string() << ": " << c.detail);
    CHECK(c.ok);
    std::cout << "ort_ep: " << model.filename().string() << " in ORT + ctxkit: max |diff| " << c.maxAbsDiff << "\n";
    ++ran;
  }
  std::cout << "ort_ep: " << ran << " of " << corpus.size() << " corpus models ran through the load path\n";
}

#ifdef CTXKIT_ORT_APP
TEST_CASE("samples/ort_app: the how-to runs a _ctx.onnx on each way of picking ctxkit and matches ORT's CPU EP", "[app]") {
  TempDir out("ort_ep_app");
  ctxgen({sample("tiny_prefill"), "-o", out.path().string(), "-q"});
  for (const char* device : {"cpu", "npu", "prefer-npu"}) {
    auto r = runTool(CTXKIT_ORT_APP, {(out / "tiny_prefill_ctx.onnx").string(), "--ep-library", CTXKIT_EP_LIBRARY,
                                      "--device", device, "--source", sample("tiny_prefill")});
    INFO(device << ": " << r.out << r.err);
    REQUIRE(r.exitCode == 0);
    CHECK(r.out.find("NPU (virtual)") != std::string::npos);
    auto at = r.out.find("max |diff| vs ORT's CPU EP on the source: ");
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(r.out.substr(at + 42)) <= 1e-4);
  }
  fs::path compiled = out / "cnn_ctx.onnx";
  for (int round = 0; round < 2; ++round) {  // the second compile overwrites the first's output, as ORT's API does
    auto r = runTool(CTXKIT_ORT_APP, {sample("tiny_cnn"), "--compile-to", compiled.string(), "--ep-library",
                                      CTXKIT_EP_LIBRARY, "--device", "npu"});
    INFO("round " << round << ": " << r.out << r.err);
    REQUIRE(r.exitCode == 0);
    CHECK(fs::exists(out / "cnn_ctxkit.bin"));
    auto at = r.out.find("max |diff| vs ORT's CPU EP on the source: ");
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(r.out.substr(at + 42)) <= 1e-4);
  }
}
#endif

int main(int argc, char** argv) {
  if (auto why = setUp()) {
    std::cout << *why << "\n";
    if (why->rfind("skipped:", 0) != 0) return 1;
    if (ctxkit::test::materialRequired()) {
      std::cout << "FAIL: CI is set: the material must be present\n";
      return 1;
    }
    return 77;
  }
  // The older-ORT runs (tests/ort_ep/CMakeLists.txt) name the version they must have loaded.
  const std::string& version = ortVersion();
  std::cout << "ort_ep: ONNX Runtime " << version << " (" << ortLibrary() << ")\n";
  if (const char* expected = std::getenv("CTXKIT_TEST_ORT_VERSION"); expected && version != expected) {
    std::cout << "FAIL: expected ONNX Runtime " << expected << ", loaded " << version << "\n";
    return 1;
  }
  return Catch::Session().run(argc, argv);
}
