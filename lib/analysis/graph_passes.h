// Whole-graph passes that run before partitioning, on the facts analyzeGraph derives (bound inputs included):
// an If whose condition is known is replaced by its branch, ops that change nothing are removed, and constants
// inside the bodies of the If/Loop/Scan nodes left are folded. The graph's own constant subgraphs need no pass:
// analyzeGraph folds them, and the partitioner stores their values as weights.
#pragma once

#include "analysis/analysis.h"

#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace ctxkit::analysis {

struct GraphPassRun {
  std::string name;
  double milliseconds = 0;
  size_t changed = 0;  // nodes replaced or removed
};

// What the passes did, node by node, for a caller that must find the graph's own nodes again (the plugin EP fuses
// ONNX Runtime's nodes, not the rewritten ones). Node numbers are indices into the graph as it was given.
struct GraphPassTrace {
  std::set<size_t> keep;  // in: nodes inline-if and remove-noops leave as they are
  // out: the given node each node of the final graph came from (an inlined branch's nodes: the If's)
  std::vector<size_t> origin;
  std::vector<size_t> inlined;  // If nodes replaced by their branch
  std::vector<size_t> removed;  // no-ops removed
  // A removed no-op's output -> the value its readers read instead (through chains of no-ops)
  std::unordered_map<std::string, std::string> renames;
};

// The passes in the order they run (for --json and errors).
const std::vector<std::string>& graphPassNames();

// Runs the passes on `graph` until none changes anything and returns the facts of the final graph (what
// analyzeGraph gives for it). `runs` receives one entry per pass.
//  - inline-if: an If whose condition is a compile-time constant becomes its chosen branch's nodes; values the
//    branch defines are renamed `<If node>/<name>` (made unique), its outputs are the If's outputs, its initializers
//    join the graph's; nested If's inlined this way are taken on the next round.
//  - remove-noops: Identity, Dropout in inference (no training_mode, or a constant false; mask unused), Cast to its
//    input's type and Reshape to its input's static shape are removed and their readers read the input instead.
//    A node writing a graph output stays, so the graph's output names never change.
//  - fold-subgraphs: inside the bodies of the If/Loop/Scan nodes that remain (they run on the fallback path), nodes
//    whose values are known (from body initializers, Constants and the outer graph's constants) become body
//    initializers, nested bodies included.
// `warnings`, when given, gets a line for each If/Loop/Scan subgraph that fold-subgraphs could not analyze with the
// bound shapes (a branch that cannot run with them: ONNX Runtime refuses to load a model holding one).
// `trace`, when given, says which If nodes to keep and receives where each node of the final graph came from.
Expected<GraphFacts> runGraphPasses(ir::Graph& graph, const Bindings& bindings, std::vector<GraphPassRun>& runs,
                                    const AnalyzeOptions& options = {}, std::vector<std::string>* warnings = nullptr,
                                    GraphPassTrace* trace = nullptr);

}  // namespace ctxkit::analysis
