// Typed op kinds: op type strings are compared only here, where ONNX nodes are read.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ctxkit::ir {

enum class OpKind : uint16_t {
#define CTX_OP(kind, ...) kind,
#include "ir/ops.def"
#undef CTX_OP
  Unknown,  // an op ctxkit does not know; kept by its op type string
};

std::string_view opKindName(OpKind kind);
std::string_view opKindDomain(OpKind kind);
// `domain` "" and "ai.onnx" are the same default domain.
OpKind opKindFromName(std::string_view domain, std::string_view opType);
std::optional<OpKind> opKindFromInt(uint32_t value);  // for programs read from files
// If, Loop and Scan: executed by the runtime's interpreter (they run subgraphs), never by a kernel.
inline bool isControlFlow(OpKind kind) { return kind == OpKind::If || kind == OpKind::Loop || kind == OpKind::Scan; }

}  // namespace ctxkit::ir
