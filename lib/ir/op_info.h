// What lib/ir/ops.def records about each op kind beyond its name and domain. Each line there is
//   CTX_OP(Kind, "onnx op type", "domain", Family, kernel, flags)
// Family: the typed attribute struct (Family##Attrs in lib/ops/op_schema.h) the kind decodes to. Its decoder is
//   decode##Family in lib/ops/op_schema.cpp and its default value Family##Attrs{} (ops::defaultAttrsFor); Onnx
//   (OnnxAttrs) when the kernel reads no attribute an inference run needs.
// kernel: the kernel entry (shape rule, run function, element types) the kind runs with, one of the entries in
//   lib/kernels/op_table.cpp's findEntry; none for the kinds no kernel runs (control flow, EPContext).
// flags: 0, or OpFlag bits joined with |.
// Consumers #include ops.def with their own CTX_OP definition; a kind's position there is its stable id in compiled
// programs, so lines are only ever appended (above EPContext). Adding an op is its line plus its family's decoder
// and its kernel entry.
#pragma once

#include "ir/op_kind.h"

#include <cstdint>

namespace ctxkit::ir {

enum OpFlag : uint8_t {
  kView = 1,         // the output is the input's data reinterpreted: it may alias the input
  kControlFlow = 2,  // runs subgraphs: the runtime's interpreter executes it, never a kernel (see isControlFlow)
};

// False for OpKind::Unknown.
bool hasOpFlag(OpKind kind, OpFlag flag);

// Reshape, Flatten, Squeeze, Unsqueeze and Identity.
inline bool isView(OpKind kind) { return hasOpFlag(kind, kView); }

}  // namespace ctxkit::ir
