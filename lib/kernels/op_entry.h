// The op table's entry type, shared by the table (op_table.cpp) and prepared ops (prepared.cpp).
#pragma once

#include "kernels/ops.h"
#include "ops/node_attrs.h"

#include <type_traits>

namespace ctxkit::kernels::detail {

struct OpEntry {
  InferFn infer;
  RunFn run;
  TypeSet types;          // element types of the main data input
  bool halfViaFloat;      // float16/bfloat16 data is computed as float32 (converted around the kernel)
  PlanFn plan = nullptr;  // for prepared ops: planned at prepare instead of per run (allocation-free runs)
  // For ops whose output shapes depend on input values: values and shapes in one pass (evaluateInto), instead of
  // the shape rule working the values out and the kernel doing it again.
  EvaluateFn evaluate = nullptr;
};

// The entry of `kind`, or null when no kernel exists (EPContext, control flow, unknown ops).
const OpEntry* findEntry(ir::OpKind kind);

Error noKernel(const OpContext& ctx);

inline bool isHalf(ElemType t) { return t == ElemType::Float16 || t == ElemType::BFloat16; }

// Runs a float32 kernel on float16/bfloat16 data: half inputs are widened, half outputs are computed into
// float32 temporaries and narrowed afterwards.
Status runViaFloat(const OpEntry& entry, const OpContext& ctx, RunIns inputs, RunOuts outputs);

// Runs the entry's kernel (through runViaFloat when `viaFloat`); running out of memory becomes the node's error.
Status runEntry(const OpEntry& entry, const OpContext& ctx, RunIns inputs, RunOuts outputs, bool viaFloat);

// For a context without typed attributes: the node's decoder error if it has one, else calls `f` with a copy of
// `ctx` whose attributes are decoded for this call only (a context built by hand; counted in ops::lateDecodes).
template <typename F> auto withTypedAttrs(const OpContext& ctx, F&& f) -> std::invoke_result_t<F, const OpContext&> {
  if (ctx.decodeError) return nodeError(ctx, ctx.decodeError->code(), "{}", ctx.decodeError->message());
  ops::countLateDecode();
  auto typed = ops::decodeAttrs(ctx.kind, ctx.opset, ctx.attrs);
  if (!typed) return nodeError(ctx, typed.error().code(), "{}", typed.error().message());
  OpContext decoded = ctx;
  decoded.typed = &*typed;
  return f(decoded);
}

}  // namespace ctxkit::kernels::detail
