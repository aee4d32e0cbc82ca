// Stores every distinct weight once: identity is element type, shape and bytes (XXH3-128, then a byte compare).
#pragma once

#include "ir/tensor.h"
#include "support/hash.h"
#include "support/status.h"

#include <cstdint>
#include <map>
#include <vector>

namespace ctxkit::weightshare {

struct PooledWeight {
  ir::Tensor tensor;  // keeps the bytes alive (a mapped source file or a lowered buffer)
  Hash128 hash;
  uint64_t references = 0;
};

class WeightPool {
public:
  // Returns the index of an equal weight already pooled, or adds this one. Never merges on hash alone.
  Expected<uint32_t> intern(const ir::Tensor& tensor);

  const std::vector<PooledWeight>& weights() const { return weights_; }
  uint64_t referencedBytes() const { return referencedBytes_; }
  uint64_t uniqueBytes() const { return uniqueBytes_; }
  uint64_t bytesHashed() const { return referencedBytes_; }
  uint64_t hashCollisions() const { return collisions_; }

private:
  std::vector<PooledWeight> weights_;
  std::multimap<Hash128, uint32_t> byHash_;
  uint64_t referencedBytes_ = 0;
  uint64_t uniqueBytes_ = 0;
  uint64_t collisions_ = 0;
};

}  // namespace ctxkit::weightshare
