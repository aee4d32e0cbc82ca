// Reading an ONNX Runtime model package: the manifest's keys checked one by one, paths confined to the package,
// shared assets addressed by content (docs/package.md).
#include "package/package.h"

#include "support/file_io.h"
#include "support/sha256.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;  // manifest order matters: ONNX Runtime breaks ties by it

namespace ctxkit::package {
namespace {

bool isHex64(std::string_view s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// One place in one file, for messages: "pkg/manifest.json: components.m.variants.cpu.ep".
struct Where {
  fs::path file;
  std::string key;
  Where operator/(const std::string& child) const { return {file, key.empty() ? child : key + "." + child}; }
  template <typename... Args> Error error(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) const {
    return Error(code, fmt::format("{}: {}: {}", file.string(), key, fmt::format(f, std::forward<Args>(args)...)));
  }
};

Expected<json> readJson(const fs::path& file) {
  CTX_ASSIGN_OR_RETURN(auto text, readFile(file));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return makeError(ErrorCode::InvalidGraph, "{}: not valid JSON", file.string());
  if (!j.is_object()) return makeError(ErrorCode::InvalidGraph, "{}: expected a JSON object", file.string());
  return j;
}

Expected<std::optional<std::string>> optionalString(const json& obj, const Where& at, const std::string& key) {
  if (!obj.contains(key)) return std::optional<std::string>();
  if (!obj[key].is_string()) return (at / key).error(ErrorCode::InvalidGraph, "must be a string");
  return std::optional<std::string>(obj[key].get<std::string>());
}

// An optional string key into `out` ("" when absent).
Status readString(const json& obj, const Where& at, const std::string& key, std::string& out) {
  CTX_ASSIGN_OR_RETURN(auto value, optionalString(obj, at, key));
  out = value.value_or("");
  return Status::ok();
}

Expected<const json*> requiredObject(const json& obj, const Where& at, const std::string& key) {
  if (!obj.contains(key)) return (at / key).error(ErrorCode::InvalidGraph, "required key is missing");
  if (!obj[key].is_object()) return (at / key).error(ErrorCode::InvalidGraph, "must be a JSON object");
  return &obj[key];
}

class Reader {
public:
  explicit Reader(Package& p) : p_(p) {}

  // A portable path: relative, no `..`, inside `base` (symbolic links included), and present.
  Expected<fs::path> confined(const fs::path& base, const std::string& ref, const Where& at, bool folder) {
    if (ref.empty()) return at.error(ErrorCode::InvalidGraph, "empty path");
    fs::path rel(ref);
    if (rel.is_absolute() || ref.front() == '/' || ref.front() == '\\')
      return at.error(ErrorCode::InvalidGraph, "'{}' is an absolute path; a portable package holds relative paths only",
                      ref);
    for (const auto& part : rel)
      if (part == "..") return at.error(ErrorCode::InvalidGraph, "'{}' escapes the package (a '..' segment)", ref);
    auto resolved = resolveInside(base, ref);
    if (!resolved) return at.error(ErrorCode::InvalidGraph, "{}", resolved.error().message());
    std::error_code ec;
    const bool ok = folder ? fs::is_directory(*resolved, ec) : fs::is_regular_file(*resolved, ec);
    if (!ok)
      return at.error(ErrorCode::NotFound, "'{}' ({}) is not {}", ref, resolved->string(),
                      folder ? "a folder in the package" : "a file in the package");
    // Both ends canonical: a link anywhere on the way out of the package is caught here.
    auto canonical = fs::weakly_canonical(*resolved, ec);
    auto root = fs::weakly_canonical(p_.root, ec);
    auto [r, c] = std::mismatch(root.begin(), root.end(), canonical.begin(), canonical.end());
    if (ec || r != root.end()) return at.error(ErrorCode::InvalidGraph, "'{}' leads out of the package", ref);
    return *resolved;
  }

  // `sha256:<hex>[/tail]` (a shared asset) or a portable path relative to `base`.
  Expected<fs::path> reference(const fs::path& base, const std::string& ref, const Where& at, bool folder) {
    if (!ref.starts_with(kAssetUriPrefix)) return confined(base, ref, at, folder);
    std::string rest = ref.substr(std::string_view(kAssetUriPrefix).size());
    std::string hex = rest.substr(0, rest.find('/'));
    std::string tail = hex.size() < rest.size() ? rest.substr(hex.size() + 1) : "";
    if (!isHex64(hex))
      return at.error(ErrorCode::InvalidGraph, "'{}' is not a sha256:<64 lower-case hex digits> asset address", ref);
    auto asset = std::find_if(p_.assets.begin(), p_.assets.end(),
                              [&](const Asset& a) { return a.uri == kAssetUriPrefix + hex; });
    if (asset == p_.assets.end())
      return at.error(ErrorCode::NotFound, "shared asset '{}{}' is not in the package (no {}/{}{})", kAssetUriPrefix,
                      hex, kSharedAssetsDir, kAssetDirPrefix, hex);
    if (tail.empty()) return asset->directory;
    return confined(asset->directory, tail, at, folder);
  }

  Status readAssets(const json& manifest, const Where& at) {
    if (manifest.contains(kSharedAssetsDir)) {
      if (!manifest[kSharedAssetsDir].is_object())
        return (at / kSharedAssetsDir).error(ErrorCode::InvalidGraph, "must be a JSON object");
      for (const auto& [uri, path] : manifest[kSharedAssetsDir].items()) {
        Where here = at / kSharedAssetsDir / uri;
        if (!uri.starts_with(kAssetUriPrefix) || !isHex64(uri.substr(std::string_view(kAssetUriPrefix).size())))
          return here.error(ErrorCode::InvalidGraph, "the key is not a sha256:<64 lower-case hex digits> address");
        if (!path.is_string()) return here.error(ErrorCode::InvalidGraph, "must be a string path");
        CTX_ASSIGN_OR_RETURN(auto dir, confined(p_.root, path.get<std::string>(), here, true));
        p_.assets.push_back({uri, dir});
      }
    }
    std::error_code ec;
    fs::path shared = p_.root / kSharedAssetsDir;
    if (!fs::is_directory(shared, ec)) return Status::ok();
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(shared, ec))
      if (entry.is_directory(ec)) names.push_back(entry.path().filename().string());
    if (ec) return makeError(ErrorCode::IoError, "{}: cannot list: {}", shared.string(), ec.message());
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      if (!name.starts_with(kAssetDirPrefix) || !isHex64(name.substr(std::string_view(kAssetDirPrefix).size())))
        continue;
      std::string uri = kAssetUriPrefix + name.substr(std::string_view(kAssetDirPrefix).size());
      if (std::none_of(p_.assets.begin(), p_.assets.end(), [&](const Asset& a) { return a.uri == uri; }))
        p_.assets.push_back({uri, shared / name});
    }
    return Status::ok();
  }

