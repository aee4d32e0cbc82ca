// The compile path's first half inside ORT: GetCapability on a plain model reads ORT's graph into ctxkit's IR
// (no protobuf, no re-reading of the file), analyzes it, asks ctxkit's partitioner and lowers each partition with
// ctxkit's code generator into a context of its own, which the fused node then runs with the runtime core.
#pragma once

#include "ort_ep/ort_api.h"
#include "partitioner/target.h"
#include "runtime/compiled_program.h"
#include "support/file_identity.h"
#include "weightshare/source_weights.h"
#include "weightshare/weight_pool.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace ctxkit::ort_ep {

struct EpConfig;

// The context of every partition of one graph (one weight pool: each identical weight once), in memory; written as
// the .bin (or embedded) when ORT asks for an EPContext model.
struct PlainContext {
  // What the partitions run from: the weights (the programs stay in memory), or the context written when that is it.
  std::shared_ptr<const std::vector<std::byte>> bytes;
  // ep.context_enable without ep.share_ep_contexts: the context written, the programs serialized in it (with
  // ep.enable_weightless, a weightless one: weights found in the source model are recorded there); else null.
  std::shared_ptr<const std::vector<std::byte>> fileBytes;
  std::filesystem::path modelPath;  // the source model, when ORT knows it
  std::string targetId;
  std::string targetRevision;
};

// One lowered partition, ready to run: its program bound to the in-memory context, and its boundary values.
struct LoweredPartitionRun {
  std::string name;  // [prefix]<model stem>_ctxkit_<n>: the graph's name in the context
  std::shared_ptr<const runtime::CompiledProgram> program;
  std::vector<std::string> inputs;   // in program input order (= the EPContext node's inputs)
  std::vector<std::string> outputs;  // in program output order (= the EPContext node's outputs)
  std::shared_ptr<const PlainContext> context;
};

// ep.share_ep_contexts=1 while compiling: every session of the process lowers into one weight pool (weights copied,
// so they outlive the sessions) and adds its graphs; the session with ep.stop_share_ep_contexts=1 writes the one
// context binary, named after the first model (ORT's flow for LLM prefill/decode pairs). Each group has a number;
// a group ends when its binary is written, or when one of its sessions fails or its last session ends without
// writing it (endGroup), so that a failed group never leaks into the next.
class SharedCompile {
public:
  static SharedCompile& instance();
  std::mutex& mutex() { return mutex_; }
  // The number of the group under way (callers hold mutex()).
  uint64_t group() const { return group_; }
  // Ends group `group` if it is still under way (takes mutex()); false when it had ended already.
  bool endGroup(uint64_t group);
  weightshare::WeightPool& pool() { return pool_; }
  // The .bin name the group's models reference: fixed by the first model that adds its graphs.
  std::string binName(const std::string& outputStem);
  // Adds a graph; the same name from the same source model file replaces the earlier graph (a retried session).
  Status addGraph(const std::string& name, const std::filesystem::path& sourceModel, const program::Program& compiled);
  // Writes the shared context to `path` (weightless: weights found in the group's source models stay there) and
  // starts a new group.
  Status writeAndReset(const std::filesystem::path& path, const partitioner::Target& target, bool weightless,
                       weightshare::WeightlessScope scope = weightshare::WeightlessScope::All);

private:
  void reset();  // callers hold mutex_

  std::mutex mutex_;
  uint64_t group_ = 1;
  weightshare::WeightPool pool_;
  std::string binName_;
  struct Graph {
    std::string name;
    std::filesystem::path sourceModel;
    std::vector<std::byte> program;
    bool loadTimeTensors = false;
  };
  std::vector<Graph> graphs_;
};

// Partitions lowered in GetCapability, found again in Compile. Each EP instance (one per session) has its own, and
// keys its partitions by the model they came from — the source file's identity (support/file_identity.h), or for a
// model from memory this instance — and their partition name: a fused graph finds its partition among its own
// model's, through its nodes' output names, so models with equal value or partition names never share one.
class PlainGraphCache {
public:
  // Claims every partition of `graph` that ctxkit compiles (AddNodesToFuse) and keeps its lowered program.
  // When it claims fewer nodes than the graph has, `note` gets why: the first blocker of each group of nodes left
  // to ORT (an unsupported op with its opset and types, a dynamic dimension and the free-dimension override that
  // fixes it, a graph ctxkit cannot analyze).
  Status claimPartitions(const Api& api, const EpConfig& config, const OrtGraph& graph, OrtEpGraphSupportInfo& support,
                         const std::function<void(const std::string&)>& note);
  // The partition a fused graph holds.
  Expected<std::shared_ptr<const LoweredPartitionRun>> find(const Api& api, const OrtGraph& fusedGraph) const;

private:
  // The model a graph came from: its file as it is (none: a model from memory, or a file that cannot be read).
  using ModelKey = std::optional<FileIdentity>;
  struct ModelPartitions {
    ModelKey model;
    // A value a claimed partition's nodes make -> that partition (named partitionName(...), unique in the model).
    std::unordered_map<std::string, std::shared_ptr<const LoweredPartitionRun>> byOutput;
  };
  static Expected<ModelKey> modelKey(const Api& api, const OrtGraph& graph);

  mutable std::mutex mutex_;
  std::vector<ModelPartitions> models_;
};

}  // namespace ctxkit::ort_ep
