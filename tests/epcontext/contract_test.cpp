// The EPContext contract: names and keys as ONNX Runtime and docs/epcontext-models.md spell them (literal strings here
// are the independent expectation), source matching, attribute round trips, the version from CMake, compatibility info.
#include "epcontext/contract.h"

#include <catch2/catch.hpp>

#include <set>

using namespace ctxkit;
using namespace ctxkit::epcontext;

TEST_CASE("source names: the EP name and 'ctxkit', case-insensitively, nothing else", "[epcontext]") {
  for (const char* ours : {"CtxKitExecutionProvider", "ctxkitexecutionprovider", "CTXKITEXECUTIONPROVIDER", "ctxkit",
                           "CtxKit", "CTXKIT"})
    CHECK(isOurSource(ours));
  for (const char* other : {"", "QNNExecutionProvider", "OpenVINOExecutionProvider", "ctxkit ", " ctxkit", "ctxki",
                            "ctxkitx", "CtxKitExecutionProvider2", "CtxKit_ExecutionProvider"})
    CHECK_FALSE(isOurSource(other));
  CHECK_FALSE(isOurSource(std::string_view("ctxkit\0", 7)));
  CHECK(std::string(kEpName) == "CtxKitExecutionProvider");
  CHECK(std::string(kProducer) == "ctxkit");
}

TEST_CASE("a node is ours when it is an EPContext node with our source", "[epcontext]") {
  ir::Node n;
  n.kind = ir::OpKind::EPContext;
  n.attrs.set(ir::Attribute::makeString("source", "ctxkit"));
  CHECK(isOurNode(n));
  n.attrs.set(ir::Attribute::makeString("source", "QNNExecutionProvider"));
  CHECK_FALSE(isOurNode(n));
  n.attrs.set(ir::Attribute::makeString("source", "CtxKitExecutionProvider"));
  n.kind = ir::OpKind::Unknown;
  CHECK_FALSE(isOurNode(n));
  ir::Node unnamed;
  unnamed.kind = ir::OpKind::EPContext;
  CHECK_FALSE(isOurNode(unnamed));
}

TEST_CASE("attribute names, defaults and option keys are ONNX Runtime's", "[epcontext]") {
  CHECK(std::string(attr::kMainContext) == "main_context");
  CHECK(std::string(attr::kEpCacheContext) == "ep_cache_context");
  CHECK(std::string(attr::kEmbedMode) == "embed_mode");
  CHECK(std::string(attr::kEpSdkVersion) == "ep_sdk_version");
  CHECK(std::string(attr::kOnnxModelFilename) == "onnx_model_filename");
  CHECK(std::string(attr::kHardwareArchitecture) == "hardware_architecture");
  CHECK(std::string(attr::kPartitionName) == "partition_name");
  CHECK(std::string(attr::kSource) == "source");
  CHECK(std::string(attr::kMaxSize) == "max_size");
  CHECK(std::string(attr::kNotes) == "notes");
  CHECK(kDefaultMainContext == 1);
  CHECK(kDefaultEmbedMode == 1);
  CHECK(std::string(kOpType) == "EPContext");
  CHECK(std::string(kDomain) == "com.microsoft");
  CHECK(kDomainVersion == 1);
  CHECK(std::string(option::kContextEnable) == "ep.context_enable");
  CHECK(std::string(option::kContextEmbedMode) == "ep.context_embed_mode");
  CHECK(std::string(option::kContextNodeNamePrefix) == "ep.context_node_name_prefix");
  CHECK(std::string(option::kContextFilePath) == "ep.context_file_path");
  CHECK(std::string(option::kContextExternalInitializersFileName) == "ep.context_model_external_initializers_file_name");
  CHECK(std::string(option::kShareEpContexts) == "ep.share_ep_contexts");
  CHECK(std::string(option::kStopShareEpContexts) == "ep.stop_share_ep_contexts");
  CHECK(std::string(option::kContextSourceModelPath) == "ep.context_source_model_path");
  CHECK(std::string(option::kEnableWeightless) == "ep.enable_weightless");
  CHECK(compatibilityMetadataKey() == "ep_compatibility_info.CtxKitExecutionProvider");
}

TEST_CASE("an absent attribute reads as its default", "[epcontext]") {
  ir::Node n;
  n.name = "node0";
  n.kind = ir::OpKind::EPContext;
  NodeAttributes a = readNodeAttributes(n);
  CHECK(a.mainContext == 1);
  CHECK(a.embedMode == 1);
  CHECK_FALSE(a.cacheContext.has_value());
  CHECK_FALSE(a.maxSize.has_value());
  CHECK(a.partitionName.empty());
  CHECK(contextGraphName(n) == "node0");
  // Wrong types read as absent, never as garbage.
  n.attrs.set(ir::Attribute::makeInt("ep_cache_context", 5));
  n.attrs.set(ir::Attribute::makeString("max_size", "big"));
  n.attrs.set(ir::Attribute::makeString("partition_name", "p"));
  a = readNodeAttributes(n);
  CHECK_FALSE(a.cacheContext.has_value());
  CHECK_FALSE(a.maxSize.has_value());
  CHECK(contextGraphName(n) == "p");
}

