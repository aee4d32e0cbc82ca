// fold-subgraphs: inside the bodies of the If/Loop/Scan nodes left, nodes whose values are known become body
// initializers, nested bodies included; initializers the branches of one node share move out of them.
#include "analysis/passes/graph_rename.h"
#include "analysis/passes/passes.h"
#include "support/hash.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_set>

namespace ctxkit::analysis {

namespace {

size_t foldSubgraphsOf(ir::Node& node, const GraphFacts& scope, std::vector<std::string>* warnings);

// Initializers of 1 KiB or more that several subgraphs of node `index` of `parent` hold with equal type, shape and
// bytes (the branches of an If that folded the same weight, or kept the same Constant) move to `parent`'s
// initializers, once, under the first one's name; the other branches read that instead. Returns how many copies
// went. A name that means something else in another branch or anywhere else in `parent` is left where it is.
size_t hoistSharedInitializers(ir::Graph& parent, size_t index) {
  constexpr uint64_t kMinBytes = 1024;
  ir::Node& node = parent.nodes[index];
  std::vector<std::shared_ptr<ir::Graph>*> subs;
  for (auto& a : node.attrs.all()) {
    if (a.g) subs.push_back(&a.g);
    for (auto& g : a.graphs) subs.push_back(&g);
  }
  if (subs.size() < 2) return 0;
  std::vector<std::unordered_set<std::string>> names(subs.size());
  for (size_t k = 0; k < subs.size(); ++k) collectNames(**subs[k], names[k]);
  std::unordered_set<std::string> outside;  // names `parent` defines outside the node's subgraphs
  for (const auto& in : parent.inputs) outside.insert(in.name);
  for (const auto& init : parent.initializers) outside.insert(init.name);
  for (size_t j = 0; j < parent.nodes.size(); ++j) {
    const ir::Node& n = parent.nodes[j];
    outside.insert(n.outputs.begin(), n.outputs.end());
    if (j == index) continue;
    for (const auto& a : n.attrs.all()) {
      if (a.g) collectNames(*a.g, outside);
      for (const auto& g : a.graphs) collectNames(*g, outside);
    }
  }
  struct First {
    size_t sub;
    const ir::Initializer* init;
  };
  std::map<std::pair<std::string, Hash128>, std::vector<First>> seen;  // (type and shape, bytes' hash)
  std::vector<Renames> renames(subs.size());
  std::set<std::pair<size_t, std::string>> hoisted;  // (sub, name) of the copy that moves out
  for (size_t k = 0; k < subs.size(); ++k)
    for (const ir::Initializer& init : (*subs[k])->initializers) {
      const ir::Tensor& t = init.tensor;
      if (t.byteSize() < kMinBytes || t.type() == ir::ElemType::String) continue;
      auto& candidates =
          seen[{fmt::format("{} {}", ir::elemTypeName(t.type()), ir::shapeToString(t.shape())), hash128(t.bytes())}];
      const First* match = nullptr;
      for (const First& f : candidates)
        if (f.sub != k && std::memcmp(f.init->tensor.data(), t.data(), t.byteSize()) == 0) match = &f;
      // The first copy's name must mean nothing else in this branch, nor in any other branch that will read it.
      const bool free = match && !outside.count(match->init->name) &&
                        (init.name == match->init->name || !names[k].count(match->init->name));
      if (!free) {
        if (!match) candidates.push_back(First{k, &init});
        continue;
      }
      hoisted.insert({match->sub, match->init->name});
      renames[k][init.name] = match->init->name;
    }
  if (hoisted.empty()) return 0;
  size_t removed = 0;
  for (size_t k = 0; k < subs.size(); ++k) {
    auto copy = std::make_shared<ir::Graph>(**subs[k]);  // subgraphs may be shared with other variants
    for (auto it = copy->initializers.begin(); it != copy->initializers.end();) {
      if (hoisted.count({k, it->name})) {
        parent.initializers.push_back(std::move(*it));
        it = copy->initializers.erase(it);
      } else if (renames[k].count(it->name)) {
        it = copy->initializers.erase(it);
        ++removed;
      } else {
        ++it;
      }
    }
    *subs[k] = renames[k].empty() ? copy : renamedSubgraph(*copy, renames[k]);
  }
  return removed;
}

// Folds the nodes of subgraph `body` whose values are known at compile time, given the facts of the scope it reads
// from, into initializers of the body (those still read); then the subgraphs of what is left. Returns how many nodes
// were folded, 0 when the body is left as it is (also when analyzing it fails: it then runs as it was, and
// `warnings` gets why, prefixed with `where`).
size_t foldSubgraph(ir::Graph& body, const GraphFacts& scope, const std::string& where,
                    std::vector<std::string>* warnings) {
  auto facts = analyzeGraph(subgraphAlone(body, scope), {});
  if (!facts) {
    if (warnings)
      warnings->push_back(fmt::format("{}: {}; it cannot run with the bound shapes, and ONNX Runtime refuses to load "
                                      "a model that gives them to it: the compiled model keeps the node as the source "
                                      "wrote it and leaves the values it reads open (bind the input that selects "
                                      "the branch with --set to compile it)",
                                      where, facts.error().message()));
    return 0;
  }
  std::vector<ir::Node> kept;
  std::vector<std::string> folded;
  for (auto& n : body.nodes) {
    bool hasSubgraph = false;
    for (const auto& a : n.attrs.all()) hasSubgraph |= a.g != nullptr || !a.graphs.empty();
    const bool known =
        !hasSubgraph && !n.outputs.empty() && std::all_of(n.outputs.begin(), n.outputs.end(), [&](const auto& o) {
          const ValueFacts* f = o.empty() ? nullptr : facts->find(o);
          return o.empty() || (f && f->constant);
        });
    if (known) folded.insert(folded.end(), n.outputs.begin(), n.outputs.end());
    else kept.push_back(std::move(n));
  }
  size_t count = body.nodes.size() - kept.size();
  body.nodes = std::move(kept);
  auto readNames = [&] {
    std::set<std::string> read;
    for (const auto& n : body.nodes) ir::collectNodeReads(n, read);
    for (const auto& o : body.outputs) read.insert(o.name);
    return read;
  };
  const size_t ownInitializers = body.initializers.size();
  if (count != 0) {
    const std::set<std::string> read = readNames();
    for (const auto& name : folded)
      if (!name.empty() && read.count(name))
        body.initializers.push_back(ir::Initializer{name, *facts->find(name)->constant, std::nullopt});
  }
  size_t nested = 0;
  for (auto& n : body.nodes) nested += foldSubgraphsOf(n, *facts, warnings);
  for (size_t i = 0; i < body.nodes.size(); ++i) nested += hoistSharedInitializers(body, i);
  if (nested != 0 && body.initializers.size() > ownInitializers) {
    // A value folded here that only nested subgraphs read, and that they folded in turn (a weight the nested
    // branches reshape), is read by nothing now: it is not kept beside what was made of it.
    const std::set<std::string> read = readNames();
    auto first = body.initializers.begin() + static_cast<std::ptrdiff_t>(ownInitializers);
    body.initializers.erase(
        std::remove_if(first, body.initializers.end(), [&](const ir::Initializer& i) { return !read.count(i.name); }),
        body.initializers.end());
  }
  return count + nested;
}

// Folds constants inside node's subgraphs; a changed subgraph is a new copy (variants share the old one).
size_t foldSubgraphsOf(ir::Node& node, const GraphFacts& scope, std::vector<std::string>* warnings) {
  size_t count = 0;
  auto fold = [&](std::shared_ptr<ir::Graph>& g, const std::string& attr) {
    auto copy = std::make_shared<ir::Graph>(*g);
    const std::string where = fmt::format("{} {}",
                                          node.name.empty() ? fmt::format("unnamed {}", node.opType)
                                                            : fmt::format("'{}' ({})", node.name, node.opType),
                                          attr);
    if (const size_t n = foldSubgraph(*copy, scope, where, warnings); n != 0) {
      g = std::move(copy);
      count += n;
    }
  };
  for (auto& a : node.attrs.all()) {
    if (a.g) fold(a.g, a.name);
    for (auto& g : a.graphs) fold(g, a.name);
  }
  return count;
}

}  // namespace

Expected<ir::PassChange> FoldSubgraphs::run(GraphPassState& state) const {
  // The graph's own facts do not depend on what its subgraphs compute inside, so they stay as they are.
  size_t folded = 0, hoisted = 0;
  std::vector<bool> unrunnable(state.graph.nodes.size(), false);
  for (size_t i = 0; i < state.graph.nodes.size(); ++i) {
    ir::Node& node = state.graph.nodes[i];
    const ir::Node source = node;  // (its subgraphs are shared, not copied)
    std::vector<std::string> warnings;
    const size_t count = foldSubgraphsOf(node, state.facts, &warnings);
    if (warnings.empty()) {
      folded += count;
      continue;
    }
    // A body that cannot run with the bound shapes: the node stays as the source wrote it, so that it computes what
    // the source does for whatever shapes a runtime gives it (what it reads is left open in the compiled model,
    // and values folded from the bound shapes would not hold for those).
    node = source;
    unrunnable[i] = true;
    state.facts.unrunnableSubgraphs.push_back(i);
    if (state.warnings) state.warnings->insert(state.warnings->end(), warnings.begin(), warnings.end());
  }
  for (size_t i = 0; i < state.graph.nodes.size(); ++i)
    if (!unrunnable[i]) hoisted += hoistSharedInitializers(state.graph, i);
  // Hoisted weights are initializers of the graph now, read by its nodes' subgraphs.
  if (hoisted != 0) renumberValues(state.facts, state.graph);
  return ir::PassChange{}.count("subgraph_nodes_folded", folded).count("shared_initializers_hoisted", hoisted);
}

}  // namespace ctxkit::analysis
