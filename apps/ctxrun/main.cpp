// ctxrun: loads a _ctx.onnx (or plain .onnx), runs it, and checks or saves the outputs.
#include "cli/cli_util.h"
#include "cli/log.h"
#include "epcontext/contract.h"
#include "generate_mode.h"
#include "package/judge.h"
#include "runtime/compatibility.h"
#include "runtime/prefault.h"
#include "runtime/profile.h"
#include "runtime/session.h"
#include "support/file_io.h"
#include "support/text.h"
#include "tooling/run_io.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include <sys/resource.h>

using namespace ctxkit;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// What the process spent on one phase (load, the first run, one later run): wall time, CPU time over all its threads
// (which a busy machine inflates less than wall time) and minor page faults (deterministic enough to compare the
// first run with the steady state).
struct PhaseCost {
  double ms = 0, cpuMs = 0;
  long faults = 0;
};

class PhaseTimer {
public:
  PhaseTimer() : start_(Clock::now()), usage_(usageNow()) {}
  PhaseCost stop() const {
    const rusage now = usageNow();
    auto cpu = [](const rusage& u) {
      return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
    };
    return PhaseCost{msSince(start_), cpu(now) - cpu(usage_), now.ru_minflt - usage_.ru_minflt};
  }

private:
  static rusage usageNow() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u;
  }
  Clock::time_point start_;
  rusage usage_;
};

template <typename T> T medianOf(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Args {
  std::string model, inputs, expected, outputDir, contextFilePath, saveInputs, sourceModel;
  std::string device = "auto", component;  // a model package: which variant of which component
  std::vector<std::string> dims, shapes, sets;
  double rtol = 1e-3, atol = 1e-5;
  int iters = 0, threads = 1, parallelRuns = 0, sessions = 1;
  uint64_t seed = 1;
  bool prefault = true, profile = false;
  int profileTop = 15;
  bool savePb = false, json = false, verify = false, strict = false, fromBuffer = false;
  ctxrun::GenerateArgs generate;  // --generate N with --decode and --prompt-ids
  cli::LogOptions log;
};

// The outputs of a run, made and made resident, when every output's shape is known before it runs; none otherwise.
Expected<std::vector<ir::Tensor>> staticOutputs(const std::vector<ir::ValueInfo>& outputs) {
  std::vector<ir::Tensor> made;
  for (const ir::ValueInfo& info : outputs) {
    std::optional<ir::Shape> shape = info.staticShape();
    if (!shape) return std::vector<ir::Tensor>{};
    auto allocated = ir::Tensor::allocate(info.type, std::move(*shape));
    if (!allocated) return allocated.takeError().addContext(fmt::format("output '{}'", info.name));
    ir::Tensor t = std::move(allocated).value();
    if (t.byteSize() > 0) runtime::prefaultWritable(t.mutableData(), t.byteSize());
    made.push_back(std::move(t));
  }
  return made;
}

int fail(const Args& a, const Error& e, nlohmann::ordered_json& report) {
  if (a.json) {
    report["ok"] = false;
    report["error"] = e.message();
    std::cout << report.dump(2) << "\n" << std::flush;
  }
  cli::logError("{}", e.message());
  return e.code() == ErrorCode::InvalidArgument ? cli::kExitUsage : cli::kExitFailure;
}

// Runs the session from `threads` threads at once, `runsEach` times each, and checks every result against the
// first (serial) run bit for bit: a loaded session is immutable, so concurrency must not change any output.
struct ParallelResult {
  uint64_t runs = 0;
  uint64_t wrong = 0;
  double seconds = 0;
  std::string firstProblem;
};

ParallelResult runInParallel(const runtime::Session& s, const std::vector<ir::Tensor>& feeds,
                             const std::vector<ir::Tensor>& reference, int threads, int runsEach) {
  ParallelResult result;
  std::atomic<uint64_t> wrong{0};
  std::mutex problemMutex;
  auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      for (int i = 0; i < runsEach; ++i) {
        auto out = s.run(feeds);
        std::string problem;
        if (!out) {
          problem = out.error().message();
        } else {
          for (size_t o = 0; o < out->size() && problem.empty(); ++o) {
            auto c = tooling::compareTensors((*out)[o], reference[o], 0, 0);
            if (!c.match) problem = fmt::format("output {} '{}': {}", o, s.outputs()[o].name, c.message);
          }
        }
        if (problem.empty()) continue;
        ++wrong;
        std::lock_guard<std::mutex> lock(problemMutex);
        if (result.firstProblem.empty()) result.firstProblem = problem;
      }
    });
  for (auto& w : workers) w.join();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.runs = static_cast<uint64_t>(threads) * static_cast<uint64_t>(runsEach);
  result.wrong = wrong.load();
  return result;
}

