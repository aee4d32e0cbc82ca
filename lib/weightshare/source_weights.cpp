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
    if (!pool.weights()[i].layout.plain()) continue;  // packed bytes are no initializer's
    auto [begin, end] = byHash.equal_range(pool.weights()[i].hash);
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

Status addPoolWeights(format::ContainerWriter& writer, const WeightPool& pool, const WeightSources* sources) {
  for (size_t i = 0; i < pool.weights().size(); ++i) {
    const PooledWeight& w = pool.weights()[i];
    auto index = sources && !(*sources)[i].empty() ? writer.addSourceWeight(w.type, w.shape, w.hash, (*sources)[i])
                 : w.layout.plain()                ? writer.addWeight(w.type, w.shape, w.tensor.bytes(), w.hash)
                                                   : writer.addWeight(w.type, w.shape, w.size, w.hash,
                                                                      [&w](const auto& sink) { return w.forEachPiece(sink, true); });
    if (!index) return index.takeError();
  }
  return Status::ok();
}

}  // namespace ctxkit::weightshare
