// A parsed model with the fallback ops prepared for it. Sessions loaded from the same unchanged file share one
// (Session::loadFile with shareContexts), as they share the file's context binaries: the second session neither
// parses the model nor prepares its fallback ops (an LSTM's packed weights, say) again.
#pragma once

#include "ir/graph.h"
#include "runtime/prepared_cache.h"

namespace ctxkit::runtime {

struct SharedModel {
  ir::Model model;             // never changed once a session uses it
  PreparedNodeCache fallback;  // thread-safe; keyed by the nodes of `model`
};

}  // namespace ctxkit::runtime
