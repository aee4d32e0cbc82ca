// ONNX Runtime session option names accepted by ctxgen -C, and the check that no two options contradict each other.
#include "session_options.h"

#include "epcontext/contract.h"

#include <fmt/ranges.h>

#include <initializer_list>
#include <sstream>
#include <vector>

namespace ctxkit::ctxgen {

Status SettingSources::claim(const std::string& setting, const std::string& option, const std::string& value) {
  auto [it, fresh] = sources_.emplace(setting, Source{option, value});
  if (fresh || it->second.value == value) return Status::ok();
  return makeError(ErrorCode::InvalidArgument, "{} contradicts {}: both set the {}", option, it->second.option,
                   setting);
}

namespace {

Status applyOne(const std::string& key, const std::string& value, pipeline::CompileOptions& o,
                SettingSources& sources) {
  const std::string given = fmt::format("-C {}={}", key, value);
  auto flag = [&](bool& out) -> Status {
    if (value != "0" && value != "1")
      return makeError(ErrorCode::InvalidArgument, "-C {}: expected 0 or 1, got '{}'", key, value);
    out = value == "1";
    return Status::ok();
  };
  namespace opt = epcontext::option;
  if (key == opt::kContextEnable) {
    if (value != "1") return makeError(ErrorCode::InvalidArgument, "-C {} must be 1 for ctxgen", key);
    return Status::ok();
  }
  if (key == opt::kContextEmbedMode) {
    bool embed = false;
    CTX_RETURN_IF_ERROR(flag(embed));
    o.embedMode = embed ? 1 : 0;
    return sources.claim("embed mode", given, value);
  }
  if (key == opt::kContextNodeNamePrefix) {
    o.nodeNamePrefix = value;
    return sources.claim("node name prefix", given, value);
  }
  if (key == opt::kContextFilePath) {
    o.outputFile = value;
    std::filesystem::path folder = std::filesystem::path(value).parent_path();
    return sources.claim("output folder", given, folder.empty() ? "." : (folder / "").lexically_normal().string());
  }
  if (key == opt::kContextExternalInitializersFileName) {
    o.externalInitializersFile = value;
    return sources.claim("external initializers file", given, value);
  }
  if (key == opt::kShareEpContexts) {
    CTX_RETURN_IF_ERROR(flag(o.share));
    return sources.claim("context sharing", given, value);
  }
  if (key == opt::kStopShareEpContexts) {
    // ONNX Runtime needs it on the last of several sessions to free what they shared; one ctxgen run compiles all
    // its models together, so sharing ends with the run and the key changes nothing.
    bool stop = false;
    return flag(stop);
  }
  if (key == opt::kContextSourceModelPath)
    return makeError(ErrorCode::InvalidArgument,
                     "-C {}: not supported by ctxgen: it reads every model from the file named on the command line, so "
                     "give the source model as MODEL",
                     key);
  if (key == opt::kEnableWeightless || key == opt::kEnableWeightlessDeprecated) {
    CTX_RETURN_IF_ERROR(flag(o.weightless));
    return sources.claim("weightless mode", given, value);
  }
  return makeError(ErrorCode::InvalidArgument, "-C: unknown key '{}'; known: {}", key, knownConfigKeys());
}

}  // namespace

std::string knownConfigKeys() {
  namespace opt = epcontext::option;
  return fmt::format(
      "{}", fmt::join(
                std::initializer_list<const char*>{
                    opt::kContextEnable, opt::kContextEmbedMode, opt::kContextNodeNamePrefix, opt::kContextFilePath,
                    opt::kContextExternalInitializersFileName, opt::kShareEpContexts, opt::kStopShareEpContexts,
                    opt::kContextSourceModelPath, opt::kEnableWeightless, opt::kEnableWeightlessDeprecated},
                ", "));
}

Status applyConfig(const std::string& entry, pipeline::CompileOptions& o, SettingSources& sources) {
  const auto eq = entry.find('='), bar = entry.find('|');
  if (eq != std::string::npos && (bar == std::string::npos || eq < bar))
    return applyOne(entry.substr(0, eq), entry.substr(eq + 1), o, sources);
  if (bar == std::string::npos)
    return makeError(ErrorCode::InvalidArgument, "-C '{}': expected KEY=VALUE or \"KEY|VALUE KEY|VALUE\"", entry);
  // ONNX Runtime's form: space-separated KEY|VALUE pairs.
  std::istringstream words(entry);
  std::string pair;
  while (words >> pair) {
    const auto sep = pair.find('|');
    if (sep == std::string::npos || sep == 0)
      return makeError(ErrorCode::InvalidArgument, "-C '{}': '{}' is not KEY|VALUE", entry, pair);
    CTX_RETURN_IF_ERROR(applyOne(pair.substr(0, sep), pair.substr(sep + 1), o, sources));
  }
  return Status::ok();
}

}  // namespace ctxkit::ctxgen
