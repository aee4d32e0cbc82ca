// Whole-graph passes that run before partitioning, on the facts analyzeGraph derives (bound inputs included):
// an If whose condition is known is replaced by its branch, ops that change nothing are removed, and constants
// inside the bodies of the If/Loop/Scan nodes left are folded. The graph's own constant subgraphs need no pass:
// analyzeGraph folds them, and the partitioner stores their values as weights. One class per pass, one file each
// (lib/analysis/passes), behind the interface the lowering passes share (ir::Pass).
#pragma once

#include "analysis/analysis.h"
#include "ir/pass.h"
#include "ir/value_table.h"

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::analysis {

// What the passes did, node by node, for a caller that must find the graph's own nodes again (the plugin EP fuses
// ONNX Runtime's nodes, not the rewritten ones). Node numbers are indices into the graph as it was given.
struct GraphPassTrace {
  std::set<size_t> keep;  // in: nodes inline-if and remove-noops leave as they are
  // out: the given node each node of the final graph came from (an inlined branch's nodes: the If's)
  std::vector<size_t> origin;
  std::vector<size_t> inlined;  // If nodes replaced by their branch
  std::vector<size_t> removed;  // no-ops removed
  // out: the graph as given, numbered (the ids below are its)
  ir::ValueTable given;
  // out: by id of `given`, the value the readers of a removed no-op's output read instead (through chains of no-ops);
  // kNoValue for the others. No-ops from an inlined branch are left out: their values are not the given graph's.
  std::vector<ir::ValueId> passedThrough;
};

// What the graph passes work on: the graph, the facts of it as it is now (a pass that changes the graph analyzes it
// again), and where its nodes came from.
struct GraphPassState {
  ir::Graph& graph;
  const Bindings& bindings;
  const AnalyzeOptions& options;
  GraphFacts facts;
  GraphPassTrace& trace;
  std::vector<std::string>* warnings;  // may be null

  // facts = analyzeGraph(graph) after a change.
  Status reanalyze();
};

using GraphPass = ir::Pass<GraphPassState>;

// The passes in the order they run.
const std::vector<const GraphPass*>& graphPasses();
const std::vector<std::string_view>& graphPassNames();

// ctxgen's --dump-after and --stop-after for the graph passes.
struct GraphPassDump {
  std::string dumpAfter, stopAfter;  // in: pass names (a lowering pass's name matches none here)
  std::string name;                  // in: the graph's name in the dump
  std::string text;                  // out: the graph as it was after that pass (graphText)
  bool stopped = false;              // out: stopAfter named a graph pass; the passes after it did not run
};

// A compact listing of the graph's nodes, one a line: `outputs = OpType(inputs)  # name`, constants marked.
std::string graphText(const ir::Graph& graph, const GraphFacts& facts, std::string_view title);

// Runs the passes on `graph` and returns the facts of the final graph (what analyzeGraph gives for it). `runs`
// receives one record per pass.
//  - inline-if: an If whose condition is a compile-time constant becomes its chosen branch's nodes; values the
//    branch defines are renamed `<If node>/<name>` (made unique), its outputs are the If's outputs, its initializers
//    join the graph's; nested If's inlined this way are taken on the next round, until no If is left to inline.
//  - remove-noops: Identity, Dropout in inference (no training_mode, or a constant false; or a constant ratio 0; mask
//    unused), Cast to its input's type and Reshape to its input's static shape are removed and their readers read
//    the input instead.
//    A node writing a graph output stays, so the graph's output names never change.
//  - fold-subgraphs: inside the bodies of the If/Loop/Scan nodes that remain (they run on the fallback path), nodes
//    whose values are known (from body initializers, Constants and the outer graph's constants) become body
//    initializers, nested bodies included.
// `warnings`, when given, gets a line for each If/Loop/Scan subgraph that fold-subgraphs could not analyze with the
// bound shapes (a branch that cannot run with them: ONNX Runtime refuses to load a model holding one); the top-level
// node holding it is left unfolded and named in the facts' unrunnableSubgraphs.
// `trace`, when given, says which If nodes to keep and receives where each node of the final graph came from.
// `dump`, when given, names a pass to dump the graph after or to stop after.
Expected<GraphFacts> runGraphPasses(ir::Graph& graph, const Bindings& bindings, std::vector<ir::PassRun>& runs,
                                    const AnalyzeOptions& options = {}, std::vector<std::string>* warnings = nullptr,
                                    GraphPassTrace* trace = nullptr, GraphPassDump* dump = nullptr);

}  // namespace ctxkit::analysis
