// remove-noops: nodes that pass their input through unchanged are removed; their readers read the input.
#include "analysis/passes/graph_rename.h"
#include "analysis/passes/passes.h"
#include "ops/node_attrs.h"

#include <span>

namespace ctxkit::analysis {

namespace {

bool isConstantFalse(ir::ValueId v, const GraphFacts& facts) {
  if (v == ir::kNoValue) return true;
  const std::optional<ir::Tensor>& c = facts[v].constant;
  return c && c->type() == ir::ElemType::Bool && c->elementCount() == 1 && c->dataAs<uint8_t>()[0] == 0;
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
      // From opset 7 Dropout is the identity outside training; from 12 training_mode (input 2) decides.
      const bool maskUnused = node.outputs.size() == 1 || node.outputs[1].empty();
      const bool inference = node.opset >= 7 && (node.inputs.size() < 3 || isConstantFalse(inputs[2], facts));
      return maskUnused && inference ? &node.inputs[0] : nullptr;
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
// the nodes.
size_t removeNoops(ir::Graph& graph, const GraphFacts& facts, GraphPassTrace& trace) {
  Renames& r = trace.renames;
  std::vector<ir::Node> kept;
  std::vector<size_t> origin;
  for (size_t index = 0; index < graph.nodes.size(); ++index) {
    ir::Node& node = graph.nodes[index];
    const std::string* source = trace.keep.count(trace.origin[index]) ? nullptr : passedThrough(node, index, facts);
    if (source && !facts.table[facts.table.outputsOf(index)[0]].isGraphOutput) {
      r[node.outputs[0]] = *source;
      trace.removed.push_back(trace.origin[index]);
    } else {
      kept.push_back(std::move(node));
      origin.push_back(trace.origin[index]);
    }
  }
  trace.origin = std::move(origin);
  const size_t removed = graph.nodes.size() - kept.size();
  graph.nodes = std::move(kept);
  if (removed == 0) return 0;
  // A chain of no-ops reads the first one's input.
  for (auto& [from, to] : r)
    for (auto it = r.find(to); it != r.end(); it = r.find(to)) to = it->second;
  for (auto& node : graph.nodes) renameNodeReads(node, r);
  std::erase_if(graph.valueInfo, [&](const ir::ValueInfo& v) { return r.count(v.name) != 0; });
  return removed;
}

}  // namespace

Expected<ir::PassChange> RemoveNoops::run(GraphPassState& state) const {
  const size_t removed = removeNoops(state.graph, state.facts, state.trace);
  if (removed != 0) CTX_RETURN_IF_ERROR(state.reanalyze());
  return ir::PassChange{}.count("nodes_removed", removed);
}

}  // namespace ctxkit::analysis
