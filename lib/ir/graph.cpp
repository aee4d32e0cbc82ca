// Attribute lookups and graph queries.
#include "ir/graph.h"

#include <algorithm>

namespace ctxkit::ir {

std::string_view attrTypeName(AttrType type) {
  switch (type) {
    case AttrType::Float: return "float";
    case AttrType::Int: return "int";
    case AttrType::String: return "string";
    case AttrType::Tensor: return "tensor";
    case AttrType::Graph: return "graph";
    case AttrType::Floats: return "floats";
    case AttrType::Ints: return "ints";
    case AttrType::Strings: return "strings";
    case AttrType::Tensors: return "tensors";
    case AttrType::Graphs: return "graphs";
  }
  return "unknown";
}

namespace {
template <typename T> Attribute makeAttr(std::string name, AttrType type, T Attribute::*field, T value) {
  Attribute a;
  a.name = std::move(name);
  a.type = type;
  a.*field = std::move(value);
  return a;
}
}  // namespace

Attribute Attribute::makeInt(std::string name, int64_t v) {
  return makeAttr(std::move(name), AttrType::Int, &Attribute::i, v);
}
Attribute Attribute::makeFloat(std::string name, float v) {
  return makeAttr(std::move(name), AttrType::Float, &Attribute::f, v);
}
Attribute Attribute::makeString(std::string name, std::string v) {
  return makeAttr(std::move(name), AttrType::String, &Attribute::s, std::move(v));
}
Attribute Attribute::makeInts(std::string name, std::vector<int64_t> v) {
  return makeAttr(std::move(name), AttrType::Ints, &Attribute::ints, std::move(v));
}
Attribute Attribute::makeFloats(std::string name, std::vector<float> v) {
  return makeAttr(std::move(name), AttrType::Floats, &Attribute::floats, std::move(v));
}
Attribute Attribute::makeTensor(std::string name, Tensor v) {
  return makeAttr(std::move(name), AttrType::Tensor, &Attribute::t, std::move(v));
}
Attribute Attribute::makeGraph(std::string name, std::shared_ptr<Graph> v) {
  return makeAttr(std::move(name), AttrType::Graph, &Attribute::g, std::move(v));
}

const Attribute* Attributes::find(std::string_view name) const {
  for (const auto& a : attrs_)
    if (a.name == name) return &a;
  return nullptr;
}

void Attributes::set(Attribute attr) {
  for (auto& a : attrs_)
    if (a.name == attr.name) {
      a = std::move(attr);
      return;
    }
  attrs_.push_back(std::move(attr));
}

bool Attributes::remove(std::string_view name) {
  auto it = std::find_if(attrs_.begin(), attrs_.end(), [&](const Attribute& a) { return a.name == name; });
  if (it == attrs_.end()) return false;
  attrs_.erase(it);
  return true;
}

int64_t Attributes::getInt(std::string_view name, int64_t fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::Int ? a->i : fallback;
}
float Attributes::getFloat(std::string_view name, float fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::Float ? a->f : fallback;
}
std::string Attributes::getString(std::string_view name, std::string fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::String ? a->s : fallback;
}
std::vector<int64_t> Attributes::getInts(std::string_view name, std::vector<int64_t> fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::Ints ? a->ints : fallback;
}
std::vector<float> Attributes::getFloats(std::string_view name, std::vector<float> fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::Floats ? a->floats : fallback;
}

std::optional<Shape> ValueInfo::staticShape() const {
  if (!shape) return std::nullopt;
  Shape s;
  for (const Dim& d : *shape) {
    if (!d.isKnown()) return std::nullopt;
    s.push_back(d.value);
  }
  return s;
}

std::string dimsToString(const std::optional<std::vector<Dim>>& shape) {
  if (!shape) return "?";
  if (shape->empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape->size(); ++i) {
    if (i) s += 'x';
    const Dim& d = (*shape)[i];
    s += d.isKnown() ? std::to_string(d.value) : (d.symbol.empty() ? "?" : d.symbol);
  }
  return s;
}

const Initializer* Graph::findInitializer(std::string_view n) const {
  for (const auto& i : initializers)
    if (i.name == n) return &i;
  return nullptr;
}

const ValueInfo* Graph::findValueInfo(std::string_view n) const {
  for (const auto* list : {&inputs, &outputs, &valueInfo})
    for (const auto& v : *list)
      if (v.name == n) return &v;
  return nullptr;
}

std::vector<const ValueInfo*> Graph::feedInputs() const {
  std::vector<const ValueInfo*> feeds;
  for (const auto& in : inputs)
    if (!isInitializer(in.name)) feeds.push_back(&in);
  return feeds;
}

void collectNodeReads(const Node& node, std::set<std::string>& names) {
  for (const auto& in : node.inputs)
    if (!in.empty()) names.insert(in);
  for (const auto& a : node.attrs.all()) {
    std::vector<const Graph*> subs;
    if (a.g) subs.push_back(a.g.get());
    for (const auto& g : a.graphs) subs.push_back(g.get());
    for (const Graph* g : subs)
      for (const auto& sub : g->nodes) collectNodeReads(sub, names);
  }
}

int64_t Model::opsetFor(std::string_view d) const {
  if (d == "ai.onnx") d = "";
  for (const auto& o : opsets)
    if (o.domain == d || (d.empty() && o.domain == "ai.onnx")) return o.version;
  return 0;
}

void Model::setMetadata(const std::string& key, const std::string& value) {
  for (auto& kv : metadata)
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  metadata.emplace_back(key, value);
}

const std::string* Model::findMetadata(std::string_view key) const {
  for (const auto& kv : metadata)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

}  // namespace ctxkit::ir
