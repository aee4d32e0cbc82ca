// Building and reading ctxkit context binaries (container format v1, docs/format/container-v1.md).
// The on-disk structs live in format/layout.h; this is the API the writer, runtime and inspector use.
#pragma once

#include "ir/elem_type.h"
#include "ir/tensor.h"
#include "support/file_io.h"
#include "support/hash.h"
#include "support/status.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ctxkit::format {

// The container format this library writes, and the oldest released one it reads (docs/format/container-v1.md,
// "Versioning"). Minors 1.0 to 1.3 were development versions of ctxkit 0.1.0: refused with developmentFormatText.
// 1.4 (ctxkit 0.1.0) is read; 1.5 adds load-time tensors. A newer minor is read.
inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 5;
inline constexpr uint16_t kFirstReleasedMinor = 4;

// Whether `major.minor` is one of the development formats that came before the first released one.
inline bool isDevelopmentFormat(uint16_t major, uint16_t minor) {
  return major == kFormatMajor && minor < kFirstReleasedMinor;
}
// "compiled by ctxkit 0.1.0-dev format 1.3: recompile": the refusal of a development format; callers add the file.
std::string developmentFormatText(uint16_t major, uint16_t minor);

// Checked first on load: who wrote the file and for which target.
struct CompatInfo {
  std::string producer;         // "ctxkit"
  std::string producerVersion;  // ctxkit version
  std::string targetId;         // hardware_architecture, e.g. "npu-sim"
  std::string targetRevision;   // e.g. "1"
  uint16_t formatMajor = kFormatMajor;
  uint16_t formatMinor = kFormatMinor;
};

struct WeightInfo {
  ir::ElemType type = ir::ElemType::Undefined;
  ir::Shape shape;
  uint64_t offset = 0;  // from the start of the file
  uint64_t size = 0;    // bytes
  Hash128 hash;
  // Weightless containers: the weight's bytes are not in the file but in these source models (initializer names).
  struct Source {
    std::string model;
    std::string initializer;
  };
  std::vector<Source> sources;  // empty: the bytes are in the file
  bool inSource() const { return !sources.empty(); }
};

// Weightless containers: a file of a source model pinned as it was compiled from (layout::SourcePinEntry).
struct SourcePin {
  std::string model;  // onnx_model_filename
  std::string file;   // empty: the model file itself; else an external data location the model records
  uint64_t size = 0;
  Hash128 hash;
  friend bool operator==(const SourcePin&, const SourcePin&) = default;
};

struct GraphInfo {
  std::string name;         // = partition_name
  std::string sourceModel;  // onnx_model_filename of the model it came from
  uint64_t programOffset = 0;
  uint64_t programSize = 0;
};

struct WriterOptions {
  uint64_t alignment = 64;  // power of two, 64..65536; 4096 gives page-aligned weights
  // A weightless container (docs/weight-sharing.md#weightless): weights may live in source models (addSourceWeight),
  // all in plain layout.
  bool weightless = false;
};

// Collects graphs and unique weights, then writes the container. Weight bytes are referenced, not copied:
// the spans passed to addWeight must stay valid until write/serialize returns. Output is deterministic.
class ContainerWriter {
public:
  ContainerWriter(CompatInfo compat, WriterOptions options = {});

  // Adds a weight and returns its index. The caller dedupes; `hash` is XXH3-128 of `bytes`.
  Expected<uint32_t> addWeight(ir::ElemType type, ir::Shape shape, std::span<const std::byte> bytes,
                               const Hash128& hash);
  // The same, hashed while it is written (one pass over the bytes). The caller still dedupes: a hash that turns
  // out to repeat another weight's key (type, shape, hash) fails the output call, which then leaves no file.
  Expected<uint32_t> addWeight(ir::ElemType type, ir::Shape shape, std::span<const std::byte> bytes);
  // Produces a weight's bytes in order by calling its argument with each piece; called once per output.
  using WeightBytes = std::function<Status(const std::function<Status(std::span<const std::byte>)>&)>;
  // Adds a weight of `size` bytes whose bytes `produce` hands over while the container is written, so that they
  // need not exist in memory all at once. Fails the write if `produce` gives another byte count.
  Expected<uint32_t> addWeight(ir::ElemType type, ir::Shape shape, uint64_t size, const Hash128& hash,
                               WeightBytes produce);
  // Produces a weight's bytes as WeightBytes does and returns XXH3-128 of all the bytes it handed over: the producer
  // hashes each piece as it makes it (where the piece is still in the cache), so the bytes are made once.
  using HashedWeightBytes = std::function<Expected<Hash128>(const std::function<Status(std::span<const std::byte>)>&)>;
  // A weight produced while written, under the hash its producer returns. A hash that repeats another weight's key
  // (type, shape, hash) fails the output call, which then leaves no file.
  Expected<uint32_t> addWeight(ir::ElemType type, ir::Shape shape, uint64_t size, HashedWeightBytes produce);
  // Weightless containers only: a weight whose bytes stay in source models, `sources` naming each model (its
  // onnx_model_filename) and the initializer there. `hash` is XXH3-128 of the bytes, checked at load on --verify.
  Expected<uint32_t> addSourceWeight(ir::ElemType type, ir::Shape shape, const Hash128& hash,
                                     std::vector<WeightInfo::Source> sources);
  // Weightless containers only: pins a file of source model `pin.model` (the model, or an external data file), which
  // the runtime then refuses to take weights from when its size or hash differ. Each (model, file) once.
  Status addSourcePin(SourcePin pin);
  // Adds a serialized program. Names must be unique in the container. `loadTimeTensors`: the program holds load-time
  // tensors (program::hasLoadTimeTensors), which the container then declares (flag load-time, format 1.5).
  Status addGraph(std::string name, std::string sourceModel, std::vector<std::byte> program,
                  bool loadTimeTensors = false);

