// The compile path's first half inside ORT: GetCapability on a plain model reads ORT's graph into ctxkit's IR
// (no protobuf, no re-reading of the file), analyzes it, asks ctxkit's partitioner and lowers each partition with
// ctxkit's code generator into a context of its own, which the fused node then runs with the runtime core.
#pragma once

#include "ort_ep/ort_api.h"
#include "runtime/compiled_program.h"

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ctxkit::ort_ep {

struct EpConfig;

// The context of every partition of one graph (one weight pool: each identical weight once), in memory; written as
// the .bin (or embedded) when ORT asks for an EPContext model.
struct PlainContext {
  std::shared_ptr<const std::vector<std::byte>> bytes;
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

// Partitions lowered in GetCapability, found again in Compile by any output name of their nodes.
class PlainGraphCache {
public:
  // Claims every partition of `graph` that ctxkit compiles (AddNodesToFuse) and keeps its lowered program.
  Status claimPartitions(const Api& api, const EpConfig& config, const OrtGraph& graph, OrtEpGraphSupportInfo& support);
  // The partition a fused graph holds.
  Expected<std::shared_ptr<const LoweredPartitionRun>> find(const Api& api, const OrtGraph& fusedGraph) const;

private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const LoweredPartitionRun>> byOutput_;
};

}  // namespace ctxkit::ort_ep
