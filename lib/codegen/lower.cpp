// Partition lowering: runs the lowering passes (lib/codegen/passes) on one partition's ops, in order.
#include "codegen/lower.h"

#include "codegen/load_time_recipes.h"
#include "codegen/lowering_state.h"
#include "codegen/passes/passes.h"
#include "ir/op_info.h"
#include "ops/node_attrs.h"

namespace ctxkit::codegen {

namespace {

const ir::Attributes kNoAttrs;

}  // namespace

const std::vector<const LoweringPass*>& loweringPasses() {
  static const FuseQdq fuseQdq;
  static const FoldConstants foldConstants;
  static const FusePad fusePad;
  static const PruneConvTaps pruneConvTaps;
  static const FoldBatchNorm foldBatchNorm;
  static const FoldAffine foldAffine;
  static const WidenFloat16 widenFloat16;
  static const FuseMatMulAdd fuseMatMulAdd;
  static const MatchActivations matchActivations;
  static const MatchLayerNorm matchLayerNorm;
  static const FuseEpilogue fuseEpilogue;
  static const ChooseKernels chooseKernels;
  static const ChooseLayouts chooseLayouts;
  static const EmitProgram emitProgram;
  static const PlanMemory planMemory;
  static const std::vector<const LoweringPass*> passes = {
      &fuseQdq,      &foldConstants, &fusePad,       &pruneConvTaps,    &foldBatchNorm,
      &foldAffine,   &widenFloat16,  &fuseMatMulAdd, &matchActivations, &matchLayerNorm,
      &fuseEpilogue, &chooseKernels, &chooseLayouts, &emitProgram,      &planMemory};
  return passes;
}

const std::vector<std::string_view>& loweringPassNames() {
  static const std::vector<std::string_view> names = ir::passNames(loweringPasses());
  return names;
}

Expected<LoweredPartition> lowerPartition(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                          const partitioner::Partition& partition,
                                          std::span<const ir::ValueId> usedOutside, const WeightInterner& intern,
                                          const LowerOptions& options) {
  LoweringState state(facts, usedOutside, intern, options);
  // A weightless context computes at load the constants the analysis folded from source weights (a Slice, Concat,
  // Transpose... of a weight): their nodes come first, writing load-time values.
  std::vector<size_t> recipes;
  if (options.plainWeights) recipes = loadTimeRecipes(graph, facts, partition, usedOutside);
  const size_t recipeOps = recipes.size();
  // And the constants computed by exact ops (anchors, masks): their nodes are kept aside for emit-program.
  ExactRecipes exact;
  if (options.plainWeights) exact = exactRecipes(graph, facts, partition, usedOutside, recipes);
  recipes.insert(recipes.end(), partition.nodes.begin(), partition.nodes.end());
  // The lowering's op for graph node i.
  auto opFor = [&](size_t i) -> Expected<LOp> {
    const ir::Node& n = graph.nodes[i];
    std::string name = n.name.empty() ? n.opType + "_" + std::to_string(i) : n.name;
    const auto decoded = ops::attrsOf(n);
    if (!decoded->attrs)
      return Error(decoded->attrs.error()).addContext(fmt::format("node '{}' ({})", name, ir::opKindName(n.kind)));
    const bool typed = ops::isTyped(decoded->attrs.value());
    // The lowering's value table: each graph value (an id of facts.table) gets its id as the ops first meet it.
    auto ids = [&](std::span<const ir::ValueId> graphValues) {
      std::vector<ValueId> v;
      v.reserve(graphValues.size());
      for (ir::ValueId g : graphValues) v.push_back(state.fromGraph(g));
      return v;
    };
    return LOp{n.kind,
               n.opset,
               std::move(name),
               decoded->attrs.value(),
               ids(facts.table.inputsOf(i)),
               ids(facts.table.outputsOf(i)),
               {},
               typed ? kNoAttrs : n.attrs};
  };
  for (size_t i : recipes) {
    CTX_ASSIGN_OR_RETURN(LOp op, opFor(i));
    state.ops.push_back(std::move(op));
  }
  for (size_t i : exact.nodes) {
    CTX_ASSIGN_OR_RETURN(LOp op, opFor(i));
    state.exactRecipeOps.push_back(std::move(op));
  }
  for (ir::ValueId v : exact.values) state.exactRecipeValues.push_back(state.fromGraph(v));
  for (size_t k = 0; k < recipeOps; ++k)
    for (ValueId o : state.ops[k].outputs) {
      if (o == kNoValue) continue;
      ValueRecord& r = state.record(o);
      r.sourceConstant = nullptr;  // computed at load: not a constant of the lowering
      r.loadTime = true;
    }
  const ir::PassControl control{&options.skipPasses, options.dumpAfter, options.stopAfter};
  LoweredPartition& result = state.result;
  CTX_ASSIGN_OR_RETURN(result.stopped,
                       ir::runPasses(loweringPasses(), ir::PassKind::Lowering, state, control, result.passes,
                                     result.dump, [&](std::string_view pass) { return state.dump(pass); }));
  return std::move(result);
}

}  // namespace ctxkit::codegen
