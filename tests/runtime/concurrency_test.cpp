// A loaded session is immutable: many threads running it at once, on different inputs, get exactly the results
// of serial runs (docs/runtime.md#running). Built under ThreadSanitizer too (see scripts/test.sh).
#include "onnx_io/onnx_io.h"
#include "runtime_test_util.h"
#include "pipeline/pipeline.h"
#include "runtime/session.h"
#include "tooling/run_io.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

using namespace ctxkit;
namespace fs = std::filesystem;

namespace {

const fs::path kSamples = CTXKIT_SAMPLES_DIR;

struct CompiledSample {
  fs::path dir;
  fs::path model;
  explicit CompiledSample(const std::string& stem, const std::string& target) {
    std::random_device rd;
    dir = fs::temp_directory_path() / fmt::format("ctxkit_concurrency_{}_{}_{}", stem, target, rd());
    pipeline::CompileOptions o;
    o.models.push_back(kSamples / (stem + ".onnx"));
    o.outputDir = dir;
    o.target = target;
    auto r = pipeline::compileModels(o);
    INFO((r ? std::string() : r.error().message()));
    REQUIRE(r);
    model = dir / (stem + "_ctx.onnx");
  }
  ~CompiledSample() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

bool sameBits(const ir::Tensor& a, const ir::Tensor& b) {
  return a.type() == b.type() && a.shape() == b.shape() && a.byteSize() == b.byteSize() &&
         std::memcmp(a.data(), b.data(), a.byteSize()) == 0;
}

// Seeded inputs and the outputs of serial runs on them: the expectation concurrent runs must reproduce.
struct SerialRuns {
  std::vector<std::vector<ir::Tensor>> feeds, outputs;
};
SerialRuns serialRuns(const runtime::Session& s, int count, uint64_t firstSeed) {
  SerialRuns r;
  for (int i = 0; i < count; ++i) {
    auto f = tooling::randomInputs(s.inputs(), {}, firstSeed + static_cast<uint64_t>(i));
    REQUIRE(f);
    auto out = s.run(*f);
    REQUIRE(out);
    r.feeds.push_back(std::move(*f));
    r.outputs.push_back(std::move(*out));
  }
  return r;
}

// Runs `threads` x `runsEach` runs at once, rotating through the input sets; counts failed or differing runs.
int wrongConcurrentRuns(const runtime::Session& s, const SerialRuns& serial, int threads, int runsEach) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> workers;
  const int sets = static_cast<int>(serial.feeds.size());
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int r = 0; r < runsEach; ++r) {
        int set = (t + r) % sets;
        auto out = s.run(serial.feeds[set]);
        bool ok = out.isOk();
        for (size_t o = 0; ok && o < out->size(); ++o) ok = sameBits((*out)[o], serial.outputs[set][o]);
        if (!ok) ++wrong;
      }
    });
  for (auto& w : workers) w.join();
  return wrong.load();
}

}  // namespace

TEST_CASE("8 threads x 100 runs on one session give exactly the serial results", "[runtime][concurrency]") {
  auto [stem, target, kernelThreads] = GENERATE(table<std::string, std::string, int>({
      {"tiny_prefill", "npu-sim", 1},
      {"tiny_cnn", "npu-sim", 2},  // kernels share the session's thread pool between concurrent runs
      {"tiny_decode", "cpu", 1},
  }));
  CAPTURE(stem, target, kernelThreads);
  CompiledSample compiled(stem, target);
  runtime::SessionOptions options;
  options.threads = kernelThreads;
  auto session = runtime::Session::loadFile(compiled.model, options);
  REQUIRE(session);
  const runtime::Session& s = **session;
  REQUIRE(s.stats().compiledNodes > 0);

  // Different inputs per run, so results that leak between concurrent runs show up as wrong outputs.
  SerialRuns serial = serialRuns(s, 6, 100);
  REQUIRE(!sameBits(serial.outputs[0][0], serial.outputs[1][0]));  // the input sets really differ
  CHECK(wrongConcurrentRuns(s, serial, 8, 100) == 0);
}

TEST_CASE("fallback nodes are prepared once and shared by concurrent runs", "[runtime][concurrency]") {
  // A plain model: every node runs on the fallback interpreter.
  auto session = runtime::Session::loadFile(kSamples / "tiny_cnn.onnx");
  REQUIRE(session);
  const runtime::Session& s = **session;
  CHECK(s.stats().fallbackNodes > 0);
  // tiny_cnn's input shape is static, so every node was prepared at load, before any run.
  const size_t prepared = s.preparedFallbackOps();
  CHECK(prepared == s.stats().fallbackNodes);
  SerialRuns serial = serialRuns(s, 4, 200);
  CHECK(s.preparedFallbackOps() == prepared);
  CHECK(wrongConcurrentRuns(s, serial, 4, 50) == 0);
  CHECK(s.preparedFallbackOps() == prepared);  // same shapes: nothing prepared again
}

TEST_CASE("fallback nodes behind a symbolic input dimension are prepared on first use", "[runtime][concurrency]") {
  auto model = onnx_io::loadModel(kSamples / "tiny_cnn.onnx");
  REQUIRE(model);
  REQUIRE(model->graph.inputs[0].shape);
  (*model->graph.inputs[0].shape)[0] = ir::Dim::named("batch");
  auto session = runtime::Session::load(std::move(model).value(), kSamples);
  INFO((session ? std::string() : session.error().message()));
  REQUIRE(session);
  const runtime::Session& s = **session;
  // Only nodes fed by initializers alone could be prepared ahead; the image path waits for a run.
  const size_t atLoad = s.preparedFallbackOps();
  CHECK(atLoad < s.stats().fallbackNodes);
  runtime::testing::expectMatch(s, "tiny_cnn");
  CHECK(s.preparedFallbackOps() > atLoad);
}

TEST_CASE("sessions sharing a .bin share its programs and run them at once", "[runtime][concurrency]") {
  CompiledSample compiled("tiny_cnn", "npu-sim");
  auto first = runtime::Session::loadFile(compiled.model);
  auto second = runtime::Session::loadFile(compiled.model);
  REQUIRE(first);
  REQUIRE(second);
  REQUIRE((*first)->stats().compiledNodes > 0);
  CHECK((*first)->stats().sharedPrograms == 0);
  CHECK((*second)->stats().sharedPrograms == (*second)->stats().compiledNodes);
  runtime::testing::expectMatch(**second, "tiny_cnn");  // the shared program against the model's reference outputs

  // Both sessions' runs at once, on one program's frames: each gets the serial results.
  SerialRuns serial = serialRuns(**first, 4, 300);
  std::atomic<int> wrong{0};
  std::thread other([&] { wrong += wrongConcurrentRuns(**second, serial, 3, 40); });
  wrong += wrongConcurrentRuns(**first, serial, 3, 40);
  other.join();
  CHECK(wrong.load() == 0);

  // The program outlives the session that loaded it, and a later session still finds it.
  first->reset();
  CHECK(wrongConcurrentRuns(**second, serial, 2, 10) == 0);
  auto third = runtime::Session::loadFile(compiled.model);
  REQUIRE(third);
  CHECK((*third)->stats().sharedPrograms == (*third)->stats().compiledNodes);

  // Sessions asked not to share mappings decode their own programs.
  runtime::SessionOptions apart;
  apart.shareContexts = false;
  auto own = runtime::Session::loadFile(compiled.model, apart);
  REQUIRE(own);
  CHECK((*own)->stats().sharedPrograms == 0);
  runtime::testing::expectMatch(**own, "tiny_cnn");
}
