// remove-noops: nodes that pass their input through unchanged are removed; their readers read the input.
#include "analysis/passes/graph_rename.h"
#include "analysis/passes/passes.h"
#include "ops/node_attrs.h"

#include <algorithm>
#include <span>

namespace ctxkit::analysis {

namespace {

bool isConstantFalse(ir::ValueId v, const GraphFacts& facts) {
  if (v == ir::kNoValue) return true;
  const std::optional<ir::Tensor>& c = facts[v].constant;
  return c && c->type() == ir::ElemType::Bool && c->elementCount() == 1 && c->dataAs<uint8_t>()[0] == 0;
}

// A constant ratio of exactly 0 (absent means 0.5): Dropout keeps every element and scales by 1 / (1 - 0).
bool isConstantZeroRatio(ir::ValueId v, const GraphFacts& facts) {
  if (v == ir::kNoValue) return false;
  const std::optional<ir::Tensor>& c = facts[v].constant;
  if (!c || c->elementCount() != 1) return false;
  switch (c->type()) {
    case ir::ElemType::Float: return c->dataAs<float>()[0] == 0.0f;
    case ir::ElemType::Double: return c->dataAs<double>()[0] == 0.0;
    default: return false;
  }
}

// The value node `index` passes through unchanged, when it is a no-op.
const std::string* passedThrough(const ir::Node& node, size_t index, const GraphFacts& facts) {
  if (!node.domain.empty() || node.inputs.empty() || node.inputs[0].empty() || node.outputs.empty() ||
      node.outputs[0].empty())
    return nullptr;
  const std::span<const ir::ValueId> inputs = facts.table.inputsOf(index);
  const ValueFacts* in = &facts[inputs[0]];
  const ValueFacts* out = &facts[facts.table.outputsOf(index)[0]];
  switch (node.kind) {
    case ir::OpKind::Identity: return node.outputs.size() == 1 ? &node.inputs[0] : nullptr;
    case ir::OpKind::Dropout: {
      // From opset 7 Dropout is the identity outside training; from 12 training_mode (input 2) decides, and in
      // training a constant ratio (input 1) of 0 keeps every element unscaled (torchvision's Swin exports
      // Dropout(ratio 0, training_mode true)).
      const std::span<const ir::ValueId> outs = facts.table.outputsOf(index);
      const bool maskUnused = outs.size() == 1 || outs[1] == ir::kNoValue ||
                              (facts.table[outs[1]].uses.empty() && !facts.table[outs[1]].isGraphOutput);
      const bool inference = node.opset >= 7 && (node.inputs.size() < 3 || isConstantFalse(inputs[2], facts));
      const bool keepsAll = node.opset >= 12 && inputs.size() >= 2 && isConstantZeroRatio(inputs[1], facts);
      return maskUnused && (inference || keepsAll) ? &node.inputs[0] : nullptr;
    }
    case ir::OpKind::Cast: {
      const auto decoded = ops::attrsOf(node);
      const auto* cast = decoded->attrs ? std::get_if<ops::CastAttrs>(&decoded->attrs.value()) : nullptr;
      const bool same = in && in->type != ir::ElemType::Undefined && cast && cast->to == in->type;
      return same && node.outputs.size() == 1 ? &node.inputs[0] : nullptr;
    }
    case ir::OpKind::Reshape:
    case ir::OpKind::Expand:
    case ir::OpKind::Tile: {  // to its own shape (Expand broadcasts nothing, Tile repeats once)
      const bool same = in && out && in->shape && out->shape && *in->shape == *out->shape;
      return same && node.outputs.size() == 1 ? &node.inputs[0] : nullptr;
    }
    case ir::OpKind::Pad: {
      // Constant pads that are all zero (torch exports one before AveragePool in DenseNet's transitions); pads from
      // opset 11 on are input 1. Every mode leaves the input unchanged then.
      if (node.opset < 11 || inputs.size() < 2 || inputs[1] == ir::kNoValue) return nullptr;
      const std::optional<ir::Tensor>& pads = facts[inputs[1]].constant;
      if (!pads || pads->type() != ir::ElemType::Int64) return nullptr;
      const int64_t* p = pads->dataAs<int64_t>();
      for (uint64_t i = 0; i < pads->elementCount(); ++i)
        if (p[i] != 0) return nullptr;
      return node.outputs.size() == 1 ? &node.inputs[0] : nullptr;
    }
    default: return nullptr;
  }
}

// Removes the no-ops `facts` shows (never one that writes a graph output); returns how many. trace.origin follows
// the nodes; trace.passedThrough gets the given graph's values that removed given nodes wrote.
size_t removeNoops(ir::Graph& graph, const GraphFacts& facts, GraphPassTrace& trace) {
  const ir::ValueTable& table = facts.table;
  std::vector<ir::ValueId> source(table.size(), ir::kNoValue);  // by id: the value a removed no-op passes through
  std::vector<bool> removed(graph.nodes.size(), false);
  size_t count = 0;
  for (size_t index = 0; index < graph.nodes.size(); ++index) {
    const size_t from = trace.origin[index];
    if (trace.keep.count(from) || !passedThrough(graph.nodes[index], index, facts)) continue;
    const ir::ValueId out = table.outputsOf(index)[0];
    if (table[out].isGraphOutput) continue;
    source[out] = table.inputsOf(index)[0];
    removed[index] = true;
    ++count;
    trace.removed.push_back(from);
    // A node of the given graph reads and writes what it did there (inline-if renames only what branches define).
    if (std::find(trace.inlined.begin(), trace.inlined.end(), from) == trace.inlined.end())
      trace.passedThrough[trace.given.outputsOf(from)[0]] = trace.given.inputsOf(from)[0];
  }
  if (count == 0) return 0;
  // A chain of no-ops reads the first one's input.
  auto resolve = [](std::vector<ir::ValueId>& to) {
    for (ir::ValueId& t : to)
      while (t != ir::kNoValue && to[t] != ir::kNoValue) t = to[t];
  };
  resolve(source);
  resolve(trace.passedThrough);
  ValueRenames to(table.size(), nullptr);
  for (ir::ValueId v = 0; v < table.size(); ++v)
    if (source[v] != ir::kNoValue) to[v] = &table.name(source[v]);
  std::vector<ir::Node> kept;
  std::vector<size_t> origin;
  for (size_t index = 0; index < graph.nodes.size(); ++index) {
    if (removed[index]) continue;
    renameNodeReads(graph.nodes[index], table, index, to);
    kept.push_back(std::move(graph.nodes[index]));
    origin.push_back(trace.origin[index]);
  }
  std::erase_if(graph.valueInfo, [&](const ir::ValueInfo& info) {
    const ir::ValueId v = table.find(info.name);
    return v != ir::kNoValue && source[v] != ir::kNoValue;
  });
  graph.nodes = std::move(kept);
  trace.origin = std::move(origin);
  return count;
}

}  // namespace

Expected<ir::PassChange> RemoveNoops::run(GraphPassState& state) const {
  const size_t removed = removeNoops(state.graph, state.facts, state.trace);
  if (removed != 0) CTX_RETURN_IF_ERROR(state.reanalyze());
  return ir::PassChange{}.count("nodes_removed", removed);
}

}  // namespace ctxkit::analysis
