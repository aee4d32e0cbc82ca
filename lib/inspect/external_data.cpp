#include "inspect/external_data.h"

#include <fmt/format.h>

namespace ctxkit::inspect {

void collectExternal(const ir::Graph& g, const std::string& scope, std::vector<ExternalInitializer>& out) {
  for (const auto& init : g.initializers)
    if (init.external) out.push_back({scope + init.name, *init.external});
  for (const auto& n : g.nodes)
    for (const auto& a : n.attrs.all()) {
      std::string inner = fmt::format("{}{}/{}/", scope, n.name, a.name);
      if (a.g) collectExternal(*a.g, inner, out);
      for (const auto& sub : a.graphs)
        if (sub) collectExternal(*sub, inner, out);
    }
}

}  // namespace ctxkit::inspect
