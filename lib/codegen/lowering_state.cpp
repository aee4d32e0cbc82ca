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
  const analysis::ValueFacts* f = facts.find(name);
  return f ? f->type : ir::ElemType::Undefined;
}

std::optional<float> LoweringState::scalarOf(const std::string& name) const {
  const ir::Tensor* t = constantOf(name);
  if (!t || t->type() != ir::ElemType::Float || t->elementCount() != 1) return std::nullopt;
  return t->dataAs<float>()[0];
}

size_t LoweringState::readers(const std::string& value) const {
  size_t n = 0;
  for (const LOp& op : ops)
    for (const auto& in : op.inputs) n += in == value;
  return n;
}

std::optional<size_t> LoweringState::soleReader(size_t i) const {
  const LOp& producer = ops[i];
  if (producer.outputs.size() != 1 || leaves(producer.outputs[0]) || readers(producer.outputs[0]) != 1)
    return std::nullopt;
  for (size_t j = i + 1; j < ops.size(); ++j)
    if (std::find(ops[j].inputs.begin(), ops[j].inputs.end(), producer.outputs[0]) != ops[j].inputs.end()) return j;
  return std::nullopt;
}

std::optional<size_t> LoweringState::producerOf(const std::string& name, ir::OpKind kind) const {
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == kind && std::find(ops[i].outputs.begin(), ops[i].outputs.end(), name) != ops[i].outputs.end())
      return i;
  return std::nullopt;
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
