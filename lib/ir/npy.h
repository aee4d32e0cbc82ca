// NumPy .npy tensors (format 1.0-3.0, little-endian, C order), for ctxrun inputs and outputs.
#pragma once

#include "ir/tensor.h"
#include "support/status.h"

#include <filesystem>
#include <span>
#include <string>

namespace ctxkit::ir {

Expected<Tensor> parseNpy(std::span<const std::byte> bytes, std::string_view displayName);
Expected<Tensor> loadNpy(const std::filesystem::path& path);
Expected<std::string> serializeNpy(const Tensor& tensor);
Status saveNpy(const Tensor& tensor, const std::filesystem::path& path);

}  // namespace ctxkit::ir
