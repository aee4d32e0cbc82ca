// The lowering state's value table and its questions about values and ops (lowering_state.h).
#include "codegen/lowering_state.h"

#include "ir/op_info.h"

#include <fmt/format.h>

#include <algorithm>

namespace ctxkit::codegen {

LOp madeOp(ir::OpKind kind, int64_t opset, std::string name, std::vector<ValueId> inputs,
           std::vector<ValueId> outputs) {
  return LOp{kind, opset, std::move(name), ops::defaultAttrsFor(kind), std::move(inputs), std::move(outputs), {}};
}

ValueId LoweringState::fromGraph(ir::ValueId graphValue) {
  if (graphValue == kNoValue) return kNoValue;
  ValueId& known = fromGraph_[graphValue];
  if (known != kNoValue) return known;
  known = static_cast<ValueId>(values_.size());
  ValueRecord& r = values_.emplace_back();
  r.name = facts.table.name(graphValue);
  const analysis::ValueFacts& f = facts.values[graphValue];
  r.type = f.type;
  r.shape = f.shape;
  if (!f.shape && f.bound) {
    r.bound = f.bound;
    r.low = f.low && f.low->size() == f.bound->size() ? *f.low : ir::Shape(f.bound->size(), 0);
  }
  if (f.constant) r.sourceConstant = &*f.constant;
  r.leaves = std::binary_search(usedOutside.begin(), usedOutside.end(), graphValue);
  byName_.emplace(r.name, known);
  return known;
}

ValueId LoweringState::value(const std::string& name) {
  if (auto it = byName_.find(name); it != byName_.end()) return it->second;
  if (const ir::ValueId g = facts.table.find(name); g != kNoValue) return fromGraph(g);
  const auto id = static_cast<ValueId>(values_.size());
  values_.emplace_back().name = name;
  byName_.emplace(name, id);
  return id;
}

std::optional<ValueId> LoweringState::findValue(const std::string& name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? std::nullopt : std::optional<ValueId>(it->second);
}

const std::string& LoweringState::nameOf(ValueId v) const {
  static const std::string kNone;
  return v == kNoValue ? kNone : values_[v].name;
}

const ir::Tensor* LoweringState::constantOf(ValueId v) const {
  if (v == kNoValue) return nullptr;
  const ValueRecord& r = values_[v];
  return r.made ? r.made.get() : r.sourceConstant;
}

std::optional<ir::Shape> LoweringState::shapeOf(ValueId v) const {
  return v == kNoValue ? std::nullopt : values_[v].shape;
}

ir::ElemType LoweringState::typeOf(ValueId v) const {
  if (const ir::Tensor* c = constantOf(v)) return c->type();
  return v == kNoValue ? ir::ElemType::Undefined : values_[v].type;
}

std::optional<float> LoweringState::scalarOf(ValueId v) const {
  const ir::Tensor* t = constantOf(v);
  if (!t || t->type() != ir::ElemType::Float || t->elementCount() != 1) return std::nullopt;
  return t->dataAs<float>()[0];
}

LoweringState::Uses& LoweringState::usesAt(ValueId v) {
  if (uses_.size() <= v) uses_.resize(static_cast<size_t>(v) + 1);
  return uses_[v];
}

const LoweringState::Uses* LoweringState::usesOf(ValueId v) const {
  if (!indexed_) {
    uses_.assign(values_.size(), Uses{});
    for (size_t i = 0; i < ops.size(); ++i) {
      for (ValueId in : ops[i].inputs)
        if (in != kNoValue) uses_[in].readers.push_back(i);
      for (ValueId out : ops[i].outputs)
        if (out != kNoValue) uses_[out].producers.push_back(i);
    }
    indexed_ = true;
  }
  return v < uses_.size() ? &uses_[v] : nullptr;
}

size_t LoweringState::readers(ValueId v) const { return readersOf(v).size(); }

const std::vector<size_t>& LoweringState::readersOf(ValueId v) const {
  static const std::vector<size_t> kNone;
  const Uses* u = usesOf(v);
  return u ? u->readers : kNone;
}

std::optional<size_t> LoweringState::soleReader(size_t i) const {
  const LOp& producer = ops[i];
  if (producer.outputs.size() != 1 || producer.outputs[0] == kNoValue || leaves(producer.outputs[0]))
    return std::nullopt;
  const std::vector<size_t>& r = readersOf(producer.outputs[0]);
  if (r.size() != 1 || r[0] <= i || touchesBounded(producer) || touchesBounded(ops[r[0]])) return std::nullopt;
  return r[0];
}

bool LoweringState::touchesBounded(const LOp& op) const {
  auto bounded = [&](ValueId v) { return isBounded(v); };
  return std::any_of(op.inputs.begin(), op.inputs.end(), bounded) ||
         std::any_of(op.outputs.begin(), op.outputs.end(), bounded);
}

std::optional<size_t> LoweringState::producerOf(ValueId v, ir::OpKind kind) const {
  if (const Uses* u = usesOf(v))
    for (size_t i : u->producers)
      if (ops[i].kind == kind) return i;
  return std::nullopt;
}

namespace {

void dropIndex(std::vector<size_t>& ops, size_t i) { ops.erase(std::remove(ops.begin(), ops.end(), i), ops.end()); }
void addIndex(std::vector<size_t>& ops, size_t i) { ops.insert(std::upper_bound(ops.begin(), ops.end(), i), i); }

}  // namespace

void LoweringState::unindex(size_t i) {
  for (ValueId in : ops[i].inputs)
    if (in != kNoValue) dropIndex(usesAt(in).readers, i);
  for (ValueId out : ops[i].outputs)
    if (out != kNoValue) dropIndex(usesAt(out).producers, i);
}

void LoweringState::index(size_t i) {
  for (ValueId in : ops[i].inputs)
    if (in != kNoValue) addIndex(usesAt(in).readers, i);
  for (ValueId out : ops[i].outputs)
    if (out != kNoValue) addIndex(usesAt(out).producers, i);
}

// The use lists follow an erase or insert by renumbering the ops after it (linear in the uses; nothing is rebuilt).
void LoweringState::eraseOp(size_t i) {
  if (indexed_) {
    unindex(i);
    for (Uses& u : uses_) {
      for (size_t& j : u.readers) j -= j > i;
      for (size_t& j : u.producers) j -= j > i;
    }
  }
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
}

void LoweringState::insertOp(size_t i, LOp op) {
  ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(i), std::move(op));
  if (!indexed_) return;
  for (Uses& u : uses_) {
    for (size_t& j : u.readers) j += j >= i;
    for (size_t& j : u.producers) j += j >= i;
  }
  index(i);
}

