// evaluateNodes (graph_builder.h): a graph's nodes run in file order through the kernels, for tests that compare a
// rewritten graph with its original.
#include "graph_builder.h"
#include "kernels/kernels.h"

#include <catch2/catch.hpp>

namespace ctxkit::testing {

std::map<std::string, ir::Tensor> evaluateNodes(const ir::Graph& g, std::map<std::string, ir::Tensor> values) {
  for (const auto& init : g.initializers) values[init.name] = init.tensor;
  for (const auto& n : g.nodes) {
    std::vector<const ir::Tensor*> ins;
    for (const auto& in : n.inputs) ins.push_back(in.empty() ? nullptr : &values.at(in));
    kernels::OpContext ctx{n.kind, n.opset, n.attrs, n.name};
    auto outs = kernels::evaluate(ctx, ins, n.outputs.size());
    INFO((outs ? std::string() : outs.error().message()));
    REQUIRE(outs);
    for (size_t o = 0; o < n.outputs.size(); ++o) values[n.outputs[o]] = (*outs)[o];
  }
  return values;
}

}  // namespace ctxkit::testing
