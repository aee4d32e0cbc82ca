// ctxrun --generate: the options of a generating run turned into runtime::Generator calls, and its report.
#include "generate_mode.h"

#include "cli/cli_util.h"
#include "cli/log.h"
#include "ir/npy.h"
#include "runtime/generate.h"
#include "support/output_guard.h"
#include "support/text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>

namespace ctxkit::ctxrun {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int runGenerate(const GenerateArgs& a, const runtime::SessionOptions& options) {
  nlohmann::ordered_json report;
  report["prefill"] = a.prefill;
  report["decode"] = a.decodes;
  auto fail = [&](const Error& e, int code = cli::kExitFailure) {
    if (a.json) {
      report["ok"] = false;
      report["error"] = e.message();
      std::cout << report.dump(2) << "\n" << std::flush;
    }
    cli::logError("{}", e.message());
    return code;
  };

  runtime::GenerateOptions generateOptions;
  generateOptions.keepLogits = !a.outputDir.empty();
  for (const auto& text : a.kv) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
      return fail(makeError(ErrorCode::InvalidArgument, "--kv '{}': expected PAST=PRESENT", text), cli::kExitUsage);
    generateOptions.kv.push_back({text.substr(0, eq), text.substr(eq + 1)});
  }

  // Nothing written may land on a file the run reads (docs/bad-input.md#outputs).
  std::vector<RunFile> read{{a.prefill, "prefill model"}, {a.promptIds, "prompt"}};
  for (const auto& d : a.decodes) read.push_back({d, "decode model"});
  std::vector<RunFile> written;
  for (int i = 0; i < a.count && !a.outputDir.empty(); ++i)
    written.push_back({fs::path(a.outputDir) / fmt::format("logits_{}.npy", i), "logits"});
  if (auto st = checkRunFiles(read, written); !st) return fail(st.error(), cli::kExitUsage);

  auto prompt = ir::loadNpy(a.promptIds);
  if (!prompt) return fail(prompt.takeError().addContext(fmt::format("--prompt-ids '{}'", a.promptIds)));
  if (auto st = runtime::Generator::checkPrompt(*prompt); !st)
    return fail(st.takeError().addContext(fmt::format("--prompt-ids '{}'", a.promptIds)));

  const auto loadStart = Clock::now();
  auto prefill = runtime::Session::loadFile(a.prefill, options);
  if (!prefill) return fail(prefill.error());
  std::vector<std::unique_ptr<runtime::Session>> decodes;
  std::vector<runtime::PairModel> pairDecodes;
  for (const auto& d : a.decodes) {
    auto s = runtime::Session::loadFile(d, options);
    if (!s) return fail(s.error());
    pairDecodes.push_back({s->get(), d});
    decodes.push_back(std::move(s).value());
  }
  const double loadMs = std::chrono::duration<double, std::milli>(Clock::now() - loadStart).count();
  for (const auto* s : {prefill->get()})
    for (const auto& w : s->warnings()) cli::logWarning("{}", w);
  for (const auto& s : decodes)
    for (const auto& w : s->warnings()) cli::logWarning("{}", w);
  auto generator = runtime::Generator::create({prefill->get(), a.prefill}, std::move(pairDecodes), generateOptions);
  if (!generator) return fail(generator.error());

  std::vector<double> ttft, tokensPerSecond;
  std::optional<runtime::GenerateResult> last;
  for (int run = 0; run < std::max(1, a.iters); ++run) {
    auto result = generator->run(*prompt, static_cast<size_t>(a.count));
    if (!result) return fail(result.error());
    if (last && last->tokens != result->tokens)
      return fail(makeError(ErrorCode::Internal, "run {} generated other tokens than run 1: {} vs {}", run + 1,
                            fmt::join(result->tokens, " "), fmt::join(last->tokens, " ")));
    ttft.push_back(result->ttftMs());
    tokensPerSecond.push_back(result->decodeTokensPerSecond());
    last = std::move(result).value();
  }
  const runtime::GenerateResult& r = *last;

  if (!a.outputDir.empty()) {
    std::error_code ec;
    fs::create_directories(a.outputDir, ec);
    if (ec)
      return fail(makeError(ErrorCode::IoError, "cannot create the output folder '{}': {}", a.outputDir, ec.message()));
    for (size_t i = 0; i < r.logits.size(); ++i)
      if (auto st = ir::saveNpy(r.logits[i], written[i].path); !st) return fail(st.error());
  }

  std::vector<std::string> used;
  for (size_t d : r.decodeModel) used.push_back(a.decodes[d]);
  report["prompt_tokens"] = prompt->shape()[1];
  report["kv"] = nlohmann::ordered_json::array();
  for (const auto& kv : generator->kv()) report["kv"].push_back({{"past", kv.past}, {"present", kv.present}});
  report["load_ms"] = loadMs;
  report["runs"] = std::max(1, a.iters);
  report["tokens"] = r.tokens;
  report["ttft_ms"] = median(ttft);
  report["tokens_per_s"] = median(tokensPerSecond);
  report["token_ms"] = r.stepMs;
  report["decode_models"] = used;
  report["presents_in_place"] = r.presentsInPlace;
  report["ok"] = true;
  if (a.json) {
    std::cout << report.dump(2) << "\n" << std::flush;
    return cli::kExitOk;
  }
  std::cout << fmt::format("tokens: {}\n", fmt::join(r.tokens, " "));
  std::cout << fmt::format("{}: prompt of {}, {} generated; load {:.2f} ms, time to first token {:.2f} ms", a.prefill,
                           counted(static_cast<uint64_t>(prompt->shape()[1]), "token"),
                           counted(r.tokens.size(), "token"), loadMs, median(ttft));
  if (r.tokens.size() > 1)
    std::cout << fmt::format(", decode {:.1f} tokens/s ({} of {} steps with presents in place)",
                             median(tokensPerSecond), r.presentsInPlace, r.tokens.size() - 1);
  if (a.iters > 1) std::cout << fmt::format(" (medians of {})", counted(static_cast<uint64_t>(a.iters), "run"));
  std::cout << "\n" << std::flush;
  return cli::kExitOk;
}

}  // namespace ctxkit::ctxrun