void LoweringState::replaceOp(size_t i, LOp op) {
  if (indexed_) unindex(i);
  ops[i] = std::move(op);
  if (indexed_) index(i);
}

void LoweringState::setInputs(size_t i, std::vector<ValueId> inputs) {
  if (indexed_) unindex(i);
  ops[i].inputs = std::move(inputs);
  if (indexed_) index(i);
}

void LoweringState::setOutputs(size_t i, std::vector<ValueId> outputs) {
  if (indexed_) unindex(i);
  ops[i].outputs = std::move(outputs);
  if (indexed_) index(i);
}

ValueId LoweringState::addConstant(ValueId v, ir::Tensor t) {
  ValueRecord& r = values_[v];
  r.shape = t.shape();
  if (!r.made) r.made = std::make_unique<ir::Tensor>(std::move(t));
  return v;
}

std::string LoweringState::dump(std::string_view pass) const {
  if (emitted) return program::dump(result.program, fmt::format("{} (after {})", options.name, pass));
  std::string out = fmt::format("ops {} (after {}): {} ops\n", options.name, pass, ops.size());
  for (const LOp& op : ops) {
    std::string attrs = ops::attrsText(op.typed);
    if (op.epilogue)
      attrs += fmt::format(" epilogue={}({},{})*{}+{}", ops::activationName(op.epilogue->activation),
                           op.epilogue->alpha, op.epilogue->beta, op.epilogue->scale, op.epilogue->shift);
    if (op.kernel.recorded()) attrs += fmt::format(" kernel={}", cpu::convAlgorithmName(op.kernel.algorithm));
    std::string ins, outs;
    for (ValueId in : op.inputs)
      ins += (ins.empty() ? "" : ", ") +
             (in == kNoValue ? std::string("-") : nameOf(in) + (constantOf(in) ? "(const)" : ""));
    for (size_t o = 0; o < op.outputs.size(); ++o) outs += (o ? ", " : "") + nameOf(op.outputs[o]);
    out += fmt::format("  {} = {}({}){}  # {}\n", outs, ir::opKindName(op.kind), ins, attrs, op.name);
  }
  return out;
}

}  // namespace ctxkit::codegen
