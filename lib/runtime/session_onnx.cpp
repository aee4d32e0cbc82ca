// Session::loadFile and Session::loadBuffer: parse the ONNX model with onnx_io, then load it with the core.
#include "ir/graph_check.h"
#include "onnx_io/onnx_io.h"
#include "runtime/session.h"
#include "runtime/shared_model.h"

#include <sys/stat.h>

#include <map>
#include <mutex>
#include <optional>

namespace ctxkit::runtime {

namespace fs = std::filesystem;

namespace {
fs::path folderOf(const fs::path& path) { return path.parent_path().empty() ? fs::path(".") : path.parent_path(); }

// A model file as it is now: its path and, so that a file replaced or rewritten is parsed afresh, its device,
// inode, size and modification time.
struct FileIdentity {
  std::string path;
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  int64_t modifiedNs = 0;
  auto operator<=>(const FileIdentity&) const = default;
};

std::optional<FileIdentity> identify(const fs::path& path) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  struct stat st {};
  if (ec || ::stat(canonical.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{canonical.string(), st.st_dev, st.st_ino, st.st_size,
                      int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
}

// A model read from ONNX is held to the structure rules ctxgen checks before it compiles (a plain model, above all).
// Not in the core's load: the graphs ONNX Runtime hands the EP are views, not files.
Expected<ir::Model> checkedStructure(Expected<ir::Model> model, const std::string& displayName) {
  if (!model) return model;
  if (auto order = ir::checkedTopologicalOrder(model->graph); !order) return order.takeError().addContext(displayName);
  return model;
}

// Models parsed from files and still used by a session, by file identity.
std::mutex gModelsMutex;
std::map<FileIdentity, std::weak_ptr<SharedModel>> gModels;  // under gModelsMutex
}  // namespace

Expected<std::unique_ptr<Session>> Session::loadFile(const fs::path& path, const SessionOptions& options) {
  const std::string displayName = fmt::format("'{}'", path.string());
  const auto identity = options.shareContexts ? identify(path) : std::nullopt;
  if (identity) {
    std::lock_guard<std::mutex> lock(gModelsMutex);
    if (auto it = gModels.find(*identity); it != gModels.end())
      if (auto live = it->second.lock()) return loadShared(std::move(live), true, folderOf(path), options, displayName);
  }
  CTX_ASSIGN_OR_RETURN(auto model, checkedStructure(onnx_io::loadModel(path), displayName));
  auto shared = std::make_shared<SharedModel>();
  shared->model = std::move(model);
  if (identity) {
    std::lock_guard<std::mutex> lock(gModelsMutex);
    std::erase_if(gModels, [](const auto& entry) { return entry.second.expired(); });
    gModels[*identity] = shared;
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
