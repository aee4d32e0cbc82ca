// The runtime loader: opens a `_ctx.onnx` (or plain .onnx), claims our EPContext nodes, maps their context
// binaries (shared across sessions in the process) and executes compiled programs and fallback nodes.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ctxkit::runtime {

// As ONNX Runtime's OrtCompiledModelCompatibility.
enum class Compatibility { NotApplicable = 0, SupportedOptimal = 1, PreferRecompilation = 2, Unsupported = 3 };

struct SessionOptions {
  int threads = 1;
  bool failOnSuboptimal = false;  // PREFER_RECOMPILATION becomes an error (session.fail_on_suboptimal_compiled_model)
  bool verifyWeights = false;     // recompute every weight hash at load
  bool shareContexts = true;      // map each .bin once per process (ep.share_ep_contexts)
};

struct SessionStats {
  size_t compiledNodes = 0;
  size_t fallbackNodes = 0;
  size_t contexts = 0;        // context binaries this session uses
  uint64_t mappedBytes = 0;   // bytes of those binaries
};

class Session {
public:
  static Expected<std::unique_ptr<Session>> loadFile(const std::filesystem::path& path, const SessionOptions& options = {});
  // A model in memory; `contextFilePath` (ORT's ep.context_file_path) fixes the folder that relative
  // ep_cache_context paths resolve against.
  static Expected<std::unique_ptr<Session>> loadBuffer(std::span<const std::byte> bytes,
                                                       const std::filesystem::path& contextFilePath,
                                                       const SessionOptions& options = {});
  ~Session();

  // Graph inputs that are not initializers, in graph order, and graph outputs.
  const std::vector<ir::ValueInfo>& inputs() const;
  const std::vector<ir::ValueInfo>& outputs() const;
  const std::vector<std::string>& warnings() const;
  const SessionStats& stats() const;
  Compatibility compatibility() const;

  // Feeds in input order; returns outputs in output order. A loaded session is immutable: `run` may be called
  // from several threads at once, each call with its own frames (arenas, bound values) from per-program pools.
  Expected<std::vector<ir::Tensor>> run(const std::vector<ir::Tensor>& feeds) const;

  struct Impl;

private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Number of context binaries currently mapped by the process-wide store (for tests of sharing).
size_t sharedContextCount();

}  // namespace ctxkit::runtime
