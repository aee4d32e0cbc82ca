// The execution provider ORT creates per session. On a _ctx.onnx, GetCapability claims ctxkit's EPContext nodes and
// Compile loads them into a runtime-core Session (context binaries mapped and validated, programs bound); on a plain
// model, GetCapability partitions and lowers the graph (plain_graph.h). Either way ORT gets one compute function per
// fused node.
#pragma once

#include "epcontext/session_options.h"
#include "ort_ep/ort_api.h"
#include "ort_ep/plain_graph.h"

#include <filesystem>
#include <optional>
#include <span>
#include <string>

namespace ctxkit::ort_ep {

// What a session asks of ctxkit: EP options (`target`, `threads`, `verify`) and the ORT session options ctxkit honours.
struct EpConfig {
  std::string target = "npu-sim";  // EP option `target`: npu-sim, cpu or a target JSON path
  int threads = 1;                 // EP option `threads`
  bool verify = false;             // EP option `verify`: recompute every weight hash of a context binary at load
  bool failOnSuboptimal = false;   // session.fail_on_suboptimal_compiled_model
  // A loaded context binary (mapping, parsed tables, prepared programs) is shared with the process's other live
  // sessions on the same unchanged file, as ctxrun shares it; ep.share_ep_contexts=0 given explicitly opts out
  // (docs/ort-ep.md#session-creation).
  bool shareLoadedContexts = true;
  // EP option `weightless_scope` (all, external_only): which source initializers a weightless compile leaves in the
  // source model; GetWeightlessSupport answers ORT with it (docs/weight-sharing.md#scope-of-a-weightless-context).
  weightshare::WeightlessScope weightlessScope = weightshare::WeightlessScope::All;
  // ORT's EPContext options (ep.context_enable, ep.context_file_path, ep.share_ep_contexts, ...), read by the parser
  // ctxgen's -C uses. Weightless contexts (docs/weight-sharing.md#weightless): `weightless` while compiling; where the
  // weights are when loading: ORT's source model buffer below, else `sourceModelPath`, else the node's
  // onnx_model_filename.
  epcontext::ContextSessionOptions context;
  std::span<const std::byte> sourceModelBuffer;
  // session.model_external_initializers_file_folder_path: the folder of the model's external weights. For a weightless
  // context without ep.context_source_model_path, the folder its onnx_model_filename is in (a model package's shared
  // asset, which ONNX Runtime resolves to a folder: docs/package.md#weights).
  std::string weightsFolder;
};

// The session config key ORT stores ctxkit's EP option `key` under: "ep.<lower-case EP name>.<key>".
std::string epOptionKey(const char* key);

// Reads the EP options (ORT stores them as session config entries "ep.<lower-case EP name>.<key>") and the
// session options above; bad values and unknown EP options are errors that name the option.
Expected<EpConfig> readEpConfig(const Api& api, const OrtSessionOptions& options);

// A session that would have ended an ep.share_ep_contexts group (ep.context_enable, ep.share_ep_contexts and
// ep.stop_share_ep_contexts set) but whose EP could not be created: the group ends anyway.
void endSharedGroupOfFailedSession(const Api& api, const OrtSessionOptions& options);

class CtxKitEp : public OrtEp {
public:
  CtxKitEp(const Api& api, EpConfig config, const OrtLogger* logger);
  ~CtxKitEp();
  CtxKitEp(const CtxKitEp&) = delete;
  CtxKitEp& operator=(const CtxKitEp&) = delete;
  const Api& api() const { return api_; }
  const EpConfig& config() const { return config_; }
  PlainGraphCache& plainGraphs() { return plain_; }
  // The pool that runs a plain model's partitions, made by the first Compile that needs it: a session on a _ctx.onnx
  // runs on its runtime session's pool and never starts these threads.
  kernels::ThreadPool& pool();
  // Writes `message` to the session's log (ORT's logger) at `level`; nothing when ORT gave no logger.
  void log(OrtLoggingLevel level, const std::string& message) const;
  // The compatibility string ORT writes to a compiled model's metadata (GetCompiledModelCompatibilityInfo).
  const std::string& compatibilityInfo();
  // This session compiles into an ep.share_ep_contexts group (ep.context_enable and ep.share_ep_contexts).
  bool sharesCompile() const { return config_.context.contextEnable && config_.context.shareContexts; }
  // Ends the group this session joined, said in the log: its state never outlives a failure of one of its sessions,
  // nor its last session (ep.stop_share_ep_contexts), whatever happened there.
  void endSharedGroup(const std::string& why);

private:
  Api api_;
  EpConfig config_;
  const OrtLogger* logger_;  // the session's, owned by ORT
  PlainGraphCache plain_;
  std::unique_ptr<kernels::ThreadPool> pool_;  // for programs of plain-model partitions (made by pool())
  std::optional<std::string> compatibilityInfo_;
  uint64_t sharedGroup_ = 0;  // the ep.share_ep_contexts group joined (SharedCompile::group())
};

}  // namespace ctxkit::ort_ep
