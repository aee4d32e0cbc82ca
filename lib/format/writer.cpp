// ContainerWriter: plans the v1 layout from the added graphs and weights, then streams it to a file or buffer.
#include "format/container.h"
#include "format/internal.h"
#include "format/layout.h"
#include "support/checked.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

namespace ctxkit::format {

using namespace layout;

namespace {

struct PendingWeight {
  ir::ElemType type;
  ir::Shape shape;
  std::span<const std::byte> bytes;  // empty for a weight in source models or one produced while written
  std::optional<Hash128> hash;       // none: hashed while written
  std::vector<WeightInfo::Source> sources;
  ContainerWriter::WeightBytes produce;              // set for a weight produced while written
  ContainerWriter::HashedWeightBytes produceHashed;  // or this, for one produced and hashed while written
  uint64_t size = 0;
};

struct PendingGraph {
  std::string name;
  std::string sourceModel;
  std::vector<std::byte> program;
};

// Where everything goes; computed once after the last add and reused by every output call.
struct Plan {
  std::string strings;
  StringRef producer{}, producerVersion{}, targetId{}, targetRevision{};
  std::vector<std::pair<StringRef, StringRef>> graphStrings;  // name, source model
  struct Source {
    uint32_t weight;
    StringRef model, initializer;
  };
  std::vector<Source> sources;
  struct Pin {
    StringRef model, file;
    const SourcePin* pin;
  };
  std::vector<Pin> pins;
  uint64_t pinTableOffset = 0;
  uint64_t stringTableOffset = 0;
  uint64_t graphTableOffset = 0;
  uint64_t weightTableOffset = 0;
  uint64_t sourceTableOffset = 0;
  uint64_t dataOffset = 0;
  uint64_t dataSize = 0;
  uint64_t fileSize = 0;
  std::vector<uint64_t> programOffsets;
  std::vector<uint64_t> weightOffsets;
};

// Deduplicates identical strings (many graphs share a source model) in first-use order.
class StringTableBuilder {
public:
  StringRef add(const std::string& s) {
    auto it = offsets_.find(s);
    if (it != offsets_.end()) return {it->second, s.size()};
    uint64_t offset = bytes_.size();
    bytes_ += s;
    offsets_.emplace(s, offset);
    return {offset, s.size()};
  }
  std::string take() { return std::move(bytes_); }

private:
  std::string bytes_;
  std::unordered_map<std::string, uint64_t> offsets_;
};

Error invalidArgument(std::string message) { return Error(ErrorCode::InvalidArgument, std::move(message)); }

Status checkString(std::string_view s, std::string_view what) {
  if (s.size() > kMaxStringBytes)
    return invalidArgument(
        fmt::format("{} is {} bytes long; the container allows at most {}", what, s.size(), kMaxStringBytes));
  std::string_view problem = detail::stringProblem(s);
  if (!problem.empty()) return invalidArgument(fmt::format("{} {}", what, problem));
  return Status::ok();
}

using WeightKey = std::tuple<Hash128, ir::ElemType, ir::Shape>;

}  // namespace

struct ContainerWriter::Impl {
  CompatInfo compat;
  WriterOptions options;
  std::vector<PendingWeight> weights;
  std::vector<PendingGraph> graphs;
  std::set<std::string, std::less<>> graphNames;
  std::map<WeightKey, uint32_t> weightKeys;
  uint64_t sourceCount = 0;
  std::map<std::pair<std::string, std::string>, SourcePin> pins;  // by (model, file): the table's order
  bool loadTimeTensors = false;  // some graph holds load-time tensors: flag kFlagLoadTime
  // Cached by the first output call and reset by every add; so a writer is not for concurrent use.
  mutable std::optional<Plan> plan;

