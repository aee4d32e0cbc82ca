// ContainerView accessors, file opening and full verification (weight hashes, zero padding), plus helpers
// shared by the writer and the reader.
#include "format/container.h"
#include "format/internal.h"
#include "format/layout.h"
#include "support/checked.h"

#include <algorithm>

namespace ctxkit::format {

std::string developmentFormatText(uint16_t major, uint16_t minor) {
  return fmt::format("compiled by ctxkit 0.1.0-dev format {}.{}: recompile", major, minor);
}

namespace detail {

std::string_view stringProblem(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return "contains a control character";
      ++i;
      continue;
    }
    // Lead byte: sequence length and the smallest code point it may encode (rejects overlong forms).
    size_t len;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return "is not valid UTF-8";
    }
    if (n - i < len) return "is not valid UTF-8";
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = p[i + k];
      if ((cc & 0xc0) != 0x80) return "is not valid UTF-8";
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return "is not valid UTF-8";
    i += len;
  }
  return {};
}

std::string hexBytes(std::span<const std::byte> bytes) {
  std::string s;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i) s += ' ';
    s += fmt::format("{:02x}", static_cast<unsigned>(bytes[i]));
  }
  return s;
}

std::string blobName(const BlobRef& blob) {
  return blob.isWeight ? fmt::format("weight {}", blob.index) : fmt::format("graph {} program", blob.index);
}

}  // namespace detail

Expected<ContainerView> ContainerView::openFile(const std::filesystem::path& path) {
  CTX_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapped, MappedFile::open(path));
  std::span<const std::byte> bytes = mapped->bytes();
  return open(bytes, std::move(mapped), path.string());
}

const GraphInfo* ContainerView::findGraph(std::string_view name) const {
  // A session looks up each of its EPContext nodes' graphs: a scan per lookup made loading thousands quadratic.
  auto it = std::lower_bound(graphsByName_.begin(), graphsByName_.end(), name,
                             [&](uint32_t g, std::string_view n) { return std::string_view(graphs_[g].name) < n; });
  if (it != graphsByName_.end() && graphs_[*it].name == name) return &graphs_[*it];
  return nullptr;
}

// Offsets and sizes were validated against the bytes on open, so these subspans are in range.
std::span<const std::byte> ContainerView::programBytes(size_t graphIndex) const {
  if (graphIndex >= graphs_.size()) return {};
  const GraphInfo& g = graphs_[graphIndex];
  return bytes_.subspan(static_cast<size_t>(g.programOffset), static_cast<size_t>(g.programSize));
}

std::span<const std::byte> ContainerView::weightBytes(size_t weightIndex) const {
  if (weightIndex >= weights_.size()) return {};
  const WeightInfo& w = weights_[weightIndex];
  return bytes_.subspan(static_cast<size_t>(w.offset), static_cast<size_t>(w.size));
}

Expected<ir::Tensor> ContainerView::weightTensor(size_t weightIndex) const {
  if (weightIndex >= weights_.size())
    return makeError(ErrorCode::InvalidArgument, "'{}': weight index {} is out of range; the container has {} weights",
                     displayName_, weightIndex, weights_.size());
  const WeightInfo& w = weights_[weightIndex];
  if (w.inSource())
    return makeError(ErrorCode::InvalidArgument,
                     "'{}': weight {} is not in this weightless context binary: it is initializer '{}' of the source "
                     "model '{}'",
                     displayName_, weightIndex, w.sources.front().initializer, w.sources.front().model);
  std::span<const std::byte> bytes = weightBytes(weightIndex);
  auto tensor = ir::Tensor::view(w.type, w.shape, bytes.data(), bytes.size(), owner_);
  if (!tensor)
    tensor.addContext(fmt::format("'{}': weight {}", displayName_, weightIndex));  // (formatted on error only)
  return tensor;
}

Status ContainerView::verify() const {
  using namespace layout;
  // Every weight's content hash; the metadata and programs were already checked by the checksum on open.
  size_t failures = 0;
  std::string first;
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (weights_[i].inSource()) continue;
    Hash128 actual = hash128(weightBytes(i));
    if (actual == weights_[i].hash) continue;
    if (failures++ == 0)
      first = fmt::format("weight {} ({} {} at offset {}) fails its hash: the table records {}, the bytes hash to {}",
                          i, ir::elemTypeName(weights_[i].type), ir::shapeToString(weights_[i].shape),
                          weights_[i].offset, weights_[i].hash.toHex(), actual.toHex());
  }
  if (failures == 1) return makeError(ErrorCode::InvalidGraph, "'{}': {}", displayName_, first);
  if (failures > 1)
    return makeError(ErrorCode::InvalidGraph, "'{}': {} weights fail their hash; the first: {}", displayName_, failures,
                     first);

  // Padding: between the string table and the graph table, after the weight table, and between blobs.
  // The header was validated on open, so its offsets are in range and ordered.
  auto header = readStruct<FileHeader>(bytes_, 0);
  if (!header) return makeError(ErrorCode::Internal, "'{}': header vanished after open", displayName_);
  std::vector<std::pair<uint64_t, uint64_t>> gaps;  // [begin, end)
  gaps.emplace_back(header->stringTableOffset + header->stringTableSize, header->graphTableOffset);
  // The source and pin tables (weightless) follow the weight table; pins_ holds the pin table's entries as read.
  const bool sourceTables = header->sourceCount > 0 || !pins_.empty();
  const uint64_t tablesEnd = sourceTables ? header->sourceTableOffset + header->sourceCount * kSourceEntrySize +
                                                pins_.size() * kSourcePinEntrySize
                                          : header->weightTableOffset + header->weightCount * kWeightEntrySize;
  if (sourceTables)
    gaps.emplace_back(header->weightTableOffset + header->weightCount * kWeightEntrySize, header->sourceTableOffset);
  gaps.emplace_back(tablesEnd, header->dataOffset);
  uint64_t cursor = header->dataOffset;
  auto blob = [&](uint64_t offset, uint64_t size) {
    gaps.emplace_back(cursor, offset);
    cursor = offset + size;
  };
  for (const GraphInfo& g : graphs_) blob(g.programOffset, g.programSize);
  for (const WeightInfo& w : weights_)
    if (!w.inSource()) blob(w.offset, w.size);
  for (auto [begin, end] : gaps) {
    for (uint64_t at = begin; at < end; ++at) {
      auto value = static_cast<unsigned>(bytes_[static_cast<size_t>(at)]);
      if (value != 0)
        return makeError(ErrorCode::InvalidGraph, "'{}': padding byte at offset {} is {:#04x}; expected 0",
                         displayName_, at, value);
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::format
