// How well this runtime can run a context binary, from its compatibility block (docs/runtime.md#compatibility), as ONNX
// Runtime's OrtCompiledModelCompatibility: another producer, another format major or a development format (1.0 to 1.3)
// is UNSUPPORTED; another revision of a known target is PREFER_RECOMPILATION.
#pragma once

#include "format/container.h"
#include "support/status.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::runtime {

// As ONNX Runtime's OrtCompiledModelCompatibility.
enum class Compatibility { NotApplicable = 0, SupportedOptimal = 1, PreferRecompilation = 2, Unsupported = 3 };

// "NOT_APPLICABLE", "SUPPORTED_OPTIMAL", "PREFER_RECOMPILATION", "UNSUPPORTED".
const char* compatibilityName(Compatibility level);

// One reason a verdict is not SUPPORTED_OPTIMAL, with a stable code (docs/runtime.md#compatibility): which field,
// what the context holds, what the device expects, and what to do.
struct CompatibilityReason {
  std::string code;  // "COMPAT_PRODUCER", "COMPAT_FORMAT_MAJOR", ...
  std::string field;
  std::string found;
  std::string expected;
  std::string action;
};

struct CompatibilityVerdict {
  Compatibility level = Compatibility::SupportedOptimal;
  std::string reason;  // why, when not SupportedOptimal (the reasons in one sentence)
  std::vector<CompatibilityReason> reasons;
};

// What a runtime can run: its ctxkit version, container format and the revision of each target it knows. thisDevice()
// is this build's; `ctxrun --print-device` writes it as JSON for `ctxinspect --check --against` on another machine.
struct DeviceProfile {
  std::string ctxkitVersion;
  uint16_t formatMajor = format::kFormatMajor;
  uint16_t formatMinor = format::kFormatMinor;
  std::map<std::string, std::string> targets;  // target id -> revision
  std::vector<std::string> cpuFeatures;        // informational: kernels pick their code paths at run time
};
const DeviceProfile& thisDevice();
std::string deviceProfileJson(const DeviceProfile& device);
// Errors name `what` (the file) and the field at fault.
Expected<DeviceProfile> parseDeviceProfile(std::string_view json, const std::string& what);

// A newer minor of the format is SUPPORTED_OPTIMAL: it only adds what this reader may skip.
CompatibilityVerdict assessCompatibility(const format::CompatInfo& found, const DeviceProfile& device = thisDevice());

// The same verdict from the model's `ep_compatibility_info.CtxKitExecutionProvider` value, as ONNX Runtime's
// ValidateCompiledModelCompatibilityInfo receives it; a value that does not parse is UNSUPPORTED (COMPAT_INFO_SYNTAX).
CompatibilityVerdict assessCompatibilityInfo(std::string_view info, const DeviceProfile& device = thisDevice());

}  // namespace ctxkit::runtime
