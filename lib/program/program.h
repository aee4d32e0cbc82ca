// A compiled program: what the compiler emits for one partition and the runtime executes, with no
// reference to the ONNX subgraph it came from. Serialized into the context binary's data region.
#pragma once

#include "ir/attribute.h"
#include "ir/op_kind.h"
#include "ir/tensor.h"
#include "ops/op_schema.h"
#include "ops/weight_layout.h"
#include "support/status.h"

#include <cstdint>
#include <memory>
#include <memory_resource>
#include <span>
#include <string>
#include <vector>

namespace ctxkit::program {

enum class TensorKind : uint8_t {
  Input = 0,   // bound to the EPContext node's input `index`
  Output = 1,  // bound to the EPContext node's output `index` (a buffer the caller owns)
  Arena = 2,   // bytes [offset, offset + size) of the program's working memory
  Weight = 3,  // entry `index` of the container's weight table, used in place
  View = 4,    // the same bytes as tensor `index` under another shape (Reshape, Flatten, ...)
};

std::string_view tensorKindName(TensorKind kind);

// The per-tensor and per-op lists and names below are allocator-aware: a program read by deserialize() keeps them all
// in its one storage block (Program::storage), so that reading one allocates the same few times whatever its size;
// a program built in memory keeps them on the heap.
using Dims = std::pmr::vector<int64_t>;
using Indices = std::pmr::vector<int32_t>;
using Name = std::pmr::string;

// A shape as program dims, on the heap (for programs built in memory), and back.
inline Dims toDims(std::span<const int64_t> shape) { return Dims(shape.begin(), shape.end()); }
inline ir::Shape toShape(std::span<const int64_t> dims) { return ir::Shape(dims.begin(), dims.end()); }

struct TensorDesc {
  TensorKind kind = TensorKind::Arena;
  ir::ElemType type = ir::ElemType::Float;
  Dims shape;
  uint32_t index = 0;        // Input/Output position, weight-table index, or viewed tensor
  uint64_t offset = 0;       // Arena only
  uint64_t size = 0;         // bytes
  Name name;                 // the value's name in the source graph, for dumps and errors
  ops::WeightLayout layout;  // Weight only: how the weight-table entry's bytes are arranged (size is the stored size)
};

struct Op {
  ir::OpKind kind = ir::OpKind::Unknown;
  int64_t opset = 0;
  Name name;             // source node name
  ir::Attributes attrs;  // ONNX attributes, for op families not migrated to typed attributes (ops::OnnxAttrs)
  Indices inputs;        // tensor indices, -1 for an omitted optional input
  Indices outputs;       // tensor indices
  ops::OpAttrs typed;    // the op's typed attributes (OnnxAttrs: see `attrs`)
};

// Encodings: 1 (ops carry ONNX attributes by name), 2 (stable op ids, typed attributes as values in schema order,
// weight layouts), 3 (as 2, with typed attributes for the shaping families too: Reshape, Transpose, Concat,
// Gather, Slice, Cast, Pad, Resize, ConvTranspose, ...) and 4 (as 3, with typed attributes for every family an
// inference run reads attributes of: LSTM/GRU/RNN, GridSample, ConstantOfShape, ...); docs/format/program-v4.md.
// serialize() writes version 4; deserialize() reads all four, decoding the ONNX attributes an older version holds
// for a typed family at load.
inline constexpr uint32_t kProgramVersion = 4;

struct Program {
  // Where a program read by deserialize() keeps its tensors' and ops' lists and names (null: on the heap). Declared
  // first, so that it outlives them; assignment swaps whole programs, so that a list never outlives its storage.
  // A copy keeps its lists on the heap. Moving one TensorDesc or Op out of a read program leaves it using that
  // program's storage: move whole programs.
  std::shared_ptr<std::pmr::memory_resource> storage;
  uint32_t version = kProgramVersion;  // the encoding it was read from
  std::vector<TensorDesc> tensors;
  std::vector<Op> ops;
  std::vector<int32_t> inputs;   // tensor index per EPContext input, in node order
  std::vector<int32_t> outputs;  // tensor index per EPContext output, in node order
  uint64_t arenaSize = 0;

  Program() = default;
  Program(const Program& o)  // on the heap: the copy does not hold `o`'s storage
      : version(o.version), tensors(o.tensors), ops(o.ops), inputs(o.inputs), outputs(o.outputs),
        arenaSize(o.arenaSize) {}
  Program(Program&&) noexcept = default;
  Program& operator=(Program other) noexcept {
    swap(other);
    return *this;
  }
  ~Program() = default;
  void swap(Program& o) noexcept {
    std::swap(storage, o.storage);
    std::swap(version, o.version);
    tensors.swap(o.tensors);
    ops.swap(o.ops);
    inputs.swap(o.inputs);
    outputs.swap(o.outputs);
    std::swap(arenaSize, o.arenaSize);
  }
};

// Limits a reader enforces before allocating (SPEC §11 rules 1, 2, 15).
inline constexpr uint32_t kMaxRank = 8;
// The longest name or string attribute a program holds (an op's node name, a tensor's value name).
inline constexpr uint32_t kMaxStringBytes = 1u << 16;
inline constexpr uint64_t kProgramMagicV1 = 0x31474f5250544358ull;  // "XCTPROG1"
inline constexpr uint64_t kProgramMagicV2 = 0x32474f5250544358ull;  // "XCTPROG2"
inline constexpr uint64_t kProgramMagicV3 = 0x33474f5250544358ull;  // "XCTPROG3"
inline constexpr uint64_t kProgramMagic = 0x34474f5250544358ull;    // "XCTPROG4"

std::vector<std::byte> serialize(const Program& program);

// An older encoding (1 to 3), for compatibility tests. Fails for what that version cannot hold: packed weights
// (version 1), and ops of a family it spells as ONNX attributes whose ONNX attributes are gone (the compiler keeps
// only the typed attributes of typed families).
Expected<std::vector<std::byte>> serializeVersion(const Program& program, uint32_t version);

// Parses and validates a program read from a file: every count bounded by the bytes left, every index in
// range (weights against `weightCount`), every arena range inside the arena, byte sizes equal to
// shape × element size (the layout's size for packed weights), views not chained, every op's typed attributes of
// its kind's family and within their rules. Version-1 programs get their typed attributes decoded here. `what` names
// the program in errors.
Expected<Program> deserialize(std::span<const std::byte> bytes, uint64_t weightCount, const std::string& what);

// The checks deserialize() applies after parsing, for a program built in memory.
Status validate(const Program& program, uint64_t weightCount);

// Readable text for `--dump`.
std::string dump(const Program& program, std::string_view name);

}  // namespace ctxkit::program
