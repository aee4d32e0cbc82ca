// Static memory planning: buffers with lifetimes packed into one arena, reusing space once a buffer is dead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ctxkit::codegen {

struct BufferRequest {
  uint64_t size = 0;
  size_t firstUse = 0;  // op index that writes it
  size_t lastUse = 0;   // last op index that reads it (inclusive)
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // one per request
  uint64_t arenaSize = 0;
};

// Greedy by size (largest first, ties by request order), each at the lowest aligned offset that does not
// overlap a placed buffer whose lifetime intersects. Deterministic.
MemoryPlan planMemory(const std::vector<BufferRequest>& requests, uint64_t alignment);

}  // namespace ctxkit::codegen
