// The compatibility verdict for a context binary's compatibility block.
#include "runtime/compatibility.h"

#include "epcontext/contract.h"

namespace ctxkit::runtime {

const char* compatibilityName(Compatibility level) {
  switch (level) {
    case Compatibility::NotApplicable: return "NOT_APPLICABLE";
    case Compatibility::SupportedOptimal: return "SUPPORTED_OPTIMAL";
    case Compatibility::PreferRecompilation: return "PREFER_RECOMPILATION";
    case Compatibility::Unsupported: return "UNSUPPORTED";
  }
  return "UNKNOWN";
}

CompatibilityVerdict assessCompatibility(const format::CompatInfo& found, uint16_t runtimeMajor,
                                         uint16_t runtimeMinor) {
  if (found.producer != epcontext::kProducer)
    return {Compatibility::Unsupported,
            fmt::format("context was produced by '{}'; expected '{}'", found.producer, epcontext::kProducer)};
  if (found.formatMajor != runtimeMajor)
    return {Compatibility::Unsupported,
            fmt::format("container format {}.{} has another major than this runtime's {}.{}", found.formatMajor,
                        found.formatMinor, runtimeMajor, runtimeMinor)};
  // A newer minor only adds what an older reader may skip (the format's versioning policy): still optimal.
  if (found.formatMinor < runtimeMinor)
    return {Compatibility::PreferRecompilation,
            fmt::format("container format {}.{} is older than this runtime's {}.{}", found.formatMajor,
                        found.formatMinor, runtimeMajor, runtimeMinor)};
  // Targets this ctxkit does not know (a user's target file) have no expected revision.
  if (const epcontext::KnownTarget* known = epcontext::findKnownTarget(found.targetId);
      known && found.targetRevision != known->revision)
    return {Compatibility::PreferRecompilation,
            fmt::format("target '{}' revision '{}' differs from this runtime's revision '{}'", found.targetId,
                        found.targetRevision, known->revision)};
  return {};
}

CompatibilityVerdict assessCompatibilityInfo(std::string_view info, uint16_t runtimeMajor, uint16_t runtimeMinor) {
  auto parsed = epcontext::parseCompatibilityInfo(info);
  if (!parsed) return {Compatibility::Unsupported, parsed.error().message()};
  format::CompatInfo found{parsed->producer,       parsed->version,     parsed->targetId,
                           parsed->targetRevision, parsed->formatMajor, parsed->formatMinor};
  return assessCompatibility(found, runtimeMajor, runtimeMinor);
}

}  // namespace ctxkit::runtime
