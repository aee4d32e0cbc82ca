// Op kind names, domains and flags from ops.def.
#include "ir/op_kind.h"

#include "ir/op_info.h"

#include <array>

namespace ctxkit::ir {

namespace {
struct OpInfo {
  std::string_view name;
  std::string_view domain;
  uint8_t flags;
};
constexpr std::array kOps = {
#define CTX_OP(kind, name, domain, family, kernel, flags) OpInfo{name, domain, flags},
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

std::optional<OpKind> opKindFromInt(uint32_t value) {
  if (value >= kOps.size()) return std::nullopt;
  return static_cast<OpKind>(value);
}

}  // namespace ctxkit::ir
