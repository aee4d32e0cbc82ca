// On-disk layout of ctxkit container format v1 (docs/format/container-v1.md): structs, limits, raw helpers.
// One header shared by the writer, the reader and the inspector. All integers are little-endian; every
// struct is fixed-size with no implicit padding, so a struct's bytes are exactly its on-disk bytes.
#pragma once

#include "support/hash.h"
#include "support/status.h"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

namespace ctxkit::format::layout {

// Structs are copied to and from file bytes with memcpy; a big-endian host would need byte swapping.
static_assert(std::endian::native == std::endian::little, "container I/O assumes a little-endian host");

// The version numbers themselves are format::kFormatMajor / kFormatMinor (container.h). This file describes
// major 1; a new major gets its own layout.

// "\x89CTXKIT\n": the high byte catches 7-bit transfers, the newline catches line-ending conversion.
inline constexpr std::array<uint8_t, 8> kMagic = {0x89, 'C', 'T', 'X', 'K', 'I', 'T', '\n'};

// A string in the string table: `length` UTF-8 bytes at `offset` from the table's start, no terminator.
struct StringRef {
  uint64_t offset;
  uint64_t length;
};
static_assert(sizeof(StringRef) == 16);

// At file offset 0. The first 16 bytes (magic, major, minor, header size) keep their place in every major.
struct FileHeader {
  std::array<uint8_t, 8> magic;
  uint16_t formatMajor;
  uint16_t formatMinor;
  uint32_t headerSize;               // = sizeof(FileHeader), checked exactly
  std::array<uint8_t, 16> checksum;  // XXH3-128, canonical (big-endian) bytes; see kChecksumOffset
  uint64_t flags;                    // bits 0-31 required features, bits 32-63 optional features
  uint64_t fileSize;
  uint32_t alignment;  // of every blob in the data region: power of two, kMinAlignment..kMaxAlignment
  uint32_t reserved0;
  uint64_t compatOffset;
  uint64_t compatSize;
  uint64_t stringTableOffset;
  uint64_t stringTableSize;
  uint64_t graphTableOffset;
  uint64_t graphCount;
  uint64_t weightTableOffset;
  uint64_t weightCount;
  uint64_t dataOffset;
  uint64_t dataSize;
  uint64_t sourceTableOffset;  // with kFlagWeightless: the source table, right after the weight table
  uint64_t sourceCount;
  uint64_t pinCount;  // with kFlagWeightless: the pin table, right after the source table (format 1.5)
};
static_assert(std::is_trivially_copyable_v<FileHeader> && std::is_standard_layout_v<FileHeader>);
static_assert(sizeof(FileHeader) == 160);
static_assert(offsetof(FileHeader, magic) == 0);
static_assert(offsetof(FileHeader, formatMajor) == 8);
static_assert(offsetof(FileHeader, formatMinor) == 10);
static_assert(offsetof(FileHeader, headerSize) == 12);
static_assert(offsetof(FileHeader, checksum) == 16);
static_assert(offsetof(FileHeader, flags) == 32);
static_assert(offsetof(FileHeader, fileSize) == 40);
static_assert(offsetof(FileHeader, alignment) == 48);
static_assert(offsetof(FileHeader, reserved0) == 52);
static_assert(offsetof(FileHeader, compatOffset) == 56);
static_assert(offsetof(FileHeader, compatSize) == 64);
static_assert(offsetof(FileHeader, stringTableOffset) == 72);
static_assert(offsetof(FileHeader, stringTableSize) == 80);
static_assert(offsetof(FileHeader, graphTableOffset) == 88);
static_assert(offsetof(FileHeader, graphCount) == 96);
static_assert(offsetof(FileHeader, weightTableOffset) == 104);
static_assert(offsetof(FileHeader, weightCount) == 112);
static_assert(offsetof(FileHeader, dataOffset) == 120);
static_assert(offsetof(FileHeader, dataSize) == 128);
static_assert(offsetof(FileHeader, sourceTableOffset) == 136);
static_assert(offsetof(FileHeader, sourceCount) == 144);
static_assert(offsetof(FileHeader, pinCount) == 152);

// Right after the header. Who wrote the file and for which target; read before any table.
struct CompatBlock {
  uint16_t formatMajor;  // must repeat the header's version
  uint16_t formatMinor;
  uint32_t reserved0;
  StringRef producer;
  StringRef producerVersion;
  StringRef targetId;
  StringRef targetRevision;
  std::array<uint64_t, 3> reserved1;
};
static_assert(std::is_trivially_copyable_v<CompatBlock> && std::is_standard_layout_v<CompatBlock>);
static_assert(sizeof(CompatBlock) == 96);
static_assert(offsetof(CompatBlock, formatMajor) == 0);
static_assert(offsetof(CompatBlock, formatMinor) == 2);
static_assert(offsetof(CompatBlock, reserved0) == 4);
static_assert(offsetof(CompatBlock, producer) == 8);
static_assert(offsetof(CompatBlock, producerVersion) == 24);
static_assert(offsetof(CompatBlock, targetId) == 40);
static_assert(offsetof(CompatBlock, targetRevision) == 56);
static_assert(offsetof(CompatBlock, reserved1) == 72);

// One per compiled program; the program blob lives in the data region.
struct GraphEntry {
  StringRef name;          // partition_name, unique in the container
  StringRef sourceModel;   // onnx_model_filename
  uint64_t programOffset;  // from the start of the file
  uint64_t programSize;
  std::array<uint64_t, 2> reserved;
};
static_assert(std::is_trivially_copyable_v<GraphEntry> && std::is_standard_layout_v<GraphEntry>);
static_assert(sizeof(GraphEntry) == 64);
static_assert(offsetof(GraphEntry, name) == 0);
static_assert(offsetof(GraphEntry, sourceModel) == 16);
static_assert(offsetof(GraphEntry, programOffset) == 32);
static_assert(offsetof(GraphEntry, programSize) == 40);
static_assert(offsetof(GraphEntry, reserved) == 48);

inline constexpr uint32_t kMaxRank = 8;

// One per unique weight; programs refer to weights by their index in this table.
struct WeightEntry {
  uint64_t offset;    // from the start of the file
  uint64_t size;      // bytes = storage size of product(dims) elements of elemType
  uint32_t elemType;  // ONNX TensorProto.DataType number
  uint32_t rank;
  std::array<int64_t, kMaxRank> dims;  // dims[rank..7] are zero
  std::array<uint8_t, 16> hash;        // XXH3-128 of the weight's bytes, canonical (big-endian)
  uint64_t weightFlags;                // kWeightInSource
  std::array<uint64_t, 2> reserved;
};
static_assert(std::is_trivially_copyable_v<WeightEntry> && std::is_standard_layout_v<WeightEntry>);
static_assert(sizeof(WeightEntry) == 128);
static_assert(offsetof(WeightEntry, offset) == 0);
static_assert(offsetof(WeightEntry, size) == 8);
static_assert(offsetof(WeightEntry, elemType) == 16);
static_assert(offsetof(WeightEntry, rank) == 20);
static_assert(offsetof(WeightEntry, dims) == 24);
static_assert(offsetof(WeightEntry, hash) == 88);
static_assert(offsetof(WeightEntry, weightFlags) == 104);
static_assert(offsetof(WeightEntry, reserved) == 112);

// Weightless containers: where a weight lives in a source model (an initializer of that name). A weight
// the programs of several source models use has one entry per model; entries are sorted by weight index.
struct SourceEntry {
  uint32_t weight;  // index in the weight table; that weight has kWeightInSource
  uint32_t reserved;
  StringRef sourceModel;  // onnx_model_filename of the graphs that use it
  StringRef initializer;  // the initializer's name in that model
};
static_assert(std::is_trivially_copyable_v<SourceEntry> && std::is_standard_layout_v<SourceEntry>);
static_assert(sizeof(SourceEntry) == 40);
static_assert(offsetof(SourceEntry, weight) == 0);
static_assert(offsetof(SourceEntry, reserved) == 4);
static_assert(offsetof(SourceEntry, sourceModel) == 8);
static_assert(offsetof(SourceEntry, initializer) == 24);

// Weightless containers: a file of a source model as it was compiled from, which the runtime refuses to take weights
// from when it differs: the model itself (`file` empty) or an external data file it names (`file` its location as
// the model records it). Entries are sorted by (sourceModel, file), each pair once.
struct SourcePinEntry {
  StringRef sourceModel;         // onnx_model_filename of the graphs compiled from it
  StringRef file;                // empty: the model file; else an external data location
  uint64_t size;                 // bytes
  std::array<uint8_t, 16> hash;  // XXH3-128 of the whole file, canonical (big-endian)
  uint64_t reserved;
};
static_assert(std::is_trivially_copyable_v<SourcePinEntry> && std::is_standard_layout_v<SourcePinEntry>);
static_assert(sizeof(SourcePinEntry) == 64);
static_assert(offsetof(SourcePinEntry, sourceModel) == 0);
static_assert(offsetof(SourcePinEntry, file) == 16);
static_assert(offsetof(SourcePinEntry, size) == 32);
static_assert(offsetof(SourcePinEntry, hash) == 40);
static_assert(offsetof(SourcePinEntry, reserved) == 56);

inline constexpr uint64_t kHeaderSize = sizeof(FileHeader);
inline constexpr uint64_t kCompatSize = sizeof(CompatBlock);
inline constexpr uint64_t kGraphEntrySize = sizeof(GraphEntry);
inline constexpr uint64_t kWeightEntrySize = sizeof(WeightEntry);
inline constexpr uint64_t kSourceEntrySize = sizeof(SourceEntry);
inline constexpr uint64_t kSourcePinEntrySize = sizeof(SourcePinEntry);
inline constexpr uint64_t kChecksumOffset = offsetof(FileHeader, checksum);
inline constexpr uint64_t kChecksumSize = 16;
// Metadata regions after the string table start on this boundary.
inline constexpr uint64_t kTableAlignment = 8;

inline constexpr uint64_t kMinAlignment = 64;
inline constexpr uint64_t kMaxAlignment = 65536;
inline constexpr uint64_t kDefaultAlignment = 64;

// Caps a reader applies before allocating anything; the writer refuses to exceed them.
inline constexpr uint64_t kMaxStringBytes = 4096;              // one string
inline constexpr uint64_t kMaxStringTableBytes = 64ull << 20;  // the whole string table
inline constexpr uint64_t kMaxGraphs = 1ull << 20;
inline constexpr uint64_t kMaxWeights = 1ull << 24;

// Flags: required features (low half) make a reader that does not know them refuse the file; optional
// features (high half) may be ignored.
inline constexpr uint64_t kRequiredFlagsMask = 0x00000000ffffffffull;
// Required: a weightless container (docs/weight-sharing.md#weightless). Weights with kWeightInSource have no bytes here
// (offset 0, no blob): the runtime takes them from the source model the source table names. Every weight is in plain
// layout; a program that asks for a packed layout gets it packed at load.
inline constexpr uint64_t kFlagWeightless = 1ull << 0;
// Required, set in every file: the programs are of encoding 4 (docs/format/program.md), which the development
// readers of formats 1.2 and 1.3 cannot decode, so that they refuse the file. Bit 1 is not defined.
inline constexpr uint64_t kFlagProgramsV4 = 1ull << 2;
// Required, format 1.5: some program holds load-time tensors (program encoding 4's tensor kind 5), which readers of
// 1.4 cannot decode, so that they refuse the file; set exactly when a program holds one.
inline constexpr uint64_t kFlagLoadTime = 1ull << 3;
// The flags each minor defines (a file of a minor this reader knows sets no other).
inline constexpr uint64_t knownFlags(uint16_t minor) {
  return kFlagWeightless | kFlagProgramsV4 | (minor >= 5 ? kFlagLoadTime : 0);
}
inline constexpr uint64_t kWeightInSource = 1ull << 0;
inline constexpr uint64_t kMaxSources = 1ull << 26;
inline constexpr uint64_t kMaxSourcePins = 1ull << 20;

// Copies a struct out of file bytes; nullopt when [offset, offset + sizeof(T)) is not inside `bytes`.
template <typename T> std::optional<T> readStruct(std::span<const std::byte> bytes, uint64_t offset) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (offset > bytes.size() || sizeof(T) > bytes.size() - offset) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// Copies a struct into file bytes; false when it does not fit.
template <typename T> bool writeStruct(std::span<std::byte> bytes, uint64_t offset, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (offset > bytes.size() || sizeof(T) > bytes.size() - offset) return false;
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
  return true;
}

// The container checksum of `file`: XXH3-128 over bytes [0, dataOffset) with the checksum field read as
// zeros, then every program blob in graph-table order. Validates only what it needs (header, program
// ranges; a development format too); errors name `displayName`. For inspectors, and for tests that re-seal files
// they corrupt.
Expected<Hash128> computeChecksum(std::span<const std::byte> file, std::string_view displayName = "container");
// Recomputes the checksum and stores it in the header.
Status sealChecksum(std::span<std::byte> file, std::string_view displayName = "container");

}  // namespace ctxkit::format::layout
