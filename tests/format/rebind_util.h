// For tests that rewrite a deployment's .bin on purpose: bind the models to the rewritten binary.
#pragma once

#include "epcontext/contract.h"
#include "format/layout.h"
#include "onnx_io/onnx_io.h"
#include "support/hash.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <span>
#include <string>

namespace ctxkit::format::testing {

// For tests that rewrite a deployment's .bin on purpose: records the new binary's header checksum in `model` as its
// binding to `cacheContext` (docs/format/container-v1.md, "Binding a model to its binary"), as ctxgen would have
// written the model with that binary, so that a load reaches the rule under test. Bytes too short for a header
// leave the model as it is.
inline void rebind(const std::filesystem::path& model, std::span<const std::byte> bin, const std::string& cacheContext) {
  if (bin.size() < sizeof(layout::FileHeader)) return;
  Hash128 checksum;
  std::memcpy(checksum.bytes.data(), bin.data() + layout::kChecksumOffset, checksum.bytes.size());
  auto m = onnx_io::loadModel(model, onnx_io::LoadOptions{false});
  REQUIRE(m.isOk());
  m->setMetadata(epcontext::contextChecksumKey(cacheContext), checksum.toHex());
  REQUIRE(onnx_io::saveModel(*m, model).isOk());
}

}  // namespace ctxkit::format::testing
