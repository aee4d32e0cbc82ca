// Which Concats plan-memory elides, and where their inputs and outputs sit in the groups it places.
#include "codegen/concat_groups.h"

#include "ir/op_kind.h"
#include "ops/op_schema.h"

#include <algorithm>
#include <variant>

namespace ctxkit::codegen {

namespace {

using program::TensorDesc;
using program::TensorKind;

// An arena tensor of exact extents: one the plan may place anywhere (not an input, output, weight, load-time tensor
// or view, not planned at a bound).
bool plainArena(const program::Program& p, int32_t t) {
  return t >= 0 && static_cast<size_t>(t) < p.tensors.size() && p.tensors[t].kind == TensorKind::Arena &&
         !program::isBounded(p.tensors[t]);
}

// Whether Concat `op`'s inputs are each one contiguous byte range of its output, in order: plain arena tensors of the
// output's type, distinct, the dimensions before the axis of product 1, their sizes adding up to the output's.
bool concatenatesBytes(const program::Program& p, const program::Op& op) {
  if (op.kind != ir::OpKind::Concat || op.outputs.size() != 1 || op.inputs.empty()) return false;
  const auto* attrs = std::get_if<ops::AxisAttrs>(&op.typed);
  if (!attrs || !plainArena(p, op.outputs[0])) return false;
  const TensorDesc& y = p.tensors[op.outputs[0]];
  const auto rank = static_cast<int64_t>(y.shape.size());
  const int64_t axis = attrs->axis < 0 ? attrs->axis + rank : attrs->axis;
  if (axis < 0 || axis >= rank) return false;
  for (int64_t d = 0; d < axis; ++d)
    if (y.shape[static_cast<size_t>(d)] != 1) return false;
  uint64_t sum = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const int32_t in = op.inputs[i];
    if (!plainArena(p, in) || p.tensors[in].type != y.type) return false;
    if (std::find(op.inputs.begin(), op.inputs.begin() + static_cast<std::ptrdiff_t>(i), in) !=
        op.inputs.begin() + static_cast<std::ptrdiff_t>(i))
      return false;  // the same value twice cannot sit in two places
    sum += p.tensors[in].size;
  }
  return sum == y.size;
}

}  // namespace

ConcatGroups groupConcats(const program::Program& p, uint64_t alignment) {
  ConcatGroups g;
  g.root.assign(p.tensors.size(), -1);
  g.offset.assign(p.tensors.size(), 0);
  const uint64_t align = std::max<uint64_t>(alignment, 1);
  for (size_t k = p.ops.size(); k-- > 0;) {
    const program::Op& op = p.ops[k];
    if (!concatenatesBytes(p, op)) continue;
    const int32_t y = op.outputs[0];
    const size_t grouped = static_cast<size_t>(
        std::count_if(op.inputs.begin(), op.inputs.end(), [&](int32_t in) { return g.root[in] >= 0; }));
    if (grouped == op.inputs.size()) {
      // Already placed by a later Concat: elided if they lie side by side, in order, in one group (then the output
      // is the bytes they cover, equal to them as each is written once per run).
      if (g.root[y] >= 0) continue;
      const int32_t root = g.root[op.inputs[0]];
      bool adjacent = true;
      for (size_t i = 1; i < op.inputs.size() && adjacent; ++i) {
        const int32_t prev = op.inputs[i - 1], in = op.inputs[i];
        adjacent = g.root[in] == root && g.offset[in] == g.offset[prev] + p.tensors[prev].size;
      }
      if (!adjacent) continue;
      g.root[y] = root;
      g.offset[y] = g.offset[op.inputs[0]];
      g.elided.push_back(k);
      continue;
    }
    if (grouped != 0) continue;  // an input placed elsewhere cannot move
    // The inputs join the output's group: the output's slice of an outer group, or a new group it is the root of.
    const int32_t root = g.root[y] >= 0 ? g.root[y] : y;
    uint64_t at = g.root[y] >= 0 ? g.offset[y] : 0;
    bool aligned = true;
    for (int32_t in : op.inputs) {
      aligned = aligned && at % align == 0;
      at += p.tensors[in].size;
    }
    if (!aligned) continue;
    at = g.root[y] >= 0 ? g.offset[y] : 0;
    g.root[y] = root;
    for (int32_t in : op.inputs) {
      g.root[in] = root;
      g.offset[in] = at;
      at += p.tensors[in].size;
    }
    g.elided.push_back(k);
  }
  std::reverse(g.elided.begin(), g.elided.end());
  return g;
}

}  // namespace ctxkit::codegen