  Expected<Variant> readVariant(const std::string& name, const json& body, const fs::path& componentDir,
                                const Where& at) {
    if (!body.is_object()) return at.error(ErrorCode::InvalidGraph, "a variant must be a JSON object");
    Variant v;
    v.name = name;
    CTX_ASSIGN_OR_RETURN(auto dir, optionalString(body, at, "variant_directory"));
    CTX_ASSIGN_OR_RETURN(v.directory, confined(componentDir, dir.value_or(name), at / "variant_directory", true));
    CTX_RETURN_IF_ERROR(readString(body, at, "ep", v.ep));
    CTX_RETURN_IF_ERROR(readString(body, at, "device", v.device));
    CTX_RETURN_IF_ERROR(readString(body, at, "compatibility_string", v.compatibility));
    if (!v.device.empty() && v.device != "cpu" && v.device != "gpu" && v.device != "npu")
      return (at / "device").error(ErrorCode::InvalidGraph, "'{}' is not one of cpu, gpu, npu", v.device);
    CTX_ASSIGN_OR_RETURN(const json* executors, requiredObject(body, at, "executor_info"));
    Where ortAt = at / "executor_info" / kExecutor;
    if (!executors->contains(kExecutor)) return ortAt.error(ErrorCode::InvalidGraph, "required key is missing");
    json ort = (*executors)[kExecutor];
    if (ort.is_string()) {  // the external form: a JSON file in the variant folder
      CTX_ASSIGN_OR_RETURN(auto file, confined(v.directory, ort.get<std::string>(), ortAt, false));
      CTX_ASSIGN_OR_RETURN(ort, readJson(file));
      ortAt = Where{file, ""};
    } else if (!ort.is_object()) {
      return ortAt.error(ErrorCode::InvalidGraph, "must be a JSON object or a path to one");
    }
    CTX_ASSIGN_OR_RETURN(auto modelFile, optionalString(ort, ortAt, "model_file"));
    if (!modelFile) return (ortAt / "model_file").error(ErrorCode::InvalidGraph, "required key is missing");
    CTX_ASSIGN_OR_RETURN(v.modelFile, reference(v.directory, *modelFile, ortAt / "model_file", false));
    if (ort.contains("session_options")) {
      Where soAt = ortAt / "session_options";
      if (!ort["session_options"].is_object()) return soAt.error(ErrorCode::InvalidGraph, "must be a JSON object");
      for (const auto& [key, value] : ort["session_options"].items())
        if (!value.is_string()) return (soAt / key).error(ErrorCode::InvalidGraph, "must be a string");
      if (ort["session_options"].contains(kContextFileOption)) {
        CTX_ASSIGN_OR_RETURN(auto contextFile, reference(v.directory, ort["session_options"][kContextFileOption],
                                                         soAt / kContextFileOption, false));
        if (fs::weakly_canonical(contextFile) != fs::weakly_canonical(v.modelFile))
          return (soAt / kContextFileOption)
              .error(ErrorCode::InvalidGraph, "names '{}', not the variant's model_file '{}'", contextFile.string(),
                     v.modelFile.string());
      }
      if (ort["session_options"].contains(kWeightsFolderOption)) {
        CTX_ASSIGN_OR_RETURN(v.weightsFolder, reference(v.directory, ort["session_options"][kWeightsFolderOption],
                                                        soAt / kWeightsFolderOption, true));
      }
    }
    if (body.contains("additional_metadata") && body["additional_metadata"].is_object() &&
        body["additional_metadata"].contains(kMetadataKey)) {
      const json& ours = body["additional_metadata"][kMetadataKey];
      Where oursAt = at / "additional_metadata" / kMetadataKey;
      if (!ours.is_object()) return oursAt.error(ErrorCode::InvalidGraph, "must be a JSON object");
      CTX_RETURN_IF_ERROR(readString(ours, oursAt, "target", v.target));
      CTX_RETURN_IF_ERROR(readString(ours, oursAt, "shape_variant", v.shapeVariant));
      CTX_RETURN_IF_ERROR(readString(ours, oursAt, "source_model", v.sourceModel));
      if (!v.sourceModel.empty()) {
        if (!v.weightsFolder)
          return (oursAt / "source_model")
              .error(ErrorCode::InvalidGraph, "names a source model but session_options has no {}",
                     kWeightsFolderOption);
        CTX_ASSIGN_OR_RETURN(auto held, confined(*v.weightsFolder, v.sourceModel, oursAt / "source_model", false));
        (void)held;
      }
    }
    return v;
  }

