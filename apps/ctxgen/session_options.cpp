// ONNX Runtime session option names accepted by ctxgen -C, and the check that no two options contradict each other.
#include "session_options.h"

#include "epcontext/contract.h"
#include "epcontext/session_options.h"

#include <fmt/ranges.h>

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

// The value is parsed and checked by the parser the plugin EP uses too; ctxgen then takes what it means for a run.
Status applyOne(const std::string& key, const std::string& value, pipeline::CompileOptions& o,
                SettingSources& sources) {
  if (!epcontext::isContextOptionKey(key))
    return makeError(ErrorCode::InvalidArgument, "-C: unknown key '{}'; known: {}", key, knownConfigKeys());
  epcontext::ContextSessionOptions parsed;
  if (Status st = epcontext::applyContextOption(key, value, parsed); !st)
    return makeError(ErrorCode::InvalidArgument, "-C {}", st.error().message());
  const std::string given = fmt::format("-C {}={}", key, value);
  namespace opt = epcontext::option;
  if (key == opt::kContextEnable) {
    if (!parsed.contextEnable) return makeError(ErrorCode::InvalidArgument, "-C {} must be 1 for ctxgen", key);
    return Status::ok();
  }
  if (key == opt::kContextEmbedMode) {
    o.embedMode = parsed.embedMode;
    return sources.claim("embed mode", given, value);
  }
  if (key == opt::kContextNodeNamePrefix) {
    o.nodeNamePrefix = parsed.nodeNamePrefix;
    return sources.claim("node name prefix", given, value);
  }
  if (key == opt::kContextFilePath) {
    o.outputFile = parsed.contextFilePath;
    std::filesystem::path folder = std::filesystem::path(value).parent_path();
    return sources.claim("output folder", given, folder.empty() ? "." : (folder / "").lexically_normal().string());
  }
  if (key == opt::kContextExternalInitializersFileName) {
    o.externalInitializersFile = parsed.externalInitializersFile;
    return sources.claim("external initializers file", given, value);
  }
  if (key == opt::kShareEpContexts) {
    o.share = parsed.shareContexts;
    return sources.claim("context sharing", given, value);
  }
  // ONNX Runtime needs ep.stop_share_ep_contexts on the last of several sessions to free what they shared; one ctxgen
  // run compiles all its models together, so sharing ends with the run and the key changes nothing.
  if (key == opt::kStopShareEpContexts) return Status::ok();
  if (key == opt::kContextSourceModelPath)
    return makeError(ErrorCode::InvalidArgument,
                     "-C {}: not supported by ctxgen: it reads every model from the file named on the command line, so "
                     "give the source model as MODEL",
                     key);
  // ep.enable_weightless or its deprecated spelling
  o.weightless = parsed.weightless;
  return sources.claim("weightless mode", given, value);
}

}  // namespace

std::string knownConfigKeys() { return fmt::format("{}", fmt::join(epcontext::contextOptionKeys(), ", ")); }

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
