// Initializers whose bytes live in external data files, found in a graph and in its nodes' subgraphs: what
// `ctxinspect` lists as deployment files and what `--lint` checks (docs/ctxinspect.md).
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace ctxkit::inspect {

struct ExternalInitializer {
  std::string name;  // "If_0/then_branch/W" inside a subgraph
  ir::ExternalLocation where;
};

// Every initializer with external data, in `g` and in the subgraphs of its nodes (the loader bounds the nesting);
// `scope` prefixes the names.
void collectExternal(const ir::Graph& g, const std::string& scope, std::vector<ExternalInitializer>& out);

}  // namespace ctxkit::inspect
