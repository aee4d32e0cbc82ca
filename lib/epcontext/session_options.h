// ONNX Runtime's EPContext session options (ep.context_*, ep.share_ep_contexts, ep.enable_weightless, ...): one
// parser and validator for ctxgen's -C and the plugin EP, so a key means the same and is checked the same in both.
#pragma once

#include "support/status.h"

#include <string>
#include <vector>

namespace ctxkit::epcontext {

struct ContextSessionOptions {
  bool contextEnable = false;            // ep.context_enable
  int embedMode = 0;                     // ep.context_embed_mode
  std::string nodeNamePrefix;            // ep.context_node_name_prefix
  std::string contextFilePath;           // ep.context_file_path
  std::string externalInitializersFile;  // ep.context_model_external_initializers_file_name
  bool shareContexts = false;            // ep.share_ep_contexts
  bool stopShareContexts = false;        // ep.stop_share_ep_contexts
  bool weightless = false;               // ep.enable_weightless or its deprecated spelling
  std::string sourceModelPath;           // ep.context_source_model_path
};

// Every key the parser knows, in a fixed order.
const std::vector<const char*>& contextOptionKeys();
bool isContextOptionKey(const std::string& key);

// Sets what `key` names from `value`. A flag takes 0 or 1 only; the error names the key and the value
// ("ep.context_embed_mode: expected 0 or 1, got '2'"); an unknown key is an error too.
Status applyContextOption(const std::string& key, const std::string& value, ContextSessionOptions& options);

// The rules between keys that hold for a compile: a shared context needs a file.
Status checkContextOptions(const ContextSessionOptions& options);

}  // namespace ctxkit::epcontext
