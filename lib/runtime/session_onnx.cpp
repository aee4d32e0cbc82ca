// Session::loadFile and Session::loadBuffer: parse the ONNX model with onnx_io, then load it with the core.
#include "ir/graph_check.h"
#include "onnx_io/onnx_io.h"
#include "runtime/session.h"
#include "runtime/shared_model.h"
#include "runtime/weak_store.h"
#include "support/file_identity.h"
#include "support/file_io.h"

#include <functional>
#include <mutex>
#include <optional>

namespace ctxkit::runtime {

namespace fs = std::filesystem;

namespace {
fs::path folderOf(const fs::path& path) { return path.parent_path().empty() ? fs::path(".") : path.parent_path(); }

// A model read from ONNX is held to the structure rules ctxgen checks before it compiles (a plain model, above all).
// Not in the core's load: the graphs ONNX Runtime hands the EP are views, not files.
Expected<ir::Model> checkedStructure(Expected<ir::Model> model, const std::string& displayName) {
  if (!model) return model;
  if (auto order = ir::checkedTopologicalOrder(model->graph); !order) return order.takeError().addContext(displayName);
  return model;
}

// A parsed model depends on its file and on the folder its external data resolves in (two hard links in two folders
// are one file with different neighbours).
struct ModelKey {
  FileIdentity file;
  fs::path folder;  // canonical
  bool operator==(const ModelKey&) const = default;
};
struct ModelKeyHash {
  size_t operator()(const ModelKey& k) const {
    return FileIdentityHash{}(k.file) ^ (std::hash<std::string>{}(k.folder.native()) << 1);
  }
};

std::optional<fs::path> canonicalFolder(const fs::path& path) {
  std::error_code ec;
  fs::path folder = fs::canonical(folderOf(path), ec);
  if (ec) return std::nullopt;
  return folder;
}

// Models parsed from files and still used by a session.
std::mutex gModelsMutex;
WeakStore<ModelKey, SharedModel, ModelKeyHash> gModels;  // under gModelsMutex
}  // namespace

Expected<std::unique_ptr<Session>> Session::loadFile(const fs::path& path, const SessionOptions& options) {
  const std::string displayName = fmt::format("'{}'", path.string());
  const auto folder = options.shareContexts ? canonicalFolder(path) : std::nullopt;
  if (folder)
    if (auto now = identifyFile(path)) {
      std::lock_guard<std::mutex> lock(gModelsMutex);
      if (auto live = gModels.find(ModelKey{std::move(*now), *folder}))
        return loadShared(std::move(live), true, folderOf(path), options, displayName);
    }
  // Parsed from a mapping of our own so that the model is stored under the identity of exactly what was parsed.
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.takeError().addContext(fmt::format("loading '{}'", path.string()));
  CTX_ASSIGN_OR_RETURN(
      auto model,
      checkedStructure(onnx_io::loadModelFromBuffer((*mapped)->bytes(), folderOf(path), path.string()), displayName));
  auto shared = std::make_shared<SharedModel>();
  shared->model = std::move(model);
  if (folder) {
    std::lock_guard<std::mutex> lock(gModelsMutex);
    gModels.put(ModelKey{(*mapped)->identity(), *folder}, shared);
  }
  return loadShared(std::move(shared), false, folderOf(path), options, displayName);
}

Expected<std::unique_ptr<Session>> Session::loadBuffer(std::span<const std::byte> bytes,
                                                       const fs::path& contextFilePath, const SessionOptions& options) {
  std::string displayName = fmt::format("model buffer (context path '{}')", contextFilePath.string());
  fs::path dir = folderOf(contextFilePath);
  CTX_ASSIGN_OR_RETURN(auto model,
                       checkedStructure(onnx_io::loadModelFromBuffer(bytes, dir, displayName), displayName));
  return load(std::move(model), dir, options, std::move(displayName));
}

}  // namespace ctxkit::runtime
