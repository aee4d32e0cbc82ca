// Concats elided by placement: the inputs of a Concat laid side by side in its output's buffer, each producer
// writing straight into its slice, so that the Concat copies nothing and leaves the program
// (docs/compiler.md#concat-elision).
#pragma once

#include "program/program.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ctxkit::codegen {

// A group is one buffer of the arena, planned as its root (the output of the outermost elided Concat) over the
// lifetimes of all its members; a member is an arena tensor at `offset` bytes into its root's buffer. The inputs of
// an elided Concat are members at the running sum of the earlier inputs' sizes, and so is its output: the root, a
// slice of an outer group (an input of a later elided Concat), or, when its inputs already lie side by side in order
// in one group (DenseNet's running concatenations), the byte range they cover.
struct ConcatGroups {
  std::vector<int32_t> root;     // by tensor: its group's root (the root itself for a root), -1 outside any group
  std::vector<uint64_t> offset;  // by tensor: bytes into its root's buffer
  std::vector<size_t> elided;    // the elided Concats' op indices, ascending
};

// The Concats of `program` that can be elided, handled from the last to the first so that an outer Concat places
// the inner ones' outputs before they place their own inputs: those whose output and inputs are all plain arena
// tensors (not bounded) of one type, the inputs distinct, and the dimensions before the axis of product 1 (each
// input one contiguous byte range of the output); an input already in a group is not moved, and the Concat is elided
// only when all its inputs are outside groups (they join its output's group) or all lie side by side, in order, in
// one group. Every member's offset is a multiple of `alignment`, as every planned buffer's is: a Concat whose inputs
// would start elsewhere (an input before the last of a size not a multiple of it) stays a copy.
ConcatGroups groupConcats(const program::Program& program, uint64_t alignment);

}  // namespace ctxkit::codegen
