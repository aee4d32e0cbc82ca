// ctxrun --generate: loads a prefill/decode pair, runs runtime::Generator on a prompt and prints or saves the result.
#pragma once

#include "runtime/session.h"

#include <string>
#include <vector>

namespace ctxkit::ctxrun {

struct GenerateArgs {
  std::string prefill;               // the positional model
  std::vector<std::string> decodes;  // --decode D[,D...]
  std::string promptIds;             // --prompt-ids FILE.npy
  std::vector<std::string> kv;       // --kv PAST=PRESENT
  std::string outputDir;             // logits_<i>.npy
  int count = 0;                     // --generate N
  int iters = 1;                     // the whole generation this many times (the timings are their medians)
  bool json = false;
};

// Returns the process exit code; errors are logged (and in the JSON report with --json).
int runGenerate(const GenerateArgs& args, const runtime::SessionOptions& options);

}  // namespace ctxkit::ctxrun
