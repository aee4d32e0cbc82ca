// Content-addressed weight interning.
#include "weightshare/weight_pool.h"

#include "cpu/gemm.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

namespace ctxkit::weightshare {

namespace {

// Large enough that packing reads long stretches of each source row (1024 floats of a typical weight's), small
// enough that a piece is still in the cache when it is hashed or written: 4 MiB measured slower on a 1 GiB model.
constexpr size_t kPieceBytes = size_t{1} << 20;

// Pulls a pooled weight's stored bytes piece by piece: plain bytes in place, packed ones a few panels at a time.
class Pieces {
public:
  static Expected<Pieces> open(const PooledWeight& w) {
    Pieces p;
    if (w.layout.plain()) {
      p.plain_ = w.tensor.bytes();
    } else {
      CTX_ASSIGN_OR_RETURN(auto stream, cpu::PackedWeightStream::open(w.layout, w.tensor, kPieceBytes));
      p.packed_.emplace(std::move(stream));
    }
    return p;
  }
  std::span<const std::byte> next() {
    if (packed_) return packed_->next();
    auto piece = plain_.first(std::min(plain_.size(), kPieceBytes));
    plain_ = plain_.subspan(piece.size());
    return piece;
  }

private:
  std::span<const std::byte> plain_;
  std::optional<cpu::PackedWeightStream> packed_;
};

// A fingerprint samples kSamples windows of kWindow bytes spread evenly over the stored bytes, at multiples of 4 so
// that a packed weight's window is whole floats; a weight of at most kWholeBytes is taken whole. Sampling reads a few
// KiB of the source and packs nothing, so distinct weights are told apart without reading them whole.
constexpr uint64_t kSamples = 256, kWindow = 16, kWholeBytes = uint64_t{64} << 10;

Expected<Hash128> fingerprintOf(const PooledWeight& w) {
  Hasher128 hasher;
  if (w.size <= kWholeBytes) {
    CTX_RETURN_IF_ERROR(w.forEachPiece([&](std::span<const std::byte> piece) {
      hasher.update(piece);
      return Status::ok();
    }));
    return hasher.digest();
  }
  std::optional<cpu::PackedWeightStream> packed;
  if (!w.layout.plain()) {
    CTX_ASSIGN_OR_RETURN(auto stream, cpu::PackedWeightStream::open(w.layout, w.tensor));
    packed.emplace(std::move(stream));
  }
  std::array<std::byte, kWindow> window;
  for (uint64_t i = 0; i < kSamples; ++i) {
    const uint64_t at = (w.size - kWindow) / (kSamples - 1) * i / 4 * 4;
    if (!packed) {
      std::memcpy(window.data(), w.tensor.data() + at, kWindow);
    } else {
      for (uint64_t j = 0; j < kWindow / sizeof(float); ++j) {
        const float value = packed->element(at / sizeof(float) + j);
        std::memcpy(window.data() + j * sizeof(float), &value, sizeof(float));
      }
    }
    hasher.update(window);
  }
  return hasher.digest();
}

// Byte equality of two weights' stored forms of equal size, pulling both a piece at a time.
Expected<bool> sameStoredBytes(const PooledWeight& a, const PooledWeight& b) {
  if (a.layout == b.layout && a.tensor.byteSize() == b.tensor.byteSize() && a.tensor.shape() == b.tensor.shape())
    // Packing is a fixed rearrangement of a shape's elements: equal plain bytes give equal packed bytes.
    return a.tensor.byteSize() == 0 || std::memcmp(a.tensor.data(), b.tensor.data(), a.tensor.byteSize()) == 0;
  CTX_ASSIGN_OR_RETURN(Pieces pa, Pieces::open(a));
  CTX_ASSIGN_OR_RETURN(Pieces pb, Pieces::open(b));
  std::span<const std::byte> x, y;
  while (true) {
    if (x.empty()) x = pa.next();
    if (y.empty()) y = pb.next();
    if (x.empty() || y.empty()) return x.empty() && y.empty();
    const size_t n = std::min(x.size(), y.size());
    if (std::memcmp(x.data(), y.data(), n) != 0) return false;
    x = x.subspan(n);
    y = y.subspan(n);
  }
}

}  // namespace

Expected<Hash128> PooledWeight::storedHash() const {
  if (hash_) return *hash_;
  if (layout.plain()) {
    hash_ = hash128(tensor.bytes());
    return *hash_;
  }
  Hasher128 hasher;
  CTX_RETURN_IF_ERROR(forEachPiece([](std::span<const std::byte>) { return Status::ok(); }, &hasher));
  hash_ = hasher.digest();
  return *hash_;
}

Status PooledWeight::forEachPiece(const std::function<Status(std::span<const std::byte>)>& sink,
                                  Hasher128* hasher) const {
  CTX_ASSIGN_OR_RETURN(Pieces pieces, Pieces::open(*this));
  uint64_t produced = 0;
  for (auto piece = pieces.next(); !piece.empty(); piece = pieces.next()) {
    if (hasher) hasher->update(piece);
    produced += piece.size();
    CTX_RETURN_IF_ERROR(sink(piece));
  }
  if (produced != size)
    return makeError(ErrorCode::Internal, "a {} weight produced {} bytes; its stored size is {}",
                     cpu::layoutName(layout), produced, size);
  return Status::ok();
}

Expected<uint32_t> WeightPool::intern(const ir::Tensor& tensor, const cpu::WeightLayout& layout) {
  if (tensor.type() == ir::ElemType::String || tensor.type() == ir::ElemType::Undefined)
    return makeError(ErrorCode::Unsupported, "a {} tensor cannot be stored in the weight table",
                     ir::elemTypeName(tensor.type()));
  PooledWeight w;
  w.tensor = tensor;
  w.layout = layout;
  w.type = tensor.type();
  w.shape = tensor.shape();
  w.size = tensor.byteSize();
  w.references = 1;
  if (!layout.plain()) {
    auto elements = cpu::layoutElements(layout, tensor.shape());
    if (!elements || tensor.type() != ir::ElemType::Float)
      return makeError(ErrorCode::InvalidArgument, "a {} {} weight cannot be stored in layout {}",
                       ir::elemTypeName(tensor.type()), ir::shapeToString(tensor.shape()), cpu::layoutName(layout));
    w.shape = {static_cast<int64_t>(*elements)};
    w.size = *elements * sizeof(float);
  }
  referencedBytes_ += w.size;
  const Identity identity{
      tensor.data(), tensor.byteSize(), tensor.type(), tensor.shape(), static_cast<uint8_t>(layout.kind),
      layout.width,  layout.depth};
  if (auto it = byIdentity_.find(identity); it != byIdentity_.end()) {
    ++weights_[it->second].references;
    return it->second;
  }
  CTX_ASSIGN_OR_RETURN(w.fingerprint, fingerprintOf(w));
  auto hashOf = [this](const PooledWeight& x) -> Expected<Hash128> {
    if (!x.hashed()) hashedBytes_ += x.size;
    return x.storedHash();
  };
  auto [begin, end] = byFingerprint_.equal_range(w.fingerprint);
  for (auto it = begin; it != end; ++it) {
    PooledWeight& pooled = weights_[it->second];
    if (pooled.type != w.type || pooled.shape != w.shape) continue;
    // Equal samples: the whole stored bytes decide, hashed first so that look-alikes cost one hash each.
    CTX_ASSIGN_OR_RETURN(Hash128 pooledHash, hashOf(pooled));
    CTX_ASSIGN_OR_RETURN(Hash128 hash, hashOf(w));
    if (pooledHash != hash) continue;
    CTX_ASSIGN_OR_RETURN(bool same, sameStoredBytes(pooled, w));
    if (!same) {
      ++collisions_;  // equal hash, different bytes: kept apart
      continue;
    }
    ++pooled.references;  // `tensor` is not kept, so its storage is no identity of this weight
    return it->second;
  }
  auto index = static_cast<uint32_t>(weights_.size());
  weights_.push_back(std::move(w));
  byFingerprint_.emplace(weights_.back().fingerprint, index);
  byIdentity_.emplace(identity, index);
  uniqueBytes_ += weights_.back().size;
  return index;
}

}  // namespace ctxkit::weightshare
