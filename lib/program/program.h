// A compiled program: what the compiler emits for one partition and the runtime executes, with no
// reference to the ONNX subgraph it came from. Serialized into the context binary's data region.
#pragma once

#include "cpu/kernel_choice.h"
#include "cpu/weight_layout.h"
#include "ir/op_kind.h"
#include "ir/tensor.h"
#include "ops/op_schema.h"
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
  // Computed once when the program is loaded, by the op that writes it (a load-time op: every input a weight or a
  // load-time tensor), and held for every run: a weight kept quantized in the container and dequantized at load.
  // Only in containers that declare load-time tensors (format 1.5, flag bit 3).
  LoadTime = 5,
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
  cpu::WeightLayout layout;  // Weight and LoadTime only: how the bytes are arranged (size is the stored size)
  // Bit d set: shape[d] is an upper bound, the extent a run computes is at most it (a value-dependent shape: behind
  // NonZero, NonMaxSuppression, TopK with a computed k). Input, Arena and Output tensors only; size holds the bound's
  // bytes, and a run stores the tensor dense at its actual shape from the start of those bytes (encoding 5); an input
  // is the caller's tensor at its extent.
  uint8_t bounded = 0;
};

// Whether some dimension of `t` is a bound rather than an exact extent.
inline bool isBounded(const TensorDesc& t) { return t.bounded != 0; }

struct Op {
  ir::OpKind kind = ir::OpKind::Unknown;
  int64_t opset = 0;
  Name name;           // source node name
  Indices inputs;      // tensor indices, -1 for an omitted optional input
  Indices outputs;     // tensor indices
  ops::OpAttrs typed;  // the op's typed attributes (OnnxAttrs for the kinds that have none a run reads)
  // The kernel recorded for a float32 Conv (the optional kernel-choice section, docs/format/program.md#kernel-choices);
  // Heuristic: none recorded, the runtime decides on the shapes.
  cpu::KernelChoice kernel = {};
};

// The program encoding (docs/format/program.md): stable op ids, typed attributes as values in schema order,
// weight layouts. Encoding 5 adds a per-tensor mask of bounded dimensions and is written only for a program holding a
// bounded tensor; any other program is written in encoding 4, byte for byte as before. Both are read. Encodings 1 to
// 3 were development versions of ctxkit 0.1.0; deserialize() refuses them by name.
inline constexpr uint32_t kProgramVersion = 5;
inline constexpr uint32_t kProgramVersionUnbounded = 4;

struct Program {
  // Where a program read by deserialize() keeps its tensors' and ops' lists and names (null: on the heap). Declared
  // first, so that it outlives them; assignment swaps whole programs, so that a list never outlives its storage.
  // A copy keeps its lists on the heap. Moving one TensorDesc or Op out of a read program leaves it using that
  // program's storage: move whole programs.
  std::shared_ptr<std::pmr::memory_resource> storage;
  std::vector<TensorDesc> tensors;
  std::vector<Op> ops;
  std::vector<int32_t> inputs;   // tensor index per EPContext input, in node order
  std::vector<int32_t> outputs;  // tensor index per EPContext output, in node order
  uint64_t arenaSize = 0;

  Program() = default;
  Program(const Program& o)  // on the heap: the copy does not hold `o`'s storage
      : tensors(o.tensors), ops(o.ops), inputs(o.inputs), outputs(o.outputs), arenaSize(o.arenaSize) {}
  Program(Program&&) noexcept = default;
  Program& operator=(Program other) noexcept {
    swap(other);
    return *this;
  }
  ~Program() = default;
  void swap(Program& o) noexcept {
    std::swap(storage, o.storage);
    tensors.swap(o.tensors);
    ops.swap(o.ops);
    inputs.swap(o.inputs);
    outputs.swap(o.outputs);
    std::swap(arenaSize, o.arenaSize);
  }
};

// Limits a reader enforces before allocating (docs/bad-input.md#loader-rules, rules 1, 2, 15).
inline constexpr uint32_t kMaxRank = 8;
// The longest name or string attribute a program holds (an op's node name, a tensor's value name).
inline constexpr uint32_t kMaxStringBytes = 1u << 16;
// "XCTPROG4" and "XCTPROG5" read as little-endian bytes. The development encodings 1 to 3 had "XCTPROG1" to
// "XCTPROG3".
inline constexpr uint64_t kProgramMagic = 0x34474f5250544358ull;
inline constexpr uint64_t kProgramMagicBounded = 0x35474f5250544358ull;

std::vector<std::byte> serialize(const Program& program);

// Parses and validates a program read from a file: every count bounded by the bytes left, every index in
// range (weights against `weightCount`), every arena range inside the arena, byte sizes equal to
// shape × element size (the layout's size for packed weights), views not chained, every op's typed attributes of
// its kind's family and within their rules. A program of a development encoding is refused by name. `what` names
// the program in errors.
Expected<Program> deserialize(std::span<const std::byte> bytes, uint64_t weightCount, const std::string& what);

// Every check deserialize() applies but the encoding's own (magic, counts, trailing bytes), for a program built in
// memory: names within kMaxStringBytes, ranks within kMaxRank, known kinds, types and layouts, then the rules above.
Status validate(const Program& program, uint64_t weightCount);

// The tensor's shape as text, a bounded dimension as "<=bound" ("<=6x4"); the plain shape text otherwise.
std::string shapeText(const TensorDesc& t);

// Whether `shape` is one a run may give `t`: the same rank, each bounded dimension in [0, bound], every other one
// equal to its recorded extent (its bytes then fit the recorded size).
bool fitsShape(const TensorDesc& t, std::span<const int64_t> shape);

// Whether the program holds a bounded tensor (TensorDesc::bounded): its ops' shapes are worked out per run.
bool hasBoundedTensors(const Program& program);

// Whether the program holds a load-time tensor (its container must then declare them: format::kFlagLoadTime).
bool hasLoadTimeTensors(const Program& program);
// Whether every output of `op` is a load-time tensor (validate() allows no mix): the op runs once, at load.
bool isLoadTimeOp(const Program& program, const Op& op);

// Whether `algorithm` can compute Conv `op` of `program` (its tensors' shapes and types, its group): Direct and Gemm
// any float32 Conv; Panels group 1 with a float32 weight; DepthwiseSmallMap one input and one output channel per group
// and at most 2 spatial dims; GroupedBlocks at most 2 spatial dims. An empty string when it can, else why not
// (validate() rejects such a choice).
std::string kernelChoiceMisfit(const Program& program, const Op& op, cpu::ConvAlgorithm algorithm);

// Readable text for `--dump`.
std::string dump(const Program& program, std::string_view name);

}  // namespace ctxkit::program
