// The graph passes, one class each, defined one per file in this folder; analysis/graph_passes.cpp runs them in the
// order docs/compiler.md#analysis lists. Each reports what it changed as counts (ir::PassChange).
#pragma once

#include "analysis/graph_passes.h"

namespace ctxkit::analysis {

#define CTXKIT_GRAPH_PASS(Class, passName)                                                                             \
  class Class final : public GraphPass {                                                                               \
  public:                                                                                                              \
    std::string_view name() const override { return passName; }                                                        \
    Expected<ir::PassChange> run(GraphPassState& state) const override;                                                \
  };

// An If whose condition is a compile-time constant becomes its chosen branch's nodes (rounds until none is left).
CTXKIT_GRAPH_PASS(InlineIf, "inline-if")
// Identity, inference Dropout, Cast to the same type and Reshape to the same shape are removed.
CTXKIT_GRAPH_PASS(RemoveNoops, "remove-noops")
// Inside the If/Loop/Scan bodies left, nodes whose values are known become body initializers.
CTXKIT_GRAPH_PASS(FoldSubgraphs, "fold-subgraphs")

#undef CTXKIT_GRAPH_PASS

}  // namespace ctxkit::analysis
