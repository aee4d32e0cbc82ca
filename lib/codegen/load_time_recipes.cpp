// Which folded constants a weightless context computes at load from the source weights (load_time_recipes.h).
#include "codegen/load_time_recipes.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace ctxkit::codegen {

namespace {

// A constant above this size is worth keeping out of the context binary; the same floor as derivesAtLoad's.
constexpr uint64_t kRecipeFloorBytes = 4096;

// Ops whose result is a rearrangement of their data input's elements (or their exact conversion), computed at load by
// the same kernels the analysis folded them with, so the result is bit for bit the folded constant.
bool isRecipeKind(ir::OpKind kind) {
  switch (kind) {
    case ir::OpKind::Slice:
    case ir::OpKind::Concat:
    case ir::OpKind::Transpose:
    case ir::OpKind::Reshape:
    case ir::OpKind::Squeeze:
    case ir::OpKind::Unsqueeze:
    case ir::OpKind::Flatten:
    case ir::OpKind::Identity:
    case ir::OpKind::Gather:
    case ir::OpKind::Split:
    case ir::OpKind::Cast: return true;
    default: return false;
  }
}

// Whether input `slot` of a `kind` op reads a weight that the passes take as computed at load as readily as stored: a
// Conv's, ConvTranspose's or Gemm's weight, MatMul's operands, a recurrent op's W, R and B, Gather's table. A bias or
// a per-channel factor is left a constant: fold-batchnorm and fold-affine fold only constant ones, and an operand they
// could not fold would be computed in another order than the ordinary compile's.
bool readsAsWeight(ir::OpKind kind, uint32_t slot) {
  switch (kind) {
    case ir::OpKind::Conv:
    case ir::OpKind::ConvTranspose:
    case ir::OpKind::Gemm: return slot == 1;
    case ir::OpKind::MatMul: return slot <= 1;
    case ir::OpKind::LSTM:
    case ir::OpKind::GRU:
    case ir::OpKind::RNN: return slot >= 1 && slot <= 3;
    case ir::OpKind::Gather: return slot == 0;
    default: return false;
  }
}

bool isHalf(ir::ElemType t) { return t == ir::ElemType::Float16 || t == ir::ElemType::BFloat16; }

class RecipeFinder {
public:
  RecipeFinder(const ir::Graph& graph, const analysis::GraphFacts& facts, std::span<const ir::ValueId> usedOutside)
      : graph_(graph), facts_(facts), usedOutside_(usedOutside) {}

  // Whether constant `v` is a source model's own: an initializer or a Constant node's value.
  bool isSource(ir::ValueId v) const {
    const ir::ValueEntry& e = facts_.table[v];
    return !e.hasProducer() || graph_.nodes[e.producer].kind == ir::OpKind::Constant;
  }

  // Whether constant `v` can be computed at load from source constants; when it can, whether it reads a large source
  // constant is or-ed into `readsLarge`.
  bool computable(ir::ValueId v, bool& readsLarge) {
    const analysis::ValueFacts& f = facts_.values[v];
    if (!f.constant || isHalf(f.constant->type())) return false;
    if (isSource(v)) {
      readsLarge = readsLarge || f.constant->byteSize() > kRecipeFloorBytes;
      return true;
    }
    if (auto known = memo_.find(v); known != memo_.end()) {
      readsLarge = readsLarge || known->second.readsLarge;
      return known->second.computable;
    }
    memo_[v] = {false, false};  // (a cycle cannot occur in a checked graph; this ends one all the same)
    const size_t node = facts_.table[v].producer;
    bool ok = isRecipeKind(graph_.nodes[node].kind), large = false;
    for (ir::ValueId o : facts_.table.outputsOf(node))
      ok = ok && (o == ir::kNoValue || (facts_.values[o].constant && !isHalf(facts_.values[o].constant->type()) &&
                                        !std::binary_search(usedOutside_.begin(), usedOutside_.end(), o)));
    for (ir::ValueId in : facts_.table.inputsOf(node)) {
      if (!ok) break;
      if (in == ir::kNoValue) continue;
      const std::optional<ir::Tensor>& constant = facts_.values[in].constant;
      bool inLarge = false;
      if (constant && computable(in, inLarge) && (inLarge || isSource(in))) {
        large = large || inLarge;
        continue;
      }
      ok = constant && constant->byteSize() <= kRecipeFloorBytes;  // stored as it is: a bound, an index, a shape
    }
    memo_[v] = {ok, large};
    readsLarge = readsLarge || large;
    return ok;
  }

  // Adds the nodes computing `v` (computable) to `nodes`.
  void collect(ir::ValueId v, std::vector<size_t>& nodes) const {
    if (isSource(v)) return;
    const size_t node = facts_.table[v].producer;
    nodes.push_back(node);
    for (ir::ValueId in : facts_.table.inputsOf(node))
      if (in != ir::kNoValue && !isSource(in) && memo_.count(in) && memo_.at(in).computable && memo_.at(in).readsLarge)
        collect(in, nodes);
  }

private:
  struct Known {
    bool computable, readsLarge;
  };
  const ir::Graph& graph_;
  const analysis::GraphFacts& facts_;
  std::span<const ir::ValueId> usedOutside_;
  std::map<ir::ValueId, Known> memo_;
};

}  // namespace

std::vector<size_t> loadTimeRecipes(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                    const partitioner::Partition& partition, std::span<const ir::ValueId> usedOutside) {
  RecipeFinder finder(graph, facts, usedOutside);
  const std::set<size_t> inPartition(partition.nodes.begin(), partition.nodes.end());
  // Every reader in the partition reads `v` as a weight.
  auto readAsWeight = [&](ir::ValueId v) {
    return std::all_of(facts.table[v].uses.begin(), facts.table[v].uses.end(), [&](const ir::ValueUse& u) {
      return !inPartition.count(u.node) || readsAsWeight(graph.nodes[u.node].kind, u.slot);
    });
  };
  std::vector<size_t> chosen;
  for (size_t i : partition.nodes)
    for (ir::ValueId in : facts.table.inputsOf(i)) {
      if (in == ir::kNoValue || !facts.values[in].constant || finder.isSource(in) ||
          facts.values[in].constant->byteSize() <= kRecipeFloorBytes || !readAsWeight(in))
        continue;
      bool readsLarge = false;
      if (finder.computable(in, readsLarge) && readsLarge) finder.collect(in, chosen);
    }
  // In the analysis' topological order, each node once.
  std::vector<size_t> position(graph.nodes.size(), 0);
  for (size_t k = 0; k < facts.order.size(); ++k) position[facts.order[k]] = k;
  std::sort(chosen.begin(), chosen.end(), [&](size_t a, size_t b) { return position[a] < position[b]; });
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  std::erase_if(chosen, [&](size_t n) { return inPartition.count(n) > 0; });  // (not one the analysis folded)
  return chosen;
}

}  // namespace ctxkit::codegen
