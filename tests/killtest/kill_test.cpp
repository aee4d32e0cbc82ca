// Atomic outputs under kill -9 (docs/bad-input.md#outputs): ctxgen is killed with SIGKILL at seeded random moments
// spread over its run. After every kill each file under a final output name is absent or valid (the `.bin` opens and
// verifies, a `_ctx.onnx` loads and passes `ctxinspect --verify`, and `ctxrun` runs it), an existing output is
// byte-identical to what it was, and the next successful run leaves no temporary file behind.
#include "../e2e/tool_runner.h"
#include "format/container.h"
#include "onnx_io/onnx_io.h"
#include "samples/graph_builder.h"
#include "samples/prng.h"
#include "support/file_io.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <thread>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

uint64_t seed() {
  const char* env = std::getenv("CTXKIT_KILLTEST_SEED");
  return env ? std::strtoull(env, nullptr, 10) : 20261123;
}

std::string sample(const std::string& stem) { return (fs::path(CTXKIT_SAMPLES_DIR) / (stem + ".onnx")).string(); }

// An MLP of 8 MatMul+Relu layers with 640x640 float weights: 12.5 MiB of distinct weights, so writing the
// `.bin` takes a visible share of the run.
fs::path makeLargeModel(const fs::path& dir) {
  constexpr int64_t kWidth = 640;
  samples::GraphBuilder b("kill_mlp", "");
  samples::SplitMix64 rng(7);
  b.addInput("x", {1, kWidth});
  std::string value = "x";
  for (int layer = 0; layer < 8; ++layer) {
    std::string w = b.addFloats(fmt::format("w{}", layer), {kWidth, kWidth},
                                rng.uniformVector(static_cast<size_t>(kWidth * kWidth), -0.05f, 0.05f));
    value = b.addNode(fmt::format("mm{}", layer), "MatMul", {value, w});
    value = b.addNode(fmt::format("relu{}", layer), "Relu", {value});
  }
  b.addOutput(value, {1, kWidth});
  ir::Model model = std::move(b).finish("kill test model");
  fs::path path = dir / "kill_mlp.onnx";
  REQUIRE(onnx_io::saveModel(model, path).isOk());
  return path;
}

std::map<std::string, std::vector<std::byte>> snapshot(const fs::path& dir) {
  std::map<std::string, std::vector<std::byte>> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    auto mapped = MappedFile::open(e.path());
    REQUIRE(mapped.isOk());
    auto bytes = (*mapped)->bytes();
    files[e.path().filename().string()] = {bytes.begin(), bytes.end()};
  }
  return files;
}

// Compares without printing megabytes of bytes on failure.
bool sameBytes(const std::vector<std::byte>& got, const std::vector<std::byte>& want) {
  if (got == want) return true;
  auto diff = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
  UNSCOPED_INFO("the file has " << got.size() << " bytes, the reference " << want.size() << "; first difference at offset "
                                << (diff.first - got.begin()));
  return false;
}

// One compile command, run to completion or killed.
class Job {
public:
  Job(std::string name, std::vector<std::string> inputs, bool withJson) : name_(std::move(name)), inputs_(std::move(inputs)), json_(withJson) {}

  std::vector<std::string> argv(const fs::path& out, bool force) const {
    std::vector<std::string> a = {CTXKIT_CTXGEN};
    a.insert(a.end(), inputs_.begin(), inputs_.end());
    a.insert(a.end(), {"-o", out.string()});
    if (json_) a.insert(a.end(), {"--json", (out / "report.json").string()});
    if (force) a.push_back("--force");
    return a;
  }
  const std::string& name() const { return name_; }
  bool isReport(const std::string& file) const { return json_ && file == "report.json"; }

private:
  std::string name_;
  std::vector<std::string> inputs_;
  bool json_;
};

pid_t spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  REQUIRE(pid > 0);
  return pid;
}

