// What lib/ir/ops.def records about each op kind beyond its name and domain. Each line there is
//   CTX_OP(Kind, "onnx op type", "domain", Family, kernel, flags, min inputs, max inputs, min outputs, max outputs)
// Family: the typed attribute struct (Family##Attrs in lib/ops/op_schema.h) the kind decodes to. Its decoder is
//   decode##Family in lib/ops/op_schema.cpp and its default value Family##Attrs{} (ops::defaultAttrsFor); Onnx
//   (OnnxAttrs) when the kernel reads no attribute an inference run needs.
// kernel: the kernel entry (shape rule, run function, element types) the kind runs with, one of the entries in
//   lib/kernels/op_table.cpp's findEntry; none for the kinds no kernel runs (control flow, EPContext).
// flags: 0, or OpFlag bits joined with |.
// Arity: how many inputs and outputs a node of the kind may list (omitted optional ones written "" count; trailing
//   ones may be left out), over every opset ctxkit reads (Slice-1 takes 1 input, Slice-10 3 to 5: 1 to 5);
//   kVariadic for no upper bound. ops::decodeNode refuses a node outside it, as it refuses a bad attribute.
// Consumers #include ops.def with their own CTX_OP definition; a kind's position there is its stable id in compiled
// programs, so lines are only ever appended (above EPContext). Adding an op is its line plus its family's decoder
// and its kernel entry.
#pragma once

#include "ir/op_kind.h"

#include <cstdint>
#include <optional>
#include <string>

namespace ctxkit::ir {

enum OpFlag : uint8_t {
  kView = 1,         // the output is the input's data reinterpreted: it may alias the input
  kControlFlow = 2,  // runs subgraphs: the runtime's interpreter executes it, never a kernel (see isControlFlow)
};

inline constexpr uint16_t kVariadic = 0xffff;

struct OpArity {
  uint16_t minInputs, maxInputs;
  uint16_t minOutputs, maxOutputs;
};

// nullopt for OpKind::Unknown.
std::optional<OpArity> opArity(OpKind kind);
// Why a node of `kind` with this many inputs and outputs is malformed ("Conv takes 2 to 3 inputs; the node has 4"),
// or nullopt.
std::optional<std::string> arityProblem(OpKind kind, size_t inputs, size_t outputs);

// False for OpKind::Unknown.
bool hasOpFlag(OpKind kind, OpFlag flag);

// Reshape, Flatten, Squeeze, Unsqueeze and Identity.
inline bool isView(OpKind kind) { return hasOpFlag(kind, kView); }

}  // namespace ctxkit::ir
