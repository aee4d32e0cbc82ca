// Helpers shared by the fuzz targets: the folder that relative paths in fuzzed files resolve against, and
// a failure that libFuzzer records as a crash when a round-trip property breaks.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace ctxkit::fuzz {

// scripts/fuzz.sh points CTXKIT_FUZZ_DATA_DIR at the ctxgen output the seeds came from, so that external
// data and ep_cache_context references of the seeds resolve; without it nothing outside the input is read.
inline std::filesystem::path dataDir() {
  const char* dir = std::getenv("CTXKIT_FUZZ_DATA_DIR");
  return dir && *dir ? std::filesystem::path(dir) : std::filesystem::path("/nonexistent-ctxkit-fuzz-dir");
}

[[noreturn]] inline void propertyBroken(std::string_view what) {
  std::fprintf(stderr, "ctxkit fuzz: property broken: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace ctxkit::fuzz
