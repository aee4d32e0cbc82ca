// How well this runtime can run a context binary, from its compatibility block (SPEC §8), as ONNX Runtime's
// OrtCompiledModelCompatibility: another producer or format major is UNSUPPORTED; an older format minor or
// another revision of a known target is PREFER_RECOMPILATION.
#pragma once

#include "format/container.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace ctxkit::runtime {

// As ONNX Runtime's OrtCompiledModelCompatibility.
enum class Compatibility { NotApplicable = 0, SupportedOptimal = 1, PreferRecompilation = 2, Unsupported = 3 };

// "NOT_APPLICABLE", "SUPPORTED_OPTIMAL", "PREFER_RECOMPILATION", "UNSUPPORTED".
const char* compatibilityName(Compatibility level);

struct CompatibilityVerdict {
  Compatibility level = Compatibility::SupportedOptimal;
  std::string reason;  // why, when not SupportedOptimal
};

// `runtimeMajor`/`runtimeMinor` are the container format this runtime writes for a plain context (parameters so
// that tests can stand for another runtime): an older minor prefers recompilation. It reads up to kFormatMinor; 1.2
// only added weightless contexts, so a 1.1 file is as good as a fresh one.
CompatibilityVerdict assessCompatibility(const format::CompatInfo& found, uint16_t runtimeMajor = format::kFormatMajor,
                                         uint16_t runtimeMinor = format::kFormatMinorBase);

// The same verdict from the model's `ep_compatibility_info.CtxKitExecutionProvider` value, as ONNX Runtime's
// ValidateCompiledModelCompatibilityInfo receives it; a value that does not parse is UNSUPPORTED.
CompatibilityVerdict assessCompatibilityInfo(std::string_view info, uint16_t runtimeMajor = format::kFormatMajor,
                                             uint16_t runtimeMinor = format::kFormatMinorBase);

}  // namespace ctxkit::runtime
