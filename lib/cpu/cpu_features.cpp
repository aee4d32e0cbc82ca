#include "cpu/cpu_features.h"

namespace ctxkit::cpu {

const char* architectureName() {
#if defined(__x86_64__)
  return "x86-64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "generic";
#endif
}

const std::vector<std::string>& cpuFeatures() {
  static const std::vector<std::string> features = [] {
    std::vector<std::string> found;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    // __builtin_cpu_supports takes a string literal, and only names both GCC 12 and clang 14 know (not f16c).
#define CTX_FEATURE(name)                                                                                              \
  if (__builtin_cpu_supports(name)) found.emplace_back(name);
    CTX_FEATURE("sse4.2")
    CTX_FEATURE("avx")
    CTX_FEATURE("avx2")
    CTX_FEATURE("fma")
    CTX_FEATURE("avx512f")
    CTX_FEATURE("avx512bw")
    CTX_FEATURE("avx512vl")
    CTX_FEATURE("avx512vnni")
#undef CTX_FEATURE
#endif
    return found;
  }();
  return features;
}

}  // namespace ctxkit::cpu
