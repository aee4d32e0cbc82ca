// ContainerView::open: validates a container in a fixed order (header, compatibility block, checksum,
// tables, data-region tiling), applying every rule of docs/bad-input.md#loader-rules that concerns the .bin before
// anything is used.
#include "format/container.h"
#include "format/internal.h"
#include "format/layout.h"
#include "support/checked.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <unordered_map>

namespace ctxkit::format {

using namespace layout;
static_assert(kFormatMajor == 1, "layout.h describes format major 1");

namespace {

std::string versionString(uint16_t major, uint16_t minor) { return fmt::format("{}.{}", major, minor); }

// Reads one container; each step relies only on what the steps before it established.
class Parser {
public:
  // `sealing`: only the checksum is wanted, which is defined alike for the development formats, so that a test can
  // build a well-sealed file of one (it is refused when opened all the same).
  Parser(std::span<const std::byte> bytes, std::string_view name, bool sealing = false)
      : bytes_(bytes), size_(bytes.size()), name_(name), sealing_(sealing) {}

  Status parseHeader();
  Status parseCompat(CompatInfo& out) const;
  Status readProgramRanges();
  Hash128 checksum() const;
  Status checkChecksum() const;
  Status parseGraphs(std::vector<GraphInfo>& out) const;
  Status parseWeights(std::vector<WeightInfo>& out) const;
  Status parseSources(std::vector<WeightInfo>& weights) const;
  Status parsePins(std::vector<SourcePin>& pins) const;
  Status checkTiling() const;
  Status checkUniqueWeights(const std::vector<WeightInfo>& weights) const;

  const FileHeader& header() const { return h_; }
  bool weightless() const { return (h_.flags & kFlagWeightless) != 0; }
  bool loadTimeTensors() const { return (h_.flags & kFlagLoadTime) != 0; }

private:
  template <typename... Args> Error invalid(fmt::format_string<Args...> format, Args&&... args) const {
    return Error(ErrorCode::InvalidGraph,
                 fmt::format("'{}': {}", name_, fmt::format(format, std::forward<Args>(args)...)));
  }
  // Reserved fields only carry meaning in newer minors; in files of this minor they must be zero.
  bool strictReserved() const { return h_.formatMinor <= kFormatMinor; }
  // The pin table's entries: pinCount is 1.5's (reserved before); a newer minor's is not read.
  uint64_t pinCount() const { return strictReserved() && h_.formatMinor >= 5 ? h_.pinCount : 0; }
  Expected<std::string_view> readString(const StringRef& ref, std::string_view what) const;
  Status checkRegion(uint64_t offset, uint64_t size, std::string_view what) const;
  Status checkCount(uint64_t count, uint64_t limit, uint64_t tableOffset, uint64_t entrySize,
                    std::string_view what) const;

