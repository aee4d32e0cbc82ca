// inline-if: an If whose condition is a compile-time constant is replaced by its chosen branch.
#include "analysis/passes/graph_rename.h"
#include "analysis/passes/passes.h"
#include "ops/node_attrs.h"

#include <algorithm>
#include <set>
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

// Replaces every If whose condition `facts` knows by its branch (but those trace.keep names); returns how many.
// trace.origin follows the nodes.
size_t inlineConstantIfs(ir::Graph& graph, const GraphFacts& facts, GraphPassTrace& trace) {
  std::vector<ir::Node> nodes;
  std::vector<size_t> origin;
  // Names are made up here for values no table has yet: those (and what valueInfo declares) are still kept by name.
  std::unordered_set<std::string> names;
  std::set<std::string> declared;
  std::vector<bool> ifOutput(facts.table.size(), false);  // by value id: an output of an If inlined now
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
    if (names.empty()) {
      collectNames(graph, names);
      for (const auto* list : {&graph.inputs, &graph.outputs, &graph.valueInfo})
        for (const auto& v : *list) declared.insert(v.name);
    }
    ++inlined;
    for (const ir::ValueId v : facts.table.outputsOf(index))
      if (v != ir::kNoValue) ifOutput[v] = true;
    const std::string prefix = (node.name.empty() ? std::string("If") : node.name) + "/";
    auto fresh = [&](const std::string& base) {
      std::string name = prefix + base;
      for (int k = 1; names.count(name); ++k) name = fmt::format("{}{}_{}", prefix, base, k);
      names.insert(name);
      return name;
    };
    // A value the branch computes and returns takes the If output's name; every other value it defines a new one.
    const ir::ValueTable values(*branch);
    auto produced = [&](const std::string& name) {
      const ir::ValueId v = values.find(name);
      return v != ir::kNoValue && values[v].hasProducer();
    };
    Renames r;
    for (size_t k = 0; k < branch->outputs.size() && k < node.outputs.size(); ++k)
      if (produced(branch->outputs[k].name) && !r.count(branch->outputs[k].name) && !node.outputs[k].empty())
        r[branch->outputs[k].name] = node.outputs[k];
    for (const auto& init : branch->initializers) r[init.name] = fresh(init.name);
    for (ir::ValueId v = 0; v < values.size(); ++v)
      if (values[v].hasProducer() && !r.count(values.name(v))) r[values.name(v)] = fresh(values.name(v));
    for (const auto& bn : branch->nodes) {
      ir::Node n = bn;
      n.name = prefix + bn.name;
      renameNodeReads(n, r);
      for (auto& o : n.outputs) o = renamed(r, o);
      nodes.push_back(std::move(n));
      origin.push_back(from);
    }
    // An output that is an outer value, a branch initializer or a value returned twice is copied to the If's name.
    for (size_t k = 0; k < branch->outputs.size() && k < node.outputs.size(); ++k) {
      const std::string& source = renamed(r, branch->outputs[k].name);
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
      graph.initializers.push_back(ir::Initializer{r[init.name], init.tensor, init.external});
    for (const auto& v : branch->valueInfo) {
      ir::ValueInfo info = v;
      info.name = renamed(r, v.name);
      if (declared.insert(info.name).second) graph.valueInfo.push_back(std::move(info));
    }
  }
  graph.nodes = std::move(nodes);
  trace.origin = std::move(origin);
  // What the file declares for an If's outputs held for either branch; the branch taken now gives them their facts.
  if (inlined != 0)
    std::erase_if(graph.valueInfo, [&](const ir::ValueInfo& info) {
      const ir::ValueId v = facts.table.find(info.name);
      return v != ir::kNoValue && ifOutput[v];
    });
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
