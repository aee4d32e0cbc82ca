// The op family of every op kind agrees with the decoder, and docs/format/program.md lists every family's
// encoded fields exactly as the code encodes them.
#include "ops/typed_attrs.h"

#include "ir/op_info.h"

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace ctxkit;
using ir::Attribute;
using ir::OpKind;

namespace {

std::vector<OpKind> allOpKinds() {
  std::vector<OpKind> kinds;
  for (uint32_t i = 0;; ++i) {
    auto k = ir::opKindFromInt(i);
    if (!k) break;
    if (*k != OpKind::Unknown && *k != OpKind::EPContext) kinds.push_back(*k);
  }
  return kinds;
}

// The attributes without which a few ops do not decode.
ir::Attributes requiredAttrs(OpKind kind) {
  ir::Attributes a;
  switch (kind) {
    case OpKind::MaxPool:
    case OpKind::AveragePool:
    case OpKind::LpPool:
    case OpKind::MaxUnpool: a.set(Attribute::makeInts("kernel_shape", {2, 2})); break;
    case OpKind::Einsum: a.set(Attribute::makeString("equation", "ij,jk->ik")); break;
    case OpKind::BitShift: a.set(Attribute::makeString("direction", "LEFT")); break;
    case OpKind::BitCast: a.set(Attribute::makeInt("to", 6)); break;
    case OpKind::LRN: a.set(Attribute::makeInt("size", 3)); break;
    case OpKind::Concat: a.set(Attribute::makeInt("axis", 0)); break;
    case OpKind::MatMulNBits:
      a.set(Attribute::makeInt("K", 64));
      a.set(Attribute::makeInt("N", 8));
      a.set(Attribute::makeInt("block_size", 32));
      break;
    case OpKind::GroupQueryAttention:
      a.set(Attribute::makeInt("num_heads", 4));
      a.set(Attribute::makeInt("kv_num_heads", 2));
      break;
    case OpKind::MultiHeadAttention:
    case OpKind::MsAttention: a.set(Attribute::makeInt("num_heads", 2)); break;
    case OpKind::DepthToSpace:
    case OpKind::SpaceToDepth: a.set(Attribute::makeInt("blocksize", 2)); break;
    default: break;
  }
  return a;
}

}  // namespace

TEST_CASE("every op kind's family is the one the decoder produces", "[ops]") {
  size_t typed = 0;
  for (OpKind kind : allOpKinds()) {
    INFO(ir::opKindName(kind));
    auto decoded = ops::decodeAttrs(kind, 21, requiredAttrs(kind));
    INFO((decoded ? std::string() : decoded.error().message()));
    REQUIRE(decoded);
    CHECK(ops::familyName(*decoded) == ops::familyName(ops::defaultAttrsFor(kind)));
    typed += ops::isTyped(*decoded) ? 1 : 0;
  }
  CHECK(typed >= 128);  // every op kind whose kernel reads an attribute
}

TEST_CASE("only op kinds without attributes an inference run reads keep ONNX attributes", "[ops]") {
  // Kinds with no ONNX attributes at all, and the kinds a compiled program never holds (control flow, Constant).
  const std::set<std::string> expected = {
      "GlobalAveragePool", "Identity", "Constant", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Not",
      "And", "Or", "Where", "Expand", "Range", "Max", "Min", "If", "Loop", "Scan", "Size", "Xor", "BitwiseAnd",
      "BitwiseOr", "BitwiseXor", "BitwiseNot", "PRelu", "Tile", "Sum", "Mean", "GlobalMaxPool",
      "DynamicQuantizeLinear", "Det", "MatMulInteger", "NonZero", "ArrayFeatureExtractor", "MatMulIntegerToFloat",
      "DynamicQuantizeMatMul"};
  std::set<std::string> untyped;
  for (OpKind kind : allOpKinds())
    if (!ops::isTyped(ops::defaultAttrsFor(kind))) untyped.emplace(ir::opKindName(kind));
  CHECK(untyped == expected);
}

TEST_CASE("ops.def's flags mark the view and control-flow kinds", "[ops]") {
  std::set<std::string> views, controlFlow;
  for (OpKind kind : allOpKinds()) {
    if (ir::isView(kind)) views.emplace(ir::opKindName(kind));
    if (ir::hasOpFlag(kind, ir::kControlFlow)) controlFlow.emplace(ir::opKindName(kind));
  }
  CHECK(views == std::set<std::string>{"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"});
  CHECK(controlFlow == std::set<std::string>{"If", "Loop", "Scan"});
  CHECK_FALSE(ir::isView(OpKind::Unknown));
  CHECK_FALSE(ir::hasOpFlag(OpKind::Unknown, ir::kControlFlow));
  CHECK_FALSE(ir::hasOpFlag(OpKind::EPContext, ir::kControlFlow));
  // op_kind.h's isControlFlow (inline, for every includer) agrees with the flag.
  for (OpKind kind : allOpKinds()) CHECK(ir::isControlFlow(kind) == ir::hasOpFlag(kind, ir::kControlFlow));
}

TEST_CASE("program.md lists every family's fields in encoding order", "[ops]") {
  std::map<std::string, std::pair<std::vector<std::string>, std::string>> families;
  for (OpKind kind : allOpKinds()) {
    ops::OpAttrs attrs = ops::defaultAttrsFor(kind);
    if (!ops::isTyped(attrs)) continue;
    auto& f = families[std::string(ops::familyName(attrs))];
    f.first.emplace_back(ir::opKindName(kind));
    f.second = ops::fieldsSchemaText(attrs);
  }
  std::ifstream in(CTXKIT_PROGRAM_DOC);
  REQUIRE(in);
  std::stringstream doc;
  doc << in.rdbuf();
  std::string table;
  for (const auto& [name, f] : families)
    table += fmt::format("| `{}` | {} |{} |\n", name, fmt::join(f.first, ", "), f.second);
  // On failure the table to paste into the document is written beside the other temporary files.
  const auto tablePath = std::filesystem::temp_directory_path() / "ctxkit-program-families.md";
  std::ofstream(tablePath) << table;
  INFO("the expected table is in " << tablePath.string());
  for (const auto& [name, f] : families) {
    std::string row = fmt::format("| `{}` | {} |{} |", name, fmt::join(f.first, ", "), f.second);
    CHECK(doc.str().find(row) != std::string::npos);
  }
}
