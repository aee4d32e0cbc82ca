// A variant's verdict on this machine, scored as ONNX Runtime's variant selector scores it.
#include "package/judge.h"

#include "epcontext/contract.h"
#include "runtime/compatibility.h"

namespace ctxkit::package {

Suitability judgeHere(const Variant& variant) {
  if (variant.ep != epcontext::kEpName) return {std::nullopt, "another EP (" + variant.ep + ")"};
  runtime::CompatibilityVerdict v = runtime::assessCompatibilityInfo(variant.compatibility);
  Suitability s;
  s.verdict = runtime::compatibilityName(v.level);
  switch (v.level) {
    case runtime::Compatibility::SupportedOptimal: s.score = 100; break;
    case runtime::Compatibility::PreferRecompilation: s.score = 50; break;
    case runtime::Compatibility::NotApplicable: s.score = 0; break;
    case runtime::Compatibility::Unsupported: break;
  }
  if (!v.reasons.empty()) s.verdict += " (" + v.reasons.front().code + ")";
  return s;
}

}  // namespace ctxkit::package
