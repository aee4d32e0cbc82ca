// Op kind names, domains and flags from ops.def.
#include "ir/op_kind.h"

#include "ir/op_info.h"

#include <fmt/format.h>

#include <array>

namespace ctxkit::ir {

namespace {
struct OpInfo {
  std::string_view name;
  std::string_view domain;
  uint8_t flags;
  OpArity arity;
};
constexpr std::array kOps = {
#define CTX_OP(kind, name, domain, family, kernel, flags, minIn, maxIn, minOut, maxOut)                                \
  OpInfo{name, domain, flags, OpArity{minIn, maxIn, minOut, maxOut}},
#include "ir/ops.def"
#undef CTX_OP
};
}  // namespace

std::string_view opKindName(OpKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < kOps.size() ? kOps[i].name : std::string_view("Unknown");
}

std::string_view opKindDomain(OpKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < kOps.size() ? kOps[i].domain : std::string_view();
}

OpKind opKindFromName(std::string_view domain, std::string_view opType) {
  if (domain == "ai.onnx") domain = "";
  for (size_t i = 0; i < kOps.size(); ++i)
    if (kOps[i].name == opType && kOps[i].domain == domain) return static_cast<OpKind>(i);
  return OpKind::Unknown;
}

bool hasOpFlag(OpKind kind, OpFlag flag) {
  auto i = static_cast<size_t>(kind);
  return i < kOps.size() && (kOps[i].flags & flag) != 0;
}

std::optional<OpArity> opArity(OpKind kind) {
  auto i = static_cast<size_t>(kind);
  if (i >= kOps.size()) return std::nullopt;
  return kOps[i].arity;
}

std::optional<std::string> arityProblem(OpKind kind, size_t inputs, size_t outputs) {
  const std::optional<OpArity> a = opArity(kind);
  if (!a) return std::nullopt;
  auto range = [](uint16_t lo, uint16_t hi, std::string_view what) {
    if (hi == kVariadic) return fmt::format("{} or more {}", lo, what);
    if (lo == hi) return fmt::format("{} {}", lo, what);
    return fmt::format("{} to {} {}", lo, hi, what);
  };
  if (inputs < a->minInputs || (a->maxInputs != kVariadic && inputs > a->maxInputs))
    return fmt::format("{} takes {}; the node has {}", opKindName(kind), range(a->minInputs, a->maxInputs, "inputs"),
                       inputs);
  if (outputs < a->minOutputs || (a->maxOutputs != kVariadic && outputs > a->maxOutputs))
    return fmt::format("{} makes {}; the node has {}", opKindName(kind), range(a->minOutputs, a->maxOutputs, "outputs"),
                       outputs);
  return std::nullopt;
}

std::optional<OpKind> opKindFromInt(uint32_t value) {
  if (value >= kOps.size()) return std::nullopt;
  return static_cast<OpKind>(value);
}

}  // namespace ctxkit::ir
