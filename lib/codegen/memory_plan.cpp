// Greedy offset assignment for the arena.
#include "codegen/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace ctxkit::codegen {

MemoryPlan planMemory(const std::vector<BufferRequest>& requests, uint64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return requests[a].size > requests[b].size; });
  auto align = [&](uint64_t v) { return (v + alignment - 1) / alignment * alignment; };

  std::vector<size_t> placed;
  for (size_t r : order) {
    const BufferRequest& req = requests[r];
    // Intervals of live buffers that overlap in time, sorted by offset.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (size_t p : placed) {
      const BufferRequest& other = requests[p];
      if (other.firstUse <= req.lastUse && req.firstUse <= other.lastUse)
        busy.emplace_back(plan.offsets[p], plan.offsets[p] + align(other.size));
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    uint64_t need = align(std::max<uint64_t>(req.size, 1));
    for (const auto& [start, end] : busy) {
      if (offset + need <= start) break;
      offset = std::max(offset, end);
    }
    plan.offsets[r] = offset;
    plan.arenaSize = std::max(plan.arenaSize, offset + need);
    placed.push_back(r);
  }
  return plan;
}

}  // namespace ctxkit::codegen