  std::span<const std::byte> bytes_;
  uint64_t size_;
  std::string_view name_;
  bool sealing_ = false;
  FileHeader h_{};
  std::vector<detail::BlobRef> programs_;
  mutable std::vector<detail::BlobRef> weightBlobs_;
};

Status Parser::checkRegion(uint64_t offset, uint64_t size, std::string_view what) const {
  if (!rangeFits(offset, size, size_))
    return invalid("{} (offset {}, size {}) extends past the end of the file ({} bytes)", what, offset, size, size_);
  return Status::ok();
}

Status Parser::checkCount(uint64_t count, uint64_t limit, uint64_t tableOffset, uint64_t entrySize,
                          std::string_view what) const {
  if (count > limit) return invalid("{} count {} exceeds the limit of {}", what, count, limit);
  // Rule 2: a count can never promise more entries than the bytes left in the file could hold.
  uint64_t left = tableOffset <= size_ ? size_ - tableOffset : 0;
  if (count > left / entrySize)
    return invalid("{} count {} needs {} bytes of table but only {} bytes follow offset {}", what, count,
                   count * entrySize, left, tableOffset);
  return Status::ok();
}

Status Parser::parseHeader() {
  // Rule 10: magic, major and header size, exactly and in this order.
  if (size_ < kMagic.size())
    return Error(ErrorCode::InvalidGraph,
                 fmt::format("'{}' is not a ctxkit container: it is {} bytes long; expected at least the {}-byte "
                             "header",
                             name_, size_, kHeaderSize));
  if (std::memcmp(bytes_.data(), kMagic.data(), kMagic.size()) != 0)
    return Error(ErrorCode::InvalidGraph,
                 fmt::format("'{}' is not a ctxkit container: it starts with bytes {}; expected the magic {}", name_,
                             detail::hexBytes(bytes_.first(kMagic.size())),
                             detail::hexBytes(std::as_bytes(std::span(kMagic)))));
  if (size_ < 16)
    return invalid("file is truncated at {} bytes; expected at least the {}-byte header", size_, kHeaderSize);
  uint16_t major = 0, minor = 0;
  uint32_t headerSize = 0;
  std::memcpy(&major, bytes_.data() + offsetof(FileHeader, formatMajor), sizeof major);
  std::memcpy(&minor, bytes_.data() + offsetof(FileHeader, formatMinor), sizeof minor);
  std::memcpy(&headerSize, bytes_.data() + offsetof(FileHeader, headerSize), sizeof headerSize);
  if (major != kFormatMajor)
    return Error(ErrorCode::Unsupported, fmt::format("'{}' is container format major {}; this ctxkit reads major {}",
                                                     name_, major, kFormatMajor));
  if (isDevelopmentFormat(major, minor) && !sealing_)
    return Error(ErrorCode::Unsupported, fmt::format("'{}': {}", name_, developmentFormatText(major, minor)));
  if (headerSize != kHeaderSize)
    return invalid("header size is {} bytes; expected {} for format major {}", headerSize, kHeaderSize, kFormatMajor);
  // Rule 1: nothing beyond the fixed header is read or allocated before its sizes are checked.
  auto header = readStruct<FileHeader>(bytes_, 0);
  if (!header)
    return invalid("file is truncated at {} bytes; expected at least the {}-byte header", size_, kHeaderSize);
  h_ = *header;

  if (h_.fileSize != size_)
    return invalid("file is {} bytes but its header records {}; the file is truncated or has extra bytes", size_,
                   h_.fileSize);
  // Within a minor this reader knows, an undefined flag or a nonzero reserved field is damage; in a newer
  // minor only an unknown required feature stops the reader (versioning policy in the format spec).
  const uint64_t unknownFlags = h_.flags & ~knownFlags(std::min(minor, kFormatMinor));
  if (strictReserved()) {
    if (unknownFlags != 0)
      return invalid("flags {:#x} are not defined in format {}; expected 0", unknownFlags, versionString(major, minor));
    if (h_.reserved0 != 0) return invalid("header field reserved0 is {:#x}; expected 0", h_.reserved0);
  } else if ((unknownFlags & kRequiredFlagsMask) != 0) {
    return Error(ErrorCode::Unsupported,
                 fmt::format("'{}' (format {}) needs features this ctxkit does not know (required flags {:#x}); this "
                             "ctxkit reads format {}",
                             name_, versionString(major, minor), unknownFlags & kRequiredFlagsMask,
                             versionString(kFormatMajor, kFormatMinor)));
  }

  // Rule 8: a power of two within bounds; blob offsets are checked against it later.
  if (!isPowerOfTwo(h_.alignment) || h_.alignment < kMinAlignment || h_.alignment > kMaxAlignment)
    return invalid("alignment is {}; expected a power of two from {} to {}", h_.alignment, kMinAlignment,
                   kMaxAlignment);

  // Metadata regions sit at fixed places derived from the sizes before them; each is range-checked
  // (rule 4) and sized within caps (rules 1 and 2) before anything inside it is read.
  if (h_.compatOffset != kHeaderSize)
    return invalid("compatibility block offset is {}; expected {} (right after the header)", h_.compatOffset,
                   kHeaderSize);
  if (h_.compatSize != kCompatSize)
    return invalid("compatibility block size is {} bytes; expected {}", h_.compatSize, kCompatSize);
  CTX_RETURN_IF_ERROR(checkRegion(h_.compatOffset, h_.compatSize, "compatibility block"));

  const uint64_t stringsAt = kHeaderSize + kCompatSize;
  if (h_.stringTableOffset != stringsAt)
    return invalid("string table offset is {}; expected {} (right after the compatibility block)", h_.stringTableOffset,
                   stringsAt);
  if (h_.stringTableSize > kMaxStringTableBytes)
    return invalid("string table size {} exceeds the limit of {} bytes", h_.stringTableSize, kMaxStringTableBytes);
  CTX_RETURN_IF_ERROR(checkRegion(h_.stringTableOffset, h_.stringTableSize, "string table"));

  const uint64_t graphsAt = alignUp(h_.stringTableOffset + h_.stringTableSize, kTableAlignment);
  if (h_.graphTableOffset != graphsAt)
    return invalid("graph table offset is {}; expected {} (end of the string table rounded up to {})",
                   h_.graphTableOffset, graphsAt, kTableAlignment);
  CTX_RETURN_IF_ERROR(checkCount(h_.graphCount, kMaxGraphs, h_.graphTableOffset, kGraphEntrySize, "graph"));

  const uint64_t weightsAt = h_.graphTableOffset + h_.graphCount * kGraphEntrySize;
  if (h_.weightTableOffset != weightsAt)
    return invalid("weight table offset is {}; expected {} (right after {} graph entries)", h_.weightTableOffset,
                   weightsAt, h_.graphCount);
  CTX_RETURN_IF_ERROR(checkCount(h_.weightCount, kMaxWeights, h_.weightTableOffset, kWeightEntrySize, "weight"));

  // Both tables lie inside the file now, so these sums are below the file size and cannot overflow.
  uint64_t metadataEnd = h_.weightTableOffset + h_.weightCount * kWeightEntrySize;
  if (strictReserved() && h_.formatMinor < 5 && h_.pinCount != 0)
    return invalid("header field reserved1 is {:#x}; expected 0 (format {})", h_.pinCount, versionString(major, minor));
  const uint64_t pins = pinCount();
  if (weightless() && (h_.sourceCount > 0 || pins > 0)) {
    if (h_.sourceTableOffset != metadataEnd)
      return invalid("source table offset is {}; expected {} (right after {} weight entries)", h_.sourceTableOffset,
                     metadataEnd, h_.weightCount);
    CTX_RETURN_IF_ERROR(
        checkCount(h_.sourceCount, kMaxSources, h_.sourceTableOffset, kSourceEntrySize, "weight source"));
    metadataEnd = h_.sourceTableOffset + h_.sourceCount * kSourceEntrySize;
    CTX_RETURN_IF_ERROR(checkCount(pins, kMaxSourcePins, metadataEnd, kSourcePinEntrySize, "source pin"));
    metadataEnd += pins * kSourcePinEntrySize;
  } else if (strictReserved() && (h_.sourceCount != 0 || h_.sourceTableOffset != 0 || h_.pinCount != 0)) {
    return invalid("header records a source table (offset {}, {} entries, {} pins) but the file is not weightless",
                   h_.sourceTableOffset, h_.sourceCount, h_.pinCount);
  }
  const uint64_t dataAt = alignUp(metadataEnd, h_.alignment);
  if (h_.dataOffset != dataAt)
    return invalid("data region offset is {}; expected {} (end of the metadata tables rounded up to the alignment {})",
                   h_.dataOffset, dataAt, h_.alignment);
  if (h_.dataOffset > size_)
    return invalid("data region offset {} is past the end of the file ({} bytes)", h_.dataOffset, size_);
  if (h_.dataSize != size_ - h_.dataOffset)
    return invalid("data region size is {} bytes; expected {} (from offset {} to the end of the file)", h_.dataSize,
                   size_ - h_.dataOffset, h_.dataOffset);
  // Rule 16: every offset is now at most the size of a span, so it fits size_t.
  if (!toSize(h_.fileSize)) return invalid("file size {} does not fit this host's address space", h_.fileSize);
  return Status::ok();
}

Expected<std::string_view> Parser::readString(const StringRef& ref, std::string_view what) const {
  if (ref.length > kMaxStringBytes)
    return invalid("{} is {} bytes long; the limit is {}", what, ref.length, kMaxStringBytes);
  if (!rangeFits(ref.offset, ref.length, h_.stringTableSize))
    return invalid("{} (offset {}, length {}) lies outside the string table of {} bytes", what, ref.offset, ref.length,
                   h_.stringTableSize);
  const char* base = reinterpret_cast<const char*>(bytes_.data() + h_.stringTableOffset);
  std::string_view s(base + ref.offset, static_cast<size_t>(ref.length));
  // Rule 14: strings are data; they are checked to be printable and are never interpreted.
  std::string_view problem = detail::stringProblem(s);
  if (!problem.empty()) return invalid("{} {}", what, problem);
  return s;
}

Status Parser::parseCompat(CompatInfo& out) const {
  auto c = readStruct<CompatBlock>(bytes_, h_.compatOffset);
  if (!c) return invalid("compatibility block lies outside the file");
  if (c->formatMajor != h_.formatMajor || c->formatMinor != h_.formatMinor)
    return invalid("compatibility block records format {} but the header records {}",
                   versionString(c->formatMajor, c->formatMinor), versionString(h_.formatMajor, h_.formatMinor));
  if (strictReserved()) {
    if (c->reserved0 != 0) return invalid("compatibility block field reserved0 is {:#x}; expected 0", c->reserved0);
    for (size_t i = 0; i < c->reserved1.size(); ++i)
      if (c->reserved1[i] != 0)
        return invalid("compatibility block field reserved1[{}] is {:#x}; expected 0", i, c->reserved1[i]);
  }
  CTX_ASSIGN_OR_RETURN(std::string_view producer, readString(c->producer, "compatibility block producer"));
  CTX_ASSIGN_OR_RETURN(std::string_view version,
                       readString(c->producerVersion, "compatibility block producer version"));
  CTX_ASSIGN_OR_RETURN(std::string_view target, readString(c->targetId, "compatibility block target id"));
  CTX_ASSIGN_OR_RETURN(std::string_view revision, readString(c->targetRevision, "compatibility block target revision"));
  out.producer = producer;
  out.producerVersion = version;
  out.targetId = target;
  out.targetRevision = revision;
  out.formatMajor = c->formatMajor;
  out.formatMinor = c->formatMinor;
  return Status::ok();
}

Status Parser::readProgramRanges() {
  programs_.clear();
  programs_.reserve(static_cast<size_t>(h_.graphCount));
  for (uint64_t i = 0; i < h_.graphCount; ++i) {
    auto e = readStruct<GraphEntry>(bytes_, h_.graphTableOffset + i * kGraphEntrySize);
    if (!e) return invalid("graph {} entry lies outside the file", i);
    if (!rangeFits(e->programOffset, e->programSize, size_))
      return invalid("graph {} program (offset {}, size {}) extends past the end of the file ({} bytes)", i,
                     e->programOffset, e->programSize, size_);
    programs_.push_back({false, static_cast<size_t>(i), e->programOffset, e->programSize});
  }
  return Status::ok();
}

Hash128 Parser::checksum() const {
  static constexpr std::array<std::byte, kChecksumSize> zeros{};
  Hasher128 hasher;
  hasher.update(bytes_.subspan(0, kChecksumOffset));
  hasher.update(zeros);
  const size_t metaEnd = static_cast<size_t>(h_.dataOffset);
  hasher.update(bytes_.subspan(kChecksumOffset + kChecksumSize, metaEnd - (kChecksumOffset + kChecksumSize)));
  for (const detail::BlobRef& p : programs_)
    hasher.update(bytes_.subspan(static_cast<size_t>(p.offset), static_cast<size_t>(p.size)));
  return hasher.digest();
}

Status Parser::checkChecksum() const {
  Hash128 stored;
  std::copy(h_.checksum.begin(), h_.checksum.end(), stored.bytes.begin());
  Hash128 actual = checksum();
  if (actual != stored)
    return invalid("checksum mismatch: the header records {} but the metadata and programs hash to {}; the file "
                   "is corrupt or was modified",
                   stored.toHex(), actual.toHex());
  return Status::ok();
}

Status Parser::parseGraphs(std::vector<GraphInfo>& out) const {
  out.clear();
  out.reserve(static_cast<size_t>(h_.graphCount));
  std::unordered_map<std::string_view, size_t> seen;
  for (uint64_t i = 0; i < h_.graphCount; ++i) {
    auto e = readStruct<GraphEntry>(bytes_, h_.graphTableOffset + i * kGraphEntrySize);
    if (!e) return invalid("graph {} entry lies outside the file", i);
    CTX_ASSIGN_OR_RETURN(std::string_view name, readString(e->name, fmt::format("graph {} name", i)));
    if (name.empty()) return invalid("graph {} has an empty name", i);
    CTX_ASSIGN_OR_RETURN(std::string_view source,
                         readString(e->sourceModel, fmt::format("graph '{}' source model", name)));
    if (strictReserved())
      for (size_t k = 0; k < e->reserved.size(); ++k)
        if (e->reserved[k] != 0)
          return invalid("graph '{}' field reserved[{}] is {:#x}; expected 0", name, k, e->reserved[k]);
    // Rule 9: names are keys (partition_name); a repeat would make lookups ambiguous.
    auto [it, inserted] = seen.emplace(name, static_cast<size_t>(i));
    if (!inserted)
      return invalid("graph name '{}' appears twice (graphs {} and {}); expected unique names", name, it->second, i);
    if (e->programOffset % h_.alignment != 0)
      return invalid("graph '{}' program offset {} is not a multiple of the alignment {}", name, e->programOffset,
                     h_.alignment);
    GraphInfo g;
    g.name = name;
    g.sourceModel = source;
    g.programOffset = e->programOffset;
    g.programSize = e->programSize;
    out.push_back(std::move(g));
  }
  return Status::ok();
}

Status Parser::parseWeights(std::vector<WeightInfo>& out) const {
  out.clear();
  out.reserve(static_cast<size_t>(h_.weightCount));
  weightBlobs_.clear();
  weightBlobs_.reserve(static_cast<size_t>(h_.weightCount));
  for (uint64_t i = 0; i < h_.weightCount; ++i) {
    auto e = readStruct<WeightEntry>(bytes_, h_.weightTableOffset + i * kWeightEntrySize);
    if (!e) return invalid("weight {} entry lies outside the file", i);
    // Rule 7: type and rank are checked before they select a size or index the dims array.
    auto type = e->elemType <= static_cast<uint32_t>(ir::kMaxElemType)
                    ? ir::elemTypeFromInt(static_cast<int32_t>(e->elemType))
                    : std::nullopt;
    if (!type)
      return invalid("weight {} has element type {}; expected an ONNX tensor type from 1 to {}", i, e->elemType,
                     ir::kMaxElemType);
    if (!ir::storageBytes(*type, 1))
      return invalid("weight {} has element type {}, which has no fixed byte size", i, ir::elemTypeName(*type));
    if (e->rank > kMaxRank) return invalid("weight {} has rank {}; expected at most {}", i, e->rank, kMaxRank);
    ir::Shape shape(e->dims.begin(), e->dims.begin() + e->rank);
    for (uint32_t k = 0; k < kMaxRank; ++k) {
      if (k < e->rank && e->dims[k] < 0)
        return invalid("weight {} dimension {} is {}; expected a non-negative size", i, k, e->dims[k]);
      if (k >= e->rank && e->dims[k] != 0)
        return invalid("weight {} has rank {} but unused dimension slot {} holds {}; expected 0", i, e->rank, k,
                       e->dims[k]);
    }
    if (strictReserved()) {
      for (size_t k = 0; k < e->reserved.size(); ++k)
        if (e->reserved[k] != 0)
          return invalid("weight {} field reserved[{}] is {:#x}; expected 0", i, k, e->reserved[k]);
      const uint64_t known = weightless() ? kWeightInSource : 0;
      if ((e->weightFlags & ~known) != 0)
        return invalid("weight {} flags {:#x} are not defined{}", i, e->weightFlags & ~known,
                       weightless() ? "" : " in a container that is not weightless");
    }
    const bool inSource = weightless() && (e->weightFlags & kWeightInSource) != 0;
    // Rules 3 and 6: the byte length is exactly what the shape needs, computed without overflow.
    auto count = checkedElementCount(shape);
    auto needed = count ? ir::storageBytes(*type, *count) : std::nullopt;
    if (!needed)
      return invalid("weight {} shape {} of {} has more bytes than fit in 64 bits", i, ir::shapeToString(shape),
                     ir::elemTypeName(*type));
    if (*needed != e->size)
      return invalid("weight {} size is {} bytes; a {} tensor of shape {} needs {}", i, e->size,
                     ir::elemTypeName(*type), ir::shapeToString(shape), *needed);
    if (inSource && e->offset != 0)
      return invalid("weight {} lives in a source model but records offset {}; expected 0", i, e->offset);
    if (!inSource && !rangeFits(e->offset, e->size, size_))
      return invalid("weight {} (offset {}, size {}) extends past the end of the file ({} bytes)", i, e->offset,
                     e->size, size_);
    if (e->offset % h_.alignment != 0)
      return invalid("weight {} offset {} is not a multiple of the alignment {}", i, e->offset, h_.alignment);
    WeightInfo w;
    w.type = *type;
    w.shape = std::move(shape);
    w.offset = e->offset;
    w.size = e->size;
    std::copy(e->hash.begin(), e->hash.end(), w.hash.bytes.begin());
    if (inSource) w.sources.emplace_back();  // filled in by parseSources
    out.push_back(std::move(w));
    if (!inSource) weightBlobs_.push_back({true, static_cast<size_t>(i), e->offset, e->size});
  }
  return Status::ok();
}

Status Parser::parseSources(std::vector<WeightInfo>& weights) const {
  std::vector<std::vector<WeightInfo::Source>> found(weights.size());
  uint32_t previous = 0;
  for (uint64_t i = 0; i < h_.sourceCount && weightless(); ++i) {
    auto e = readStruct<SourceEntry>(bytes_, h_.sourceTableOffset + i * kSourceEntrySize);
    if (!e) return invalid("weight source {} entry lies outside the file", i);
    if (e->weight >= weights.size() || !weights[e->weight].inSource())
      return invalid("weight source {} names weight {}, which is not a weight in a source model", i, e->weight);
    if (e->weight < previous)
      return invalid("weight source {} (weight {}) follows weight {}; expected entries sorted by weight", i, e->weight,
                     previous);
    previous = e->weight;
    if (strictReserved() && e->reserved != 0)
      return invalid("weight source {} field reserved is {:#x}; expected 0", i, e->reserved);
    CTX_ASSIGN_OR_RETURN(std::string_view model, readString(e->sourceModel, fmt::format("weight source {} model", i)));
    CTX_ASSIGN_OR_RETURN(std::string_view name,
                         readString(e->initializer, fmt::format("weight source {} initializer", i)));
    if (model.empty() || name.empty()) return invalid("weight source {} has an empty model or initializer name", i);
    found[e->weight].push_back(WeightInfo::Source{std::string(model), std::string(name)});
  }
  for (size_t w = 0; w < weights.size(); ++w) {
    if (!weights[w].inSource()) continue;
    if (found[w].empty()) return invalid("weight {} lives in a source model but no weight source names it", w);
    weights[w].sources = std::move(found[w]);
  }
  return Status::ok();
}

Status Parser::parsePins(std::vector<SourcePin>& out) const {
  const uint64_t pins = weightless() ? pinCount() : 0;
  const uint64_t at = h_.sourceTableOffset + h_.sourceCount * kSourceEntrySize;
  for (uint64_t i = 0; i < pins; ++i) {
    auto e = readStruct<SourcePinEntry>(bytes_, at + i * kSourcePinEntrySize);
    if (!e) return invalid("source pin {} entry lies outside the file", i);
    if (e->reserved != 0) return invalid("source pin {} field reserved is {:#x}; expected 0", i, e->reserved);
    CTX_ASSIGN_OR_RETURN(std::string_view model, readString(e->sourceModel, fmt::format("source pin {} model", i)));
    CTX_ASSIGN_OR_RETURN(std::string_view file, readString(e->file, fmt::format("source pin {} file", i)));
    if (model.empty()) return invalid("source pin {} has an empty model name", i);
    SourcePin pin{std::string(model), std::string(file), e->size, {}};
    std::copy(e->hash.begin(), e->hash.end(), pin.hash.bytes.begin());
    if (!out.empty() && std::tie(out.back().model, out.back().file) >= std::tie(pin.model, pin.file))
      return invalid("source pin {} ('{}' of '{}') does not follow pin {} ('{}' of '{}'); expected entries sorted by "
                     "model and file, each once",
                     i, pin.file, pin.model, i - 1, out.back().file, out.back().model);
    out.push_back(std::move(pin));
  }
  return Status::ok();
}

Status Parser::checkTiling() const {
  // Rule 5: programs then weights, each at the first aligned offset after the previous blob, the last one
  // ending the file. Every byte of the data region is then a blob or alignment padding.
  uint64_t cursor = h_.dataOffset;
  const detail::BlobRef* before = nullptr;  // named only in an error: every load checks the tiling
  auto previousName = [&] { return before ? detail::blobName(*before) : std::string("the start of the data region"); };
  auto visit = [&](const detail::BlobRef& blob) -> Status {
    // cursor is at most the size of a span in memory, far below 2^64 - alignment: no overflow.
    uint64_t expected = alignUp(cursor, h_.alignment);
    if (blob.offset < cursor)
      return invalid("{} (offset {}, size {}) overlaps {}, which ends at {}", detail::blobName(blob), blob.offset,
                     blob.size, previousName(), cursor);
    if (blob.offset != expected)
      return invalid("{} starts at offset {}, leaving a gap of {} bytes after {}; expected offset {} (the next "
                     "multiple of the alignment {})",
                     detail::blobName(blob), blob.offset, blob.offset - cursor, previousName(), expected, h_.alignment);
    cursor = blob.offset + blob.size;
    before = &blob;
    return Status::ok();
  };
  for (const detail::BlobRef& p : programs_) CTX_RETURN_IF_ERROR(visit(p));
  for (const detail::BlobRef& w : weightBlobs_) CTX_RETURN_IF_ERROR(visit(w));
  if (cursor != size_)
    return invalid("the last blob ({}) ends at offset {} but the file is {} bytes; expected no trailing bytes",
                   previousName(), cursor, size_);
  return Status::ok();
}

Status Parser::checkUniqueWeights(const std::vector<WeightInfo>& weights) const {
  // Rule 9 for weights: the table is keyed by content (type, shape, hash), each unique weight once. A load checks it
  // every time: the weights are sorted by their hash as two integers (any order groups equal hashes), and only a group
  // of one hash is sorted by type, shape and table position to compare neighbours.
  struct Key {
    uint64_t high, low;
    size_t index;
    auto operator<=>(const Key&) const = default;
  };
  std::vector<Key> keys(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    std::memcpy(&keys[i].high, weights[i].hash.bytes.data(), sizeof(uint64_t));
    std::memcpy(&keys[i].low, weights[i].hash.bytes.data() + sizeof(uint64_t), sizeof(uint64_t));
    keys[i].index = i;
  }
  std::sort(keys.begin(), keys.end());
  auto content = [&](const Key& k) { return std::tie(weights[k.index].type, weights[k.index].shape, k.index); };
  for (size_t end = 0, begin = 0; begin < keys.size(); begin = end) {
    for (end = begin + 1; end < keys.size() && keys[end].high == keys[begin].high && keys[end].low == keys[begin].low;)
      ++end;
    if (end - begin < 2) continue;
    std::sort(keys.begin() + static_cast<ptrdiff_t>(begin), keys.begin() + static_cast<ptrdiff_t>(end),
              [&](const Key& a, const Key& b) { return content(a) < content(b); });
    for (size_t k = begin + 1; k < end; ++k) {
      const WeightInfo &a = weights[keys[k - 1].index], &b = weights[keys[k].index];
      if (a.type == b.type && a.shape == b.shape)
        return invalid("weight {} repeats weight {} (same element type, shape and hash {}); expected each unique "
                       "weight once",
                       keys[k].index, keys[k - 1].index, b.hash.toHex());
    }
  }
  return Status::ok();
}

}  // namespace

Expected<ContainerView> ContainerView::open(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                                            std::string displayName) {
  Parser parser(bytes, displayName);
  ContainerView view;
  CTX_RETURN_IF_ERROR(parser.parseHeader());
  CTX_RETURN_IF_ERROR(parser.parseCompat(view.compat_));
  CTX_RETURN_IF_ERROR(parser.readProgramRanges());
  CTX_RETURN_IF_ERROR(parser.checkChecksum());
  CTX_RETURN_IF_ERROR(parser.parseGraphs(view.graphs_));
  view.graphsByName_.resize(view.graphs_.size());
  for (size_t g = 0; g < view.graphs_.size(); ++g) view.graphsByName_[g] = static_cast<uint32_t>(g);
  std::stable_sort(view.graphsByName_.begin(), view.graphsByName_.end(),
                   [&](uint32_t a, uint32_t b) { return view.graphs_[a].name < view.graphs_[b].name; });
  CTX_RETURN_IF_ERROR(parser.parseWeights(view.weights_));
  CTX_RETURN_IF_ERROR(parser.parseSources(view.weights_));
  CTX_RETURN_IF_ERROR(parser.parsePins(view.pins_));
  CTX_RETURN_IF_ERROR(parser.checkTiling());
  CTX_RETURN_IF_ERROR(parser.checkUniqueWeights(view.weights_));
  view.bytes_ = bytes;
  view.owner_ = std::move(owner);
  view.displayName_ = std::move(displayName);
  view.alignment_ = parser.header().alignment;
  view.weightless_ = parser.weightless();
  view.loadTimeTensors_ = parser.loadTimeTensors();
  std::copy(parser.header().checksum.begin(), parser.header().checksum.end(), view.checksum_.bytes.begin());
  return view;
}

namespace layout {

Expected<Hash128> computeChecksum(std::span<const std::byte> file, std::string_view displayName) {
  Parser parser(file, displayName, /*sealing=*/true);
  CTX_RETURN_IF_ERROR(parser.parseHeader());
  CTX_RETURN_IF_ERROR(parser.readProgramRanges());
  return parser.checksum();
}

Status sealChecksum(std::span<std::byte> file, std::string_view displayName) {
  CTX_ASSIGN_OR_RETURN(Hash128 sum, computeChecksum(file, displayName));
  std::memcpy(file.data() + kChecksumOffset, sum.bytes.data(), kChecksumSize);
  return Status::ok();
}

}  // namespace layout

}  // namespace ctxkit::format
