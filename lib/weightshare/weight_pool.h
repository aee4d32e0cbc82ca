// Stores every distinct weight once: identity is element type, shape and the bytes stored. A weight stored in a GEMM
// panel layout stays a recipe (its plain source and the layout) until it is written: its packed bytes are produced
// a few panels at a time, never all at once. Interning reads only a sample of the stored bytes (a fingerprint); only
// weights with equal fingerprints are hashed whole (XXH3-128) and then compared byte for byte, so distinct weights
// are packed once, when the container writer writes and hashes them in one pass.
#pragma once

#include "cpu/weight_layout.h"
#include "ir/tensor.h"
#include "support/hash.h"
#include "support/status.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

namespace ctxkit::weightshare {

struct PooledWeight {
  ir::Tensor tensor;         // the plain bytes; keeps them alive (a mapped source file or a lowered buffer)
  cpu::WeightLayout layout;  // how they are stored: Plain as they are, a panel layout packed (cpu::packWeight)
  ir::ElemType type = ir::ElemType::Undefined;  // of the stored form: a packed weight is 1-D
  ir::Shape shape;
  uint64_t size = 0;    // stored bytes
  Hash128 fingerprint;  // of a sample of the stored bytes (equal stored bytes, equal fingerprints)
  uint64_t references = 0;

  // XXH3-128 of the stored bytes, computed (a packed weight packed a piece at a time) on the first call.
  Expected<Hash128> storedHash() const;
  bool hashed() const { return hash_.has_value(); }

  // Hands `sink` the stored bytes in order, in pieces of bounded size; with `hasher`, adds each piece to it first.
  // (The container writer gets packed weights from addPoolWeights' packing workers instead.)
  Status forEachPiece(const std::function<Status(std::span<const std::byte>)>& sink, Hasher128* hasher = nullptr) const;

private:
  mutable std::optional<Hash128> hash_;
};

class WeightPool {
public:
  // Returns the index of an equal weight already pooled, or adds this one; `layout` is the form it is stored in.
  // Never merges on hash alone. Hashes only weights whose fingerprints equal another's, each at most once.
  Expected<uint32_t> intern(const ir::Tensor& tensor, const cpu::WeightLayout& layout = {});

  const std::vector<PooledWeight>& weights() const { return weights_; }
  uint64_t referencedBytes() const { return referencedBytes_; }
  uint64_t uniqueBytes() const { return uniqueBytes_; }
  uint64_t bytesHashed() const { return hashedBytes_; }
  uint64_t hashCollisions() const { return collisions_; }

private:
  // Storage address, byte count, type, shape, layout (kind, width, depth): pooled tensors keep their storage alive
  // and never change it, so an equal key means equal bytes.
  using Identity = std::tuple<const std::byte*, size_t, ir::ElemType, ir::Shape, uint8_t, uint16_t, uint16_t>;
  std::vector<PooledWeight> weights_;
  std::multimap<Hash128, uint32_t> byFingerprint_;
  std::map<Identity, uint32_t> byIdentity_;
  uint64_t referencedBytes_ = 0;
  uint64_t uniqueBytes_ = 0;
  uint64_t hashedBytes_ = 0;
  uint64_t collisions_ = 0;
};

}  // namespace ctxkit::weightshare
