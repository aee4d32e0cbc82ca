// fold-subgraphs: inside the bodies of the If/Loop/Scan nodes left, nodes whose values are known become body
// initializers, nested bodies included; initializers the branches of one node share move out of them.
#include "analysis/passes/graph_rename.h"
#include "analysis/passes/passes.h"
#include "support/hash.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <span>

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
  // What `parent` defines outside the node's subgraphs: its own values (by the value table), and what the other
  // nodes' subgraphs define (looked for only when a copy matches, which is rare).
  const ir::ValueTable table(parent);
  auto definedOutside = [&](const std::string& name) {
    const ir::ValueId v = table.find(name);
    if (v != ir::kNoValue && !table[v].isOuter()) return true;
    for (size_t j = 0; j < parent.nodes.size(); ++j)
      if (j != index && subgraphsDefine(parent.nodes[j], name)) return true;
    return false;
  };
  struct First {
    size_t sub;
    const ir::Initializer* init;
  };
  std::map<std::pair<std::string, Hash128>, std::vector<First>> seen;  // (type and shape, bytes' hash)
  // By sub, by id of its value table: the parent's name a dropped copy's readers read instead.
  std::vector<ir::ValueTable> tables;
  for (const auto* sub : subs) tables.emplace_back(**sub);
  std::vector<ValueRenames> renames(subs.size());
  for (size_t k = 0; k < subs.size(); ++k) renames[k].assign(tables[k].size(), nullptr);
  // By sub, then by initializer: the copy that moves out; a copy dropped for it.
  std::vector<std::vector<bool>> hoisted(subs.size()), dropped(subs.size());
  for (size_t k = 0; k < subs.size(); ++k) {
    hoisted[k].assign((*subs[k])->initializers.size(), false);
    dropped[k].assign((*subs[k])->initializers.size(), false);
  }
  bool any = false;
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
      const bool free = match && !definedOutside(match->init->name) &&
                        (init.name == match->init->name || !graphDefines(**subs[k], match->init->name));
      if (!free) {
        if (!match) candidates.push_back(First{k, &init});
        continue;
      }
      hoisted[match->sub][static_cast<size_t>(match->init - (*subs[match->sub])->initializers.data())] = true;
      renames[k][tables[k].id(init.name)] = &match->init->name;
      dropped[k][static_cast<size_t>(&init - (*subs[k])->initializers.data())] = true;
      any = true;
    }
  if (!any) return 0;
  size_t removed = 0;
  // The renames point at names in the subs as they were: those stay alive until every sub is replaced.
  std::vector<std::shared_ptr<const ir::Graph>> given;
  for (const auto* sub : subs) given.push_back(*sub);
  for (size_t k = 0; k < subs.size(); ++k) {
    auto copy = std::make_shared<ir::Graph>(**subs[k]);  // subgraphs may be shared with other variants
    // The readers first, by the table of the sub as it was (renames name parent initializers that outlive the sub).
    renameReads(*copy, tables[k], renames[k]);
    std::vector<ir::Initializer> kept;
    for (size_t i = 0; i < copy->initializers.size(); ++i) {
      ir::Initializer& init = copy->initializers[i];
      if (hoisted[k][i]) {
        parent.initializers.push_back(std::move(init));
      } else if (dropped[k][i]) {
        ++removed;
      } else {
        kept.push_back(std::move(init));
      }
    }
    copy->initializers = std::move(kept);
    *subs[k] = std::move(copy);
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
  // `alone` has the body's nodes in the body's order: node i's values are facts->table.outputsOf(i).
  std::vector<ir::Node> kept;
  std::vector<ir::ValueId> folded;
  for (size_t i = 0; i < body.nodes.size(); ++i) {
    ir::Node& n = body.nodes[i];
    bool hasSubgraph = false;
    for (const auto& a : n.attrs.all()) hasSubgraph |= a.g != nullptr || !a.graphs.empty();
    const std::span<const ir::ValueId> outs = facts->table.outputsOf(i);
    const bool known = !hasSubgraph && !outs.empty() && std::all_of(outs.begin(), outs.end(), [&](ir::ValueId o) {
      return o == ir::kNoValue || (*facts)[o].constant;
    });
    if (known) folded.insert(folded.end(), outs.begin(), outs.end());
    else kept.push_back(std::move(n));
  }
  size_t count = body.nodes.size() - kept.size();
  body.nodes = std::move(kept);
  // By value id in `facts`: whether the body as it is now still reads the value (its nodes, the subgraphs they hold,
  // or its outputs). The table of the body alone would not do: a value only a nested subgraph reads is not one of its
  // values once the node writing it is folded.
  auto readValues = [&] {
    std::vector<bool> read(facts->table.size(), false);
    auto mark = [&](const std::string& name) {
      if (const ir::ValueId v = facts->table.find(name); v != ir::kNoValue) read[v] = true;
    };
    for (const auto& n : body.nodes) forEachRead(n, mark);
    for (const auto& o : body.outputs) mark(o.name);
    return read;
  };
  const size_t ownInitializers = body.initializers.size();
  if (count != 0) {
    const std::vector<bool> read = readValues();
    for (const ir::ValueId v : folded)
      if (v != ir::kNoValue && read[v])
        body.initializers.push_back(ir::Initializer{facts->table.name(v), *(*facts)[v].constant, std::nullopt});
  }
  size_t nested = 0;
  for (auto& n : body.nodes) nested += foldSubgraphsOf(n, *facts, warnings);
  for (size_t i = 0; i < body.nodes.size(); ++i) nested += hoistSharedInitializers(body, i);
  if (nested != 0 && body.initializers.size() > ownInitializers) {
    // A value folded here that only nested subgraphs read, and that they folded in turn (a weight the nested
    // branches reshape), is read by nothing now: it is not kept beside what was made of it.
    // (Past ownInitializers: folded values, and weights hoisted out of nested branches, which those read.)
    const std::vector<bool> read = readValues();
    auto first = body.initializers.begin() + static_cast<std::ptrdiff_t>(ownInitializers);
    body.initializers.erase(std::remove_if(first, body.initializers.end(),
                                           [&](const ir::Initializer& i) {
                                             const ir::ValueId v = facts->table.find(i.name);
                                             return v != ir::kNoValue && !read[v];
                                           }),
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
