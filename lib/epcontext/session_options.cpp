// ONNX Runtime's EPContext session options, parsed and checked once (session_options.h).
#include "epcontext/session_options.h"

#include "epcontext/contract.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace ctxkit::epcontext {

const std::vector<const char*>& contextOptionKeys() {
  static const std::vector<const char*> keys = {option::kContextEnable,
                                                option::kContextEmbedMode,
                                                option::kContextNodeNamePrefix,
                                                option::kContextFilePath,
                                                option::kContextExternalInitializersFileName,
                                                option::kShareEpContexts,
                                                option::kStopShareEpContexts,
                                                option::kContextSourceModelPath,
                                                option::kEnableWeightless,
                                                option::kEnableWeightlessDeprecated};
  return keys;
}

bool isContextOptionKey(const std::string& key) {
  const auto& keys = contextOptionKeys();
  return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; });
}

Status applyContextOption(const std::string& key, const std::string& value, ContextSessionOptions& o) {
  auto flag = [&](bool& out) -> Status {
    if (value != "0" && value != "1")
      return makeError(ErrorCode::InvalidArgument, "{}: expected 0 or 1, got '{}'", key, value);
    out = value == "1";
    return Status::ok();
  };
  if (key == option::kContextEnable) return flag(o.contextEnable);
  if (key == option::kContextEmbedMode) {
    bool embed = false;
    CTX_RETURN_IF_ERROR(flag(embed));
    o.embedMode = embed ? 1 : 0;
    return Status::ok();
  }
  if (key == option::kContextNodeNamePrefix) {
    o.nodeNamePrefix = value;
    return Status::ok();
  }
  if (key == option::kContextFilePath) {
    o.contextFilePath = value;
    return Status::ok();
  }
  if (key == option::kContextExternalInitializersFileName) {
    o.externalInitializersFile = value;
    return Status::ok();
  }
  if (key == option::kShareEpContexts) return flag(o.shareContexts);
  if (key == option::kStopShareEpContexts) return flag(o.stopShareContexts);
  if (key == option::kContextSourceModelPath) {
    o.sourceModelPath = value;
    return Status::ok();
  }
  if (key == option::kEnableWeightless || key == option::kEnableWeightlessDeprecated) {
    bool on = false;
    CTX_RETURN_IF_ERROR(flag(on));
    o.weightless = o.weightless || on;  // either spelling turns it on
    return Status::ok();
  }
  return makeError(ErrorCode::InvalidArgument, "unknown key '{}'", key);
}

Status checkContextOptions(const ContextSessionOptions& o) {
  if (o.shareContexts && o.embedMode == 1)
    return makeError(ErrorCode::InvalidArgument, "{}=1 with {}=1: sharing a context needs a file",
                     option::kShareEpContexts, option::kContextEmbedMode);
  return Status::ok();
}

}  // namespace ctxkit::epcontext
