// libFuzzer target for the protobuf-free reader of source model initializers (weightless contexts): any bytes are
// rejected cleanly, and an initializer it reads from a model that onnx_io also loads has onnx_io's type and bytes.
#include "fuzz_util.h"
#include "onnx_io/onnx_io.h"
#include "runtime/source_model.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto dir = ctxkit::fuzz::dataDir();
  const auto bytes = std::as_bytes(std::span(data, size));
  auto ours = ctxkit::runtime::readSourceInitializers(bytes, nullptr, dir, "fuzz.onnx");
  if (!ours.isOk()) return 0;
  auto model = ctxkit::onnx_io::loadModelFromBuffer(bytes, dir, "fuzz.onnx");
  if (!model.isOk()) return 0;
  std::set<std::string> names;
  for (const auto& init : model->graph.initializers)
    if (!names.insert(init.name).second) return 0;  // a repeated name: which copy wins is not the property
  for (const auto& init : model->graph.initializers) {
    auto it = (*ours)->byName.find(init.name);
    if (it == (*ours)->byName.end()) continue;
    const auto& t = it->second;
    if (t.type() == init.tensor.type() && t.byteSize() == init.tensor.byteSize() &&
        !std::ranges::equal(t.bytes(), init.tensor.bytes()))
      ctxkit::fuzz::propertyBroken("the source model reader and onnx_io read different bytes for one initializer");
  }
  return 0;
}