  size_t weightCount() const;
  size_t graphCount() const;
  // File offset the weight at `index` will have once written (known after all adds; for ONNX external
  // data references into the container).
  Expected<uint64_t> weightFileOffset(uint32_t index) const;

  // Streams the container to `path` atomically (temporary name, fsync, rename): the data region first, then the
  // metadata at the start of the file, once the weights hashed while written have their hashes.
  Status write(const std::filesystem::path& path) const;
  // The same, left under its temporary name (flushed and closed) for the caller to commit with other files; with the
  // checksum written into its header, the file's identity (ContainerView::checksum).
  struct Staged {
    std::unique_ptr<AtomicFileWriter> file;
    Hash128 checksum;
  };
  Expected<Staged> stage(const std::filesystem::path& path) const;
  // The same bytes in memory (embed_mode=1).
  Expected<std::vector<std::byte>> serialize() const;

private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// A validated, read-only view of a container in memory or in a mapped file. Opening checks the header,
// compatibility block, every table and the checksum (docs/bad-input.md#loader-rules); weight bytes are used in place.
class ContainerView {
public:
  // `owner` keeps `bytes` alive (a MappedFile, or a buffer); `displayName` names the file in errors.
  static Expected<ContainerView> open(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                                      std::string displayName);
  static Expected<ContainerView> openFile(const std::filesystem::path& path);

  const CompatInfo& compat() const { return compat_; }
  const std::vector<GraphInfo>& graphs() const { return graphs_; }
  const std::vector<WeightInfo>& weights() const { return weights_; }
  // Weightless: the source model files pinned, sorted by (model, file); empty in a container written without pins.
  const std::vector<SourcePin>& sourcePins() const { return pins_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t fileSize() const { return bytes_.size(); }
  const std::string& displayName() const { return displayName_; }
  // Weightless (docs/weight-sharing.md#weightless): some weights live in source models, and every weight is in plain
  // layout.
  bool weightless() const { return weightless_; }
  // Whether programs may hold load-time tensors (flag load-time, format 1.5): a program that holds one in a container
  // that does not declare them is refused at load.
  bool loadTimeTensors() const { return loadTimeTensors_; }
  // The header's checksum over the metadata and programs, which cover every weight by its hash: the container's
  // identity, which a _ctx.onnx written with it records (docs/format/container-v1.md, "Binding").
  const Hash128& checksum() const { return checksum_; }

  const GraphInfo* findGraph(std::string_view name) const;
  std::span<const std::byte> programBytes(size_t graphIndex) const;
  std::span<const std::byte> weightBytes(size_t weightIndex) const;
  // A read-only tensor viewing the weight in place; keeps the container's bytes alive. An error for a weight that
  // lives in a source model.
  Expected<ir::Tensor> weightTensor(size_t weightIndex) const;

  // Recomputes the hash of every weight in the file and checks that all padding bytes are zero (weights in source
  // models are checked where they are resolved).
  Status verify() const;

private:
  std::span<const std::byte> bytes_;
  std::shared_ptr<const void> owner_;
  std::string displayName_;
  CompatInfo compat_;
  std::vector<GraphInfo> graphs_;
  std::vector<uint32_t> graphsByName_;  // indices into graphs_, sorted by name: findGraph is a binary search
  std::vector<WeightInfo> weights_;
  std::vector<SourcePin> pins_;
  uint64_t alignment_ = 64;
  bool weightless_ = false;
  bool loadTimeTensors_ = false;
  Hash128 checksum_;
};

}  // namespace ctxkit::format
