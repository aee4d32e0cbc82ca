// Constant: its one value attribute (value, value_float(s), value_int(s)) as a tensor; string values are refused.
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

// ---- Constant ----------------------------------------------------------------------------------------

namespace {

// The one value attribute of a Constant node.
Expected<const ir::Attribute*> constantAttr(const OpContext& ctx) {
  const ir::Attribute* found = nullptr;
  for (const ir::Attribute& a : ctx.attrs.all()) {
    if (a.name.rfind("value", 0) != 0 && a.name != "sparse_value") continue;
    if (found)
      return invalid(ctx, "has both attributes {} and {} but exactly one value is allowed", found->name, a.name);
    found = &a;
  }
  if (!found) return invalid(ctx, "has no value attribute");
  const std::string& n = found->name;
  if (n == "sparse_value") return unsupported(ctx, "sparse constants are not supported");
  if (n == "value_string" || n == "value_strings") return unsupported(ctx, "string constants are not supported");
  bool ok = (n == "value" && found->type == ir::AttrType::Tensor) ||
            (n == "value_float" && found->type == ir::AttrType::Float) ||
            (n == "value_floats" && found->type == ir::AttrType::Floats) ||
            (n == "value_int" && found->type == ir::AttrType::Int) ||
            (n == "value_ints" && found->type == ir::AttrType::Ints);
  if (!ok)
    return invalid(ctx, "attribute {} has type {} which is not a valid constant value", n,
                   ir::attrTypeName(found->type));
  if (n == "value" && found->t.type() == ElemType::String)
    return unsupported(ctx, "string constants are not supported");
  return found;
}

}  // namespace

InferResult inferConstant(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 0, 0));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_ASSIGN_OR_RETURN(const ir::Attribute* a, constantAttr(ctx));
  if (a->name == "value") return single(a->t.type(), a->t.shape());
  if (a->name == "value_float") return single(ElemType::Float, {});
  if (a->name == "value_floats") return single(ElemType::Float, {static_cast<int64_t>(a->floats.size())});
  if (a->name == "value_int") return single(ElemType::Int64, {});
  return single(ElemType::Int64, {static_cast<int64_t>(a->ints.size())});
}

Status runConstant(const OpContext& ctx, RunIns, RunOuts outputs) {
  CTX_ASSIGN_OR_RETURN(const ir::Attribute* a, constantAttr(ctx));
  ir::Tensor& y = *outputs[0];
  std::span<const std::byte> bytes;
  if (a->name == "value") bytes = a->t.bytes();
  else if (a->name == "value_float") bytes = std::as_bytes(std::span(&a->f, 1));
  else if (a->name == "value_floats") bytes = std::as_bytes(std::span(a->floats));
  else if (a->name == "value_int") bytes = std::as_bytes(std::span(&a->i, 1));
  else bytes = std::as_bytes(std::span(a->ints));
  if (bytes.size() != y.byteSize())
    return invalid(ctx, "constant holds {} bytes but its shape needs {}", bytes.size(), y.byteSize());
  if (!bytes.empty()) std::memcpy(y.mutableData(), bytes.data(), bytes.size());
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
