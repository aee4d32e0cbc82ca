// plan-memory: the program's arena tensors get offsets in one arena, buffers reused once their values are dead.
#include "codegen/memory_plan.h"
#include "codegen/passes/passes.h"

#include <algorithm>

namespace ctxkit::codegen {

Expected<ir::PassChange> PlanMemory::run(LoweringState& state) const {
  std::vector<BufferRequest> requests;
  std::vector<size_t> owners;
  auto& tensors = state.result.program.tensors;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].kind != program::TensorKind::Arena) continue;
    requests.push_back(
        BufferRequest{tensors[t].size, state.firstUse[t], std::max(state.firstUse[t], state.lastUse[t])});
    owners.push_back(t);
  }
  MemoryPlan plan = planMemory(requests, state.options.arenaAlignment);
  for (size_t r = 0; r < owners.size(); ++r) tensors[owners[r]].offset = plan.offsets[r];
  state.result.program.arenaSize = plan.arenaSize;
  return ir::PassChange{}.count("buffers_placed", requests.size()).count("arena_bytes", plan.arenaSize);
}

}  // namespace ctxkit::codegen
