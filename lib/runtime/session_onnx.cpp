// Session::loadFile and Session::loadBuffer: parse the ONNX model with onnx_io, then load it with the core.
#include "onnx_io/onnx_io.h"
#include "runtime/session.h"

namespace ctxkit::runtime {

namespace fs = std::filesystem;

namespace {
fs::path folderOf(const fs::path& path) { return path.parent_path().empty() ? fs::path(".") : path.parent_path(); }
}  // namespace

Expected<std::unique_ptr<Session>> Session::loadFile(const fs::path& path, const SessionOptions& options) {
  CTX_ASSIGN_OR_RETURN(auto model, onnx_io::loadModel(path));
  return load(std::move(model), folderOf(path), options, fmt::format("'{}'", path.string()));
}

Expected<std::unique_ptr<Session>> Session::loadBuffer(std::span<const std::byte> bytes,
                                                       const fs::path& contextFilePath, const SessionOptions& options) {
  std::string displayName = fmt::format("model buffer (context path '{}')", contextFilePath.string());
  fs::path dir = folderOf(contextFilePath);
  CTX_ASSIGN_OR_RETURN(auto model, onnx_io::loadModelFromBuffer(bytes, dir, displayName));
  return load(std::move(model), dir, options, std::move(displayName));
}

}  // namespace ctxkit::runtime
