// The runtime loader: claims our EPContext nodes of a model, maps their context binaries (shared across sessions
// in the process) and executes compiled programs and fallback nodes. `Session::load` (the runtime core, no
// protobuf) starts from a model already in memory, as an ONNX Runtime EP gets it; `loadFile`/`loadBuffer` parse
// ONNX first and live in the `ctxkit_runtime` library on top of the core.
#pragma once

#include "ir/graph.h"
#include "kernels/kernels.h"
#include "runtime/compatibility.h"
#include "support/status.h"

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ctxkit::runtime {

struct SessionOptions {
  int threads = 1;
  bool failOnSuboptimal = false;  // PREFER_RECOMPILATION becomes an error (session.fail_on_suboptimal_compiled_model)
  bool verifyWeights = false;     // recompute every weight hash at load
  bool shareContexts = true;      // map each .bin once per process, parse each model file once (ep.share_ep_contexts)
  // Make each program's arena and mapped weights resident at load, so that the first run costs what later ones do
  // (docs/runtime.md#time-to-first-result); off, the first run faults them in (ctxrun --no-prefault).
  bool prefault = true;
  // Weightless contexts (docs/weight-sharing.md#weightless) take weights from the source model: these bytes (ONNX
  // Runtime's SessionOptionsSetWeightlessSourceModelBuffer; the caller keeps them alive) or this file
  // (ep.context_source_model_path, ctxrun --source-model), else the node's onnx_model_filename beside the model.
  std::span<const std::byte> sourceModelBuffer;
  std::filesystem::path sourceModelPath;
};

struct SessionStats {
  size_t compiledNodes = 0;
  size_t fallbackNodes = 0;
  size_t contexts = 0;       // context binaries this session uses
  uint64_t mappedBytes = 0;  // bytes of those binaries
  // Compiled programs taken as they are from another live session of this process (shareContexts): not decoded or
  // prepared again, and their frames (arenas) shared between the sessions' runs.
  size_t sharedPrograms = 0;
  // The parsed model and its prepared fallback ops were taken from another live session of this process that
  // loaded the same file (loadFile with shareContexts; the file unchanged since): not parsed or prepared again.
  bool sharedModel = false;
  // Runs take the frame path (every value of the graph and its subgraphs in a slot planned at load); false: the
  // Scope interpreter (a subgraph the plan cannot take).
  bool planned = false;
};

// A parsed model with the fallback ops prepared for it, which sessions loaded from the same file share.
struct SharedModel;

class Session {
public:
  // Runtime core: a model already parsed (by onnx_io, or through ONNX Runtime's graph API). Relative
  // ep_cache_context paths resolve against `modelDir`; `displayName` starts every error message.
  static Expected<std::unique_ptr<Session>> load(ir::Model model, const std::filesystem::path& modelDir,
                                                 const SessionOptions& options = {}, std::string displayName = "model");

  // In ctxkit_runtime (they parse ONNX with onnx_io):
  static Expected<std::unique_ptr<Session>> loadFile(const std::filesystem::path& path,
                                                     const SessionOptions& options = {});
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
  // Fallback nodes prepared so far (each once per input shapes, on first use); for tests and reports.
  size_t preparedFallbackOps() const;
  // Constant weights the fallback path packed into GEMM panels so far: once per node and weight, shared by the ops
  // of every input signature the node meets (for tests).
  size_t fallbackPanelPacks() const;

  // Feeds in input order; returns outputs in output order. A loaded session is immutable: `run` may be called
  // from several threads at once, each call with its own frames (arenas, bound values) from per-program pools.
  Expected<std::vector<ir::Tensor>> run(const std::vector<ir::Tensor>& feeds) const;
  // As run(), writing output k into *outputs[k]: in place when that tensor is writable and already has the output's
  // type and shape (the previous run's outputs, say), else replaced by a new tensor. Runs that pass their outputs
  // back, with inputs of the same shapes, allocate nothing (docs/runtime.md#allocations), but for graphs
  // with Loop or Scan (run through the Scope interpreter).
  Status runInto(const std::vector<ir::Tensor>& feeds, std::span<ir::Tensor* const> outputs) const;
  // For an execution provider that runs each compiled node on its own (ONNX Runtime makes every EPContext node it
  // gives ctxkit a fused node of its own): the compiled program of node `nodeIndex` of the model, run with `inputs`
  // in the node's input order. Thread-safe like run().
  Expected<std::vector<ir::Tensor>> runCompiledNode(size_t nodeIndex, std::span<const ir::Tensor* const> inputs) const;
  // As runCompiledNode, writing into the caller's output tensors (see CompiledProgram::runInto: an output of bounded
  // shape takes no buffer and is made at the run's extent, into `bounded`).
  Status runCompiledNodeInto(size_t nodeIndex, std::span<const ir::Tensor* const> inputs,
                             std::span<ir::Tensor* const> outputs, std::vector<ir::Tensor>* bounded = nullptr) const;
  // The element types and shapes of compiled node `nodeIndex`'s outputs, in the node's output order; `bounded` (when
  // given) tells which have a bounded shape (the shape given is then the bound).
  Expected<std::vector<kernels::OutputDesc>> compiledNodeOutputs(size_t nodeIndex,
                                                                 std::vector<bool>* bounded = nullptr) const;

  struct Impl;

private:
  explicit Session(std::unique_ptr<Impl> impl);
  // The core of load(): `shared` may already be used by other sessions (loadFile with shareContexts).
  static Expected<std::unique_ptr<Session>> loadShared(std::shared_ptr<SharedModel> shared, bool reused,
                                                       const std::filesystem::path& modelDir,
                                                       const SessionOptions& options, std::string displayName);
  std::unique_ptr<Impl> impl_;
};

// Context binaries currently mapped by the process-wide shared store (for tests of sharing).
size_t sharedContextCount();
// Context binary files currently mapped by any session, shared or not (with sharing off, each session maps its own).
size_t mappedContextCount();

}  // namespace ctxkit::runtime
