// The compile path's first half inside ORT: GetCapability on a plain model reads ORT's graph into ctxkit's IR
// (no protobuf, no re-reading of the file), analyzes it, asks ctxkit's partitioner and lowers each partition with
// ctxkit's code generator into a context of its own, which the fused node then runs with the runtime core.
#pragma once

#include "ort_ep/ort_api.h"
#include "runtime/compiled_program.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ctxkit::ort_ep {

struct EpConfig;

// One lowered partition, ready to run: its program bound to an in-memory context, and its boundary values.
struct LoweredPartitionRun {
  std::string name;  // <model stem>_ctxkit_<n>
  std::shared_ptr<const runtime::CompiledProgram> program;
  std::vector<std::string> inputs;   // in program input order
  std::vector<std::string> outputs;  // in program output order
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