  Status readComponent(const std::string& name, const json& value, const Where& at) {
    Component c;
    c.name = name;
    json body = value;
    fs::path dir = p_.root;  // an inline component's folder is the package root
    Where bodyAt = at;
    if (value.is_string()) {
      const std::string ref = value.get<std::string>();
      std::error_code ec;
      const bool isDir = fs::is_directory(p_.root / ref, ec);
      CTX_ASSIGN_OR_RETURN(auto path, confined(p_.root, ref, at, isDir));
      if (isDir) {
        dir = path;
        path /= kComponentFile;
      } else {
        dir = path.parent_path();
      }
      CTX_ASSIGN_OR_RETURN(body, readJson(path));
      bodyAt = Where{path, ""};
    } else if (!value.is_object()) {
      return at.error(ErrorCode::InvalidGraph, "must be a JSON object or a path to a component");
    }
    CTX_ASSIGN_OR_RETURN(auto declaredName, optionalString(body, bodyAt, "component_name"));
    (void)declaredName;  // descriptive only: the key in components names the component
    CTX_ASSIGN_OR_RETURN(const json* variants, requiredObject(body, bodyAt, "variants"));
    for (const auto& [vname, vbody] : variants->items()) {
      CTX_ASSIGN_OR_RETURN(auto v, readVariant(vname, vbody, dir, bodyAt / "variants" / vname));
      c.variants.push_back(std::move(v));
    }
    p_.components.push_back(std::move(c));
    return Status::ok();
  }

private:
  Package& p_;
};

}  // namespace

bool isPackage(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(path / kManifestFile, ec);
}

