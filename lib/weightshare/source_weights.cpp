// Weight pools into context binaries, and where pooled weights live in source models.
#include "weightshare/source_weights.h"

#include "cpu/gemm.h"

#include <array>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>

namespace ctxkit::weightshare {

SourceModel sourceModelOf(std::string name, const std::map<std::string, ir::Tensor>& byName,
                          const std::set<std::string>& external) {
  SourceModel m{std::move(name), {}};
  for (const auto& [initializer, tensor] : byName)
    m.initializers.push_back(SourceModel::Initializer{initializer, &tensor, external.count(initializer) > 0});
  return m;
}

WeightSources locateInSources(const WeightPool& pool, std::span<const SourceModel> models, WeightlessScope scope) {
  std::multimap<Hash128, std::tuple<const std::string*, std::string_view, const ir::Tensor*>> byHash;
  for (const SourceModel& m : models)
    for (const auto& [name, tensor, external] : m.initializers)
      if (tensor->type() != ir::ElemType::String && tensor->byteSize() > 0 &&
          (external || scope == WeightlessScope::All))
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

// Packs the pool's packed weights for the container writer on kWorkers threads, in the order the writer takes them:
// up to kSlots pieces ahead, on from one weight to the next without waiting. Worker w packs the pieces whose number
// (counted over all weights, each weight's end included) is w modulo kWorkers, and the pieces are hashed in order,
// each by the worker that packed it, while it is in that core's cache. The writer's thread only writes, and a worker
// the scheduler keeps waiting costs nothing while pieces are queued. A producer called out of order (another output
// call) restarts the workers at its weight.
class PoolPacker {
public:
  explicit PoolPacker(std::vector<const PooledWeight*> weights) : weights_(std::move(weights)) {}
  ~PoolPacker() { stop(); }
  PoolPacker(const PoolPacker&) = delete;
  PoolPacker& operator=(const PoolPacker&) = delete;

  // Hands `sink` the packed bytes of weights_[j] and returns their XXH3-128.
  Expected<Hash128> produce(size_t j, const Sink& sink) {
    if ((next_ != j || workers_.empty()) && !restart(j)) {  // no thread to be had: packed here, then
      Hasher128 hasher;
      CTX_RETURN_IF_ERROR(weights_[j]->forEachPiece(sink, &hasher));
      return hasher.digest();
    }
    next_ = kNone;  // until this weight is taken whole
    while (true) {
      Slot* slot = &slots_[consumed_ % kSlots];
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return slot->ready; });
      }
      Status status = slot->status.isOk() && !slot->end ? sink(slot->bytes) : slot->status;
      const bool end = slot->end;
      const Hash128 hash = slot->hash;
      {
        std::lock_guard lock(mutex_);  // only now may a worker pack into the slot again
        slot->ready = false;
        ++consumed_;
      }
      changed_.notify_all();
      CTX_RETURN_IF_ERROR(status);
      if (end) {
        next_ = j + 1;
        return hash;
      }
    }
  }

private:
  static constexpr size_t kWorkers = 2;
  static constexpr size_t kSlots = 4;
  static constexpr size_t kPieceBytes = size_t{1} << 20;
  static constexpr size_t kNone = ~size_t{0};
  struct Slot {
    std::vector<float> buffer;
    std::span<const std::byte> bytes;
    bool end = false;  // the weight's last slot: no bytes, its hash
    bool ready = false;
    Hash128 hash;
    Status status;
  };

  bool restart(size_t from) {
    stop();
    consumed_ = hashed_ = 0;
    for (Slot& slot : slots_) slot.ready = false;
    hasher_.emplace();
    quit_ = false;
    try {
      for (size_t w = 0; w < kWorkers; ++w) workers_.emplace_back([this, w, from] { run(w, from); });
    } catch (const std::system_error&) {
      stop();
      return false;
    }
    return true;
  }

  void run(size_t worker, size_t from) {
    uint64_t sequence = 0;  // of the next piece, from this run's start
    for (size_t j = from; j < weights_.size(); ++j) {
      auto stream = cpu::PackedWeightStream::open(weights_[j]->layout, weights_[j]->tensor, kPieceBytes);
      for (bool end = false; !end; ++sequence) {
        if (sequence % kWorkers != worker) {  // the other's piece: the same boundaries on both streams
          end = !stream || !stream->skip();
          continue;
        }
        Slot* slot = acquire(sequence);
        if (!slot) return;
        slot->status = stream ? Status::ok() : Status(stream.error());
        slot->bytes = {};
        if (stream) {
          if (slot->buffer.size() < stream->maxPieceElements()) slot->buffer.resize(stream->maxPieceElements());
          slot->bytes = stream->next(slot->buffer.data());
        }
        end = slot->bytes.empty();
        slot->end = end;
        {
          std::unique_lock lock(mutex_);  // the pieces before are hashed: this one's turn
          changed_.wait(lock, [&] { return quit_ || hashed_ == sequence; });
          if (quit_) return;
        }
        hasher_->update(slot->bytes);
        if (end) {
          slot->hash = hasher_->digest();
          hasher_.emplace();
        }
        {
          std::lock_guard lock(mutex_);
          ++hashed_;
          slot->ready = true;
        }
        changed_.notify_all();
      }
    }
  }
  // The slot for piece `sequence` once the writer is done with the piece kSlots before it; null when told to stop.
  Slot* acquire(uint64_t sequence) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return quit_ || sequence < consumed_ + kSlots; });
    return quit_ ? nullptr : &slots_[sequence % kSlots];
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    changed_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<const PooledWeight*> weights_;
  std::array<Slot, kSlots> slots_;
  uint64_t consumed_ = 0;            // pieces the writer is done with (it takes slots_[consumed_ % kSlots] next)
  uint64_t hashed_ = 0;              // pieces hashed, in order
  std::optional<Hasher128> hasher_;  // of the weight being hashed
  size_t next_ = kNone;              // the weight the running workers hand over next
  bool quit_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::thread> workers_;
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
