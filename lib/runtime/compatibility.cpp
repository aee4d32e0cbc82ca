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

CompatibilityVerdict assessCompatibility(const format::CompatInfo& found) {
  if (found.producer != epcontext::kProducer)
    return {Compatibility::Unsupported,
            fmt::format("context was produced by '{}'; expected '{}'", found.producer, epcontext::kProducer)};
  if (found.formatMajor != format::kFormatMajor)
    return {Compatibility::Unsupported,
            fmt::format("container format {}.{} has another major than this runtime's {}.{}", found.formatMajor,
                        found.formatMinor, format::kFormatMajor, format::kFormatMinor)};
  if (format::isDevelopmentFormat(found.formatMajor, found.formatMinor))
    return {Compatibility::Unsupported, format::developmentFormatText(found.formatMajor, found.formatMinor)};
  // A newer minor only adds what an older reader may skip (the format's versioning policy): still optimal. An older
  // released minor loads, but a recompile would write what this ctxkit writes (1.4: weights behind DequantizeLinear
  // widened to float32, which 1.5 keeps quantized).
  if (found.formatMinor < format::kFormatMinor)
    return {Compatibility::PreferRecompilation,
            fmt::format("container format {}.{} is older than this runtime's {}.{}", found.formatMajor,
                        found.formatMinor, format::kFormatMajor, format::kFormatMinor)};
  // Targets this ctxkit does not know (a user's target file) have no expected revision.
  if (const epcontext::KnownTarget* known = epcontext::findKnownTarget(found.targetId);
      known && found.targetRevision != known->revision)
    return {Compatibility::PreferRecompilation,
            fmt::format("target '{}' revision '{}' differs from this runtime's revision '{}'", found.targetId,
                        found.targetRevision, known->revision)};
  return {};
}

CompatibilityVerdict assessCompatibilityInfo(std::string_view info) {
  auto parsed = epcontext::parseCompatibilityInfo(info);
  if (!parsed) return {Compatibility::Unsupported, parsed.error().message()};
  format::CompatInfo found{parsed->producer,       parsed->version,     parsed->targetId,
                           parsed->targetRevision, parsed->formatMajor, parsed->formatMinor};
  return assessCompatibility(found);
}

}  // namespace ctxkit::runtime
