// Weight pools into context binaries, and where pooled weights live in source models.
#include "weightshare/source_weights.h"

#include <cstring>
#include <map>
#include <set>
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

// Weights stored in the file are hashed while they are written: a packed one is packed once, on another thread while
// the writer writes the piece before, and hashed there; not packed once more to hash it first.
Status addPoolWeights(format::ContainerWriter& writer, const WeightPool& pool, const WeightSources* sources) {
  for (size_t i = 0; i < pool.weights().size(); ++i) {
    const PooledWeight& w = pool.weights()[i];
    Expected<uint32_t> index = 0u;
    if (sources && !(*sources)[i].empty()) {
      CTX_ASSIGN_OR_RETURN(Hash128 hash, w.storedHash());
      index = writer.addSourceWeight(w.type, w.shape, hash, (*sources)[i]);
    } else if (w.layout.plain()) {
      index = writer.addWeight(w.type, w.shape, w.tensor.bytes());
    } else {
      index = writer.addWeight(w.type, w.shape, w.size, [&w](const auto& sink) -> Expected<Hash128> {
        Hasher128 hasher;
        CTX_RETURN_IF_ERROR(w.forEachPiece(sink, true, &hasher));
        return hasher.digest();
      });
    }
    if (!index) return index.takeError();
  }
  return Status::ok();
}

}  // namespace ctxkit::weightshare
