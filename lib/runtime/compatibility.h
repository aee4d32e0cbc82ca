// How well this runtime can run a context binary, from its compatibility block (docs/runtime.md#compatibility), as ONNX
// Runtime's OrtCompiledModelCompatibility: another producer, another format major or a development format (1.0 to 1.3)
// is UNSUPPORTED; another revision of a known target is PREFER_RECOMPILATION.
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

// A newer minor of the format is SUPPORTED_OPTIMAL: it only adds what this reader may skip.
CompatibilityVerdict assessCompatibility(const format::CompatInfo& found);

// The same verdict from the model's `ep_compatibility_info.CtxKitExecutionProvider` value, as ONNX Runtime's
// ValidateCompiledModelCompatibilityInfo receives it; a value that does not parse is UNSUPPORTED.
CompatibilityVerdict assessCompatibilityInfo(std::string_view info);

}  // namespace ctxkit::runtime
