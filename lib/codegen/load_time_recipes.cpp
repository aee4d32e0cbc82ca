// Which folded constants a weightless context computes at load, and by which nodes (load_time_recipes.h).
#include "codegen/load_time_recipes.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace ctxkit::codegen {

namespace {

// A constant above this size is worth keeping out of the context binary; the same floor as derivesAtLoad's.
constexpr uint64_t kRecipeFloorBytes = 4096;
// About what an op computed at load adds to a program besides its names (program.md: the op, its output tensor).
constexpr uint64_t kRecipeOpBytes = 96;

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

// Ops whose results IEEE arithmetic (or plain copying) fixes exactly, so that the constant they fold to is the same
// bytes on every machine: their kernels round each element once as the scalar code does on every vector path (no
// fused multiply-add: the build is ISO C++ with -ffp-contract off; no approximation, no reassociation), or move,
// compare and select elements. Exp, Log, Pow, Tanh, Erf, Softmax and the reductions are not among them: libm and the
// vector paths compute them differently (docs/weight-sharing.md#derived-weights).
bool isExactKind(ir::OpKind kind) {
  if (isRecipeKind(kind)) return true;
  switch (kind) {
    case ir::OpKind::Add:
    case ir::OpKind::Sub:
    case ir::OpKind::Mul:
    case ir::OpKind::Div:
    case ir::OpKind::Mod:
    case ir::OpKind::Neg:
    case ir::OpKind::Abs:
    case ir::OpKind::Sign:
    case ir::OpKind::Sqrt:
    case ir::OpKind::Reciprocal:
    case ir::OpKind::Floor:
    case ir::OpKind::Ceil:
    case ir::OpKind::Round:
    case ir::OpKind::Min:
    case ir::OpKind::Max:
    case ir::OpKind::Clip:
    case ir::OpKind::Equal:
    case ir::OpKind::Less:
    case ir::OpKind::LessOrEqual:
    case ir::OpKind::Greater:
    case ir::OpKind::GreaterOrEqual:
    case ir::OpKind::Not:
    case ir::OpKind::And:
    case ir::OpKind::Or:
    case ir::OpKind::Xor:
    case ir::OpKind::Where:
    case ir::OpKind::Range:
    case ir::OpKind::ConstantOfShape:
    case ir::OpKind::Expand:
    case ir::OpKind::Tile:
    case ir::OpKind::Pad:
    case ir::OpKind::Trilu:
    case ir::OpKind::EyeLike:
    case ir::OpKind::ScatterND:
    case ir::OpKind::ScatterElements: return true;
    default: return false;
  }
}

// Whether value `v` is a source model's own: an initializer or a Constant node's value.
bool isSourceValue(const ir::Graph& graph, const analysis::GraphFacts& facts, ir::ValueId v) {
  const ir::ValueEntry& e = facts.table[v];
  return !e.hasProducer() || graph.nodes[e.producer].kind == ir::OpKind::Constant;
}

bool isHalf(ir::ElemType t) { return t == ir::ElemType::Float16 || t == ir::ElemType::BFloat16; }

class RecipeFinder {
public:
  RecipeFinder(const ir::Graph& graph, const analysis::GraphFacts& facts, std::span<const ir::ValueId> usedOutside)
      : graph_(graph), facts_(facts), usedOutside_(usedOutside) {}

  // Whether constant `v` is a source model's own: an initializer or a Constant node's value.
  bool isSource(ir::ValueId v) const { return isSourceValue(graph_, facts_, v); }

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

// What computing some constants at load stores: the ops (graph nodes) and the small constants they read.
struct Recipe {
  std::set<size_t> nodes;
  std::set<ir::ValueId> stored;

  void add(const Recipe& other) {
    nodes.insert(other.nodes.begin(), other.nodes.end());
    stored.insert(other.stored.begin(), other.stored.end());
  }
};

// Finds, for the constants the partition reads, the nodes computing them from source constants by exact ops
// (isExactKind) and the other constants they read (stored as they are).
class ExactRecipeFinder {
public:
  ExactRecipeFinder(const ir::Graph& graph, const analysis::GraphFacts& facts, std::span<const ir::ValueId> usedOutside,
                    std::set<size_t> excluded)
      : graph_(graph), facts_(facts), usedOutside_(usedOutside), excluded_(std::move(excluded)) {}

  bool isSource(ir::ValueId v) const { return isSourceValue(graph_, facts_, v); }

