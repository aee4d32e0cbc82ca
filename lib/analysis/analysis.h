// Whole-graph facts the compiler needs: topological order, static types and shapes after binding
// symbolic dimensions, and values known at compile time (constant folding).
#pragma once

#include "analysis/bounds.h"
#include "ir/graph.h"
#include "ir/value_table.h"
#include "support/status.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::analysis {

using Bindings = ir::ShapeBindings;

inline constexpr size_t kNoNode = static_cast<size_t>(-1);

struct ValueFacts {
  ir::ElemType type = ir::ElemType::Undefined;
  std::optional<ir::Shape> shape;  // set when static
  std::string blocker;             // why the shape is not static: "dimension 'seq' of input 'x' is not bound"
  // When the shape is not static: the node the blocker names (a value-dependent op such as NonZero, or a node
  // without a shape rule), kNoNode for an unbound graph input; and the shape's upper bound when one is known
  // (analysis/bounds.h): each dimension at most `bound` at run time, and at least `low` (set with `bound`).
  size_t blockerNode = kNoNode;
  std::optional<ir::Shape> bound;
  std::optional<ir::Shape> low;
  // For a small integer tensor not known at compile time that a shape is computed from (a Shape of a bounded value,
  // arithmetic on it): the range of each element's value (analysis/bounds.h).
  std::optional<ValueRanges> range;
  std::optional<ir::Tensor> constant;  // set when known at compile time
  bool isInitializer = false;
};

struct GraphFacts {
  std::vector<size_t> order;       // node indices in a topological order (file order where possible)
  ir::ValueTable table;            // the analysed graph's values, producers and uses
  std::vector<ValueFacts> values;  // by value id
  // Nodes whose shape rule could not run at compile time (a shape input not constant, an unsupported
  // attribute value...), with the reason: they can only run on the fallback path.
  std::map<size_t, std::string> ruleFailures;
  // Nodes of the graph (indices, ascending) holding a subgraph that fold-subgraphs could not analyze with the bound
  // shapes: a branch or body that cannot run with them. ONNX Runtime infers every branch when it loads a model, so
  // such a branch must not see those shapes there (pipeline::buildContextModel leaves them open).
  std::vector<size_t> unrunnableSubgraphs;

  // The facts of a value of the analysed graph, or null for a name it does not have.
  const ValueFacts* find(std::string_view name) const {
    const ir::ValueId id = table.find(name);
    return id == ir::kNoValue ? nullptr : &values[id];
  }
  const ValueFacts& operator[](ir::ValueId id) const { return values[id]; }
};

// Whether the result of `kind` is stored as a weight: a result past 1 MiB that is more than 16 times the size of its
// constant inputs (Expand, Tile, ConstantOfShape, a Range) stays computed at run time, so the .bin does not hold
// what a few bytes describe. Weight reshuffles (Transpose, Reshape, Concat, DequantizeLinear) stay well inside, and
// a Constant's value is in the model file already.
inline bool worthFolding(ir::OpKind kind, uint64_t inputBytes, uint64_t resultBytes) {
  constexpr uint64_t kFloorBytes = uint64_t{1} << 20, kGrowth = 16;
  return kind == ir::OpKind::Constant || resultBytes <= kFloorBytes || resultBytes <= kGrowth * inputBytes;
}

struct AnalyzeOptions {
  bool foldConstants = true;
  uint64_t maxFoldBytes = uint64_t{256} << 20;  // larger results stay computed at run time
  // For a subgraph made standalone by `subgraphAlone`: the facts of the scope it reads from. An input of the graph
  // that is a value there takes its facts from there (a bound of its shape, a range of its values).
  const GraphFacts* outerScope = nullptr;
};

// Checks structure (defined inputs, unique value names, no cycles) and derives facts. Errors name the
// node and the value at fault.
Expected<GraphFacts> analyzeGraph(const ir::Graph& graph, const Bindings& bindings, const AnalyzeOptions& options = {});

// Subgraph `body` (a branch or a loop body) with the values of the scope around it that its nodes read made
// explicit: those `scope` knows as constants become initializers, the rest graph inputs (with their static shape when
// `scope` has one), so that it can be analysed alone.
ir::Graph subgraphAlone(const ir::Graph& body, const GraphFacts& scope);

// After a change that adds initializers to the graph and leaves its nodes' inputs and outputs as they were
// (fold-subgraphs hoisting a weight its subgraphs share): the value table is built anew, each value's facts move to
// its new id and a new initializer gets its own.
void renumberValues(GraphFacts& facts, const ir::Graph& graph);

// Applies bindings to a declared shape; nullopt with `blocker` set when a dimension stays unknown.
std::optional<ir::Shape> bindShape(const ir::ValueInfo& info, const Bindings& bindings, std::string* blocker);

}  // namespace ctxkit::analysis
