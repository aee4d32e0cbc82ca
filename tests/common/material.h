// Tests whose material (ONNX's node tests beside the project, ONNX Runtime and models from npm) may be missing on
// a developer's machine skip, saying why; under CI (the environment variable CI set, as CI services do) a missing
// piece fails the test instead, so a CI run cannot pass by skipping.
#pragma once

#include <cstdlib>
#include <string_view>

namespace ctxkit::test {

// True when CI is set to anything but "", "0" or "false".
inline bool materialRequired() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  std::string_view v(ci);
  return !v.empty() && v != "0" && v != "false";
}

}  // namespace ctxkit::test

// For Catch2 tests: returns from the test case (after a WARN) when `present` is false, or fails it under CI. `what` names the
// missing material and how to get it; it may use <<.
#define CTX_REQUIRE_MATERIAL(present, what)                                     \
  do {                                                                          \
    if (!(present)) {                                                           \
      if (::ctxkit::test::materialRequired()) FAIL(what << " (CI is set: the material must be present)"); \
      WARN("skipped: " << what);                                                \
      return;                                                                   \
    }                                                                           \
  } while (false)
