// A compiled program: what the compiler emits for one partition and the runtime executes, with no
// reference to the ONNX subgraph it came from. Serialized into the context binary's data region.
#pragma once

#include "ir/attribute.h"
#include "ir/op_kind.h"
#include "ir/tensor.h"
#include "support/status.h"

#include <cstdint>
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

struct TensorDesc {
  TensorKind kind = TensorKind::Arena;
  ir::ElemType type = ir::ElemType::Float;
  ir::Shape shape;
  uint32_t index = 0;   // Input/Output position, weight-table index, or viewed tensor
  uint64_t offset = 0;  // Arena only
  uint64_t size = 0;    // bytes
  std::string name;     // the value's name in the source graph, for dumps and errors
};

struct Op {
  ir::OpKind kind = ir::OpKind::Unknown;
  int64_t opset = 0;
  std::string name;           // source node name
  ir::Attributes attrs;       // typed; no graph attributes
  std::vector<int32_t> inputs;   // tensor indices, -1 for an omitted optional input
  std::vector<int32_t> outputs;  // tensor indices
};

struct Program {
  std::vector<TensorDesc> tensors;
  std::vector<Op> ops;
  std::vector<int32_t> inputs;   // tensor index per EPContext input, in node order
  std::vector<int32_t> outputs;  // tensor index per EPContext output, in node order
  uint64_t arenaSize = 0;
};

// Limits a reader enforces before allocating (SPEC §11 rules 1, 2, 15).
inline constexpr uint32_t kMaxRank = 8;
inline constexpr uint64_t kProgramMagic = 0x31474f5250544358ull;  // "XCTPROG1"

std::vector<std::byte> serialize(const Program& program);

// Parses and validates a program read from a file: every count bounded by the bytes left, every index in
// range (weights against `weightCount`), every arena range inside the arena, byte sizes equal to
// shape × element size, views not chained. `what` names the program in errors.
Expected<Program> deserialize(std::span<const std::byte> bytes, uint64_t weightCount, const std::string& what);

// Readable text for `--dump`.
std::string dump(const Program& program, std::string_view name);

}  // namespace ctxkit::program
