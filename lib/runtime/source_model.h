// The initializers of an ONNX source model, read without protobuf (weightless contexts,
// docs/weight-sharing.md#weightless): the file is mapped and raw_data and external data are used in place; typed fields
// (float_data, int64_data...) are copied. The top-level graph's initializers and Constant values come first; those of
// If/Loop/Scan bodies are added under their own names when no other definition in the model has that name. The model
// file and every external data file it names are hashed, so that a context can pin the model it was compiled from.
#pragma once

#include "ir/tensor.h"
#include "support/file_io.h"
#include "support/hash.h"
#include "support/status.h"

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace ctxkit::runtime {

// A file of a source model as read: the model itself (`file` empty) or an external data file (`file` its location as
// the model records it), with its size and XXH3-128.
struct SourceFilePin {
  std::string file;
  uint64_t size = 0;
  Hash128 hash;
};

struct SourceInitializers {
  std::string displayName;                   // the file, or "source model buffer", for errors
  std::map<std::string, ir::Tensor> byName;  // each keeps its bytes alive (the mapping, or its own copy)
  std::set<std::string> external;            // the names in byName whose bytes are external data
  SourceFilePin model;                       // the model's own bytes
  std::vector<SourceFilePin> externalFiles;  // every external data file the model names, sorted by location
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
