// Writing an ONNX Runtime model package: one weightless compile per (model, target) into a folder beside the
// destination, the source models moved into content-addressed shared assets, the manifest, then one rename.
#include "pipeline/package.h"

#include "epcontext/contract.h"
#include "package/package.h"
#include "support/file_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <unistd.h>

namespace fs = std::filesystem;

namespace ctxkit::pipeline {
namespace {

std::vector<std::string> splitTargets(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// The [STEM:] arguments (--dim, --shape, --set) for the run of one model: those of another model of the package
// are dropped; an unknown stem is kept, so that the run refuses it as a run of all models would.
std::vector<std::string> argsFor(const std::vector<std::string>& args, const std::string& stem,
                                 const std::set<fs::path>& stems) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    const size_t colon = a.find(':'), eq = a.find('=');
    const bool prefixed = colon != std::string::npos && (eq == std::string::npos || colon < eq);
    const std::string prefix = prefixed ? a.substr(0, colon) : "";
    if (!prefixed || prefix == stem || !stems.count(prefix)) out.push_back(a);
  }
  return out;
}

// Removes the staging folder unless the package was committed.
struct StagingGuard {
  fs::path path;
  bool keep = false;
  ~StagingGuard() {
    std::error_code ec;
    if (!keep && !path.empty()) fs::remove_all(path, ec);
  }
};

uint64_t treeBytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  return total;
}

Status copyInto(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (!ec) fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return makeError(ErrorCode::IoError, "copying '{}' to '{}': {}", from.string(), to.string(), ec.message());
  return Status::ok();
}

// The device ONNX Runtime matches a variant against: our CPU target runs on the host CPU, every other target is
// an NPU (npu-sim is a simulated one; the EP offers it as a virtual NPU device).
std::string deviceOf(const std::string& targetId) { return targetId == epcontext::kCpu.id ? "cpu" : "npu"; }

// The source model and the external data it was loaded from, in one folder whose name is its content address.
Expected<std::string> addSourceAsset(const fs::path& staging, const ModelSummary& model) {
  const fs::path shared = staging / package::kSharedAssetsDir;
  const fs::path tmp = shared / (".tmp-" + model.source.stem().string());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  CTX_RETURN_IF_ERROR(copyInto(model.source, tmp / model.source.filename()));
  const fs::path sourceDir = model.source.parent_path();
  for (const fs::path& data : model.externalData) {
    fs::path rel = data.lexically_relative(sourceDir.empty() ? fs::path(".") : sourceDir);
    if (rel.empty() || rel.is_absolute() || *rel.begin() == "..")
      return makeError(ErrorCode::Unsupported, "'{}': external data '{}' is outside the model's folder",
                       model.source.string(), data.string());
    CTX_RETURN_IF_ERROR(copyInto(data, tmp / rel));
  }
  CTX_ASSIGN_OR_RETURN(std::string uri, package::directoryUri(tmp));
  const fs::path final =
      shared / (package::kAssetDirPrefix + uri.substr(std::string_view(package::kAssetUriPrefix).size()));
  if (fs::exists(final, ec)) {
    fs::remove_all(tmp, ec);  // the same bytes are there already (the same model given twice)
  } else {
    fs::rename(tmp, final, ec);
    if (ec)
      return makeError(ErrorCode::IoError, "renaming '{}' to '{}': {}", tmp.string(), final.string(), ec.message());
  }
  return uri;
}

