// SelectBestModelCandidate: the runtime's compatibility verdicts ranked across compiled variants.
#include "ort_ep/model_selection.h"

#include "epcontext/contract.h"
#include "format/container.h"
#include "ort_ep/ep.h"
#include "ort_ep/factory.h"
#include "runtime/compatibility.h"

#include <charconv>
#include <limits>
#include <tuple>

namespace ctxkit::ort_ep {

namespace {

// Larger is better; a candidate with an UNSUPPORTED model has no rank.
struct Rank {
  int verdict = 0;  // the worst model's: SUPPORTED_OPTIMAL 3, PREFER_RECOMPILATION 2, no info (NOT_APPLICABLE) 1
  bool targetMatches = true;  // every compiled model is for the wanted target
  uint16_t formatMinor = 0;   // the oldest model's format minor, newer minors counted as this runtime's own
  uint64_t revision = 0;      // the lowest target revision (a number; other spellings count 0)

  auto key() const { return std::tie(verdict, targetMatches, formatMinor, revision); }
};

uint64_t revisionNumber(std::string_view text) {
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc() && end == text.data() + text.size() ? n : 0;
}

std::optional<Rank> rankCandidate(const ModelCandidate& models, std::string_view wantedTarget) {
  if (models.empty()) return std::nullopt;
  Rank rank;
  rank.verdict = 3;
  rank.formatMinor = format::kFormatMinor;
  rank.revision = std::numeric_limits<uint64_t>::max();
  for (const std::string& info : models) {
    if (info.empty()) {  // not compiled: ctxkit compiles it for the wanted target when the session is created
      rank.verdict = std::min(rank.verdict, 1);
      continue;
    }
    runtime::CompatibilityVerdict verdict = runtime::assessCompatibilityInfo(info);
    if (verdict.level == runtime::Compatibility::Unsupported) return std::nullopt;
    rank.verdict = std::min(rank.verdict, verdict.level == runtime::Compatibility::SupportedOptimal ? 3 : 2);
    auto parsed = epcontext::parseCompatibilityInfo(info);  // parses: the verdict above was not UNSUPPORTED
    if (!parsed) return std::nullopt;
    rank.targetMatches = rank.targetMatches && (wantedTarget.empty() || parsed->targetId == wantedTarget);
    rank.formatMinor = std::min(rank.formatMinor, parsed->formatMinor);
    rank.revision = std::min(rank.revision, revisionNumber(parsed->targetRevision));
  }
  if (rank.revision == std::numeric_limits<uint64_t>::max()) rank.revision = 0;
  return rank;
}

Expected<ModelCandidate> readCandidate(const Api& api, const OrtKeyValuePairs& kv, size_t index) {
  const char* count = api.ort.GetKeyValue(&kv, "num_models");
  if (count == nullptr) {
    if (const char* single = api.ort.GetKeyValue(&kv, "ep_compatibility_info")) return ModelCandidate{single};
    return makeError(ErrorCode::InvalidArgument, "{}: SelectBestModelCandidate: candidate {} has no num_models",
                     epcontext::kEpName, index);
  }
  size_t n = 0;
  std::string_view text = count;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n == 0 || n > 4096)
    return makeError(ErrorCode::InvalidArgument,
                     "{}: SelectBestModelCandidate: candidate {} num_models '{}': expected a number from 1 to 4096",
                     epcontext::kEpName, index, text);
  ModelCandidate models;
  for (size_t i = 0; i < n; ++i) {
    std::string key = fmt::format("{}.ep_compatibility_info", i);
    const char* info = api.ort.GetKeyValue(&kv, key.c_str());
    if (info == nullptr)
      return makeError(ErrorCode::InvalidArgument, "{}: SelectBestModelCandidate: candidate {} has no {}",
                       epcontext::kEpName, index, key);
    models.emplace_back(info);
  }
  return models;
}

}  // namespace

std::optional<size_t> selectBestCandidate(const std::vector<ModelCandidate>& candidates,
                                          std::string_view wantedTarget) {
  std::optional<size_t> best;
  std::optional<Rank> bestRank;
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::optional<Rank> rank = rankCandidate(candidates[i], wantedTarget);
    if (rank && (!bestRank || rank->key() > bestRank->key())) {
      best = i;
      bestRank = rank;
    }
  }
  return best;
}

OrtStatus* ORT_API_CALL selectBestModelCandidate(OrtEpFactory* factory, const OrtHardwareDevice* device,
                                                 const OrtKeyValuePairs* const* candidates, size_t numCandidates,
                                                 const OrtSessionOptions* sessionOptions,
                                                 size_t* selectedIndex) noexcept {
  const Api& api = static_cast<CtxKitEpFactory*>(factory)->api();
  try {
    if (selectedIndex == nullptr || device == nullptr || (candidates == nullptr && numCandidates > 0))
      return api.ort.CreateStatus(ORT_INVALID_ARGUMENT,
                                  "CtxKitExecutionProvider: SelectBestModelCandidate: null device, candidates or "
                                  "selected_index");
    *selectedIndex = std::numeric_limits<size_t>::max();
    // ctxkit serves the host CPU and its virtual NPU; on any other device nothing is supported.
    OrtHardwareDeviceType type = api.ort.HardwareDevice_Type(device);
    if (type != OrtHardwareDeviceType_CPU && type != OrtHardwareDeviceType_NPU) return nullptr;
    // The target a session would compile for: its EP option, else the default. A target file has no id to compare
    // before it is read, so it prefers no candidate's target.
    std::string wanted = EpConfig{}.target;
    if (sessionOptions != nullptr) {
      auto target = sessionConfigEntry(api, *sessionOptions, epOptionKey("target"), wanted);
      if (!target) return toOrtStatus(api, target.error());
      wanted = epcontext::findKnownTarget(*target) ? *target : std::string();
    }
    std::vector<ModelCandidate> read;
    for (size_t i = 0; i < numCandidates; ++i) {
      if (candidates[i] == nullptr)
        return api.ort.CreateStatus(
            ORT_INVALID_ARGUMENT,
            fmt::format("{}: SelectBestModelCandidate: candidate {} is null", epcontext::kEpName, i).c_str());
      auto models = readCandidate(api, *candidates[i], i);
      if (!models) return toOrtStatus(api, models.error());
      read.push_back(std::move(models).value());
    }
    if (auto best = selectBestCandidate(read, wanted)) *selectedIndex = *best;
    return nullptr;
  } catch (const std::exception& e) {
    return api.ort.CreateStatus(ORT_FAIL,
                                fmt::format("{}: SelectBestModelCandidate: {}", epcontext::kEpName, e.what()).c_str());
  }
}

}  // namespace ctxkit::ort_ep
