// Preparing the ops of a compiled program: attributes borrowed, outputs already inferred once taken as they are.
#pragma once

#include "kernels/kernels.h"

namespace ctxkit::kernels {

// prepare() for an op of a compiled program (runtime::CompiledProgram), which outlives its prepared ops: ctx.attrs,
// *ctx.typed (required) and the characters of ctx.nodeName are borrowed, not copied. `inferred`, when not null, are
// the op's outputs, taken as they are instead of inferred again: only for outputs that this process's kernels
// already inferred for these same inputs (types, shapes and constant contents) and found equal. The kernels write
// what they infer, and runs check buffers against these outputs only: anything else could write out of bounds.
Expected<std::unique_ptr<PreparedOp>> prepareProgramOp(const OpContext& ctx, std::span<const ValueDesc> inputs,
                                                       size_t outputCount, std::span<const cpu::WeightLayout> layouts,
                                                       const std::span<const OutputDesc>* inferred);

}  // namespace ctxkit::kernels
