// The EPContext contract (docs/epcontext-models.md), defined once: ctxkit's names and version, the EPContext node's
// attributes and their defaults, "is this node ours", target ids and revisions, the compatibility metadata and
// ONNX Runtime's session-option keys. The compiler, runtime, inspector, tools and plugin EP all read them here.
#pragma once

#include "epcontext/version.h"
#include "ir/graph.h"
#include "support/status.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ctxkit::epcontext {

// The EP name: written to `source`, part of the compatibility metadata key, the plugin EP's factory name.
inline constexpr const char* kEpName = "CtxKitExecutionProvider";
// The short name: model producer_name, container producer, the plugin EP's vendor; also accepted as `source`.
inline constexpr const char* kProducer = "ctxkit";

// The EPContext operator (ONNX Runtime's contrib op).
inline constexpr const char* kOpType = "EPContext";
inline constexpr const char* kDomain = "com.microsoft";
inline constexpr int64_t kDomainVersion = 1;

// `source` names ctxkit: kEpName or kProducer, case-insensitively.
bool isOurSource(std::string_view source);
// An EPContext node whose `source` is ours.
bool isOurNode(const ir::Node& node);

// EPContext attribute names.
namespace attr {
inline constexpr const char* kMainContext = "main_context";
inline constexpr const char* kEpCacheContext = "ep_cache_context";
inline constexpr const char* kEmbedMode = "embed_mode";
inline constexpr const char* kEpSdkVersion = "ep_sdk_version";
inline constexpr const char* kOnnxModelFilename = "onnx_model_filename";
inline constexpr const char* kHardwareArchitecture = "hardware_architecture";
inline constexpr const char* kPartitionName = "partition_name";
inline constexpr const char* kSource = "source";
inline constexpr const char* kMaxSize = "max_size";
inline constexpr const char* kNotes = "notes";
}  // namespace attr

// Values an absent attribute takes (the EPContext schema's defaults).
inline constexpr int64_t kDefaultMainContext = 1;
inline constexpr int64_t kDefaultEmbedMode = 1;

// An EPContext node's attributes. Absent strings read as empty; an absent or non-integer `max_size` as nullopt.
struct NodeAttributes {
  int64_t mainContext = kDefaultMainContext;
  int64_t embedMode = kDefaultEmbedMode;
  // The .bin path (embed_mode=0) or the payload itself (embed_mode=1); nullopt when absent or not a string.
  // A view: of the node when read, of the caller's bytes when written.
  std::optional<std::string_view> cacheContext;
  std::string sdkVersion;
  std::string onnxModelFilename;
  std::string hardwareArchitecture;
  std::string partitionName;
  std::string source;
  std::optional<int64_t> maxSize;
  std::string notes;  // written only when non-empty
};

NodeAttributes readNodeAttributes(const ir::Node& node);
// The graph of the context binary that a node runs: its partition_name, or its name when that is absent.
std::string contextGraphName(const ir::Node& node);
// Sets the attributes (ep_cache_context only when present, notes only when non-empty), and op type, domain and
// kind of an EPContext node.
void writeNodeAttributes(const NodeAttributes& attrs, ir::Node& node);
// What a node written by ctxkit carries before its per-node values: our source and version.
NodeAttributes ourNodeAttributes();

// Targets this ctxkit knows, with the revision it compiles for and its runtime expects.
struct KnownTarget {
  const char* id;  // --target name = hardware_architecture = compatibility target id
  const char* revision;
};
inline constexpr KnownTarget kNpuSim{"npu-sim", "1"};
// cpu revision 2: float16 graphs compute in float32 between ops (float16_compute, docs/target-json.md).
inline constexpr KnownTarget kCpu{"cpu", "2"};
// The revision a target description that names none gets.
inline constexpr const char* kDefaultRevision = "1";
std::span<const KnownTarget> knownTargets();
const KnownTarget* findKnownTarget(std::string_view id);

// Model metadata `ep_compatibility_info.CtxKitExecutionProvider` (ONNX Runtime's per-EP key) and its value:
// "ctxkit;format=<major>.<minor>;version=<ctxkit version>;target=<id>;revision=<revision>".
std::string compatibilityMetadataKey();
struct CompatibilityInfo {
  std::string producer = kProducer;
  uint16_t formatMajor = 0;
  uint16_t formatMinor = 0;
  std::string version = kVersion;
  std::string targetId;
  std::string targetRevision;
};
std::string formatCompatibilityInfo(const CompatibilityInfo& info);
Expected<CompatibilityInfo> parseCompatibilityInfo(std::string_view text);

// Model metadata that binds a _ctx.onnx to the context binary it was written with (embed_mode=0): key
// "ctxkit.context_checksum:<ep_cache_context>", value the binary's header checksum as 32 lower-case hex digits
// (format::ContainerView::checksum). A loader refuses a binary with another checksum: the two files come from
// different runs. Models without the key (older ctxkit, ONNX Runtime's compile API) are not checked.
std::string contextChecksumKey(std::string_view cacheContext);

// ONNX Runtime session-option keys ctxkit honours (ctxgen -C, the plugin EP).
namespace option {
inline constexpr const char* kContextEnable = "ep.context_enable";
inline constexpr const char* kContextEmbedMode = "ep.context_embed_mode";
inline constexpr const char* kContextNodeNamePrefix = "ep.context_node_name_prefix";
inline constexpr const char* kContextFilePath = "ep.context_file_path";
inline constexpr const char* kContextExternalInitializersFileName = "ep.context_model_external_initializers_file_name";
inline constexpr const char* kShareEpContexts = "ep.share_ep_contexts";
inline constexpr const char* kStopShareEpContexts = "ep.stop_share_ep_contexts";
inline constexpr const char* kContextSourceModelPath = "ep.context_source_model_path";
inline constexpr const char* kEnableWeightless = "ep.enable_weightless";
// ONNX Runtime's older spelling of kEnableWeightless, still accepted by it.
inline constexpr const char* kEnableWeightlessDeprecated = "ep.enable_weightless_ep_context_nodes";
}  // namespace option

}  // namespace ctxkit::epcontext
