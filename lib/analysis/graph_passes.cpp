// inline-if and remove-noops: graph rewrites that let more of a model compile.
#include "analysis/graph_passes.h"
#include "ops/node_attrs.h"
#include "support/hash.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace ctxkit::analysis {

namespace {

using Renames = std::unordered_map<std::string, std::string>;

const std::string& renamed(const Renames& r, const std::string& name) {
  auto it = r.find(name);
  return it == r.end() ? name : it->second;
}

void renameNodeReads(ir::Node& node, const Renames& r);

// A copy of subgraph `g` whose reads of outer values follow `r`. ONNX forbids a subgraph to reuse an outer name, so
// every match is such a read. Copied, never changed in place: the copies of a model (variants) share subgraphs.
std::shared_ptr<ir::Graph> renamedSubgraph(const ir::Graph& g, const Renames& r) {
  auto copy = std::make_shared<ir::Graph>(g);
  for (auto& n : copy->nodes) renameNodeReads(n, r);
  for (auto& o : copy->outputs) o.name = renamed(r, o.name);
  return copy;
}

void renameNodeReads(ir::Node& node, const Renames& r) {
  for (auto& in : node.inputs) in = renamed(r, in);
  bool subgraphReads = false;
  for (const auto& a : node.attrs.all()) subgraphReads |= a.g != nullptr || !a.graphs.empty();
  if (!subgraphReads) return;
  std::set<std::string> reads;
  ir::collectNodeReads(node, reads);
  if (std::none_of(reads.begin(), reads.end(), [&](const std::string& n) { return r.count(n) != 0; })) return;
  for (auto& a : node.attrs.all()) {
    if (a.g) a.g = renamedSubgraph(*a.g, r);
    for (auto& g : a.graphs) g = renamedSubgraph(*g, r);
  }
}

// Every name defined in `g` and its subgraphs, so that inlined values get names nothing else has.
void collectNames(const ir::Graph& g, std::unordered_set<std::string>& names) {
  for (const auto& in : g.inputs) names.insert(in.name);
  for (const auto& init : g.initializers) names.insert(init.name);
  for (const auto& n : g.nodes) {
    for (const auto& o : n.outputs) names.insert(o);
    for (const auto& a : n.attrs.all()) {
      if (a.g) collectNames(*a.g, names);
      for (const auto& sub : a.graphs) collectNames(*sub, names);
    }
  }
}

const ir::Graph* chosenBranch(const ir::Node& node, const GraphFacts& facts) {
  if (node.kind != ir::OpKind::If || node.inputs.size() != 1) return nullptr;
  const ValueFacts* cond = facts.find(node.inputs[0]);
  if (!cond || !cond->constant || cond->constant->type() != ir::ElemType::Bool || cond->constant->elementCount() != 1)
    return nullptr;
  const ir::Attribute* branch =
      node.attrs.find(cond->constant->dataAs<uint8_t>()[0] != 0 ? "then_branch" : "else_branch");
  return branch ? branch->g.get() : nullptr;
}

// Replaces every If whose condition `facts` knows by its branch (but those trace.keep names); returns how many.
// trace.origin follows the nodes.
size_t inlineConstantIfs(ir::Graph& graph, const GraphFacts& facts, GraphPassTrace& trace) {
  std::vector<ir::Node> nodes;
  std::vector<size_t> origin;
  std::unordered_set<std::string> names;
  std::set<std::string> declared, ifOutputs;
  size_t inlined = 0;
  for (size_t index = 0; index < graph.nodes.size(); ++index) {
    ir::Node& node = graph.nodes[index];
    const size_t from = trace.origin[index];
    const ir::Graph* branch = trace.keep.count(from) ? nullptr : chosenBranch(node, facts);
    if (!branch) {
      nodes.push_back(std::move(node));
      origin.push_back(from);
      continue;
    }
    // A nested If comes from its outer If, already listed.
    if (std::find(trace.inlined.begin(), trace.inlined.end(), from) == trace.inlined.end())
      trace.inlined.push_back(from);
    if (names.empty()) {
      collectNames(graph, names);
      for (const auto* list : {&graph.inputs, &graph.outputs, &graph.valueInfo})
        for (const auto& v : *list) declared.insert(v.name);
    }
    ++inlined;
    ifOutputs.insert(node.outputs.begin(), node.outputs.end());
    const std::string prefix = (node.name.empty() ? std::string("If") : node.name) + "/";
    auto fresh = [&](const std::string& base) {
      std::string name = prefix + base;
      for (int k = 1; names.count(name); ++k) name = fmt::format("{}{}_{}", prefix, base, k);
      names.insert(name);
      return name;
    };
    // A value the branch computes and returns takes the If output's name; every other value it defines a new one.
    std::set<std::string> produced;
    for (const auto& n : branch->nodes)
      for (const auto& o : n.outputs)
        if (!o.empty()) produced.insert(o);
    Renames r;
    for (size_t k = 0; k < branch->outputs.size() && k < node.outputs.size(); ++k)
      if (produced.count(branch->outputs[k].name) && !r.count(branch->outputs[k].name) && !node.outputs[k].empty())
        r[branch->outputs[k].name] = node.outputs[k];
    for (const auto& init : branch->initializers) r[init.name] = fresh(init.name);
    for (const auto& name : produced)
      if (!r.count(name)) r[name] = fresh(name);
    for (const auto& bn : branch->nodes) {
      ir::Node n = bn;
      n.name = prefix + bn.name;
      renameNodeReads(n, r);
      for (auto& o : n.outputs) o = renamed(r, o);
      nodes.push_back(std::move(n));
      origin.push_back(from);
    }
    // An output that is an outer value, a branch initializer or a value returned twice is copied to the If's name.
    for (size_t k = 0; k < branch->outputs.size() && k < node.outputs.size(); ++k) {
      const std::string& source = renamed(r, branch->outputs[k].name);
      if (node.outputs[k].empty() || source == node.outputs[k]) continue;
      ir::Node copy;
      copy.name = fmt::format("{}output_{}", prefix, k);
      copy.opType = "Identity";
      copy.kind = ir::OpKind::Identity;
      copy.opset = node.opset;
      copy.inputs = {source};
      copy.outputs = {node.outputs[k]};
      ops::decodeNode(copy);
      nodes.push_back(std::move(copy));
      origin.push_back(from);
    }
    for (const auto& init : branch->initializers)
      graph.initializers.push_back(ir::Initializer{r[init.name], init.tensor, init.external});
    for (const auto& v : branch->valueInfo) {
      ir::ValueInfo info = v;
      info.name = renamed(r, v.name);
      if (declared.insert(info.name).second) graph.valueInfo.push_back(std::move(info));
    }
  }
  graph.nodes = std::move(nodes);
  trace.origin = std::move(origin);
  // What the file declares for an If's outputs held for either branch; the branch taken now gives them their facts.
  if (inlined != 0)
    std::erase_if(graph.valueInfo, [&](const ir::ValueInfo& v) { return ifOutputs.count(v.name) != 0; });
  return inlined;
}

bool isConstantFalse(const std::string& name, const GraphFacts& facts) {
  if (name.empty()) return true;
  const ValueFacts* f = facts.find(name);
  return f && f->constant && f->constant->type() == ir::ElemType::Bool && f->constant->elementCount() == 1 &&
         f->constant->dataAs<uint8_t>()[0] == 0;
}

// The value a node passes through unchanged, when it is a no-op.
const std::string* passedThrough(const ir::Node& node, const GraphFacts& facts) {
  if (!node.domain.empty() || node.inputs.empty() || node.inputs[0].empty() || node.outputs.empty() ||
      node.outputs[0].empty())
    return nullptr;
  const ValueFacts* in = facts.find(node.inputs[0]);
  const ValueFacts* out = facts.find(node.outputs[0]);
  switch (node.kind) {
    case ir::OpKind::Identity: return node.outputs.size() == 1 ? &node.inputs[0] : nullptr;
    case ir::OpKind::Dropout: {
      // From opset 7 Dropout is the identity outside training; from 12 training_mode (input 2) decides.
      const bool maskUnused = node.outputs.size() == 1 || node.outputs[1].empty();
      const bool inference = node.opset >= 7 && (node.inputs.size() < 3 || isConstantFalse(node.inputs[2], facts));
      return maskUnused && inference ? &node.inputs[0] : nullptr;
    }
    case ir::OpKind::Cast: {
      const auto decoded = ops::attrsOf(node);
      const auto* cast = decoded->attrs ? std::get_if<ops::CastAttrs>(&decoded->attrs.value()) : nullptr;
      const bool same = in && in->type != ir::ElemType::Undefined && cast && cast->to == in->type;
      return same && node.outputs.size() == 1 ? &node.inputs[0] : nullptr;
    }
    case ir::OpKind::Reshape: {
      const bool same = in && out && in->shape && out->shape && *in->shape == *out->shape;
      return same && node.outputs.size() == 1 ? &node.inputs[0] : nullptr;
    }
    default: return nullptr;
  }
}

// Removes the no-ops `facts` shows (never one that writes a graph output); returns how many. trace.origin follows
// the nodes.
size_t removeNoops(ir::Graph& graph, const GraphFacts& facts, GraphPassTrace& trace) {
  std::set<std::string> graphOutputs;
  for (const auto& o : graph.outputs) graphOutputs.insert(o.name);
  Renames& r = trace.renames;
  std::vector<ir::Node> kept;
  std::vector<size_t> origin;
  for (size_t index = 0; index < graph.nodes.size(); ++index) {
    ir::Node& node = graph.nodes[index];
    const std::string* source = trace.keep.count(trace.origin[index]) ? nullptr : passedThrough(node, facts);
    if (source && !graphOutputs.count(node.outputs[0])) {
      r[node.outputs[0]] = *source;
      trace.removed.push_back(trace.origin[index]);
    } else {
      kept.push_back(std::move(node));
      origin.push_back(trace.origin[index]);
    }
  }
  trace.origin = std::move(origin);
  const size_t removed = graph.nodes.size() - kept.size();
  graph.nodes = std::move(kept);
  if (removed == 0) return 0;
  // A chain of no-ops reads the first one's input.
  for (auto& [from, to] : r)
    for (auto it = r.find(to); it != r.end(); it = r.find(to)) to = it->second;
  for (auto& node : graph.nodes) renameNodeReads(node, r);
  std::erase_if(graph.valueInfo, [&](const ir::ValueInfo& v) { return r.count(v.name) != 0; });
  return removed;
}

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
  // The body with the outer values its nodes read made explicit: constants as initializers, the rest as inputs.
  ir::Graph alone = body;
  std::set<std::string> defined;
  for (const auto& in : body.inputs) defined.insert(in.name);
  for (const auto& init : body.initializers) defined.insert(init.name);
  for (const auto& n : body.nodes) defined.insert(n.outputs.begin(), n.outputs.end());
  for (const auto& n : body.nodes)
    for (const auto& in : n.inputs) {
      if (in.empty() || !defined.insert(in).second) continue;
      const ValueFacts* f = scope.find(in);
      if (f && f->constant) {
        alone.initializers.push_back(ir::Initializer{in, *f->constant, std::nullopt});
        continue;
      }
      ir::ValueInfo info{in, f ? f->type : ir::ElemType::Undefined, std::nullopt, ""};
      if (f && f->shape) info.shape = std::vector<ir::Dim>(f->shape->size());
      for (size_t d = 0; f && f->shape && d < f->shape->size(); ++d) (*info.shape)[d] = ir::Dim::known((*f->shape)[d]);
      alone.inputs.push_back(std::move(info));
    }
  // Outer constants that only the nodes' own subgraphs read: the nested bodies fold against them too.
  for (const auto& n : body.nodes) {
    std::set<std::string> nested;
    ir::collectNodeReads(n, nested);
    for (const auto& in : nested) {
      const ValueFacts* f = defined.count(in) ? nullptr : scope.find(in);
      if (f && f->constant && defined.insert(in).second)
        alone.initializers.push_back(ir::Initializer{in, *f->constant, std::nullopt});
    }
  }
  auto facts = analyzeGraph(alone, {});
  if (!facts) {
    if (warnings)
      warnings->push_back(fmt::format("{}: {}; it cannot run with the bound shapes, and ONNX Runtime refuses to load "
                                      "a model holding it (bind the input that selects it with --set, or leave the "
                                      "dimensions it needs unbound)",
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

template <typename F> size_t timed(GraphPassRun& run, F&& pass) {
  const auto start = std::chrono::steady_clock::now();
  const size_t changed = pass();
  run.milliseconds += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  run.changed += changed;
  return changed;
}

}  // namespace

const std::vector<std::string>& graphPassNames() {
  static const std::vector<std::string> names{"inline-if", "remove-noops", "fold-subgraphs"};
  return names;
}

Expected<GraphFacts> runGraphPasses(ir::Graph& graph, const Bindings& bindings, std::vector<GraphPassRun>& runs,
                                    const AnalyzeOptions& options, std::vector<std::string>* warnings,
                                    GraphPassTrace* trace) {
  GraphPassRun inlineRun{"inline-if"}, noopRun{"remove-noops"};
  GraphPassTrace own;
  GraphPassTrace& t = trace ? *trace : own;
  t.origin.resize(graph.nodes.size());
  for (size_t i = 0; i < t.origin.size(); ++i) t.origin[i] = i;
  t.inlined.clear();
  t.removed.clear();
  t.renames.clear();
  CTX_ASSIGN_OR_RETURN(GraphFacts facts, analyzeGraph(graph, bindings, options));
  // Each round removes at least one If and exposes at most the Ifs nested in it, so the rounds end.
  while (timed(inlineRun, [&] { return inlineConstantIfs(graph, facts, t); }) != 0) {
    CTX_ASSIGN_OR_RETURN(facts, analyzeGraph(graph, bindings, options));
  }
  if (timed(noopRun, [&] { return removeNoops(graph, facts, t); }) != 0) {
    CTX_ASSIGN_OR_RETURN(facts, analyzeGraph(graph, bindings, options));
  }
  // The graph's own facts do not depend on what its subgraphs compute inside, so they stay as they are.
  GraphPassRun subgraphRun{"fold-subgraphs"};
  timed(subgraphRun, [&] {
    size_t folded = 0;
    for (auto& node : graph.nodes) folded += foldSubgraphsOf(node, facts, warnings);
    for (size_t i = 0; i < graph.nodes.size(); ++i) folded += hoistSharedInitializers(graph, i);
    return folded;
  });
  runs = {inlineRun, noopRun, subgraphRun};
  return facts;
}

}  // namespace ctxkit::analysis
