// Weight pools into context binaries, and where pooled weights live in source models.
#include "weightshare/source_weights.h"

#include "kernels/gemm.h"

#include <array>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>

namespace ctxkit::weightshare {

WeightSources locateInSources(const WeightPool& pool, std::span<const SourceModel> models) {
  std::multimap<Hash128, std::tuple<const std::string*, std::string_view, const ir::Tensor*>> byHash;
  for (const SourceModel& m : models)
    for (const auto& [name, tensor] : m.initializers)
      if (tensor->type() != ir::ElemType::String && tensor->byteSize() > 0)
        byHash.emplace(hash128(tensor->bytes()), std::tuple{&m.name, name, tensor});
  WeightSources sources(pool.weights().size());
  for (size_t i = 0; i < pool.weights().size(); ++i) {
    if (!pool.weights()[i].layout.plain()) continue;  // packed bytes are never a source's
    const ir::Tensor& t = pool.weights()[i].tensor;
    auto hash = pool.weights()[i].storedHash();  // a plain weight's: never fails
    if (!hash) continue;
    auto [begin, end] = byHash.equal_range(*hash);
    std::set<std::string> found;  // one place per model is enough
    for (auto it = begin; it != end; ++it) {
      const auto& [model, name, tensor] = it->second;
      const ir::Tensor& s = *tensor;
      if (s.type() != t.type() || s.byteSize() != t.byteSize() || found.count(*model)) continue;
      if (std::memcmp(s.bytes().data(), t.bytes().data(), t.byteSize()) != 0) continue;
      found.insert(*model);
      sources[i].push_back(format::WeightInfo::Source{*model, std::string(name)});
    }
  }
  return sources;
}

namespace {

using Sink = std::function<Status(std::span<const std::byte>)>;

// Packs the pool's packed weights for the container writer on one thread, in the order the writer takes them: up to
// kSlots pieces ahead, on from one weight to the next without waiting, hashing each piece while it is in the cache.
// The writer's thread only writes, and a packing thread the scheduler keeps waiting costs nothing while pieces are
// queued. A producer called out of order (another output call) restarts the thread at its weight.
class PoolPacker {
public:
  explicit PoolPacker(std::vector<const PooledWeight*> weights) : weights_(std::move(weights)) {}
  ~PoolPacker() { stop(); }
  PoolPacker(const PoolPacker&) = delete;
  PoolPacker& operator=(const PoolPacker&) = delete;

  // Hands `sink` the packed bytes of weights_[j] and returns their XXH3-128.
  Expected<Hash128> produce(size_t j, const Sink& sink) {
    if (next_ != j || !thread_.joinable()) {
      stop();
      head_ = tail_ = count_ = 0;
      quit_ = false;
      try {
        thread_ = std::thread([this, j] { run(j); });
      } catch (const std::system_error&) {  // no thread to be had: packed here, then
        next_ = kNone;
        Hasher128 hasher;
        CTX_RETURN_IF_ERROR(weights_[j]->forEachPiece(sink, &hasher));
        return hasher.digest();
      }
    }
    next_ = kNone;  // until this weight is taken whole
    while (true) {
      Slot* slot;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return count_ > 0; });
        slot = &slots_[head_];
      }
      Status status = slot->status.isOk() && !slot->end ? sink(slot->bytes) : slot->status;
      const bool end = slot->end;
      const Hash128 hash = slot->hash;
      release();  // only now may the thread pack into the slot again
      CTX_RETURN_IF_ERROR(status);
      if (end) {
        next_ = j + 1;
        return hash;
      }
    }
  }

private:
  static constexpr size_t kSlots = 4;
  static constexpr size_t kPieceBytes = size_t{1} << 20;
  static constexpr size_t kNone = ~size_t{0};
  struct Slot {
    std::vector<float> buffer;
    std::span<const std::byte> bytes;
    bool end = false;  // the weight's last slot: no bytes, its hash
    Hash128 hash;
    Status status;
  };

  void run(size_t from) {
    for (size_t j = from; j < weights_.size(); ++j) {
      auto stream = kernels::PackedWeightStream::open(weights_[j]->layout, weights_[j]->tensor, kPieceBytes);
      Hasher128 hasher;
      while (true) {
        Slot* slot = acquire();
        if (!slot) return;
        slot->end = !stream;
        slot->status = stream ? Status::ok() : Status(stream.error());
        if (stream) {
          if (slot->buffer.size() < stream->maxPieceElements()) slot->buffer.resize(stream->maxPieceElements());
          slot->bytes = stream->next(slot->buffer.data());
          hasher.update(slot->bytes);
          slot->end = slot->bytes.empty();
          if (slot->end) slot->hash = hasher.digest();
        }
        publish();
        if (!stream) return;
        if (slot->end) break;
      }
    }
  }
  // The packing thread's next free slot, or null when told to stop.
  Slot* acquire() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return quit_ || count_ < kSlots; });
    return quit_ ? nullptr : &slots_[tail_];
  }
  void publish() {
    {
      std::lock_guard lock(mutex_);
      tail_ = (tail_ + 1) % kSlots;
      ++count_;
    }
    changed_.notify_all();
  }
  void release() {
    {
      std::lock_guard lock(mutex_);
      head_ = (head_ + 1) % kSlots;
      --count_;
    }
    changed_.notify_all();
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  std::vector<const PooledWeight*> weights_;
  std::array<Slot, kSlots> slots_;
  size_t head_ = 0, tail_ = 0, count_ = 0;  // the writer takes slots_[head_]; the thread fills slots_[tail_]
  size_t next_ = kNone;                     // the weight the running thread hands over next
  bool quit_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread thread_;
};

}  // namespace

// Weights stored in the file are hashed while they are written: a packed one is packed once (by a PoolPacker, ahead
// of the writer), not once more to hash it first.
Status addPoolWeights(format::ContainerWriter& writer, const WeightPool& pool, const WeightSources* sources) {
  auto inSource = [&](size_t i) { return sources && !(*sources)[i].empty(); };
  std::vector<const PooledWeight*> packed;
  for (size_t i = 0; i < pool.weights().size(); ++i)
    if (!inSource(i) && !pool.weights()[i].layout.plain()) packed.push_back(&pool.weights()[i]);
  auto packer = std::make_shared<PoolPacker>(std::move(packed));
  size_t packedIndex = 0;
  for (size_t i = 0; i < pool.weights().size(); ++i) {
    const PooledWeight& w = pool.weights()[i];
    Expected<uint32_t> index = 0u;
    if (inSource(i)) {
      CTX_ASSIGN_OR_RETURN(Hash128 hash, w.storedHash());
      index = writer.addSourceWeight(w.type, w.shape, hash, (*sources)[i]);
    } else if (w.layout.plain()) {
      index = writer.addWeight(w.type, w.shape, w.tensor.bytes());
    } else {
      index = writer.addWeight(w.type, w.shape, w.size,
                               [packer, j = packedIndex++](const auto& sink) { return packer->produce(j, sink); });
    }
    if (!index) return index.takeError();
  }
  return Status::ok();
}

}  // namespace ctxkit::weightshare