Expected<Package> open(const fs::path& root) {
  Package p;
  p.root = root;
  const fs::path manifestPath = root / kManifestFile;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return makeError(ErrorCode::NotFound, "{}: not a folder", root.string());
  if (!fs::exists(manifestPath, ec))
    return makeError(ErrorCode::NotFound, "{}: no {}: not a model package", root.string(), kManifestFile);
  CTX_ASSIGN_OR_RETURN(auto manifest, readJson(manifestPath));
  Where at{manifestPath, ""};
  CTX_ASSIGN_OR_RETURN(auto version, optionalString(manifest, at, "schema_version"));
  if (!version) return (at / "schema_version").error(ErrorCode::InvalidGraph, "required key is missing");
  if (!version->starts_with("1.") || version->size() < 3 ||
      !std::all_of(version->begin() + 2, version->end(), [](char c) { return c >= '0' && c <= '9'; }))
    return (at / "schema_version")
        .error(ErrorCode::Unsupported, "'{}' is not a 1.<minor> schema version (ctxkit reads major 1)", *version);
  p.schemaVersion = *version;
  CTX_ASSIGN_OR_RETURN(auto layout, optionalString(manifest, at, "layout"));
  if (layout && *layout != "portable")
    return (at / "layout")
        .error(ErrorCode::Unsupported, "'{}': ctxkit reads portable packages only (paths inside the package)", *layout);
  Reader reader(p);
  CTX_RETURN_IF_ERROR(reader.readAssets(manifest, at));
  CTX_ASSIGN_OR_RETURN(const json* components, requiredObject(manifest, at, "components"));
  if (components->empty()) return (at / "components").error(ErrorCode::InvalidGraph, "has no component");
  for (const auto& [name, value] : components->items())
    CTX_RETURN_IF_ERROR(reader.readComponent(name, value, at / "components" / name));
  return p;
}

Expected<std::string> directoryUri(const fs::path& folder) {
  std::error_code ec;
  std::vector<std::pair<std::string, fs::path>> files;  // relative POSIX path, full path
  for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_symlink(ec))
      return makeError(ErrorCode::InvalidGraph, "{}: a symbolic link in a shared asset", it->path().string());
    if (it->is_regular_file(ec)) files.emplace_back(it->path().lexically_relative(folder).generic_string(), it->path());
  }
  if (ec) return makeError(ErrorCode::IoError, "{}: cannot list: {}", folder.string(), ec.message());
  std::sort(files.begin(), files.end());
  std::string lines;
  for (const auto& [rel, full] : files) {
    CTX_ASSIGN_OR_RETURN(auto hex, sha256File(full));
    lines += hex + "  " + rel + "\n";
  }
  return kAssetUriPrefix + sha256Hex(lines);
}

Status verifyAssets(const Package& package) {
  for (const Asset& a : package.assets) {
    CTX_ASSIGN_OR_RETURN(auto uri, directoryUri(a.directory));
    if (uri != a.uri)
      return makeError(ErrorCode::Mismatch,
                       "{}: shared asset content hashes to {}, its name says {}: a file in it "
                       "changed, went missing or was added",
                       a.directory.string(), uri, a.uri);
  }
  return Status::ok();
}

Expected<const Variant*> select(const Package& package, const std::string& component, const std::string& device,
                                const Judge& judge) {
  const Component* c = nullptr;
  std::string names;
  for (const auto& k : package.components) {
    names += (names.empty() ? "" : ", ") + k.name;
    if (k.name == component) c = &k;
  }
  if (component.empty() && package.components.size() == 1) c = &package.components.front();
  if (!c)
    return makeError(ErrorCode::InvalidArgument, "{}: {}; components: {}", package.root.string(),
                     component.empty() ? std::string("several components, name one")
                                       : fmt::format("no component '{}'", component),
                     names);
  if (c->variants.empty())
    return makeError(ErrorCode::NotFound, "{}: component '{}' has no variant", package.root.string(), c->name);
  if (device != "auto") {
    for (const auto& v : c->variants)
      if (v.name == device) return &v;
    for (const auto& v : c->variants)
      if (v.device == device || v.target == device) return &v;
    std::string all;
    for (const auto& v : c->variants) all += fmt::format("{}{} ({})", all.empty() ? "" : ", ", v.name, v.device);
    return makeError(ErrorCode::InvalidArgument, "{}: component '{}' has no variant or device '{}'; variants: {}",
                     package.root.string(), c->name, device, all);
  }
  const Variant* best = nullptr;
  int bestScore = -1;
  std::string verdicts;
  for (const auto& v : c->variants) {
    Suitability s = judge(v);
    verdicts += fmt::format("{}{}: {}", verdicts.empty() ? "" : ", ", v.name, s.verdict);
    if (s.score && *s.score > bestScore) {
      best = &v;
      bestScore = *s.score;
    }
  }
  if (!best)
    return makeError(ErrorCode::Unsupported, "{}: no variant of component '{}' runs here ({})", package.root.string(),
                     c->name, verdicts);
  return best;
}

}  // namespace ctxkit::package