Status commitPackage(const fs::path& staging, const fs::path& root, bool force) {
  std::error_code ec;
  fs::path old;
  if (fs::exists(fs::symlink_status(root, ec))) {
    if (!force) return makeError(ErrorCode::InvalidArgument, "'{}' exists (--force replaces it)", root.string());
    if (!package::isPackage(root) && !(fs::is_directory(root, ec) && fs::is_empty(root, ec)))
      return makeError(ErrorCode::InvalidArgument, "'{}' exists and is not a model package: not replacing it",
                       root.string());
    old = staging.string() + ".old";
    fs::rename(root, old, ec);
    if (ec) return makeError(ErrorCode::IoError, "moving the old package '{}' aside: {}", root.string(), ec.message());
  }
  fs::rename(staging, root, ec);
  if (ec) {
    std::error_code back;
    if (!old.empty()) fs::rename(old, root, back);
    return makeError(ErrorCode::IoError, "renaming '{}' to '{}': {}", staging.string(), root.string(), ec.message());
  }
  if (!old.empty()) fs::remove_all(old, ec);
  return Status::ok();
}

}  // namespace

Expected<PackageReport> writePackage(const CompileOptions& options, const fs::path& root, const ProgressFn& progress) {
  if (options.outputDir || options.outputFile)
    return makeError(ErrorCode::InvalidArgument, "a package is its own output folder: no output folder or file too");
  if (options.dryRun || !options.stopAfter.empty())
    return makeError(ErrorCode::InvalidArgument, "a package is written whole: no dry run or --stop-after");
  if (options.embedMode != 0)
    return makeError(ErrorCode::InvalidArgument, "a package keeps each context beside its model (embed mode 0)");
  if (!options.externalInitializersFile.empty())
    return makeError(ErrorCode::InvalidArgument, "a package keeps fallback initializers in each variant's model");
  if (root.filename().empty() || root.filename() == "." || root.filename() == "..")
    return makeError(ErrorCode::InvalidArgument, "package folder '{}': give a folder name", root.string());
  const std::vector<std::string> targets = splitTargets(options.target);
  std::set<fs::path> stems;
  for (const auto& m : options.models)
    if (!stems.insert(m.stem()).second)
      return makeError(ErrorCode::InvalidArgument, "two models named '{}': components need distinct names",
                       m.stem().string());
  std::error_code ec;
  const fs::path parent = root.parent_path().empty() ? fs::path(".") : root.parent_path();
  fs::create_directories(parent, ec);
  if (ec) return makeError(ErrorCode::IoError, "creating '{}': {}", parent.string(), ec.message());
  if (fs::exists(fs::symlink_status(root, ec)) && !options.force)
    return makeError(ErrorCode::InvalidArgument, "'{}' exists (--force replaces it)", root.string());

  StagingGuard staging{parent / fmt::format(".{}.tmp{}", root.filename().string(), ::getpid())};
  fs::remove_all(staging.path, ec);
  fs::create_directories(staging.path, ec);
  if (ec) return makeError(ErrorCode::IoError, "creating '{}': {}", staging.path.string(), ec.message());

  PackageReport report;
  report.root = root;
  nlohmann::ordered_json components = nlohmann::ordered_json::object();
  for (const auto& model : options.models) {
    const std::string component = model.stem().string();
    nlohmann::ordered_json variants = nlohmann::ordered_json::object();
    std::string assetUri;
    std::set<std::string> targetDirs;
    uint64_t componentWeightBytes = 0;  // the most any target reads from the source model
    for (size_t t = 0; t < targets.size(); ++t) {
      CompileOptions run = options;
      run.models = {model};
      run.dimArgs = argsFor(options.dimArgs, component, stems);
      run.shapeArgs = argsFor(options.shapeArgs, component, stems);
      run.setArgs = argsFor(options.setArgs, component, stems);
      run.target = targets[t];
      run.weightless = true;  // plain weights stay in the source model: the shared asset
      run.share = false;
      run.force = true;
      run.depfile.reset();
      run.reportFile.reset();
      const fs::path work = staging.path / component / fmt::format(".target{}", t);
      run.outputDir = work;
      auto compiled = compileModels(run, progress);
      if (!compiled) return compiled.takeError().addContext(fmt::format("target '{}'", targets[t]));
      const std::string targetId = compiled->target;
      if (!targetDirs.insert(targetId).second)
        return makeError(ErrorCode::InvalidArgument, "targets {} name the same target '{}' twice", options.target,
                         targetId);
      const fs::path dir = staging.path / component / targetId;
      fs::rename(work, dir, ec);
      if (ec) return makeError(ErrorCode::IoError, "renaming '{}': {}", work.string(), ec.message());
      if (assetUri.empty()) {
        CTX_ASSIGN_OR_RETURN(assetUri, addSourceAsset(staging.path, compiled->models.front()));
      }
      componentWeightBytes = std::max(componentWeightBytes, compiled->sourceWeightBytes);
      for (const ModelSummary& m : compiled->models) {
        const std::string name = m.variant.empty() ? targetId : targetId + "-" + m.variant;
        PackageVariantSummary v{component,
                                name,
                                targetId,
                                deviceOf(targetId),
                                compiled->compatibility,
                                fs::path(component) / targetId / m.output.filename(),
                                0};
        nlohmann::ordered_json ours = {{"target", targetId}, {"source_model", model.filename().string()}};
        if (!m.variant.empty()) ours["shape_variant"] = m.variant;
        variants[name] = {{"variant_directory", (fs::path(component) / targetId).generic_string()},
                          {"ep", epcontext::kEpName},
                          {"device", v.device},
                          {"compatibility_string", v.compatibility},
                          {"executor_info",
                           {{package::kExecutor,
                             {{"model_file", m.output.filename().string()},
                              {"session_options",
                               {{package::kWeightsFolderOption, assetUri},
                                {package::kContextFileOption, m.output.filename().string()}}}}}}},
                          {"additional_metadata", {{package::kMetadataKey, ours}}}};
        report.variants.push_back(std::move(v));
      }
      report.variantBytes += treeBytes(dir);
      for (auto& v : report.variants)
        if (v.component == component && v.target == targetId) v.bytes = treeBytes(dir);
      report.runs.push_back(std::move(compiled).value());
    }
    report.sourceWeightBytes += componentWeightBytes;
    components[component] = {{"component_name", component}, {"variants", variants}};
  }
  nlohmann::ordered_json manifest = {
      {"schema_version", package::kSchemaVersion},
      {"package_name", root.filename().string()},
      {"layout", "portable"},
      {"components", components},
      {"additional_metadata",
       {{package::kMetadataKey, {{"producer", epcontext::kProducer}, {"version", epcontext::kVersion}}}}}};
  const std::string text = manifest.dump(2) + "\n";
  CTX_RETURN_IF_ERROR(writeFileAtomically(staging.path / package::kManifestFile, text));
  report.manifestBytes = text.size();
  report.assetBytes = treeBytes(staging.path / package::kSharedAssetsDir);
  report.totalBytes = treeBytes(staging.path);
  // What the package holds is what ctxinspect and ctxrun will read: check it before it takes the final name.
  CTX_ASSIGN_OR_RETURN(auto reread, package::open(staging.path));
  CTX_RETURN_IF_ERROR(package::verifyAssets(reread));
  CTX_RETURN_IF_ERROR(commitPackage(staging.path, root, options.force));
  staging.keep = true;
  return report;
}

std::string packageText(const PackageReport& r) {
  std::string out =
      fmt::format("{}: {} variant{}\n", r.root.string(), r.variants.size(), r.variants.size() == 1 ? "" : "s");
  for (const auto& v : r.variants)
    out += fmt::format("  {}/{}: {} ({}, {}), {} bytes\n", v.component, v.name, v.modelFile.generic_string(), v.device,
                       v.compatibility, v.bytes);
  out += fmt::format(
      "{} bytes on disk = {} shared assets (the source models once; {} bytes of unique plain weights) + {} in "
      "variants (programs, derived weights, graphs) + {} manifest\n",
      r.totalBytes, r.assetBytes, r.sourceWeightBytes, r.variantBytes, r.manifestBytes);
  return out;
}

}  // namespace ctxkit::pipeline
