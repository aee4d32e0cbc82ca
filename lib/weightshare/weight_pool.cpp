// Content-addressed weight interning.
#include "weightshare/weight_pool.h"

#include "kernels/gemm.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <optional>
#include <system_error>

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
      CTX_ASSIGN_OR_RETURN(auto stream, kernels::PackedWeightStream::open(w.layout, w.tensor, kPieceBytes));
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
  std::optional<kernels::PackedWeightStream> packed_;
};

Expected<Hash128> hashStored(const PooledWeight& w) {
  if (w.layout.plain()) return hash128(w.tensor.bytes());
  Hasher128 hasher;
  CTX_RETURN_IF_ERROR(w.forEachPiece([&](std::span<const std::byte> piece) {
    hasher.update(piece);
    return Status::ok();
  }));
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

Status PooledWeight::forEachPiece(const std::function<Status(std::span<const std::byte>)>& sink, bool packAhead) const {
  CTX_ASSIGN_OR_RETURN(Pieces pieces, Pieces::open(*this));
  uint64_t produced = 0;
  auto following = [&]() -> std::future<std::span<const std::byte>> {
    auto next = [&pieces] { return pieces.next(); };
    if (!packAhead || layout.plain()) return std::async(std::launch::deferred, next);
    try {
      return std::async(std::launch::async, next);
    } catch (const std::system_error&) {  // no thread to be had: in turn, then
      return std::async(std::launch::deferred, next);
    }
  };
  for (auto piece = pieces.next(); !piece.empty();) {
    produced += piece.size();
    auto next = following();
    Status status = sink(piece);
    piece = next.get();  // joined before leaving, on an error too: the thread uses `pieces`
    CTX_RETURN_IF_ERROR(status);
  }
  if (produced != size)
    return makeError(ErrorCode::Internal, "a {} weight produced {} bytes; its stored size is {}",
                     ops::layoutName(layout), produced, size);
  return Status::ok();
}

Expected<uint32_t> WeightPool::intern(const ir::Tensor& tensor, const ops::WeightLayout& layout) {
  if (tensor.type() == ir::ElemType::String || tensor.type() == ir::ElemType::Undefined)
    return makeError(ErrorCode::Unsupported, "a {} tensor cannot be stored in the weight table",
                     ir::elemTypeName(tensor.type()));
  PooledWeight w{tensor, layout, tensor.type(), tensor.shape(), tensor.byteSize(), {}, 1};
  if (!layout.plain()) {
    auto elements = ops::layoutElements(layout, tensor.shape());
    if (!elements || tensor.type() != ir::ElemType::Float)
      return makeError(ErrorCode::InvalidArgument, "a {} {} weight cannot be stored in layout {}",
                       ir::elemTypeName(tensor.type()), ir::shapeToString(tensor.shape()), ops::layoutName(layout));
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
  CTX_ASSIGN_OR_RETURN(w.hash, hashStored(w));
  hashedBytes_ += w.size;
  auto [begin, end] = byHash_.equal_range(w.hash);
  for (auto it = begin; it != end; ++it) {
    PooledWeight& pooled = weights_[it->second];
    if (pooled.size != w.size) continue;
    CTX_ASSIGN_OR_RETURN(bool same, sameStoredBytes(pooled, w));
    if (!same) {
      ++collisions_;  // equal hash, different bytes: kept apart
      continue;
    }
    if (pooled.type == w.type && pooled.shape == w.shape) {
      ++pooled.references;  // `tensor` is not kept, so its storage is no identity of this weight
      return it->second;
    }
  }
  auto index = static_cast<uint32_t>(weights_.size());
  weights_.push_back(std::move(w));
  byHash_.emplace(weights_.back().hash, index);
  byIdentity_.emplace(identity, index);
  uniqueBytes_ += weights_.back().size;
  return index;
}

}  // namespace ctxkit::weightshare
