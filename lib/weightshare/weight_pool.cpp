// Content-addressed weight interning.
#include "weightshare/weight_pool.h"

#include <cstring>

namespace ctxkit::weightshare {

Expected<uint32_t> WeightPool::intern(const ir::Tensor& tensor) {
  if (tensor.type() == ir::ElemType::String || tensor.type() == ir::ElemType::Undefined)
    return makeError(ErrorCode::Unsupported, "a {} tensor cannot be stored in the weight table", ir::elemTypeName(tensor.type()));
  Hash128 hash = hash128(tensor.bytes());
  referencedBytes_ += tensor.byteSize();
  auto [begin, end] = byHash_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    PooledWeight& w = weights_[it->second];
    if (w.tensor.type() == tensor.type() && w.tensor.shape() == tensor.shape() &&
        w.tensor.byteSize() == tensor.byteSize() &&
        (tensor.byteSize() == 0 || std::memcmp(w.tensor.data(), tensor.data(), tensor.byteSize()) == 0)) {
      ++w.references;
      return it->second;
    }
    if (w.tensor.bytes().size() == tensor.bytes().size() &&
        std::memcmp(w.tensor.data(), tensor.data(), tensor.byteSize()) != 0)
      ++collisions_;  // equal hash, different bytes: kept apart
  }
  auto index = static_cast<uint32_t>(weights_.size());
  weights_.push_back(PooledWeight{tensor, hash, 1});
  byHash_.emplace(hash, index);
  uniqueBytes_ += tensor.byteSize();
  return index;
}

}  // namespace ctxkit::weightshare
