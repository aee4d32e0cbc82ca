// libFuzzer target for the TensorProto (.pb) reader: any bytes are rejected cleanly, or parse into a tensor
// that serializes and parses back unchanged.
#include "fuzz_util.h"
#include "onnx_io/onnx_io.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string name;
  auto tensor = ctxkit::onnx_io::parseTensor(std::as_bytes(std::span(data, size)), "fuzz.pb", &name);
  if (!tensor.isOk()) return 0;
  auto text = ctxkit::onnx_io::serializeTensor(*tensor, name);
  if (!text.isOk()) return 0;  // a tensor the reader accepts but the writer refuses is allowed (e.g. > 2 GiB)
  std::string nameBack;
  auto back = ctxkit::onnx_io::parseTensor(std::as_bytes(std::span(text->data(), text->size())), "rewritten.pb", &nameBack);
  if (!back.isOk()) ctxkit::fuzz::propertyBroken("a serialized tensor does not parse");
  if (back->type() != tensor->type() || back->shape() != tensor->shape() || nameBack != name ||
      !std::ranges::equal(back->bytes(), tensor->bytes()) || back->stringValues() != tensor->stringValues())
    ctxkit::fuzz::propertyBroken("a tensor changes in a serialize/parse round trip");
  return 0;
}
