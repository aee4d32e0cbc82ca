// The compatibility verdict for a context binary's compatibility block.
#include "runtime/compatibility.h"

#include "cpu/cpu_features.h"
#include "epcontext/contract.h"

#include <nlohmann/json.hpp>

#include <cstdio>

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

namespace {

// Adds a reason; the verdict is the worst level among its reasons.
void addReason(CompatibilityVerdict& v, Compatibility level, CompatibilityReason reason, std::string sentence) {
  if (v.reasons.empty() || static_cast<int>(level) > static_cast<int>(v.level)) v.level = level;
  v.reason += (v.reason.empty() ? "" : "; ") + sentence;
  v.reasons.push_back(std::move(reason));
}

std::string formatText(uint16_t major, uint16_t minor) { return fmt::format("{}.{}", major, minor); }

}  // namespace

const DeviceProfile& thisDevice() {
  static const DeviceProfile device = [] {
    DeviceProfile d;
    d.ctxkitVersion = epcontext::kVersion;
    for (const epcontext::KnownTarget& t : epcontext::knownTargets()) d.targets[t.id] = t.revision;
    d.cpuFeatures = cpu::cpuFeatures();
    return d;
  }();
  return device;
}

std::string deviceProfileJson(const DeviceProfile& device) {
  nlohmann::ordered_json j;
  j["ctxkit_version"] = device.ctxkitVersion;
  j["format"] = formatText(device.formatMajor, device.formatMinor);
  j["targets"] = device.targets;
  j["cpu_features"] = device.cpuFeatures;
  return j.dump(2) + "\n";
}

Expected<DeviceProfile> parseDeviceProfile(std::string_view json, const std::string& what) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return makeError(ErrorCode::InvalidArgument, "{}: not a JSON object", what);
  DeviceProfile d;
  auto text = [&](const char* key) -> Expected<std::string> {
    if (!j.contains(key) || !j[key].is_string())
      return makeError(ErrorCode::InvalidArgument, "{}: field '{}' must be a string", what, key);
    return j[key].get<std::string>();
  };
  CTX_ASSIGN_OR_RETURN(d.ctxkitVersion, text("ctxkit_version"));
  CTX_ASSIGN_OR_RETURN(std::string formatField, text("format"));
  unsigned major = 0, minor = 0;
  char tail = 0;
  if (std::sscanf(formatField.c_str(), "%u.%u%c", &major, &minor, &tail) != 2 || major > 0xffff || minor > 0xffff)
    return makeError(ErrorCode::InvalidArgument, "{}: field 'format' is '{}'; expected MAJOR.MINOR", what, formatField);
  d.formatMajor = static_cast<uint16_t>(major);
  d.formatMinor = static_cast<uint16_t>(minor);
  if (!j.contains("targets") || !j["targets"].is_object())
    return makeError(ErrorCode::InvalidArgument, "{}: field 'targets' must be an object of target id to revision",
                     what);
  for (const auto& [id, revision] : j["targets"].items()) {
    if (!revision.is_string())
      return makeError(ErrorCode::InvalidArgument, "{}: targets.{} must be a revision string", what, id);
    d.targets[id] = revision.get<std::string>();
  }
  if (j.contains("cpu_features")) {
    if (!j["cpu_features"].is_array())
      return makeError(ErrorCode::InvalidArgument, "{}: field 'cpu_features' must be an array of strings", what);
    for (const auto& f : j["cpu_features"]) {
      if (!f.is_string())
        return makeError(ErrorCode::InvalidArgument, "{}: field 'cpu_features' must be an array of strings", what);
      d.cpuFeatures.push_back(f.get<std::string>());
    }
  }
  return d;
}

CompatibilityVerdict assessCompatibility(const format::CompatInfo& found, const DeviceProfile& device) {
  CompatibilityVerdict v;
  const std::string foundFormat = formatText(found.formatMajor, found.formatMinor);
  const std::string deviceFormat = formatText(device.formatMajor, device.formatMinor);
  if (found.producer != epcontext::kProducer) {
    addReason(v, Compatibility::Unsupported,
              {"COMPAT_PRODUCER", "producer", found.producer, epcontext::kProducer,
               "compile the model with ctxgen, or run it with the EP that produced it"},
              fmt::format("context was produced by '{}'; expected '{}'", found.producer, epcontext::kProducer));
    return v;
  }
  if (found.formatMajor != device.formatMajor) {
    const bool newer = found.formatMajor > device.formatMajor;
    addReason(v, Compatibility::Unsupported,
              {"COMPAT_FORMAT_MAJOR", "format", foundFormat, deviceFormat,
               newer ? fmt::format("update ctxkit on the device to one that reads format {}.x (ctxkit >= {})",
                                   found.formatMajor, found.producerVersion.empty() ? "?" : found.producerVersion)
                     : fmt::format("recompile with ctxgen {} for this device", device.ctxkitVersion)},
              fmt::format("container format {} has another major than this runtime's {}", foundFormat, deviceFormat));
    return v;
  }
  if (format::isDevelopmentFormat(found.formatMajor, found.formatMinor)) {
    addReason(v, Compatibility::Unsupported,
              {"COMPAT_FORMAT_DEVELOPMENT", "format", foundFormat, deviceFormat,
               fmt::format("recompile with ctxgen {}", device.ctxkitVersion)},
              format::developmentFormatText(found.formatMajor, found.formatMinor));
    return v;
  }
  // A newer minor only adds what an older reader may skip (the format's versioning policy): still optimal. An older
  // released minor loads, but a recompile would write what this ctxkit writes (1.4: weights behind DequantizeLinear
  // widened to float32, which 1.5 keeps quantized).
  if (found.formatMinor < device.formatMinor)
    addReason(v, Compatibility::PreferRecompilation,
              {"COMPAT_FORMAT_OLDER_MINOR", "format", foundFormat, deviceFormat,
               fmt::format("recompile with ctxgen {} to get what it writes", device.ctxkitVersion)},
              fmt::format("container format {} is older than this runtime's {}", foundFormat, deviceFormat));
  // Targets this ctxkit does not know (a user's target file) have no expected revision.
  if (auto known = device.targets.find(found.targetId);
      known != device.targets.end() && found.targetRevision != known->second)
    addReason(v, Compatibility::PreferRecompilation,
              {"COMPAT_TARGET_REVISION", "target revision", found.targetId + " revision " + found.targetRevision,
               found.targetId + " revision " + known->second,
               fmt::format("recompile with ctxgen --target {}", found.targetId)},
              fmt::format("target '{}' revision '{}' differs from this runtime's revision '{}'", found.targetId,
                          found.targetRevision, known->second));
  return v;
}

CompatibilityVerdict assessCompatibilityInfo(std::string_view info, const DeviceProfile& device) {
  auto parsed = epcontext::parseCompatibilityInfo(info);
  if (!parsed) {
    CompatibilityVerdict v;
    addReason(v, Compatibility::Unsupported,
              {"COMPAT_INFO_SYNTAX", "ep_compatibility_info", std::string(info),
               "ctxkit;format=<major>.<minor>;version=<v>;target=<id>;revision=<r>",
               "recompile with ctxgen (the metadata was not written by it, or was edited)"},
              parsed.error().message());
    return v;
  }
  format::CompatInfo found{parsed->producer,       parsed->version,     parsed->targetId,
                           parsed->targetRevision, parsed->formatMajor, parsed->formatMinor};
  return assessCompatibility(found, device);
}

}  // namespace ctxkit::runtime
