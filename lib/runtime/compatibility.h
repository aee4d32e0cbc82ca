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

// `runtimeMajor`/`runtimeMinor` are the container format this runtime reads (parameters so that tests can
// stand for another runtime).
CompatibilityVerdict assessCompatibility(const format::CompatInfo& found, uint16_t runtimeMajor = format::kFormatMajor,
                                         uint16_t runtimeMinor = format::kFormatMinor);

// The same verdict from the model's `ep_compatibility_info.CtxKitExecutionProvider` value, as ONNX Runtime's
// ValidateCompiledModelCompatibilityInfo receives it; a value that does not parse is UNSUPPORTED.
CompatibilityVerdict assessCompatibilityInfo(std::string_view info, uint16_t runtimeMajor = format::kFormatMajor,
                                             uint16_t runtimeMinor = format::kFormatMinor);

}  // namespace ctxkit::runtime
