// inline-if: an If whose condition is a compile-time constant is replaced by its chosen branch.
#include "analysis/passes/graph_rename.h"
#include "analysis/passes/passes.h"
#include "ops/node_attrs.h"

#include <algorithm>
#include <span>
#include <unordered_set>

namespace ctxkit::analysis {

namespace {

const ir::Graph* chosenBranch(const ir::Node& node, const GraphFacts& facts) {
  if (node.kind != ir::OpKind::If || node.inputs.size() != 1) return nullptr;
  const ValueFacts* cond = facts.find(node.inputs[0]);
  if (!cond || !cond->constant || cond->constant->type() != ir::ElemType::Bool || cond->constant->elementCount() != 1)
    return nullptr;
  const ir::Attribute* branch =
      node.attrs.find(cond->constant->dataAs<uint8_t>()[0] != 0 ? "then_branch" : "else_branch");
  return branch ? branch->g.get() : nullptr;
}

// Names for the values inlined branches bring into a graph: `<If node>/<name>`, unless the graph's value table, a
// subgraph of the graph, or an earlier inlined value has that name (`_2`, `_3`, ... is appended then). The table
// answers by hash; subgraphs' names are gathered once, the first time a name collides with nothing else.
class FreshNames {
public:
  FreshNames(const ir::Graph& graph, const ir::ValueTable& table) : graph_(graph), table_(table) {}
  std::string make(const std::string& prefix, const std::string& base) {
    std::string name = prefix + base;
    for (int k = 1; taken(name); ++k) name = fmt::format("{}{}_{}", prefix, base, k);
    issued_.insert(name);
    return name;
  }

private:
  bool taken(const std::string& name) {
    if (table_.find(name) != ir::kNoValue || issued_.count(name)) return true;
    if (!subgraphNamesKnown_) {
      collectSubgraphNames(graph_, subgraphNames_);
      subgraphNamesKnown_ = true;
    }
    return subgraphNames_.count(name) != 0;
  }
  const ir::Graph& graph_;
  const ir::ValueTable& table_;
  std::unordered_set<std::string> issued_, subgraphNames_;
  bool subgraphNamesKnown_ = false;
};

// Replaces every If whose condition `facts` knows by its branch (but those trace.keep names); returns how many.
// trace.origin follows the nodes.
size_t inlineConstantIfs(ir::Graph& graph, const GraphFacts& facts, GraphPassTrace& trace) {
  const ir::ValueTable& table = facts.table;
  std::vector<ir::Node> nodes;
  std::vector<size_t> origin;
  FreshNames fresh(graph, table);
  // By id of the graph's values: declared in its inputs, outputs or value_info; an output of an If inlined now.
  std::vector<bool> declared(table.size(), false), ifOutput(table.size(), false);
  for (const auto* list : {&graph.inputs, &graph.outputs, &graph.valueInfo})
    for (const auto& v : *list)
      if (const ir::ValueId id = table.find(v.name); id != ir::kNoValue) declared[id] = true;
  std::vector<ir::ValueInfo> valueInfo;  // what the inlined branches declare
  size_t inlined = 0;
  for (size_t index = 0; index < graph.nodes.size(); ++index) {
    ir::Node& node = graph.nodes[index];
    const size_t from = trace.origin[index];
    const ir::Graph* branch = trace.keep.count(from) ? nullptr : chosenBranch(node, facts);
    if (!branch) {
      nodes.push_back(std::move(node));
      origin.push_back(from);
      continue;
    }
    // A nested If comes from its outer If, already listed.
    if (std::find(trace.inlined.begin(), trace.inlined.end(), from) == trace.inlined.end())
      trace.inlined.push_back(from);
    ++inlined;
    const std::span<const ir::ValueId> ifOutputs = table.outputsOf(index);
    for (const ir::ValueId v : ifOutputs)
      if (v != ir::kNoValue) ifOutput[v] = true;
    const std::string prefix = (node.name.empty() ? std::string("If") : node.name) + "/";
    // By id of the branch's values: a value the branch computes and returns takes the If output's name; every other
    // value it defines (initializers included) a fresh one; what it reads from outside keeps its name.
    const ir::ValueTable values(*branch);
    std::vector<std::string> names(values.size());
    ValueRenames to(values.size(), nullptr);
    std::vector<ir::ValueId> returned(branch->outputs.size(), ir::kNoValue);
    std::vector<bool> takesIfName(values.size(), false);
    for (size_t k = 0; k < branch->outputs.size(); ++k) returned[k] = values.find(branch->outputs[k].name);
    for (size_t k = 0; k < returned.size() && k < node.outputs.size(); ++k)
      if (const ir::ValueId v = returned[k];
          v != ir::kNoValue && values[v].hasProducer() && !to[v] && !node.outputs[k].empty()) {
        to[v] = &node.outputs[k];
        takesIfName[v] = true;
      }
    for (ir::ValueId v = 0; v < values.size(); ++v)
      if ((values[v].hasProducer() || values[v].isInitializer) && !to[v]) {
        names[v] = fresh.make(prefix, values.name(v));
        to[v] = &names[v];
      }
    for (size_t i = 0; i < branch->nodes.size(); ++i) {
      ir::Node n = branch->nodes[i];
      n.name = prefix + n.name;
      renameNodeReads(n, values, i, to);
      const std::span<const ir::ValueId> outs = values.outputsOf(i);
      for (size_t o = 0; o < outs.size(); ++o)
        if (outs[o] != ir::kNoValue && to[outs[o]]) n.outputs[o] = *to[outs[o]];
      nodes.push_back(std::move(n));
      origin.push_back(from);
    }
    // An output that is an outer value, a branch initializer or a value returned twice is copied to the If's name.
    for (size_t k = 0; k < returned.size() && k < node.outputs.size(); ++k) {
      const ir::ValueId v = returned[k];
      const std::string& source = v != ir::kNoValue && to[v] ? *to[v] : branch->outputs[k].name;
      if (node.outputs[k].empty() || source == node.outputs[k]) continue;
      ir::Node copy;
      copy.name = fmt::format("{}output_{}", prefix, k);
      copy.opType = "Identity";
      copy.kind = ir::OpKind::Identity;
      copy.opset = node.opset;
      copy.inputs = {source};
      copy.outputs = {node.outputs[k]};
      ops::decodeNode(copy);
      nodes.push_back(std::move(copy));
      origin.push_back(from);
    }
    for (const auto& init : branch->initializers)
      graph.initializers.push_back(ir::Initializer{*to[values.id(init.name)], init.tensor, init.external});
    // What the branch declares for a value it defines goes under the value's new name (not for the If's outputs:
    // their declarations are dropped below); for an outer value, when the graph lacks it.
    std::vector<bool> described(values.size(), false);
    for (const auto& v : branch->valueInfo) {
      const ir::ValueId id = values.find(v.name);
      if (id == ir::kNoValue || described[id] || takesIfName[id]) continue;
      described[id] = true;
      if (!to[id]) {
        const ir::ValueId outer = table.find(v.name);
        if (outer != ir::kNoValue && declared[outer]) continue;
        if (outer != ir::kNoValue) declared[outer] = true;
      }
      ir::ValueInfo info = v;
      if (to[id]) info.name = *to[id];
      valueInfo.push_back(std::move(info));
    }
  }
  graph.nodes = std::move(nodes);
  trace.origin = std::move(origin);
  // What the file declares for an If's outputs held for either branch; the branch taken now gives them their facts.
  if (inlined != 0) {
    std::erase_if(graph.valueInfo, [&](const ir::ValueInfo& info) {
      const ir::ValueId v = table.find(info.name);
      return v != ir::kNoValue && ifOutput[v];
    });
    graph.valueInfo.insert(graph.valueInfo.end(), std::make_move_iterator(valueInfo.begin()),
                           std::make_move_iterator(valueInfo.end()));
  }
  return inlined;
}

}  // namespace

Expected<ir::PassChange> InlineIf::run(GraphPassState& state) const {
  // Each round removes at least one If and exposes at most the Ifs nested in it, so the rounds end.
  size_t inlined = 0;
  while (const size_t n = inlineConstantIfs(state.graph, state.facts, state.trace)) {
    inlined += n;
    CTX_RETURN_IF_ERROR(state.reanalyze());
  }
  return ir::PassChange{}.count("ifs_inlined", inlined);
}

}  // namespace ctxkit::analysis
