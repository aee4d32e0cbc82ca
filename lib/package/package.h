// ONNX Runtime model packages (docs/package.md): the manifest keys ctxkit writes and reads, content-addressed shared
// assets, and a reader that distrusts its input (every path confined to the package, every key checked).
#pragma once

#include "support/status.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ctxkit::package {

// The on-disk names, as ONNX Runtime 1.28+'s model_package library reads them.
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kComponentFile = "component.json";  // an external component's body
inline constexpr const char* kSharedAssetsDir = "shared_assets";
inline constexpr const char* kSchemaVersion = "1.0";
inline constexpr const char* kAssetUriPrefix = "sha256:";
inline constexpr const char* kAssetDirPrefix = "sha256-";
inline constexpr const char* kExecutor = "ort";  // ONNX Runtime's executor_info namespace
// The path-valued session option ONNX Runtime resolves against the package: the folder of a model's external weights.
// For a weightless context it names the shared asset that holds the source model (docs/package.md#weights).
inline constexpr const char* kWeightsFolderOption = "session.model_external_initializers_file_folder_path";
// Also path-valued: the variant's own _ctx.onnx. ONNX Runtime reports a model whose weights folder is set as
// <weights folder>/virtual_model.onnx; this option tells the EP where the model and its context binary really are.
inline constexpr const char* kContextFileOption = "ep.context_file_path";
inline constexpr const char* kMetadataKey = "ctxkit";  // our slot in additional_metadata

struct Variant {
  std::string name;
  std::string ep;
  std::string device;                                  // "cpu", "gpu", "npu" or ""
  std::string compatibility;                           // compatibility_string
  std::filesystem::path directory;                     // resolved, inside the package
  std::filesystem::path modelFile;                     // executor_info.ort.model_file, resolved
  std::optional<std::filesystem::path> weightsFolder;  // session option kWeightsFolderOption, resolved
  // additional_metadata.ctxkit (empty for another producer's variant)
  std::string target, shapeVariant, sourceModel;  // sourceModel: the file name inside weightsFolder
};

struct Component {
  std::string name;
  std::vector<Variant> variants;  // in manifest order (ONNX Runtime breaks ties by it)
};

struct Asset {
  std::string uri;  // sha256:<64 hex>
  std::filesystem::path directory;
};

struct Package {
  std::filesystem::path root;
  std::string schemaVersion;
  std::vector<Component> components;
  std::vector<Asset> assets;  // overrides first, then shared_assets/sha256-* in name order
};

// True when `path` is a folder holding a manifest.json (a package, not a model file).
bool isPackage(const std::filesystem::path& path);

// Reads and checks the manifest: required keys and their types, portable layout (no absolute path, no `..`, no
// symbolic link out of the package), every variant folder, model file and shared asset present. Errors name the file
// and the key ("pkg/manifest.json: components.m.variants.cpu.executor_info.ort.model_file: ...").
Expected<Package> open(const std::filesystem::path& root);

// ONNX Runtime's canonical asset address of a folder: sha256 over the lines "<sha256 of file>  <relative path>\n",
// sorted by path, of every regular file under it; a symbolic link is refused. Returns "sha256:<hex>".
Expected<std::string> directoryUri(const std::filesystem::path& folder);

// Recomputes every shared asset's address and compares it to its name; the error names the folder, found vs expected.
Status verifyAssets(const Package& package);

// How a variant suits this machine: a score as ONNX Runtime ranks compatibility verdicts (100 optimal, 50 prefer
// recompilation, 0 not applicable), nullopt for unsupported, and the verdict's name for messages.
struct Suitability {
  std::optional<int> score;
  std::string verdict;
};
using Judge = std::function<Suitability(const Variant&)>;

// The variant to run: `device` "auto" takes the best-scoring variant (manifest order breaks ties, as ONNX Runtime
// does); otherwise the variant of that name, or the first variant of that device or target. `component` may be
// empty when the package has one component.
Expected<const Variant*> select(const Package& package, const std::string& component, const std::string& device,
                                const Judge& judge);

}  // namespace ctxkit::package
