// Runs the graph passes (lib/analysis/passes) in order, and lists a graph as text for --dump-after.
#include "analysis/graph_passes.h"

#include "analysis/passes/passes.h"

#include <fmt/format.h>

namespace ctxkit::analysis {

Status GraphPassState::reanalyze() {
  CTX_ASSIGN_OR_RETURN(facts, analyzeGraph(graph, bindings, options));
  return Status::ok();
}

const std::vector<const GraphPass*>& graphPasses() {
  static const InlineIf inlineIf;
  static const RemoveNoops removeNoops;
  static const FoldSubgraphs foldSubgraphs;
  static const std::vector<const GraphPass*> passes = {&inlineIf, &removeNoops, &foldSubgraphs};
  return passes;
}

const std::vector<std::string_view>& graphPassNames() {
  static const std::vector<std::string_view> names = ir::passNames(graphPasses());
  return names;
}

std::string graphText(const ir::Graph& graph, const GraphFacts& facts, std::string_view title) {
  std::string out = fmt::format("graph {}: {} nodes\n", title, graph.nodes.size());
  for (const ir::Node& n : graph.nodes) {
    std::string ins;
    for (const auto& in : n.inputs) {
      const ValueFacts* f = in.empty() ? nullptr : facts.find(in);
      ins += (ins.empty() ? "" : ", ") + (in.empty() ? std::string("-") : in + (f && f->constant ? "(const)" : ""));
    }
    bool subgraphs = false;
    for (const auto& a : n.attrs.all()) subgraphs |= a.g != nullptr || !a.graphs.empty();
    out += fmt::format("  {} = {}({}){}  # {}\n", fmt::join(n.outputs, ", "), n.opType, ins,
                       subgraphs ? " {subgraphs}" : "", n.name);
  }
  return out;
}

Expected<GraphFacts> runGraphPasses(ir::Graph& graph, const Bindings& bindings, std::vector<ir::PassRun>& runs,
                                    const AnalyzeOptions& options, std::vector<std::string>* warnings,
                                    GraphPassTrace* trace, GraphPassDump* dump) {
  GraphPassTrace own;
  GraphPassTrace& t = trace ? *trace : own;
  t.origin.resize(graph.nodes.size());
  for (size_t i = 0; i < t.origin.size(); ++i) t.origin[i] = i;
  t.inlined.clear();
  t.removed.clear();
  CTX_ASSIGN_OR_RETURN(GraphFacts facts, analyzeGraph(graph, bindings, options));
  t.given = facts.table;
  t.passedThrough.assign(t.given.size(), ir::kNoValue);
  GraphPassState state{graph, bindings, options, std::move(facts), t, warnings};
  ir::PassControl control;
  std::string text;
  if (dump) {
    control.dumpAfter = dump->dumpAfter;
    control.stopAfter = dump->stopAfter;
  }
  runs.clear();
  CTX_ASSIGN_OR_RETURN(
      bool stopped,
      ir::runPasses(graphPasses(), ir::PassKind::Graph, state, control, runs, text, [&](std::string_view pass) {
        return graphText(graph, state.facts, fmt::format("{} (after {})", dump->name, pass));
      }));
  if (dump) {
    dump->text += text;
    dump->stopped = stopped;
  }
  return std::move(state.facts);
}

}  // namespace ctxkit::analysis
