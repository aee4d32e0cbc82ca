// The initializers of an ONNX source model, read without protobuf (weightless contexts,
// docs/weight-sharing.md#weightless): the file is mapped and raw_data and external data are used in place; typed fields
// (float_data, int64_data...) are copied. Only the top-level graph's initializers are read: those are the ones a
// weightless context refers to.
#pragma once

#include "ir/tensor.h"
#include "support/file_io.h"
#include "support/status.h"

#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>

namespace ctxkit::runtime {

struct SourceInitializers {
  std::string displayName;                   // the file, or "source model buffer", for errors
  std::map<std::string, ir::Tensor> byName;  // each keeps its bytes alive (the mapping, or its own copy)
};

// External data resolves inside the model's folder (paths confined as onnx_io confines them).
Expected<std::shared_ptr<const SourceInitializers>> readSourceInitializers(const std::filesystem::path& path);
// As above, from a file already mapped (whose identity a store keeps).
Expected<std::shared_ptr<const SourceInitializers>> readSourceInitializers(std::shared_ptr<const MappedFile> file);
// A model in memory that `owner` keeps alive; external data resolves inside `baseDir`.
Expected<std::shared_ptr<const SourceInitializers>> readSourceInitializers(std::span<const std::byte> bytes,
                                                                           std::shared_ptr<const void> owner,
                                                                           const std::filesystem::path& baseDir,
                                                                           std::string displayName);

}  // namespace ctxkit::runtime
