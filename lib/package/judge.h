// How this runtime judges a package variant: ONNX Runtime's ranking of our compatibility verdict (docs/package.md).
#pragma once

#include "package/package.h"

namespace ctxkit::package {

// Another EP's variant is not ours to run (no score); ours gets the verdict of runtime::assessCompatibilityInfo.
Suitability judgeHere(const Variant& variant);

}  // namespace ctxkit::package
