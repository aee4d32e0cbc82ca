// plan-memory: Concats whose inputs can sit side by side in their output are elided (concat_groups.h), then the
// program's arena tensors get offsets in one arena, buffers reused once their values are dead.
#include "codegen/concat_groups.h"
#include "codegen/memory_plan.h"
#include "codegen/passes/passes.h"

#include <algorithm>
#include <limits>

namespace ctxkit::codegen {

Expected<ir::PassChange> PlanMemory::run(LoweringState& state) const {
  program::Program& prog = state.result.program;
  auto& tensors = prog.tensors;
  const ConcatGroups groups = groupConcats(prog, state.options.arenaAlignment);
  for (size_t k = groups.elided.size(); k-- > 0;)
    prog.ops.erase(prog.ops.begin() + static_cast<std::ptrdiff_t>(groups.elided[k]));

  // Each buffer's lifetime, by the tensor it is planned as (a group's root for its members): from the first op
  // writing it to the last reading it (a view read is a read of its base), inclusive.
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  std::vector<size_t> firstUse(tensors.size(), kNever), lastUse(tensors.size(), 0);
  auto planned = [&](int32_t t) -> int32_t {
    if (tensors[t].kind == program::TensorKind::View) t = static_cast<int32_t>(tensors[t].index);
    return groups.root[t] >= 0 ? groups.root[t] : t;
  };
  for (size_t k = 0; k < prog.ops.size(); ++k) {
    for (int32_t out : prog.ops[k].outputs) {
      if (out < 0) continue;
      const int32_t t = planned(out);
      firstUse[t] = std::min(firstUse[t], k);
    }
    for (int32_t in : prog.ops[k].inputs)
      if (in >= 0) {
        const int32_t t = planned(in);
        lastUse[t] = std::max(lastUse[t], k);
      }
  }

  std::vector<BufferRequest> requests;
  std::vector<size_t> owners;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].kind != program::TensorKind::Arena) continue;
    if (groups.root[t] >= 0 && static_cast<size_t>(groups.root[t]) != t) continue;  // placed with its root
    const size_t first = firstUse[t] == kNever ? lastUse[t] : firstUse[t];
    requests.push_back(BufferRequest{tensors[t].size, first, std::max(first, lastUse[t])});
    owners.push_back(t);
  }
  MemoryPlan plan = planMemory(requests, state.options.arenaAlignment);
  for (size_t r = 0; r < owners.size(); ++r) tensors[owners[r]].offset = plan.offsets[r];
  for (size_t t = 0; t < tensors.size(); ++t)
    if (groups.root[t] >= 0 && static_cast<size_t>(groups.root[t]) != t)
      tensors[t].offset = tensors[groups.root[t]].offset + groups.offset[t];
  prog.arenaSize = plan.arenaSize;
  return ir::PassChange{}
      .count("concats_elided", groups.elided.size())
      .count("buffers_placed", requests.size())
      .count("arena_bytes", plan.arenaSize);
}

}  // namespace ctxkit::codegen