int waitExit(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

// Runs to completion and returns the wall time.
std::chrono::microseconds runToEnd(const Job& job, const fs::path& out, bool force) {
  auto start = Clock::now();
  int status = waitExit(spawn(job.argv(out, force)));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
}

struct Stats {
  int trials = 0, killed = 0, finishedFirst = 0, leftTemps = 0, leftPartialSet = 0;
};

class KillHarness {
public:
  KillHarness(Job job, const fs::path& work) : job_(std::move(job)), out_(work / job_.name()) {
    fs::create_directories(out_);
    // The reference outputs, and how long a warm run takes (median of three after a first, cold one).
    runToEnd(job_, out_, true);
    std::vector<std::chrono::microseconds> times;
    for (int i = 0; i < 3; ++i) times.push_back(runToEnd(job_, out_, true));
    std::sort(times.begin(), times.end());
    duration_ = times[1];
    reference_ = snapshot(out_);
    for (const auto& [name, bytes] : reference_) finals_.push_back(name);
    INFO("reference outputs of " << job_.name());
    REQUIRE(std::any_of(finals_.begin(), finals_.end(), [](const std::string& n) { return n.ends_with(".bin"); }));
  }

  std::chrono::microseconds duration() const { return duration_; }
  const Stats& stats() const { return stats_; }

  // One kill: into an empty folder (`existing` false) or over the complete reference outputs, with or
  // without --force, after a delay drawn from [0, spread x the run time]. Then a successful run with --force
  // must restore the reference with no temporaries.
  void trial(std::mt19937_64& rng, bool existing, bool force, double spread = 1.0) {
    ++stats_.trials;
    resetFolder(existing);
    std::uniform_int_distribution<int64_t> delay(0, static_cast<int64_t>(static_cast<double>(duration_.count()) * spread));
    const auto wait = std::chrono::microseconds(delay(rng));
    const auto argv = job_.argv(out_, force);
    pid_t pid = spawn(argv);
    std::this_thread::sleep_for(wait);
    ::kill(pid, SIGKILL);
    int status = waitExit(pid);
    INFO(job_.name() << ": trial " << stats_.trials << ", killed after " << wait.count() << " us of a ~"
                     << duration_.count() << " us run (existing outputs: " << existing << ", --force: " << force << ")");
    if (WIFSIGNALED(status)) ++stats_.killed;
    else ++stats_.finishedFirst;

    checkAfterKill(existing);

    runToEnd(job_, out_, true);
    auto after = snapshot(out_);
    std::vector<std::string> names;
    for (const auto& [name, bytes] : after) names.push_back(name);
    CHECK(names == finals_);  // no temporary file is left behind
    for (const auto& [name, bytes] : after)
      if (!job_.isReport(name)) CHECK(sameBytes(bytes, reference_.at(name)));
  }

private:
  void resetFolder(bool existing) {
    fs::remove_all(out_);
    fs::create_directories(out_);
    if (existing)
      for (const auto& [name, bytes] : reference_) {
        std::ofstream f(out_ / name, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      }
  }

  bool isTemp(const std::string& file) const {
    return std::any_of(finals_.begin(), finals_.end(), [&](const std::string& f) { return atomicTempOwner(file, f).has_value(); });
  }

  void checkAfterKill(bool existing) {
    std::vector<std::string> models;
    size_t finalsPresent = 0;
    bool temps = false;
    for (const auto& e : fs::directory_iterator(out_)) {
      const std::string file = e.path().filename().string();
      INFO("file " << file);
      if (isTemp(file)) {
        temps = true;
        continue;
      }
      REQUIRE(std::find(finals_.begin(), finals_.end(), file) != finals_.end());  // nothing under another name
      ++finalsPresent;
      if (existing && !job_.isReport(file)) {
        // Deterministic output: whether the old file or a complete new one is in place, the bytes are the same.
        CHECK(sameBytes(snapshotOne(e.path()), reference_.at(file)));
      }
      if (file.ends_with(".bin")) {
        auto view = format::ContainerView::openFile(e.path());
        INFO((view ? std::string() : view.error().message()));
        REQUIRE(view.isOk());
        auto verified = view->verify();
        INFO((verified ? std::string() : verified.error().message()));
        CHECK(verified.isOk());
      } else if (file.ends_with(".onnx")) {
        auto m = onnx_io::loadModel(e.path());
        INFO((m ? std::string() : m.error().message()));
        CHECK(m.isOk());
        models.push_back(e.path().string());
      } else if (job_.isReport(file)) {
        CHECK_NOTHROW(nlohmann::json::parse(testing::readText(e.path())));
      }
    }
    if (temps) ++stats_.leftTemps;
    if (finalsPresent > 0 && finalsPresent < finals_.size()) ++stats_.leftPartialSet;
    if (models.empty()) return;
    auto args = models;
    args.push_back("--verify");
    auto r = runTool(CTXKIT_CTXINSPECT, args);
    INFO("ctxinspect --verify:\n" << r.out << r.err);
    CHECK(r.exitCode == 0);
    for (const auto& m : models) {
      auto run = runTool(CTXKIT_CTXRUN, {m});
      INFO("ctxrun " << m << ":\n" << run.out << run.err);
      CHECK(run.exitCode == 0);
    }
  }

  static std::vector<std::byte> snapshotOne(const fs::path& p) {
    auto mapped = MappedFile::open(p);
    REQUIRE(mapped.isOk());
    auto bytes = (*mapped)->bytes();
    return {bytes.begin(), bytes.end()};
  }

  Job job_;
  fs::path out_;
  std::chrono::microseconds duration_{0};
  std::map<std::string, std::vector<std::byte>> reference_;
  std::vector<std::string> finals_;
  Stats stats_;
};

void report(const KillHarness& h, const std::string& name) {
  const Stats& s = h.stats();
  WARN(name << ": " << s.trials << " trials over a ~" << h.duration().count() / 1000 << " ms run: " << s.killed
            << " killed, " << s.finishedFirst << " finished before the kill, " << s.leftTemps
            << " left temporaries, " << s.leftPartialSet << " left part of the output set");
}

}  // namespace

TEST_CASE("ctxgen killed at random moments never leaves a bad file under a final name", "[killtest]") {
  const uint64_t s = seed();
  INFO("seed " << s << " (set CTXKIT_KILLTEST_SEED to reproduce another)");
  std::mt19937_64 rng(s);
  TempDir work("killtest");

  KillHarness small(Job("samples", {sample("tiny_prefill") + "," + sample("tiny_decode"), sample("tiny_cnn"), "--share"}, true),
                    work.path());
  KillHarness large(Job("large", {makeLargeModel(work.path()).string()}, false), work.path());

  // Mostly kills of a run into an empty folder; some over existing outputs with --force (the old files must
  // survive byte for byte until replaced by identical new ones).
  for (int i = 0; i < 24; ++i) small.trial(rng, i % 4 == 3, true);
  for (int i = 0; i < 32; ++i) large.trial(rng, i % 4 == 3, true);
  report(small, "samples");
  report(large, "large model");
  CHECK(small.stats().killed + large.stats().killed >= 24);  // the kills did land inside runs
}

TEST_CASE("killing ctxgen without --force never touches existing outputs", "[killtest]") {
  std::mt19937_64 rng(seed() + 1);
  TempDir work("killtest_noforce");
  KillHarness small(Job("samples", {sample("tiny_prefill") + "," + sample("tiny_decode"), "--share"}, false), work.path());
  // A run that refuses is much shorter than one that compiles: the kills aim at its first fifth.
  for (int i = 0; i < 10; ++i) small.trial(rng, true, false, 0.2);
  report(small, "samples without --force");
}
