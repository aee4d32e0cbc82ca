// libFuzzer target for the compiled-program decoder: any bytes are rejected cleanly, or decode into a program
// that dumps and re-encodes to exactly the same bytes (the encoding has one spelling per program).
#include "fuzz_util.h"
#include "program/program.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::as_bytes(std::span(data, size));
  // Weight indices below this count resolve; the seeds' containers have far fewer weights.
  constexpr uint64_t kWeightCount = 1024;
  auto program = ctxkit::program::deserialize(bytes, kWeightCount, "fuzz program");
  if (!program.isOk()) return 0;
  (void)ctxkit::program::dump(*program, "fuzz");
  const std::vector<std::byte> again = ctxkit::program::serialize(*program);
  if (!std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()))
    ctxkit::fuzz::propertyBroken("a decoded program re-encodes to different bytes");
  return 0;
}