  // What the context binary holds for a recipe: its stored constants and, for each op, kRecipeOpBytes and its name
  // twice (the op's and its output's).
  uint64_t bytes(const Recipe& r) const {
    uint64_t total = 0;
    for (size_t n : r.nodes) total += kRecipeOpBytes + 2 * graph_.nodes[n].name.size();
    for (ir::ValueId v : r.stored) total += facts_.values[v].constant->byteSize();
    return total;
  }

  // How constant `v` (not a source constant) is computed at load, or nothing if it is stored. It can be computed if
  // its producer is an exact op (not one of `excluded`) whose outputs are constants of no 16-bit float type read only
  // inside the partition, and its inputs are source constants or constants (computed or stored); it is if it is larger
  // than kRecipeFloorBytes, or if computing it stores fewer bytes than it has.
  const Recipe* computed(ir::ValueId v) {
    if (auto known = memo_.find(v); known != memo_.end()) return known->second ? &*known->second : nullptr;
    memo_[v] = std::nullopt;  // (a cycle cannot occur in a checked graph; this ends one all the same)
    const std::optional<ir::Tensor>& constant = facts_.values[v].constant;
    if (!constant || isHalf(constant->type()) || isSource(v)) return nullptr;
    const size_t node = facts_.table[v].producer;
    if (!isExactKind(graph_.nodes[node].kind) || excluded_.count(node)) return nullptr;
    for (ir::ValueId o : facts_.table.outputsOf(node))
      if (o != ir::kNoValue && (!facts_.values[o].constant || isHalf(facts_.values[o].constant->type()) ||
                                std::binary_search(usedOutside_.begin(), usedOutside_.end(), o)))
        return nullptr;
    Recipe r;
    r.nodes.insert(node);
    for (ir::ValueId in : facts_.table.inputsOf(node)) {
      if (in == ir::kNoValue || isSource(in)) continue;
      if (const Recipe* inner = computed(in)) r.add(*inner);
      else if (facts_.values[in].constant) r.stored.insert(in);
      else return nullptr;
    }
    if (constant->byteSize() <= kRecipeFloorBytes && bytes(r) >= constant->byteSize()) return nullptr;
    memo_[v] = std::move(r);
    return &*memo_[v];
  }

private:
  const ir::Graph& graph_;
  const analysis::GraphFacts& facts_;
  std::span<const ir::ValueId> usedOutside_;
  std::set<size_t> excluded_;
  std::map<ir::ValueId, std::optional<Recipe>> memo_;
};

}  // namespace

ExactRecipes exactRecipes(const ir::Graph& graph, const analysis::GraphFacts& facts,
                          const partitioner::Partition& partition, std::span<const ir::ValueId> usedOutside,
                          std::span<const size_t> rearrangements) {
  std::set<size_t> excluded(partition.nodes.begin(), partition.nodes.end());
  excluded.insert(rearrangements.begin(), rearrangements.end());
  ExactRecipeFinder finder(graph, facts, usedOutside, excluded);
  // The constants larger than kRecipeFloorBytes the partition reads that can be computed at load, each with its
  // recipe; kept if all of them together store fewer bytes than they have (anchors: four Gathers of one table), else
  // those that do so alone.
  std::vector<std::pair<ir::ValueId, const Recipe*>> candidates;
  std::set<ir::ValueId> seen;
  for (size_t i : partition.nodes)
    for (ir::ValueId in : facts.table.inputsOf(i)) {
      if (in == ir::kNoValue || !facts.values[in].constant ||
          facts.values[in].constant->byteSize() <= kRecipeFloorBytes || !seen.insert(in).second)
        continue;
      if (const Recipe* r = finder.computed(in)) candidates.emplace_back(in, r);
    }
  Recipe all;
  uint64_t saved = 0;
  for (const auto& [v, r] : candidates) {
    all.add(*r);
    saved += facts.values[v].constant->byteSize();
  }
  const bool together = finder.bytes(all) < saved;
  ExactRecipes result;
  std::set<size_t> nodes;
  for (const auto& [v, r] : candidates) {
    if (!together && finder.bytes(*r) >= facts.values[v].constant->byteSize()) continue;
    result.values.push_back(v);
    nodes.insert(r->nodes.begin(), r->nodes.end());
  }
  std::vector<size_t> position(graph.nodes.size(), 0);
  for (size_t k = 0; k < facts.order.size(); ++k) position[facts.order[k]] = k;
  result.nodes.assign(nodes.begin(), nodes.end());
  std::sort(result.nodes.begin(), result.nodes.end(), [&](size_t a, size_t b) { return position[a] < position[b]; });
  return result;
}

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
