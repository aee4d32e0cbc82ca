// The lowering state's questions about values and ops (lowering_state.h).
#include "codegen/lowering_state.h"

#include "ir/op_info.h"

#include <fmt/format.h>

#include <algorithm>

namespace ctxkit::codegen {

LOp madeOp(ir::OpKind kind, int64_t opset, std::string name, std::vector<std::string> inputs,
           std::vector<std::string> outputs) {
  return LOp{kind, opset, std::move(name), ops::defaultAttrsFor(kind), std::move(inputs), std::move(outputs), {}};
}

const ir::Tensor* LoweringState::constantOf(const std::string& name) const {
  if (auto it = folded.find(name); it != folded.end()) return &it->second;
  const analysis::ValueFacts* f = facts.find(name);
  return f && f->constant ? &*f->constant : nullptr;
}

std::optional<ir::Shape> LoweringState::shapeOf(const std::string& name) const {
  if (auto it = localShapes.find(name); it != localShapes.end()) return it->second;
  const analysis::ValueFacts* f = facts.find(name);
  return f ? f->shape : std::nullopt;
}

ir::ElemType LoweringState::typeOf(const std::string& name) const {
  if (const ir::Tensor* c = constantOf(name)) return c->type();
  if (auto it = localTypes.find(name); it != localTypes.end()) return it->second;
  const analysis::ValueFacts* f = facts.find(name);
  return f ? f->type : ir::ElemType::Undefined;
}

std::optional<float> LoweringState::scalarOf(const std::string& name) const {
  const ir::Tensor* t = constantOf(name);
  if (!t || t->type() != ir::ElemType::Float || t->elementCount() != 1) return std::nullopt;
  return t->dataAs<float>()[0];
}

const LoweringState::Uses* LoweringState::usesOf(const std::string& value) const {
  if (!indexed_) {
    uses_.clear();
    for (size_t i = 0; i < ops.size(); ++i) {
      for (const auto& in : ops[i].inputs) uses_[in].readers.push_back(i);
      for (const auto& out : ops[i].outputs) uses_[out].producers.push_back(i);
    }
    indexed_ = true;
  }
  auto it = uses_.find(value);
  return it == uses_.end() ? nullptr : &it->second;
}

size_t LoweringState::readers(const std::string& value) const { return readersOf(value).size(); }

const std::vector<size_t>& LoweringState::readersOf(const std::string& value) const {
  static const std::vector<size_t> kNone;
  const Uses* u = usesOf(value);
  return u ? u->readers : kNone;
}

std::optional<size_t> LoweringState::soleReader(size_t i) const {
  const LOp& producer = ops[i];
  if (producer.outputs.size() != 1 || leaves(producer.outputs[0])) return std::nullopt;
  const std::vector<size_t>& r = readersOf(producer.outputs[0]);
  if (r.size() != 1 || r[0] <= i) return std::nullopt;
  return r[0];
}

std::optional<size_t> LoweringState::producerOf(const std::string& name, ir::OpKind kind) const {
  if (const Uses* u = usesOf(name))
    for (size_t i : u->producers)
      if (ops[i].kind == kind) return i;
  return std::nullopt;
}

namespace {

void dropIndex(std::vector<size_t>& ops, size_t i) { ops.erase(std::remove(ops.begin(), ops.end(), i), ops.end()); }
void addIndex(std::vector<size_t>& ops, size_t i) { ops.insert(std::upper_bound(ops.begin(), ops.end(), i), i); }

}  // namespace

void LoweringState::unindex(size_t i) {
  for (const auto& in : ops[i].inputs) dropIndex(uses_[in].readers, i);
  for (const auto& out : ops[i].outputs) dropIndex(uses_[out].producers, i);
}

void LoweringState::index(size_t i) {
  for (const auto& in : ops[i].inputs) addIndex(uses_[in].readers, i);
  for (const auto& out : ops[i].outputs) addIndex(uses_[out].producers, i);
}

// The index follows an erase or insert by renumbering the ops after it (linear in the uses; nothing is rebuilt).
void LoweringState::eraseOp(size_t i) {
  if (indexed_) {
    unindex(i);
    for (auto& [value, u] : uses_) {
      for (size_t& j : u.readers) j -= j > i;
      for (size_t& j : u.producers) j -= j > i;
    }
  }
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
}

void LoweringState::insertOp(size_t i, LOp op) {
  ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(i), std::move(op));
  if (!indexed_) return;
  for (auto& [value, u] : uses_) {
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

void LoweringState::setInputs(size_t i, std::vector<std::string> inputs) {
  if (indexed_) unindex(i);
  ops[i].inputs = std::move(inputs);
  if (indexed_) index(i);
}

void LoweringState::setOutputs(size_t i, std::vector<std::string> outputs) {
  if (indexed_) unindex(i);
  ops[i].outputs = std::move(outputs);
  if (indexed_) index(i);
}

std::string LoweringState::addConstant(const std::string& name, ir::Tensor t) {
  localShapes[name] = t.shape();
  folded.emplace(name, std::move(t));
  return name;
}

std::string LoweringState::dump(std::string_view pass) const {
  if (emitted) return program::dump(result.program, fmt::format("{} (after {})", options.name, pass));
  std::string out = fmt::format("ops {} (after {}): {} ops\n", options.name, pass, ops.size());
  for (const LOp& op : ops) {
    std::string attrs = ops::attrsText(op.typed);
    if (op.epilogue)
      attrs += fmt::format(" epilogue={}({},{})*{}+{}", ops::activationName(op.epilogue->activation),
                           op.epilogue->alpha, op.epilogue->beta, op.epilogue->scale, op.epilogue->shift);
    std::string ins;
    for (const auto& in : op.inputs)
      ins += (ins.empty() ? "" : ", ") + (in.empty() ? std::string("-") : in + (constantOf(in) ? "(const)" : ""));
    out += fmt::format("  {} = {}({}){}  # {}\n", fmt::join(op.outputs, ", "), ir::opKindName(op.kind), ins, attrs,
                       op.name);
  }
  return out;
}

}  // namespace ctxkit::codegen
