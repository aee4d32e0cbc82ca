// ctxgen's settings that two spellings can give (its own options and ONNX Runtime's session option names through
// -C): each records which option set it, so two options contradicting each other are a usage error naming both.
#pragma once

#include "pipeline/pipeline.h"
#include "support/status.h"

#include <map>
#include <string>

namespace ctxkit::ctxgen {

class SettingSources {
public:
  // Records that `option` (as the user wrote it) sets `setting` to `value`; an earlier option that set it to
  // another value is a usage error naming both.
  Status claim(const std::string& setting, const std::string& option, const std::string& value);

private:
  struct Source {
    std::string option, value;
  };
  std::map<std::string, Source> sources_;
};

// The ONNX Runtime session option keys -C knows, comma-separated, for messages and --help.
std::string knownConfigKeys();

// One -C argument: KEY=VALUE, or ONNX Runtime's own form "KEY|VALUE KEY|VALUE".
Status applyConfig(const std::string& entry, pipeline::CompileOptions& options, SettingSources& sources);

}  // namespace ctxkit::ctxgen
