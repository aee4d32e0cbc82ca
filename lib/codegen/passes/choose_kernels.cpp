// choose-kernels: each float32 Conv of static shapes gets its algorithm (cpu::ConvAlgorithm) before choose-layouts,
// which stores the weight in panels exactly for the Panels algorithm. The cost model is the kernels' own heuristic
// (kernels::convHeuristic), so an untuned compile chooses what the runtime would and leaves it implicit (the program
// bytes are those of a compile without this pass). With LowerOptions::tuner (ctxgen --tune) each distinct Conv's
// algorithms are timed on this machine, the fastest within kTuneTolerance of the heuristic's output is recorded, and
// the program carries every Conv's choice (docs/format/program.md#kernel-choices).
#include "codegen/passes/passes.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "kernels/kernels.h"
#include "support/file_io.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace ctxkit::codegen {

namespace {

// Timed runs per algorithm (after one untimed run), of which the median counts; an algorithm whose untimed run took
// more than kSlowFactor times the fastest's counts that one run.
constexpr int kTimedRuns = 5;
constexpr double kSlowFactor = 4.0;
// How much faster than the heuristic's algorithm another must measure to be chosen.
constexpr double kTuneMargin = 0.05;
constexpr std::string_view kCacheHeader = "ctxkit-tune-cache 1";

std::string dimsText(std::span<const int64_t> dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += fmt::format("{}{}", i ? "x" : "", dims[i]);
  return s;
}

// The op's key in the cache: kind, shapes and every attribute a run reads (the typed attributes' text).
std::string convKey(const ops::ConvAttrs& attrs, std::span<const int64_t> x, std::span<const int64_t> w, bool bias) {
  std::string key = fmt::format("Conv x={} w={} bias={}{}", dimsText(x), dimsText(w), bias ? 1 : 0,
                                ops::attrsText(ops::OpAttrs(attrs)));
  std::replace_if(
      key.begin(), key.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
  return key;
}

// Deterministic values in [-1, 1): the timings do not depend on them, the tolerance check needs no zeros.
Expected<ir::Tensor> filled(std::span<const int64_t> shape, uint32_t seed) {
  CTX_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::allocate(ir::ElemType::Float, ir::Shape(shape.begin(), shape.end())));
  float* p = t.mutableDataAs<float>();
  uint32_t s = seed * 2654435761u + 1;
  for (uint64_t i = 0; i < t.elementCount(); ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return t;
}

// One candidate: prepared as a program's op would be (a plain weight, packed at prepare for Panels), its output and
// its timed runs.
struct Candidate {
  cpu::ConvAlgorithm algorithm;
  std::unique_ptr<kernels::PreparedOp> op;
  ir::Tensor out;
  std::vector<double> times;
  double median() {
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }
};

Expected<double> timeRun(Candidate& c, std::span<const ir::Tensor* const> ins) {
  ir::Tensor* outs[] = {&c.out};
  const auto start = std::chrono::steady_clock::now();
  CTX_RETURN_IF_ERROR(c.op->run(ins, outs, nullptr));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Times the candidates serially, in rounds of one run each (after one untimed run each), so that a change in the
// machine's load during the measurement weighs on all of them alike.
Expected<std::vector<Candidate>> timeConv(const ops::ConvAttrs& attrs, std::span<const ir::Tensor* const> ins,
                                          std::span<const cpu::ConvAlgorithm> algorithms) {
  static const ir::Attributes kNoAttrs;
  const ops::OpAttrs typed(attrs);
  std::vector<kernels::ValueDesc> descs;
  for (size_t i = 0; i < ins.size(); ++i)
    descs.push_back(kernels::ValueDesc{ir::ElemType::Float, ins[i]->shape(), i == 0 ? nullptr : ins[i], true});
  std::vector<Candidate> all;
  double fastest = INFINITY;
  for (cpu::ConvAlgorithm a : algorithms) {
    kernels::OpContext ctx{ir::OpKind::Conv, 22, kNoAttrs, "tuned Conv", nullptr, &typed};
    ctx.kernel.algorithm = a;
    CTX_ASSIGN_OR_RETURN(auto op, kernels::prepare(ctx, descs, 1));
    CTX_ASSIGN_OR_RETURN(ir::Tensor out, ir::Tensor::allocate(ir::ElemType::Float, op->outputs()[0].shape));
    Candidate& c = all.emplace_back(Candidate{a, std::move(op), std::move(out), {}});
    CTX_ASSIGN_OR_RETURN(double first, timeRun(c, ins));
    fastest = std::min(fastest, first);
    c.times.push_back(first);
  }
  // A candidate whose untimed run took kSlowFactor times the fastest's counts that run alone.
  std::vector<char> timed(all.size());
  for (size_t i = 0; i < all.size(); ++i) timed[i] = all[i].times[0] <= kSlowFactor * fastest;
  for (size_t i = 0; i < all.size(); ++i)
    if (timed[i]) all[i].times.clear();
  for (int r = 0; r < kTimedRuns; ++r)
    for (size_t i = 0; i < all.size(); ++i)
      if (timed[i]) {
        CTX_ASSIGN_OR_RETURN(double ms, timeRun(all[i], ins));
        all[i].times.push_back(ms);
      }
  return all;
}

// max |a - b| / max(1, max |b|).
double deviation(const ir::Tensor& a, const ir::Tensor& b) {
  const float* pa = a.dataAs<float>();
  const float* pb = b.dataAs<float>();
  double diff = 0, scale = 1;
  for (uint64_t i = 0; i < b.elementCount(); ++i) {
    const double d = std::fabs(static_cast<double>(pa[i]) - pb[i]);
    diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    scale = std::max(scale, std::fabs(static_cast<double>(pb[i])));
  }
  return diff / scale;
}

}  // namespace

Expected<ir::PassChange> ChooseKernels::run(LoweringState& state) const {
  size_t chosen = 0, tuned = 0, changed = 0;
  for (LOp& op : state.ops) {
    if (op.kind != ir::OpKind::Conv || op.inputs.size() < 2 || op.inputs[0] == kNoValue || op.inputs[1] == kNoValue)
      continue;
    const ValueId xv = op.inputs[0], wv = op.inputs[1];
    if (state.typeOf(xv) != ir::ElemType::Float || state.typeOf(wv) != ir::ElemType::Float) continue;
    auto x = state.shapeOf(xv);
    auto w = state.shapeOf(wv);
    if (const ir::Tensor* c = state.constantOf(wv)) w = c->shape();
    if (!x || !w) continue;
    ops::ConvAttrs attrs = std::get<ops::ConvAttrs>(op.typed);
    if (op.epilogue) attrs.epilogue = *op.epilogue;
    const bool constantWeight = state.constantOf(wv) || state.isLoadTime(wv);
    const std::vector<cpu::ConvAlgorithm> candidates = kernels::convAlgorithms(attrs, *x, *w, constantWeight);
    if (candidates.empty()) continue;  // not a Conv's shapes: the kernel reports it
    op.kernel = cpu::KernelChoice{candidates[0], 0};
    ++chosen;
    if (!state.options.tuner || candidates.size() < 2) continue;
    const bool bias = op.inputs.size() > 2 && op.inputs[2] != kNoValue;
    CTX_ASSIGN_OR_RETURN(op.kernel.algorithm,
                         state.options.tuner->chooseConv(attrs, *x, *w, bias, candidates, state.options.name, op.name));
    ++tuned;
    if (op.kernel.algorithm != candidates[0]) ++changed;
  }
  return ir::PassChange{}.count("convs_chosen", chosen).count("convs_tuned", tuned).count("convs_changed", changed);
}

std::string KernelTuner::cpuFeatures() {
  std::string s = cpu::architectureName();
  for (const std::string& feature : cpu::cpuFeatures()) s += " " + feature;
  return s + " sgemm=" + cpu::sgemmKernelName();
}

Expected<std::unique_ptr<KernelTuner>> KernelTuner::open(std::filesystem::path path) {
  auto tuner = std::make_unique<KernelTuner>();
  tuner->path_ = std::move(path);
  std::error_code ec;
  if (!std::filesystem::exists(tuner->path_, ec)) return tuner;
  CTX_ASSIGN_OR_RETURN(std::string text, readFile(tuner->path_));
  auto bad = [&](size_t line, std::string_view why) {
    return makeError(ErrorCode::InvalidArgument, "tuning cache '{}' line {}: {}; delete the file to tune anew",
                     tuner->path_.string(), line, why);
  };
  std::istringstream in(text);
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (number == 1) {
      if (line != kCacheHeader) return bad(1, fmt::format("expected the header '{}'", kCacheHeader));
      continue;
    }
    if (line.empty()) continue;
    // cpu features \t op key \t chosen algorithm \t algorithm=ms,...
    std::vector<std::string> fields;
    for (size_t start = 0;;) {
      const size_t tab = line.find('\t', start);
      fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    if (fields.size() != 4) return bad(number, fmt::format("{} tab-separated fields; expected 4", fields.size()));
    Entry e;
    auto chosen = cpu::convAlgorithmNamed(fields[2]);
    if (!chosen || *chosen == cpu::ConvAlgorithm::Heuristic)
      return bad(number, fmt::format("unknown algorithm '{}'", fields[2]));
    e.chosen = *chosen;
    std::istringstream times(fields[3]);
    std::string item;
    while (std::getline(times, item, ',')) {
      const size_t eq = item.find('=');
      auto algorithm = cpu::convAlgorithmNamed(item.substr(0, eq == std::string::npos ? 0 : eq));
      char* end = nullptr;
      const std::string value = eq == std::string::npos ? std::string() : item.substr(eq + 1);
      const double ms = std::strtod(value.c_str(), &end);
      if (!algorithm || *algorithm == cpu::ConvAlgorithm::Heuristic || value.empty() || *end != '\0' ||
          !std::isfinite(ms) || ms < 0)
        return bad(number, fmt::format("'{}' is not algorithm=milliseconds", item));
      e.times.emplace_back(*algorithm, ms);
    }
    if (std::none_of(e.times.begin(), e.times.end(), [&](const auto& t) { return t.first == e.chosen; }))
      return bad(number, "the chosen algorithm has no time");
    tuner->entries_[fields[0] + '\t' + fields[1]] = std::move(e);
  }
  if (number == 0) return bad(1, fmt::format("empty; expected the header '{}'", kCacheHeader));
  return tuner;
}

Expected<cpu::ConvAlgorithm> KernelTuner::chooseConv(const ops::ConvAttrs& attrs, std::span<const int64_t> x,
                                                     std::span<const int64_t> weight, bool bias,
                                                     std::span<const cpu::ConvAlgorithm> candidates,
                                                     const std::string& partition, const std::string& node) {
  static const std::string features = cpuFeatures();
  Choice c{partition, node, convKey(attrs, x, weight, bias)};
  c.heuristic = candidates[0];
  auto timeOf = [](const Entry& e, cpu::ConvAlgorithm a) {
    for (const auto& [alg, ms] : e.times)
      if (alg == a) return ms;
    return 0.0;
  };
  const std::string id = features + '\t' + c.key;
  auto it = entries_.find(id);
  // A cached choice no longer among the candidates (another weight kind) is measured again, and so is a record without
  // a time for some candidate (written before that algorithm existed: winograd came after the first caches).
  auto timed = [&](const Entry& e) {
    return std::all_of(candidates.begin(), candidates.end(), [&](cpu::ConvAlgorithm a) {
      return std::any_of(e.times.begin(), e.times.end(), [&](const auto& t) { return t.first == a; });
    });
  };
  if (it != entries_.end() && std::find(candidates.begin(), candidates.end(), it->second.chosen) != candidates.end() &&
      timed(it->second)) {
    ++hits_;
    c.cacheHit = true;
  } else {
    ++misses_;
    std::vector<ir::Tensor> tensors;
    CTX_ASSIGN_OR_RETURN(tensors.emplace_back(), filled(x, 1));
    CTX_ASSIGN_OR_RETURN(tensors.emplace_back(), filled(weight, 2));
    if (bias) {
      CTX_ASSIGN_OR_RETURN(tensors.emplace_back(), filled(std::array<int64_t, 1>{weight[0]}, 3));
    }
    std::vector<const ir::Tensor*> ins;
    for (const ir::Tensor& t : tensors) ins.push_back(&t);
    Entry e;
    e.chosen = candidates[0];
    CTX_ASSIGN_OR_RETURN(std::vector<Candidate> measured, timeConv(attrs, ins, candidates));
    double best = measured[0].median();
    for (Candidate& m : measured) {
      const double ms = m.median();
      e.times.emplace_back(m.algorithm, ms);
      if (m.algorithm == candidates[0]) continue;
      // Another algorithm than the heuristic's must win by a margin: timing noise alone never flips a choice.
      const double needed = e.chosen == candidates[0] ? best * (1.0 - kTuneMargin) : best;
      if (ms < needed && deviation(m.out, measured[0].out) <= kTuneTolerance) {
        best = ms;
        e.chosen = m.algorithm;
      }
    }
    it = entries_.insert_or_assign(id, std::move(e)).first;
    changed_ = true;
  }
  c.chosen = it->second.chosen;
  c.heuristicMs = timeOf(it->second, c.heuristic);
  c.chosenMs = timeOf(it->second, c.chosen);
  choices_.push_back(std::move(c));
  return it->second.chosen;
}

Status KernelTuner::save() const {
  if (!changed_) return Status::ok();
  std::string text = std::string(kCacheHeader) + "\n";
  for (const auto& [id, e] : entries_) {
    std::string times;
    for (const auto& [a, ms] : e.times)
      times += fmt::format("{}{}={:.4f}", times.empty() ? "" : ",", convAlgorithmName(a), ms);
    text += fmt::format("{}\t{}\t{}\n", id, cpu::convAlgorithmName(e.chosen), times);
  }
  std::error_code ec;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), ec);
  if (ec)
    return makeError(ErrorCode::InvalidArgument, "cannot create the folder of tuning cache '{}': {}", path_.string(),
                     ec.message());
  return writeFileAtomically(path_, text);
}

}  // namespace ctxkit::codegen