// Shown after the options by --help, and in the man page help2man makes from it.
constexpr const char* kHelpFooter = R"(Examples:
  $ ctxrun out/model_ctx.onnx
      load and run once on seeded random inputs; print the load and run times
  $ ctxrun out/model_ctx.onnx --inputs test_data_set_0 --expected test_data_set_0
      run on input_0.pb (or .npy) and compare with output_0.pb within --rtol/--atol
  $ ctxrun out/model_ctx.onnx --verify --strict --iters 100
      check every weight hash at load, refuse a model compiled for another target revision, time 100 runs
  $ ctxrun model.onnx --output-dir ref --save-inputs ref
      run a plain ONNX model (no compilation) and save inputs and outputs as .npy
  $ ctxrun out/prefill_ctx.onnx --generate 8 --decode out/decode_p16_ctx.onnx,out/decode_p17_ctx.onnx,... \
        --prompt-ids prompt.npy --json
      generate 8 tokens greedily: the prompt through the prefill, then each token through the decode model that
      takes the past so far; print the tokens, time to first token and decode tokens/s

Exit codes:
  0  success (and the outputs match, with --expected)
  1  failure: the model or its context binary cannot be loaded or run, or the outputs do not match
  2  usage error
)";

// The per-op profile (--profile): time per run by op kind and the slowest ops, in the JSON report and, without
// --json, as text.
void reportProfile(const runtime::RunProfile& profile, int top, bool text, nlohmann::ordered_json& report) {
  const double runs = std::max<double>(1, static_cast<double>(profile.runs()));
  const std::vector<runtime::ProfileEntry> entries = profile.entries();
  double total = 0;
  struct Kind {
    std::string kind;
    double ms = 0;
    size_t ops = 0;
  };
  std::vector<Kind> kinds;
  for (const auto& e : entries) {
    total += e.milliseconds / runs;
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const Kind& k) { return k.kind == e.op.kind; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), Kind{e.op.kind});
    it->ms += e.milliseconds / runs;
    ++it->ops;
  }
  std::stable_sort(kinds.begin(), kinds.end(), [](const Kind& a, const Kind& b) { return a.ms > b.ms; });
  auto share = [&](double ms) { return total > 0 ? 100.0 * ms / total : 0.0; };
  nlohmann::ordered_json j;
  j["runs"] = profile.runs();
  j["ms_per_run"] = total;
  j["by_kind"] = nlohmann::ordered_json::array();
  for (const auto& k : kinds)
    j["by_kind"].push_back({{"kind", k.kind}, {"ms", k.ms}, {"percent", share(k.ms)}, {"ops", k.ops}});
  j["ops"] = nlohmann::ordered_json::array();
  for (const auto& e : entries)
    j["ops"].push_back({{"graph", e.op.graph},
                        {"index", e.op.index},
                        {"name", e.op.name},
                        {"kind", e.op.kind},
                        {"shape", e.op.shape},
                        {"ms", e.milliseconds / runs},
                        {"percent", share(e.milliseconds / runs)}});
  report["profile"] = std::move(j);
  if (!text) return;
  std::cout << fmt::format("profile: {:.3f} ms per run in {} over {}\n", total, counted(entries.size(), "op"),
                           counted(profile.runs(), "run"));
  std::cout << "  by kind:\n";
  for (const auto& k : kinds)
    std::cout << fmt::format("    {:<24} {:9.3f} ms {:5.1f}%  {}\n", k.kind, k.ms, share(k.ms), counted(k.ops, "op"));
  std::cout << "  slowest ops:\n";
  for (size_t i = 0; i < entries.size() && i < static_cast<size_t>(top); ++i) {
    const auto& e = entries[i];
    std::cout << fmt::format("    {:9.3f} ms {:5.1f}%  {} '{}' {} ({} op {})\n", e.milliseconds / runs,
                             share(e.milliseconds / runs), e.op.kind, e.op.name, e.op.shape, e.op.graph, e.op.index);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ctxrun: run a _ctx.onnx model (or a plain .onnx) with ctxkit's runtime"};
  Args a;
  bool printDevice = false;
  auto* modelOption =
      app.add_option("model", a.model, "the model to run, or a model package folder (required unless --print-device)");
  app.add_option("--device", a.device,
                 "a package's variant to run: a variant name, a device (cpu, npu) or target, or auto (default): the "
                 "variant this runtime's compatibility verdict ranks best (docs/package.md)");
  app.add_option("--component", a.component, "a package's component to run (needed when it has several)");
  app.add_flag("--print-device", printDevice,
               "print this machine's device profile (ctxkit version, container format, target revisions, CPU features) "
               "as JSON, for ctxinspect --check --against, and exit")
      ->excludes(modelOption);
  auto* inputsOption = app.add_option(
      "--inputs", a.inputs, "folder with input_<i>.pb, input_<i>.npy or <name>.npy (default: seeded random inputs)");
  auto* expectedOption =
      app.add_option("--expected", a.expected, "folder with output_<i>.pb or .npy to compare against");
  app.add_option("--rtol", a.rtol, "relative tolerance (default 1e-3)");
  app.add_option("--atol", a.atol, "absolute tolerance (default 1e-5)");
  app.add_option("--output-dir", a.outputDir, "write output_<i>.npy here (with --generate: logits_<i>.npy)");
  app.add_flag("--save-pb", a.savePb, "also write output_<i>.pb");
  app.add_option("--save-inputs", a.saveInputs,
                 "write the inputs used as input_<i>.npy here (to feed another runtime)");
  app.add_option("--dim", a.dims, "bind a symbolic dimension for random inputs: SYM=V");
  app.add_option("--shape", a.shapes, "input shape for random inputs: INPUT=AxBxC");
  app.add_option("--seed", a.seed, "seed for random inputs (default 1)");
  app.add_option("--set", a.sets,
                 "give input NAME these values (e.g. a sample rate); one value fills every element: NAME=V[,V...]");
  app.add_option("--iters", a.iters, "run N times and print load, first-run, median and p90 times");
  app.add_option("--threads", a.threads, "kernel threads (default 1)")->check(CLI::Range(1, 256));
  app.add_option("--parallel-runs", a.parallelRuns,
                 "also run from N threads at once on the one session (--iters runs each, default 50), check every "
                 "result against the serial run, and report throughput")
      ->check(CLI::Range(1, 256));
  app.add_option("--sessions", a.sessions,
                 "load the model this many times in this process (they share each context binary's mapping) and "
                 "run each once, to measure what extra sessions cost")
      ->check(CLI::Range(1, 64));
  app.add_flag("--profile", a.profile,
               "time every compiled op and fallback node over the runs after the first (--iters, default 10 with "
               "--profile) and print the time per op kind and the slowest ops");
  app.add_option("--profile-top", a.profileTop, "with --profile: how many of the slowest ops to print (default 15)")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--verify", a.verify, "check every weight hash of the context binaries at load");
  app.add_flag("--prefault,!--no-prefault", a.prefault,
               "make the execution arena and the mapped weights resident at load, so the first run does not fault "
               "them in (the default; --no-prefault leaves that to the first run)");
  app.add_option(
      "--source-model", a.sourceModel,
      "weightless contexts: the source model holding the weights (ep.context_source_model_path; default: the "
      "node's onnx_model_filename beside the model)");
  app.add_flag("--strict", a.strict, "fail instead of warn when recompilation is recommended");
  app.add_flag("--from-buffer", a.fromBuffer, "load the model from memory (with --context-file-path)");
  app.add_option("--context-file-path", a.contextFilePath,
                 "with --from-buffer: the path ep_cache_context resolves against");
  app.add_flag("--json", a.json, "print a JSON report");
  auto* generateOption =
      app.add_option("--generate", a.generate.count,
                     "generate N tokens greedily with a prefill/decode pair: the model is the prefill; needs --decode "
                     "and --prompt-ids (--iters repeats the generation, --output-dir saves each token's logits)")
          ->check(CLI::Range(1, 1000000));
  auto* decodeOption =
      app.add_option("--decode", a.generate.decodes,
                     "with --generate: the decode model, or several at different past lengths (ctxgen --variant): each "
                     "token runs the first that takes the past so far: D[,D...]")
          ->delimiter(',');
  auto* promptOption = app.add_option("--prompt-ids", a.generate.promptIds,
                                      "with --generate: the prompt, int64 token ids [1, S] (.npy)");
  auto* kvOption = app.add_option("--kv", a.generate.kv,
                                  "with --generate: a decode past input and the present output feeding it, "
                                  "PAST=PRESENT[,...] (default: found by name, past_key_0 -> present_key_0)")
                       ->delimiter(',');
  generateOption->needs(decodeOption)->needs(promptOption);
  decodeOption->needs(generateOption);
  promptOption->needs(generateOption);
  kvOption->needs(generateOption);
  std::string memoryLimit;
  app.add_option("--memory-limit", memoryLimit,
                 "fail (naming the node) instead of allocating a tensor or arena of more than SIZE bytes (K, M, G, T; "
                 "default 16G)");
  cli::addLogOptions(app, a.log);
  // A generating run feeds its models itself and compares nothing.
  for (const char* name :
       {"--save-pb", "--save-inputs", "--dim", "--shape", "--seed", "--set", "--parallel-runs", "--sessions",
        "--profile", "--profile-top", "--from-buffer", "--context-file-path", "--rtol", "--atol"})
    generateOption->excludes(app.get_option(name));
  generateOption->excludes(inputsOption)->excludes(expectedOption);
  app.footer(kHelpFooter);
  app.set_version_flag("--version", std::string("ctxrun ") + epcontext::kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? cli::kExitOk : cli::kExitUsage;
  }
  if (auto usage = cli::initLogging("ctxrun", a.log)) {
    cli::logError("{}", *usage);
    return cli::kExitUsage;
  }
  if (printDevice) {
    std::cout << runtime::deviceProfileJson(runtime::thisDevice()) << std::flush;
    return cli::kExitOk;
  }
  if (a.model.empty()) {
    cli::logError("a model is required (or --print-device)");
    return cli::kExitUsage;
  }
  nlohmann::ordered_json report;
  report["model"] = a.model;
  if (package::isPackage(a.model)) {
    auto opened = package::open(a.model);
    if (!opened) return fail(a, opened.error(), report);
    auto chosen = package::select(*opened, a.component, a.device, package::judgeHere);
    if (!chosen) return fail(a, chosen.error(), report);
    const package::Variant& v = **chosen;
    cli::logInfo("{}: variant '{}' ({}, {})", a.model, v.name, v.device, package::judgeHere(v).verdict);
    report["package"] = a.model;
    report["variant"] = v.name;
    a.model = v.modelFile.string();
    if (a.sourceModel.empty() && v.weightsFolder && !v.sourceModel.empty())
      a.sourceModel = (*v.weightsFolder / v.sourceModel).string();
  } else if (a.device != "auto" || !a.component.empty()) {
    return fail(a,
                Error(ErrorCode::InvalidArgument, "--device and --component choose within a model package; '" +
                                                      a.model + "' is not one (no manifest.json)"),
                report);
  }
  ir::ShapeBindings bindings;
  for (const auto& d : a.dims)
    if (auto s = cli::parseDimBinding(d, bindings); !s) return fail(a, s.error(), report);
  for (const auto& s : a.shapes)
    if (auto st = cli::parseShapeBinding(s, bindings); !st) return fail(a, st.error(), report);

  if (!memoryLimit.empty()) {
    auto bytes = cli::parseByteCount(memoryLimit);
    if (!bytes) return fail(a, Error(ErrorCode::InvalidArgument, "--memory-limit: " + bytes.error().message()), report);
    ir::setMemoryLimit(*bytes);
  }

  runtime::SessionOptions options;
  options.threads = a.threads;
  options.verifyWeights = a.verify;
  options.sourceModelPath = a.sourceModel;
  options.prefault = a.prefault;
  options.failOnSuboptimal = a.strict;
  if (a.generate.count > 0) {
    a.generate.prefill = a.model;
    a.generate.outputDir = a.outputDir;
    a.generate.iters = std::max(1, a.iters);
    a.generate.json = a.json;
    return ctxrun::runGenerate(a.generate, options);
  }
  const PhaseTimer loadTimer;
  Expected<std::unique_ptr<runtime::Session>> session = makeError(ErrorCode::Internal, "not loaded");
  if (a.fromBuffer) {
    auto bytes = readFile(a.model);
    if (!bytes) return fail(a, bytes.error(), report);
    fs::path ctx = a.contextFilePath.empty() ? fs::path(a.model) : fs::path(a.contextFilePath);
    session = runtime::Session::loadBuffer(std::as_bytes(std::span(bytes->data(), bytes->size())), ctx, options);
  } else {
    session = runtime::Session::loadFile(a.model, options);
  }
  if (!session) return fail(a, session.error(), report);
  const runtime::Session& s = **session;
  // Pre-faulting also makes the outputs a run writes, when their shapes are known, and touches them: the first run
  // then writes into them as every later run does (docs/runtime.md#time-to-first-result).
  std::optional<std::vector<ir::Tensor>> madeOutputs;
  if (a.prefault) {
    auto made = staticOutputs(s.outputs());
    if (!made) return fail(a, made.error(), report);
    madeOutputs = std::move(made).value();
  }
  const PhaseCost load = loadTimer.stop();
  const double loadMs = load.ms;
  for (const auto& w : s.warnings()) cli::logWarning("{}", w);
  cli::logVerbose("loaded {} in {:.2f} ms{}", a.model, loadMs, a.verify ? ", every weight hash checked" : "");

  // Every file the run reads, so that nothing it writes lands on one of them (docs/bad-input.md#outputs).
  std::vector<RunFile> read{{a.model, "model"}};
  if (!a.sourceModel.empty()) read.push_back({a.sourceModel, "source model"});
  auto feeds = a.inputs.empty() ? tooling::randomInputs(s.inputs(), bindings, a.seed)
                                : tooling::loadInputFolder(a.inputs, s.inputs(), &read);
  if (!feeds) return fail(a, feeds.error(), report);
  for (const auto& set : a.sets)
    if (auto st = tooling::setInputValue(*feeds, s.inputs(), set); !st) return fail(a, st.error(), report);
  std::optional<std::vector<ir::Tensor>> expected;
  if (!a.expected.empty()) {
    auto loaded = tooling::loadExpectedFolder(a.expected, s.outputs().size(), &read);
    if (!loaded) return fail(a, loaded.error(), report);
    expected = std::move(loaded).value();
  }
  std::vector<RunFile> written;
  if (!a.saveInputs.empty()) written = tooling::savedFiles(a.saveInputs, "input", feeds->size(), false);
  if (!a.outputDir.empty())
    for (auto& f : tooling::savedFiles(a.outputDir, "output", s.outputs().size(), a.savePb)) written.push_back(f);
  if (auto st = checkRunFiles(read, written); !st) return fail(a, st.error(), report);

  if (!a.saveInputs.empty())
    if (auto st = tooling::saveTensors(a.saveInputs, "input", *feeds); !st) return fail(a, st.error(), report);

  const PhaseTimer firstTimer;
  Expected<std::vector<ir::Tensor>> outputs = makeError(ErrorCode::Internal, "not run");
  if (madeOutputs && !madeOutputs->empty()) {
    std::vector<ir::Tensor*> into;
    for (auto& t : *madeOutputs) into.push_back(&t);
    if (auto st = s.runInto(*feeds, into); st) outputs = std::move(*madeOutputs);
    else outputs = st.error();
  } else {
    outputs = s.run(*feeds);
  }
  const PhaseCost first = firstTimer.stop();
  const double firstMs = first.ms;
  if (!outputs) return fail(a, outputs.error(), report);
  std::vector<double> times, cpuTimes;
  std::vector<long> faults;
  // Later runs write into the previous run's outputs (Session::runInto): a steady-state run allocates nothing.
  std::vector<ir::Tensor> again(outputs->size());
  std::vector<ir::Tensor*> againPtrs;
  for (auto& t : again) againPtrs.push_back(&t);
  if (a.profile && a.iters < 2) a.iters = 10;
  runtime::RunProfile profile;
  {
    std::optional<runtime::ProfileScope> profiling;
    if (a.profile) profiling.emplace(&profile);
    for (int i = 1; i < a.iters; ++i) {
      const PhaseTimer timer;
      auto st = s.runInto(*feeds, againPtrs);
      const PhaseCost cost = timer.stop();
      times.push_back(cost.ms);
      cpuTimes.push_back(cost.cpuMs);
      faults.push_back(cost.faults);
      if (!st) return fail(a, st.error(), report);
      profile.endRun();
    }
  }

  report["compiled_nodes"] = s.stats().compiledNodes;
  report["fallback_nodes"] = s.stats().fallbackNodes;
  report["contexts"] = s.stats().contexts;
  report["load_ms"] = loadMs;
  report["first_run_ms"] = firstMs;
  report["time_to_first_result_ms"] = loadMs + firstMs;
  report["load_cpu_ms"] = load.cpuMs;
  report["first_run_cpu_ms"] = first.cpuMs;
  report["load_page_faults"] = load.faults;
  report["first_run_page_faults"] = first.faults;
  if (!times.empty()) {
    report["iterations"] = a.iters;
    report["median_ms"] = medianOf(times);
    std::sort(times.begin(), times.end());
    report["p90_ms"] = times[std::min(times.size() - 1, times.size() * 9 / 10)];
    report["median_cpu_ms"] = medianOf(cpuTimes);
    report["median_page_faults"] = medianOf(faults);
    report["first_run_ratio"] = firstMs / report["median_ms"].get<double>();
  }
  if (a.parallelRuns > 0) {
    auto p = runInParallel(s, *feeds, *outputs, a.parallelRuns, a.iters > 0 ? a.iters : 50);
    report["parallel"] = {{"threads", a.parallelRuns},
                          {"runs", p.runs},
                          {"wrong", p.wrong},
                          {"seconds", p.seconds},
                          {"runs_per_second", p.runs / p.seconds}};
    if (!a.json)
      std::cout << fmt::format("parallel: {}, {}, {} wrong, {:.1f} runs/s\n", counted(a.parallelRuns, "thread"),
                               counted(p.runs, "run"), p.wrong, p.runs / p.seconds);
    if (p.wrong > 0)
      return fail(a,
                  makeError(ErrorCode::Internal, "{} of {} parallel runs differ from the serial run; first: {}",
                            p.wrong, p.runs, p.firstProblem),
                  report);
  }
  std::vector<std::unique_ptr<runtime::Session>> extraSessions;  // alive until the end: their memory is what counts
  if (a.sessions > 1) {
    std::vector<double> loads;
    size_t sharedPrograms = 0;
    for (int k = 1; k < a.sessions; ++k) {
      auto start = Clock::now();
      auto extra = runtime::Session::loadFile(a.model, options);
      loads.push_back(msSince(start));
      if (!extra) return fail(a, extra.error(), report);
      sharedPrograms += (*extra)->stats().sharedPrograms;
      auto out = (*extra)->run(*feeds);
      if (!out) return fail(a, out.error(), report);
      for (size_t o = 0; o < out->size(); ++o)
        if (!tooling::compareTensors((*out)[o], (*outputs)[o], 0, 0).match)
          return fail(a, makeError(ErrorCode::Internal, "session {} computed another output {}", k + 1, o), report);
      extraSessions.push_back(std::move(extra).value());
    }
    report["sessions"] = {{"count", a.sessions},
                          {"extra_load_ms", loads},
                          {"mapped_contexts", runtime::mappedContextCount()},
                          {"shared_programs", sharedPrograms}};
  }
  report["outputs"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < outputs->size(); ++i)
    report["outputs"].push_back({{"name", s.outputs()[i].name},
                                 {"type", std::string(ir::elemTypeName((*outputs)[i].type()))},
                                 {"shape", (*outputs)[i].shape()}});
  if (!a.outputDir.empty())
    if (auto st = tooling::saveOutputs(a.outputDir, *outputs, s.outputs(), a.savePb); !st)
      return fail(a, st.error(), report);

  bool allMatch = true;
  if (expected) {
    if (expected->size() != outputs->size())
      return fail(a,
                  makeError(ErrorCode::Internal, "the model declares {} but computed {}",
                            counted(expected->size(), "output"), counted(outputs->size(), "output")),
                  report);
    report["comparison"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < outputs->size(); ++i) {
      auto c = tooling::compareTensors((*outputs)[i], (*expected)[i], a.rtol, a.atol);
      allMatch &= c.match;
      report["comparison"].push_back({{"output", s.outputs()[i].name},
                                      {"match", c.match},
                                      {"max_abs_error", c.maxAbsError},
                                      {"message", c.message}});
      if (!a.json) {
        if (c.match)
          std::cout << fmt::format("output {} '{}': match (max |diff| {:.3g})\n", i, s.outputs()[i].name,
                                   c.maxAbsError);
        else std::cout << fmt::format("output {} '{}': MISMATCH: {}\n", i, s.outputs()[i].name, c.message);
      }
    }
  }
  report["ok"] = allMatch;
  if (!a.json) {
    std::cout << fmt::format("{}: {}, {}, {}; load {:.2f} ms, first run {:.2f} ms", a.model,
                             counted(s.stats().compiledNodes, "compiled node"),
                             counted(s.stats().fallbackNodes, "fallback node"),
                             counted(s.stats().contexts, "context binary", "context binaries"), loadMs, firstMs);
    if (!times.empty())
      std::cout << fmt::format(", median {:.3f} ms, p90 {:.3f} ms over {}", report["median_ms"].get<double>(),
                               report["p90_ms"].get<double>(), counted(times.size(), "run"));
    std::cout << "\n";
  }
  if (a.profile) reportProfile(profile, a.profileTop, !a.json, report);
  if (a.json) std::cout << report.dump(2) << "\n";
  std::cout << std::flush;
  if (!allMatch) {
    cli::logError("outputs do not match the expected values");
    return cli::kExitFailure;
  }
  return cli::kExitOk;
}
