// libFuzzer target for the .npy reader: any bytes are rejected cleanly, or parse into a tensor that the
// writer saves and the reader loads back unchanged.
#include "fuzz_util.h"
#include "ir/npy.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensor = ctxkit::ir::parseNpy(std::as_bytes(std::span(data, size)), "fuzz.npy");
  if (!tensor.isOk()) return 0;
  auto text = ctxkit::ir::serializeNpy(*tensor);
  if (!text.isOk()) ctxkit::fuzz::propertyBroken("a parsed .npy tensor cannot be written back");
  auto back = ctxkit::ir::parseNpy(std::as_bytes(std::span(text->data(), text->size())), "rewritten.npy");
  if (!back.isOk()) ctxkit::fuzz::propertyBroken("a written .npy file does not parse");
  if (back->type() != tensor->type() || back->shape() != tensor->shape() ||
      !std::ranges::equal(back->bytes(), tensor->bytes()))
    ctxkit::fuzz::propertyBroken("a .npy tensor changes in a write/read round trip");
  return 0;
}