TEST_CASE("written attributes read back, under ONNX Runtime's names, in a fixed order", "[epcontext]") {
  const std::string payload("bin\0ary", 7);
  NodeAttributes w = ourNodeAttributes();
  w.mainContext = 0;
  w.embedMode = 1;
  w.cacheContext = payload;
  w.onnxModelFilename = "m.onnx";
  w.hardwareArchitecture = "npu-sim";
  w.partitionName = "m_ctxkit_0";
  w.maxSize = 4096;
  w.notes = "n";
  ir::Node node;
  writeNodeAttributes(w, node);
  CHECK(node.opType == "EPContext");
  CHECK(node.domain == "com.microsoft");
  CHECK(node.kind == ir::OpKind::EPContext);
  std::vector<std::string> names;
  for (const auto& a : node.attrs.all()) names.push_back(a.name);
  CHECK(names == std::vector<std::string>{"main_context", "ep_cache_context", "embed_mode", "ep_sdk_version",
                                          "onnx_model_filename", "hardware_architecture", "partition_name", "source",
                                          "max_size", "notes"});
  CHECK(node.attrs.getString("source") == "CtxKitExecutionProvider");
  CHECK(node.attrs.getString("ep_sdk_version") == CTXKIT_CMAKE_PROJECT_VERSION);
  CHECK(node.attrs.getString("ep_cache_context") == payload);
  CHECK(node.attrs.getInt("max_size", 0) == 4096);
  NodeAttributes r = readNodeAttributes(node);
  CHECK(r.mainContext == 0);
  CHECK(r.embedMode == 1);
  REQUIRE(r.cacheContext);
  CHECK(*r.cacheContext == payload);
  CHECK(r.sdkVersion == w.sdkVersion);
  CHECK(r.onnxModelFilename == "m.onnx");
  CHECK(r.hardwareArchitecture == "npu-sim");
  CHECK(r.partitionName == "m_ctxkit_0");
  CHECK(r.source == w.source);
  CHECK(r.maxSize == std::optional<int64_t>(4096));
  CHECK(r.notes == "n");
  CHECK(isOurNode(node));

  // A non-main node carries no ep_cache_context, and empty notes are left out.
  NodeAttributes bare = ourNodeAttributes();
  bare.mainContext = 0;
  ir::Node other;
  writeNodeAttributes(bare, other);
  CHECK_FALSE(other.attrs.has("ep_cache_context"));
  CHECK_FALSE(other.attrs.has("notes"));
  CHECK_FALSE(other.attrs.has("max_size"));
}

TEST_CASE("the version is CMake's project version, as semver", "[epcontext]") {
  CHECK(std::string(kVersion) == CTXKIT_CMAKE_PROJECT_VERSION);
  CHECK(std::string(kVersion) == fmt::format("{}.{}.{}", kVersionMajor, kVersionMinor, kVersionPatch));
  CHECK(ourNodeAttributes().sdkVersion == CTXKIT_CMAKE_PROJECT_VERSION);
}

TEST_CASE("known targets: the built-in ids with their revisions", "[epcontext]") {
  std::set<std::string> ids;
  for (const auto& t : knownTargets()) {
    ids.insert(t.id);
    CHECK(findKnownTarget(t.id) == &t);
    CHECK_FALSE(std::string(t.revision).empty());
  }
  CHECK(ids == std::set<std::string>{"npu-sim", "cpu"});
  CHECK(findKnownTarget("npu-sim-rev2") == nullptr);
  CHECK(findKnownTarget("") == nullptr);
  CHECK(std::string(kDefaultRevision) == "1");
}

TEST_CASE("compatibility info is written and read back", "[epcontext]") {
  CompatibilityInfo info;
  info.formatMajor = 1;
  info.formatMinor = 2;
  info.targetId = "npu-sim";
  info.targetRevision = "3";
  std::string text = formatCompatibilityInfo(info);
  CHECK(text == fmt::format("ctxkit;format=1.2;version={};target=npu-sim;revision=3", CTXKIT_CMAKE_PROJECT_VERSION));
  auto back = parseCompatibilityInfo(text);
  REQUIRE(back);
  CHECK(back->producer == "ctxkit");
  CHECK(back->formatMajor == 1);
  CHECK(back->formatMinor == 2);
  CHECK(back->version == CTXKIT_CMAKE_PROJECT_VERSION);
  CHECK(back->targetId == "npu-sim");
  CHECK(back->targetRevision == "3");

  for (const char* bad : {"", "ctxkit", "ctxkit;format=1;version=0.1.0;target=cpu;revision=1",
                          "ctxkit;format=1.x;version=0.1.0;target=cpu;revision=1",
                          "ctxkit;format=1.99999;version=0.1.0;target=cpu;revision=1",
                          "ctxkit;version=0.1.0;format=1.0;target=cpu;revision=1",
                          "ctxkit;format=1.0;version=0.1.0;target=cpu;revision=1;extra=2"}) {
    INFO(bad);
    auto r = parseCompatibilityInfo(bad);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message(), Catch::Contains("compatibility info"));
  }
}
