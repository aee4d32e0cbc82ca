// Reading and writing ONNX models and tensors; the only library that sees protobuf types.
#pragma once

#include "ir/graph.h"
#include "support/file_io.h"
#include "support/status.h"

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ctxkit::onnx_io {

struct LoadOptions {
  // false: external initializers are not read; their `external` location is recorded and `tensor` stays
  // empty (for tools that list deployment files without needing the bytes, such as ctxinspect).
  bool resolveExternalData = true;
};

// Loads a model file. Initializers, Constant-node tensors and subgraph (If/Loop/Scan) attributes are read;
// external data is mapped (not copied) from files inside the model's folder. Errors name the file and the
// tensor or node at fault.
Expected<ir::Model> loadModel(const std::filesystem::path& path, const LoadOptions& options = {});

// Loads a model from memory. `baseDir` is where relative external data paths resolve; `displayName` is
// used in error messages.
Expected<ir::Model> loadModelFromBuffer(std::span<const std::byte> bytes, const std::filesystem::path& baseDir,
                                        std::string_view displayName);

// Serializes a model. Initializers with `external` set are written as external data references
// (location/offset/length); their bytes are not embedded. Fails above protobuf's 2 GiB limit.
Expected<std::string> serializeModel(const ir::Model& model);

// Serializes and writes atomically (temporary file, fsync, rename).
Status saveModel(const ir::Model& model, const std::filesystem::path& path);

// Writes `model` with every initializer of at least `thresholdBytes` bytes moved to `externalFileName`
// beside the model (64-byte aligned), written atomically too.
Status saveModelWithExternalData(ir::Model model, const std::filesystem::path& path,
                                 const std::string& externalFileName, size_t thresholdBytes);
// The same, both files left under temporary names (flushed and closed) for the caller to commit with other files, in
// commit order: the external data file (when some initializer moved) before the model that refers to it.
Expected<std::vector<std::unique_ptr<AtomicFileWriter>>> stageModelWithExternalData(ir::Model model,
                                                                                    const std::filesystem::path& path,
                                                                                    const std::string& externalFileName,
                                                                                    size_t thresholdBytes);

// ONNX TensorProto files (test data `input_0.pb`, `output_0.pb`).
Expected<ir::Tensor> parseTensor(std::span<const std::byte> bytes, std::string_view displayName,
                                 std::string* name = nullptr);
Expected<ir::Tensor> loadTensorFile(const std::filesystem::path& path, std::string* name = nullptr);
Expected<std::string> serializeTensor(const ir::Tensor& tensor, const std::string& name);

// Runs the ONNX checker (onnx 1.12) on a model file.
Status checkModelFile(const std::filesystem::path& path);

}  // namespace ctxkit::onnx_io