  Expected<uint32_t> add(PendingWeight w);
  Expected<const Plan*> getPlan() const;
  // `hashes`: every weight's, in weight-table order.
  Expected<std::vector<std::byte>> buildMetadata(const Plan& plan, const std::vector<Hash128>& hashes) const;
  // Emits the whole file through `write(span)` and `zeros(count)`: zeros in place of the metadata, the data region,
  // then the metadata through `patch(span)` at offset 0, once the weights hashed while written have their hashes.
  template <typename Write, typename Zeros, typename Patch>
  Status emit(Write&& write, Zeros&& zeros, Patch&& patch) const;
  Status checkKeys(const std::vector<Hash128>& hashes) const;
};

ContainerWriter::ContainerWriter(CompatInfo compat, WriterOptions options) : impl_(std::make_shared<Impl>()) {
  // The version written is always the one this library implements, whatever the caller filled in.
  compat.formatMajor = kFormatMajor;
  compat.formatMinor = kFormatMinor;
  impl_->compat = std::move(compat);
  impl_->options = options;
}

// The checks every weight passes, in the file or in a source model; returns its byte size.
static Expected<uint64_t> checkWeight(ir::ElemType type, const ir::Shape& shape) {
  auto typeBytes = ir::storageBytes(type, 1);
  if (!ir::elemTypeFromInt(static_cast<int32_t>(type)) || !typeBytes)
    return invalidArgument(fmt::format("weight element type {} has no fixed byte size", ir::elemTypeName(type)));
  if (shape.size() > kMaxRank)
    return invalidArgument(fmt::format("weight of shape {} has rank {}; the container allows at most {}",
                                       ir::shapeToString(shape), shape.size(), kMaxRank));
  auto count = checkedElementCount(shape);
  auto expected = count ? ir::storageBytes(type, *count) : std::nullopt;
  if (!expected)
    return invalidArgument(fmt::format("weight shape {} is negative or too large", ir::shapeToString(shape)));
  return *expected;
}

static Error repeatedWeight(ir::ElemType type, const ir::Shape& shape, const Hash128& hash, uint32_t first) {
  return invalidArgument(
      fmt::format("weight ({} {}, hash {}) repeats weight {}; the weight table holds each unique weight once",
                  ir::elemTypeName(type), ir::shapeToString(shape), hash.toHex(), first));
}

Expected<uint32_t> ContainerWriter::Impl::add(PendingWeight w) {
  if (weights.size() >= kMaxWeights)
    return invalidArgument(fmt::format("a container holds at most {} weights", kMaxWeights));
  const auto index = static_cast<uint32_t>(weights.size());
  if (w.hash) {  // else checked once it is hashed (checkKeys)
    auto [it, inserted] = weightKeys.emplace(WeightKey{*w.hash, w.type, w.shape}, index);
    if (!inserted) return repeatedWeight(w.type, w.shape, *w.hash, it->second);
  }
  weights.push_back(std::move(w));
  plan.reset();
  return index;
}

// The weights hashed while written against each other and the rest: a repeated key is a file a reader rejects.
Status ContainerWriter::Impl::checkKeys(const std::vector<Hash128>& hashes) const {
  std::map<WeightKey, uint32_t> keys = weightKeys;
  for (uint32_t i = 0; i < weights.size(); ++i) {
    if (weights[i].hash) continue;
    auto [it, inserted] = keys.emplace(WeightKey{hashes[i], weights[i].type, weights[i].shape}, i);
    if (!inserted) return repeatedWeight(weights[i].type, weights[i].shape, hashes[i], std::min(i, it->second));
  }
  return Status::ok();
}

// A weight with its bytes in memory (`produce` empty) or produced while written; `hash` none: hashed while written.
static Expected<PendingWeight> fileWeight(ir::ElemType type, ir::Shape shape, std::span<const std::byte> bytes,
                                          uint64_t size, std::optional<Hash128> hash, bool produce) {
  CTX_ASSIGN_OR_RETURN(uint64_t expected, checkWeight(type, shape));
  if (!produce && expected != bytes.size())
    return invalidArgument(fmt::format("{} weight of shape {} needs {} bytes but {} were given", ir::elemTypeName(type),
                                       ir::shapeToString(shape), expected, bytes.size()));
  if (produce && expected != size)
    return invalidArgument(fmt::format("{} weight of shape {} needs {} bytes but has {}", ir::elemTypeName(type),
                                       ir::shapeToString(shape), expected, size));
  return PendingWeight{type, std::move(shape), bytes, hash, {}, {}, {}, expected};
}

Expected<uint32_t> ContainerWriter::addWeight(ir::ElemType type, ir::Shape shape, std::span<const std::byte> bytes,
                                              const Hash128& hash) {
  CTX_ASSIGN_OR_RETURN(auto w, fileWeight(type, std::move(shape), bytes, 0, hash, false));
  return impl_->add(std::move(w));
}

Expected<uint32_t> ContainerWriter::addWeight(ir::ElemType type, ir::Shape shape, std::span<const std::byte> bytes) {
  CTX_ASSIGN_OR_RETURN(auto w, fileWeight(type, std::move(shape), bytes, 0, std::nullopt, false));
  return impl_->add(std::move(w));
}

Expected<uint32_t> ContainerWriter::addWeight(ir::ElemType type, ir::Shape shape, uint64_t size, const Hash128& hash,
                                              WeightBytes produce) {
  if (!produce) return invalidArgument("a produced weight needs a producer");
  CTX_ASSIGN_OR_RETURN(auto w, fileWeight(type, std::move(shape), {}, size, hash, true));
  w.produce = std::move(produce);
  return impl_->add(std::move(w));
}

Expected<uint32_t> ContainerWriter::addWeight(ir::ElemType type, ir::Shape shape, uint64_t size,
                                              HashedWeightBytes produce) {
  if (!produce) return invalidArgument("a produced weight needs a producer");
  CTX_ASSIGN_OR_RETURN(auto w, fileWeight(type, std::move(shape), {}, size, std::nullopt, true));
  w.produceHashed = std::move(produce);
  return impl_->add(std::move(w));
}

Expected<uint32_t> ContainerWriter::addSourceWeight(ir::ElemType type, ir::Shape shape, const Hash128& hash,
                                                    std::vector<WeightInfo::Source> sources) {
  if (!impl_->options.weightless)
    return invalidArgument("a weight in a source model needs a weightless container (WriterOptions::weightless)");
  if (sources.empty()) return invalidArgument("a weight in a source model needs at least one source");
  if (impl_->sourceCount + sources.size() > kMaxSources)
    return invalidArgument(fmt::format("a container holds at most {} weight sources", kMaxSources));
  for (const auto& s : sources) {
    CTX_RETURN_IF_ERROR(checkString(s.model, "source model name"));
    CTX_RETURN_IF_ERROR(checkString(s.initializer, fmt::format("initializer name in source model '{}'", s.model)));
  }
  CTX_ASSIGN_OR_RETURN(uint64_t expected, checkWeight(type, shape));
  impl_->sourceCount += sources.size();
  return impl_->add(PendingWeight{type, std::move(shape), {}, hash, std::move(sources), {}, {}, expected});
}

Status ContainerWriter::addSourcePin(SourcePin pin) {
  Impl& d = *impl_;
  if (!d.options.weightless)
    return invalidArgument("a source model pin needs a weightless container (WriterOptions::weightless)");
  if (pin.model.empty()) return invalidArgument("a source model pin needs the model's name");
  CTX_RETURN_IF_ERROR(checkString(pin.model, "pinned source model name"));
  CTX_RETURN_IF_ERROR(checkString(pin.file, fmt::format("pinned file of source model '{}'", pin.model)));
  if (d.pins.size() >= kMaxSourcePins)
    return invalidArgument(fmt::format("a container pins at most {} source files", kMaxSourcePins));
  auto key = std::pair{pin.model, pin.file};
  auto [it, added] = d.pins.emplace(std::move(key), std::move(pin));
  if (!added)
    return invalidArgument(
        fmt::format("file '{}' of source model '{}' is pinned twice", it->second.file, it->second.model));
  d.plan.reset();
  return Status::ok();
}

Status ContainerWriter::addGraph(std::string name, std::string sourceModel, std::vector<std::byte> program,
                                 bool loadTimeTensors) {
  Impl& d = *impl_;
  if (loadTimeTensors && d.compat.formatMinor < 5)
    return invalidArgument(fmt::format("graph '{}' holds load-time tensors, which format 1.{} cannot declare", name,
                                       d.compat.formatMinor));
  if (d.graphs.size() >= kMaxGraphs)
    return invalidArgument(fmt::format("a container holds at most {} graphs", kMaxGraphs));
  if (name.empty()) return invalidArgument("graph name is empty");
  CTX_RETURN_IF_ERROR(checkString(name, fmt::format("graph name '{}'", name)));
  CTX_RETURN_IF_ERROR(checkString(sourceModel, fmt::format("source model name of graph '{}'", name)));
  if (d.graphNames.contains(name))
    return invalidArgument(fmt::format("graph name '{}' is already in the container; names must be unique", name));
  d.graphNames.insert(name);
  d.graphs.push_back({std::move(name), std::move(sourceModel), std::move(program)});
  d.loadTimeTensors = d.loadTimeTensors || loadTimeTensors;
  d.plan.reset();
  return Status::ok();
}

size_t ContainerWriter::weightCount() const { return impl_->weights.size(); }
size_t ContainerWriter::graphCount() const { return impl_->graphs.size(); }

Expected<const Plan*> ContainerWriter::Impl::getPlan() const {
  if (plan) return &*plan;
  const uint64_t alignment = options.alignment;
  if (!isPowerOfTwo(alignment) || alignment < kMinAlignment || alignment > kMaxAlignment)
    return invalidArgument(
        fmt::format("alignment {} is not a power of two from {} to {}", alignment, kMinAlignment, kMaxAlignment));

  Plan p;
  CTX_RETURN_IF_ERROR(checkString(compat.producer, "producer"));
  CTX_RETURN_IF_ERROR(checkString(compat.producerVersion, "producer version"));
  CTX_RETURN_IF_ERROR(checkString(compat.targetId, "target id"));
  CTX_RETURN_IF_ERROR(checkString(compat.targetRevision, "target revision"));
  StringTableBuilder strings;
  p.producer = strings.add(compat.producer);
  p.producerVersion = strings.add(compat.producerVersion);
  p.targetId = strings.add(compat.targetId);
  p.targetRevision = strings.add(compat.targetRevision);
  for (const PendingGraph& g : graphs) {
    // Two statements: the order of function arguments is unspecified, and the table's order must not be.
    StringRef name = strings.add(g.name);
    StringRef source = strings.add(g.sourceModel);
    p.graphStrings.emplace_back(name, source);
  }
  for (uint32_t i = 0; i < weights.size(); ++i)
    for (const auto& src : weights[i].sources) {
      StringRef model = strings.add(src.model);
      StringRef initializer = strings.add(src.initializer);
      p.sources.push_back(Plan::Source{i, model, initializer});
    }
  for (const auto& [key, pin] : pins) {
    StringRef model = strings.add(pin.model);
    StringRef file = strings.add(pin.file);
    p.pins.push_back(Plan::Pin{model, file, &pin});
  }
  p.strings = strings.take();
  if (p.strings.size() > kMaxStringTableBytes)
    return invalidArgument(fmt::format("the names add up to {} bytes; the string table allows at most {}",
                                       p.strings.size(), kMaxStringTableBytes));

  // Metadata sizes are bounded by the caps above, so only the data region needs checked sums.
  p.stringTableOffset = kHeaderSize + kCompatSize;
  p.graphTableOffset = alignUp(p.stringTableOffset + p.strings.size(), kTableAlignment);
  p.weightTableOffset = p.graphTableOffset + graphs.size() * kGraphEntrySize;
  const bool sourceTables = !p.sources.empty() || !p.pins.empty();
  p.sourceTableOffset = sourceTables ? p.weightTableOffset + weights.size() * kWeightEntrySize : 0;
  p.pinTableOffset = p.sourceTableOffset + p.sources.size() * kSourceEntrySize;
  const uint64_t tablesEnd = sourceTables ? p.pinTableOffset + p.pins.size() * kSourcePinEntrySize
                                          : p.weightTableOffset + weights.size() * kWeightEntrySize;
  p.dataOffset = alignUp(tablesEnd, alignment);

  uint64_t cursor = p.dataOffset;
  auto place = [&](uint64_t size, std::vector<uint64_t>& offsets) -> Status {
    auto padded = checkedAdd(cursor, alignment - 1);
    auto end = padded ? checkedAdd(*padded / alignment * alignment, size) : std::nullopt;
    if (!end) return invalidArgument("the container would exceed 2^64 bytes");
    offsets.push_back(*padded / alignment * alignment);
    cursor = *end;
    return Status::ok();
  };
  for (const PendingGraph& g : graphs) CTX_RETURN_IF_ERROR(place(g.program.size(), p.programOffsets));
  for (const PendingWeight& w : weights) {
    if (!w.sources.empty()) {
      p.weightOffsets.push_back(0);  // no blob: the bytes stay in the source model
      continue;
    }
    CTX_RETURN_IF_ERROR(place(w.size, p.weightOffsets));
  }
  p.fileSize = cursor;
  p.dataSize = cursor - p.dataOffset;
  plan = std::move(p);
  return &*plan;
}

Expected<uint64_t> ContainerWriter::weightFileOffset(uint32_t index) const {
  if (index >= impl_->weights.size())
    return invalidArgument(
        fmt::format("weight index {} is out of range; the container has {} weights", index, impl_->weights.size()));
  CTX_ASSIGN_OR_RETURN(const Plan* plan, impl_->getPlan());
  return plan->weightOffsets[index];
}

Expected<std::vector<std::byte>> ContainerWriter::Impl::buildMetadata(const Plan& p,
                                                                      const std::vector<Hash128>& hashes) const {
  auto metaSize = toSize(p.dataOffset);
  if (!metaSize) return invalidArgument("container metadata does not fit in memory");
  std::vector<std::byte> meta(*metaSize);  // zero-filled: padding and reserved fields stay zero

  FileHeader h{};
  h.magic = kMagic;
  h.formatMajor = kFormatMajor;
  h.formatMinor = compat.formatMinor;
  h.headerSize = static_cast<uint32_t>(kHeaderSize);
  h.flags = kFlagProgramsV4 | (options.weightless ? kFlagWeightless : 0) | (loadTimeTensors ? kFlagLoadTime : 0);
  h.fileSize = p.fileSize;
  h.alignment = static_cast<uint32_t>(options.alignment);
  h.compatOffset = kHeaderSize;
  h.compatSize = kCompatSize;
  h.stringTableOffset = p.stringTableOffset;
  h.stringTableSize = p.strings.size();
  h.graphTableOffset = p.graphTableOffset;
  h.graphCount = graphs.size();
  h.weightTableOffset = p.weightTableOffset;
  h.weightCount = weights.size();
  h.dataOffset = p.dataOffset;
  h.dataSize = p.dataSize;
  h.sourceTableOffset = p.sourceTableOffset;
  h.sourceCount = p.sources.size();
  h.pinCount = p.pins.size();

  CompatBlock c{};
  c.formatMajor = kFormatMajor;
  c.formatMinor = compat.formatMinor;
  c.producer = p.producer;
  c.producerVersion = p.producerVersion;
  c.targetId = p.targetId;
  c.targetRevision = p.targetRevision;

  bool ok = writeStruct(std::span(meta), 0, h) && writeStruct(std::span(meta), kHeaderSize, c);
  if (!p.strings.empty()) std::memcpy(meta.data() + p.stringTableOffset, p.strings.data(), p.strings.size());
  for (size_t i = 0; i < graphs.size(); ++i) {
    GraphEntry e{};
    e.name = p.graphStrings[i].first;
    e.sourceModel = p.graphStrings[i].second;
    e.programOffset = p.programOffsets[i];
    e.programSize = graphs[i].program.size();
    ok = ok && writeStruct(std::span(meta), p.graphTableOffset + i * kGraphEntrySize, e);
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    const PendingWeight& w = weights[i];
    WeightEntry e{};
    e.offset = p.weightOffsets[i];
    e.size = w.size;
    e.weightFlags = w.sources.empty() ? 0 : kWeightInSource;
    e.elemType = static_cast<uint32_t>(w.type);
    e.rank = static_cast<uint32_t>(w.shape.size());
    for (size_t k = 0; k < w.shape.size(); ++k) e.dims[k] = w.shape[k];
    e.hash = hashes[i].bytes;
    ok = ok && writeStruct(std::span(meta), p.weightTableOffset + i * kWeightEntrySize, e);
  }
  for (size_t i = 0; i < p.sources.size(); ++i) {
    SourceEntry e{};
    e.weight = p.sources[i].weight;
    e.sourceModel = p.sources[i].model;
    e.initializer = p.sources[i].initializer;
    ok = ok && writeStruct(std::span(meta), p.sourceTableOffset + i * kSourceEntrySize, e);
  }
  for (size_t i = 0; i < p.pins.size(); ++i) {
    SourcePinEntry e{};
    e.sourceModel = p.pins[i].model;
    e.file = p.pins[i].file;
    e.size = p.pins[i].pin->size;
    e.hash = p.pins[i].pin->hash.bytes;
    ok = ok && writeStruct(std::span(meta), p.pinTableOffset + i * kSourcePinEntrySize, e);
  }
  if (!ok) return Error(ErrorCode::Internal, "container metadata does not fit its planned size");

  // The checksum field is still zero here, which is how the checksum defines it.
  Hasher128 hasher;
  hasher.update(meta);
  for (const PendingGraph& g : graphs) hasher.update(g.program);
  Hash128 sum = hasher.digest();
  std::memcpy(meta.data() + kChecksumOffset, sum.bytes.data(), kChecksumSize);
  return meta;
}

// A piece of a weight hashed just before it is written, while it is still in the cache.
constexpr size_t kPieceBytes = size_t{1} << 20;

template <typename Write, typename Zeros, typename Patch>
Status ContainerWriter::Impl::emit(Write&& write, Zeros&& zeros, Patch&& patch) const {
  CTX_ASSIGN_OR_RETURN(const Plan* p, getPlan());
  CTX_RETURN_IF_ERROR(zeros(p->dataOffset));  // the metadata's place
  uint64_t cursor = p->dataOffset;
  auto blob = [&](uint64_t offset, std::span<const std::byte> bytes) -> Status {
    CTX_RETURN_IF_ERROR(zeros(offset - cursor));
    CTX_RETURN_IF_ERROR(write(bytes));
    cursor = offset + bytes.size();
    return Status::ok();
  };
  for (size_t i = 0; i < graphs.size(); ++i) CTX_RETURN_IF_ERROR(blob(p->programOffsets[i], graphs[i].program));
  std::vector<Hash128> hashes(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    const PendingWeight& w = weights[i];
    if (w.hash) hashes[i] = *w.hash;
    if (!w.sources.empty()) continue;
    Hasher128 hasher;
    auto piece = [&](std::span<const std::byte> bytes) -> Status {
      if (!w.hash) hasher.update(bytes);
      return write(bytes);
    };
    CTX_RETURN_IF_ERROR(zeros(p->weightOffsets[i] - cursor));
    cursor = p->weightOffsets[i];
    if (!w.produce && !w.produceHashed) {
      for (uint64_t at = 0; at < w.bytes.size(); at += kPieceBytes)
        CTX_RETURN_IF_ERROR(piece(w.bytes.subspan(at, std::min<uint64_t>(kPieceBytes, w.bytes.size() - at))));
      cursor += w.bytes.size();
    } else {
      auto produced = [&](std::span<const std::byte> bytes) -> Status {
        if (cursor - p->weightOffsets[i] + bytes.size() > w.size)
          return Error(ErrorCode::Internal, fmt::format("weight {} gives more than its {} bytes", i, w.size));
        cursor += bytes.size();
        return write(bytes);
      };
      if (w.produceHashed) {
        CTX_ASSIGN_OR_RETURN(hashes[i], w.produceHashed(produced));
      } else {
        CTX_RETURN_IF_ERROR(w.produce(produced));
      }
      if (cursor - p->weightOffsets[i] != w.size)
        return Error(ErrorCode::Internal, fmt::format("weight {} gave {} bytes; its entry records {}", i,
                                                      cursor - p->weightOffsets[i], w.size));
    }
    if (!w.hash && !w.produceHashed) hashes[i] = hasher.digest();
  }
  if (cursor != p->fileSize)
    return Error(ErrorCode::Internal,
                 fmt::format("container ended at {} bytes; its header records {}", cursor, p->fileSize));
  CTX_RETURN_IF_ERROR(checkKeys(hashes));
  CTX_ASSIGN_OR_RETURN(std::vector<std::byte> meta, buildMetadata(*p, hashes));
  return patch(std::span<const std::byte>(meta));
}

Expected<ContainerWriter::Staged> ContainerWriter::stage(const std::filesystem::path& path) const {
  Staged staged;
  CTX_ASSIGN_OR_RETURN(staged.file, AtomicFileWriter::create(path));
  AtomicFileWriter& out = *staged.file;
  if (auto plan = impl_->getPlan()) out.reserve((*plan)->fileSize);
  Status status = impl_->emit([&](std::span<const std::byte> bytes) { return out.write(bytes); },
                              [&](uint64_t count) { return out.writeZeros(count); },
                              [&](std::span<const std::byte> meta) {
                                std::memcpy(staged.checksum.bytes.data(), meta.data() + kChecksumOffset, kChecksumSize);
                                return out.writeAt(0, meta);
                              });
  if (status.isOk()) status = out.finish();
  // Dropping the writer without commit removes the temporary file, so a failure leaves no final name.
  if (!status.isOk()) return status.addContext(fmt::format("writing container '{}'", path.string()));
  return staged;
}

Status ContainerWriter::write(const std::filesystem::path& path) const {
  CTX_ASSIGN_OR_RETURN(auto staged, stage(path));
  return staged.file->commit();
}

Expected<std::vector<std::byte>> ContainerWriter::serialize() const {
  CTX_ASSIGN_OR_RETURN(const Plan* p, impl_->getPlan());
  auto size = toSize(p->fileSize);
  if (!size) return invalidArgument(fmt::format("a container of {} bytes does not fit in memory", p->fileSize));
  std::vector<std::byte> out;
  out.reserve(*size);
  CTX_RETURN_IF_ERROR(impl_->emit(
      [&](std::span<const std::byte> bytes) {
        out.insert(out.end(), bytes.begin(), bytes.end());
        return Status::ok();
      },
      [&](uint64_t count) {
        out.resize(out.size() + static_cast<size_t>(count));
        return Status::ok();
      },
      [&](std::span<const std::byte> meta) {
        std::copy(meta.begin(), meta.end(), out.begin());
        return Status::ok();
      }));
  return out;
}

}  // namespace ctxkit::format
