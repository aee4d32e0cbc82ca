// libFuzzer target for what ctxrun does on load: ONNX loading, EPContext claiming, the embedded or referenced
// context binary, program decoding and validation against the kernels. Nothing is executed.
#include "fuzz_util.h"
#include "runtime/session.h"

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto contextPath = ctxkit::fuzz::dataDir() / "fuzz_ctx.onnx";
  ctxkit::runtime::SessionOptions options;
  options.shareContexts = false;  // no process-wide state from one input to the next
  (void)ctxkit::runtime::Session::loadBuffer(std::as_bytes(std::span(data, size)), contextPath, options);
  return 0;
}
