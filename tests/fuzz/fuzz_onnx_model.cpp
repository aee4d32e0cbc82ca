// libFuzzer target for the ONNX model loader (plain and `_ctx.onnx` models): any bytes are rejected cleanly,
// or load into a model that serializes and loads again.
#include "fuzz_util.h"
#include "onnx_io/onnx_io.h"

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto dir = ctxkit::fuzz::dataDir();
  auto model = ctxkit::onnx_io::loadModelFromBuffer(std::as_bytes(std::span(data, size)), dir, "fuzz.onnx");
  if (!model.isOk()) return 0;
  auto text = ctxkit::onnx_io::serializeModel(*model);
  if (!text.isOk()) return 0;  // the writer may refuse what the reader accepts (e.g. above 2 GiB)
  auto back = ctxkit::onnx_io::loadModelFromBuffer(std::as_bytes(std::span(text->data(), text->size())), dir,
                                                   "reserialized.onnx");
  if (!back.isOk()) ctxkit::fuzz::propertyBroken("a model the loader accepted does not load after serializing");
  return 0;
}
