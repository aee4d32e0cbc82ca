// Partition lowering: from IR nodes to a program with weights, views and an arena plan.
#include "codegen/lower.h"

#include "codegen/memory_plan.h"
#include "cpu/gemm.h"
#include "ir/op_info.h"
#include "kernels/kernels.h"
#include "ops/node_attrs.h"
#include "ops/typed_attrs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <optional>

namespace ctxkit::codegen {

namespace {

using program::TensorDesc;
using program::TensorKind;

// ONNX attributes for ops of the few families that have no typed ones (kernels read ONNX attributes for them).
struct LOp {
  ir::OpKind kind;
  int64_t opset;
  std::string name;
  // The node's attributes as decoded at import (ops::attrsOf), or the defaults (ops::defaultAttrsFor) for an op the
  // lowering makes; passes read and change these, never ONNX attributes.
  ops::OpAttrs typed;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::optional<ops::Epilogue> epilogue;  // fuse-epilogue: what Conv/Gemm/MatMul apply to their results
  ir::Attributes onnx = {};               // ONNX attributes, kept only for families without typed ones
};

// An op the lowering makes, with its kind's default attributes.
LOp madeOp(ir::OpKind kind, int64_t opset, std::string name, std::vector<std::string> inputs,
           std::vector<std::string> outputs) {
  return LOp{kind, opset, std::move(name), ops::defaultAttrsFor(kind), std::move(inputs), std::move(outputs), {}};
}

const ir::Attributes kNoAttrs;

class Lowering {
public:
  Lowering(const analysis::GraphFacts& facts, const std::set<std::string>& usedOutside, const WeightInterner& intern,
           const LowerOptions& options)
      : facts_(facts), usedOutside_(usedOutside), intern_(intern), options_(options) {}

  Expected<LoweredPartition> run(const ir::Graph& graph, const partitioner::Partition& partition) {
    for (size_t i : partition.nodes) {
      const ir::Node& n = graph.nodes[i];
      std::string name = n.name.empty() ? n.opType + "_" + std::to_string(i) : n.name;
      const auto decoded = ops::attrsOf(n);
      if (!decoded->attrs)
        return Error(decoded->attrs.error()).addContext(fmt::format("node '{}' ({})", name, ir::opKindName(n.kind)));
      const bool typed = ops::isTyped(decoded->attrs.value());
      ops_.push_back(LOp{n.kind,
                         n.opset,
                         std::move(name),
                         decoded->attrs.value(),
                         n.inputs,
                         n.outputs,
                         {},
                         typed ? kNoAttrs : n.attrs});
    }
    for (const Pass& pass : passes()) {
      if (!pass.required && options_.skipPasses.count(std::string(pass.name))) continue;
      auto start = std::chrono::steady_clock::now();
      CTX_ASSIGN_OR_RETURN(bool changed, (this->*pass.run)());
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      result_.passes.push_back(PassRun{std::string(pass.name), ms, changed});
      if (options_.dumpAfter == pass.name || options_.stopAfter == pass.name) result_.dump = dumpState(pass.name);
      if (options_.stopAfter == pass.name) {
        result_.stopped = true;
        break;
      }
    }
    return std::move(result_);
  }

  struct Pass {
    std::string_view name;
    Expected<bool> (Lowering::*run)();
    bool required;  // emit-program and plan-memory make the program; they cannot be skipped
  };

  static const std::vector<Pass>& passes() {
    static const std::vector<Pass> kPasses = {
        {"fuse-qdq", &Lowering::fuseQdq, false},
        {"fold-constants", &Lowering::foldConstants, false},
        {"fold-batchnorm", &Lowering::foldBatchNorms, false},
        {"fold-affine", &Lowering::foldAffines, false},
        {"fuse-matmul-add", &Lowering::fuseMatMulAdds, false},
        {"match-activations", &Lowering::matchActivations, false},
        {"fuse-epilogue", &Lowering::fuseActivations, false},
        {"choose-layouts", &Lowering::chooseLayouts, false},
        {"emit-program", &Lowering::emitProgram, true},
        {"plan-memory", &Lowering::planArena, true},
    };
    return kPasses;
  }

private:
  // Before emit-program the partition is a list of ONNX-level ops; after it, the program.
  std::string dumpState(std::string_view pass) const {
    if (emitted_) return program::dump(result_.program, fmt::format("{} (after {})", options_.name, pass));
    std::string out = fmt::format("ops {} (after {}): {} ops\n", options_.name, pass, ops_.size());
    for (const LOp& op : ops_) {
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

  // Ops whose results are already constants, or whose inputs all are, are evaluated now and become weights
  // (unless a result leaves the partition, which needs a real output).
  Expected<bool> foldConstants() {
    bool changed = false;
    for (size_t i = 0; i < ops_.size();) {
      const LOp& op = ops_[i];
      bool leaves = std::any_of(op.outputs.begin(), op.outputs.end(),
                                [&](const std::string& o) { return usedOutside_.count(o) > 0; });
      if (leaves || ir::isControlFlow(op.kind) || !kernels::hasKernel(op.kind) || op.outputs.empty()) {
        ++i;
        continue;
      }
      bool known = std::all_of(op.outputs.begin(), op.outputs.end(),
                               [&](const std::string& o) { return o.empty() || constantOf(o) != nullptr; });
      if (!known) {
        std::vector<const ir::Tensor*> ins;
        bool constantInputs = !op.inputs.empty();
        for (const auto& in : op.inputs) {
          ins.push_back(in.empty() ? nullptr : constantOf(in));
          constantInputs = constantInputs && (in.empty() || ins.back());
        }
        if (!constantInputs) {
          ++i;
          continue;
        }
        size_t outputCount = op.outputs.size();
        while (outputCount > 0 && op.outputs[outputCount - 1].empty()) --outputCount;
        kernels::OpContext ctx{op.kind, op.opset, op.onnx, op.name, nullptr, &op.typed};
        auto outs = kernels::evaluate(ctx, ins, outputCount);
        uint64_t inputBytes = 0, resultBytes = 0;
        for (const ir::Tensor* in : ins) inputBytes += in ? in->byteSize() : 0;
        for (size_t o = 0; outs && o < outputCount; ++o) resultBytes += (*outs)[o].byteSize();
        // Left to run: a failure is reported by emit-program; a result much larger than its inputs is not stored.
        if (!outs || !analysis::worthFolding(op.kind, inputBytes, resultBytes)) {
          ++i;
          continue;
        }
        for (size_t o = 0; o < outputCount; ++o)
          if (!op.outputs[o].empty()) addConstant(op.outputs[o], std::move((*outs)[o]));
      }
      ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(i));
      changed = true;
    }
    return changed;
  }

  Expected<bool> emitProgram() {
    for (const LOp& op : ops_) CTX_RETURN_IF_ERROR(emit(op).addContext(fmt::format("lowering node '{}'", op.name)));
    emitted_ = true;
    return true;
  }

  const ir::Tensor* constantOf(const std::string& name) const {
    if (auto it = folded_.find(name); it != folded_.end()) return &it->second;
    const analysis::ValueFacts* f = facts_.find(name);
    return f && f->constant ? &*f->constant : nullptr;
  }

  size_t readers(const std::string& value) const {
    size_t n = 0;
    for (const LOp& op : ops_)
      for (const auto& in : op.inputs) n += in == value;
    return n;
  }

  // The op that alone reads op i's only output (which leaves neither the partition nor the op list), or nothing.
  std::optional<size_t> soleReader(size_t i) const {
    const LOp& producer = ops_[i];
    if (producer.outputs.size() != 1 || usedOutside_.count(producer.outputs[0]) || readers(producer.outputs[0]) != 1)
      return std::nullopt;
    for (size_t j = i + 1; j < ops_.size(); ++j)
      if (std::find(ops_[j].inputs.begin(), ops_[j].inputs.end(), producer.outputs[0]) != ops_[j].inputs.end())
        return j;
    return std::nullopt;
  }

  // Output channels of a Conv or Gemm whose weights (and bias, when present) are float32 constants that a
  // per-channel affine can be folded into; nothing for any other op.
  std::optional<int64_t> foldableChannels(const LOp& op) const {
    if (op.epilogue || op.inputs.size() < 2) return std::nullopt;
    const ir::Tensor* w = constantOf(op.inputs[1]);
    if (!w || w->type() != ir::ElemType::Float) return std::nullopt;
    const bool hasBias = op.inputs.size() > 2 && !op.inputs[2].empty();
    const ir::Tensor* bias = hasBias ? constantOf(op.inputs[2]) : nullptr;
    if (hasBias && (!bias || bias->type() != ir::ElemType::Float)) return std::nullopt;
    if (op.kind == ir::OpKind::Conv) {
      if (w->rank() < 3 || (bias && bias->elementCount() != static_cast<uint64_t>(w->shape()[0]))) return std::nullopt;
      return w->shape()[0];
    }
    if (op.kind == ir::OpKind::Gemm && w->rank() == 2) {
      const int64_t n = std::get<ops::GemmAttrs>(op.typed).transB ? w->shape()[0] : w->shape()[1];
      // C absent, one value, or N values along the last axis.
      if (bias && bias->elementCount() != 1 &&
          (bias->rank() > 2 || bias->elementCount() != static_cast<uint64_t>(n) || bias->shape().back() != n))
        return std::nullopt;
      return n;
    }
    return std::nullopt;
  }

  // Folds y = x * scale[c] + shift[c] over output channels c of op i (a foldableChannels op) into its weights and
  // bias; op `by`, which applied it, is removed and op i takes over its output.
  Status foldChannelAffine(size_t i, size_t by, const std::vector<double>& scale, const std::vector<double>& shift) {
    LOp& op = ops_[i];
    const ir::Tensor& w = *constantOf(op.inputs[1]);
    const bool hasBias = op.inputs.size() > 2 && !op.inputs[2].empty();
    const ir::Tensor* bias = hasBias ? constantOf(op.inputs[2]) : nullptr;
    const auto channels = static_cast<int64_t>(scale.size());
    CTX_ASSIGN_OR_RETURN(ir::Tensor newW, ir::Tensor::allocate(ir::ElemType::Float, w.shape()));
    CTX_ASSIGN_OR_RETURN(ir::Tensor newB, ir::Tensor::allocate(ir::ElemType::Float, {channels}));
    const float* pw = w.dataAs<float>();
    float* nw = newW.mutableDataAs<float>();
    float* nb = newB.mutableDataAs<float>();
    auto biasAt = [&](int64_t c) -> double {
      if (!bias) return 0.0;
      return bias->dataAs<float>()[bias->elementCount() == 1 ? 0 : c];
    };
    if (op.kind == ir::OpKind::Conv) {
      const uint64_t perFilter = w.elementCount() / static_cast<uint64_t>(channels);
      for (int64_t c = 0; c < channels; ++c) {
        for (uint64_t k = 0; k < perFilter; ++k)
          nw[c * perFilter + k] = static_cast<float>(pw[c * perFilter + k] * scale[c]);
        nb[c] = static_cast<float>(biasAt(c) * scale[c] + shift[c]);
      }
    } else {  // Gemm: B's columns scaled; C' = beta * C * scale + shift, beta becomes 1
      auto& gemm = std::get<ops::GemmAttrs>(op.typed);
      const bool transB = gemm.transB;
      const float beta = gemm.beta;
      const int64_t k = transB ? w.shape()[1] : w.shape()[0];
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t row = 0; row < k; ++row) {
          size_t at = static_cast<size_t>(transB ? c * k + row : row * channels + c);
          nw[at] = static_cast<float>(pw[at] * scale[c]);
        }
        nb[c] = static_cast<float>(beta * biasAt(c) * scale[c] + shift[c]);
      }
      gemm.beta = 1.0f;
    }
    std::string wName = addConstant(op.name + ".folded_w" + std::to_string(folds_), std::move(newW));
    std::string bName = addConstant(op.name + ".folded_b" + std::to_string(folds_), std::move(newB));
    ++folds_;
    op.inputs = {op.inputs[0], wName, bName};
    op.outputs = {ops_[by].outputs[0]};
    ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(by));
    return Status::ok();
  }

  // Conv or Gemm followed only by BatchNormalization (inference, four float32 constant vectors of its channels)
  // becomes one op with rescaled weights and bias.
  Expected<bool> foldBatchNorms() {
    bool changed = false;
    for (size_t i = 0; i < ops_.size(); ++i) {
      auto channels = foldableChannels(ops_[i]);
      auto j = soleReader(i);
      if (!channels || !j) continue;
      const LOp& bn = ops_[*j];
      // (training_mode = 1 does not decode: such a node never reaches a partition)
      if (bn.kind != ir::OpKind::BatchNormalization || bn.inputs.size() != 5 || bn.inputs[0] != ops_[i].outputs[0])
        continue;
      if (std::any_of(bn.outputs.begin() + 1, bn.outputs.end(), [](const std::string& o) { return !o.empty(); }))
        continue;
      const float* params[4];
      bool ok = true;
      for (int k = 0; k < 4 && ok; ++k) {
        const ir::Tensor* t = constantOf(bn.inputs[1 + k]);
        ok = t && t->type() == ir::ElemType::Float && t->rank() == 1 && t->shape()[0] == *channels;
        if (ok) params[k] = t->dataAs<float>();
      }
      if (!ok) continue;
      const auto& bnAttrs = std::get<ops::BatchNormAttrs>(bn.typed);
      const double epsilon = bnAttrs.epsilon;
      std::vector<double> scale(static_cast<size_t>(*channels)), shift(scale.size());
      for (size_t c = 0; c < scale.size(); ++c) {
        scale[c] = params[0][c] / std::sqrt(static_cast<double>(params[3][c]) + epsilon);
        shift[c] = params[1][c] - params[2][c] * scale[c];
      }
      CTX_RETURN_IF_ERROR(foldChannelAffine(i, *j, scale, shift));
      changed = true;
    }
    return changed;
  }

  // The values of a float32 constant that broadcasts against an output of `rank` dims over axis 1 only (one
  // value, or one per channel): the per-channel operand of an affine; nothing otherwise.
  std::optional<std::vector<double>> channelValues(const std::string& name, size_t rank, int64_t channels) const {
    const ir::Tensor* t = constantOf(name);
    if (!t || t->type() != ir::ElemType::Float || t->rank() > rank) return std::nullopt;
    const size_t lead = rank - t->rank();
    for (size_t d = 0; d < t->rank(); ++d)
      if (t->shape()[d] != 1 && !(lead + d == 1 && t->shape()[d] == channels)) return std::nullopt;
    std::vector<double> v(static_cast<size_t>(channels));
    for (size_t c = 0; c < v.size(); ++c) v[c] = t->dataAs<float>()[t->elementCount() == 1 ? 0 : c];
    return v;
  }

  // Conv or Gemm followed only by Mul, Add, Sub or Div with a constant of one value or one per output channel
  // (PP-LCNet's learnable affine blocks, a model's own scale and shift) folds that into its weights and bias;
  // chains fold one op at a time.
  Expected<bool> foldAffines() {
    bool changed = false;
    for (size_t i = 0; i < ops_.size(); ++i) {
      auto channels = foldableChannels(ops_[i]);
      auto j = soleReader(i);
      if (!channels || !j) continue;
      const LOp& next = ops_[*j];
      const bool arithmetic = next.kind == ir::OpKind::Mul || next.kind == ir::OpKind::Add ||
                              next.kind == ir::OpKind::Sub || next.kind == ir::OpKind::Div;
      if (!arithmetic || next.inputs.size() != 2 || next.outputs.size() != 1) continue;
      const bool first = next.inputs[0] == ops_[i].outputs[0];
      if (!first && (next.kind == ir::OpKind::Sub || next.kind == ir::OpKind::Div)) continue;
      const size_t rank = ops_[i].kind == ir::OpKind::Conv ? constantOf(ops_[i].inputs[1])->rank() : 2;
      auto values = channelValues(next.inputs[first ? 1 : 0], rank, *channels);
      if (!values) continue;
      std::vector<double> scale(values->size(), 1.0), shift(values->size(), 0.0);
      for (size_t c = 0; c < values->size(); ++c) {
        double v = (*values)[c];
        switch (next.kind) {
          case ir::OpKind::Mul: scale[c] = v; break;
          case ir::OpKind::Div: scale[c] = 1.0 / v; break;
          case ir::OpKind::Add: shift[c] = v; break;
          default: shift[c] = -v; break;
        }
      }
      CTX_RETURN_IF_ERROR(foldChannelAffine(i, *j, scale, shift));
      changed = true;
      --i;  // the same op may take the next affine of a chain
    }
    return changed;
  }

  std::optional<ir::Shape> shapeOf(const std::string& name) const {
    if (auto it = localShapes_.find(name); it != localShapes_.end()) return it->second;
    const analysis::ValueFacts* f = facts_.find(name);
    return f ? f->shape : std::nullopt;
  }

  std::string addConstant(const std::string& name, ir::Tensor t) {
    localShapes_[name] = t.shape();
    folded_.emplace(name, std::move(t));
    return name;
  }

  // MatMul by a constant [K, N] followed only by Add of a constant bias [N] becomes one Gemm with the bias
  // as C; leading dimensions of A are flattened and restored with views (no copies).
  Expected<bool> fuseMatMulAdds() {
    bool changed = false;
    for (size_t i = 0; i < ops_.size(); ++i) {
      LOp& mm = ops_[i];
      if (mm.kind != ir::OpKind::MatMul || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
      const std::string& out = mm.outputs[0];
      const ir::Tensor* b = constantOf(mm.inputs[1]);
      auto aShape = shapeOf(mm.inputs[0]);
      const analysis::ValueFacts* af = facts_.find(mm.inputs[0]);
      if (!b || b->type() != ir::ElemType::Float || b->rank() != 2 || !aShape || aShape->size() < 2 || !af ||
          af->type != ir::ElemType::Float || usedOutside_.count(out) || readers(out) != 1)
        continue;
      size_t j = i + 1;
      while (j < ops_.size() && std::find(ops_[j].inputs.begin(), ops_[j].inputs.end(), out) == ops_[j].inputs.end())
        ++j;
      if (j == ops_.size() || ops_[j].kind != ir::OpKind::Add || ops_[j].inputs.size() != 2 ||
          ops_[j].outputs.size() != 1)
        continue;
      const LOp& add = ops_[j];
      const std::string& other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
      const ir::Tensor* bias = constantOf(other);
      const int64_t k = b->shape()[0], n = b->shape()[1];
      if (!bias || bias->type() != ir::ElemType::Float || bias->elementCount() != static_cast<uint64_t>(n) ||
          bias->rank() > aShape->size() || (bias->rank() > 0 && bias->shape().back() != n) || aShape->back() != k)
        continue;
      int64_t rows = 1;
      for (size_t d = 0; d + 1 < aShape->size(); ++d) rows *= (*aShape)[d];
      ir::Shape outShape(aShape->begin(), aShape->end() - 1);
      outShape.push_back(n);
      std::string base = mm.name + ".gemm";
      std::vector<int64_t> inDims = {rows, k};
      CTX_ASSIGN_OR_RETURN(ir::Tensor c, bias->reshaped({n}));
      std::string inShape = addConstant(base + ".a_shape", ir::Tensor::fromVector(ir::ElemType::Int64, {2}, inDims));
      std::string outShapeName =
          addConstant(base + ".y_shape",
                      ir::Tensor::fromVector(ir::ElemType::Int64, {static_cast<int64_t>(outShape.size())}, outShape));
      std::string cName = addConstant(base + ".c", std::move(c));
      std::string a2 = base + ".a", y2 = base + ".y", finalOut = add.outputs[0];
      localShapes_[a2] = ir::Shape{rows, k};
      localShapes_[y2] = ir::Shape{rows, n};
      LOp flatten = madeOp(ir::OpKind::Reshape, 14, base + ".flatten", {mm.inputs[0], inShape}, {a2});
      LOp gemm = madeOp(ir::OpKind::Gemm, 13, mm.name, {a2, mm.inputs[1], cName}, {y2});
      LOp restore = madeOp(ir::OpKind::Reshape, 14, base + ".restore", {y2, outShapeName}, {finalOut});
      ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(j));
      ops_[i] = std::move(gemm);
      ops_.insert(ops_.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(restore));
      ops_.insert(ops_.begin() + static_cast<std::ptrdiff_t>(i), std::move(flatten));
      i += 2;
      changed = true;
    }
    return changed;
  }

  // Clip's bounds as fused-activation parameters: attributes before opset 11, constant inputs after.
  std::optional<std::vector<float>> clipBounds(const LOp& clip) const {
    float lo = -INFINITY, hi = INFINITY;
    if (clip.opset < 11) {
      const auto& bounds = std::get<ops::ClipAttrs>(clip.typed);
      return std::vector<float>{bounds.min, bounds.max};
    }
    for (size_t k = 1; k < clip.inputs.size() && k < 3; ++k) {
      if (clip.inputs[k].empty()) continue;
      const ir::Tensor* t = constantOf(clip.inputs[k]);
      if (!t || t->type() != ir::ElemType::Float || t->elementCount() != 1) return std::nullopt;
      (k == 1 ? lo : hi) = t->dataAs<float>()[0];
    }
    return std::vector<float>{lo, hi};
  }

  // The scalar value of a float32 constant with one element, or nothing.
  std::optional<float> scalarOf(const std::string& name) const {
    const ir::Tensor* t = constantOf(name);
    if (!t || t->type() != ir::ElemType::Float || t->elementCount() != 1) return std::nullopt;
    return t->dataAs<float>()[0];
  }

  // The activation `act` applies, as an epilogue (its parameters from attributes or constant inputs).
  std::optional<ops::Epilogue> activationOf(const LOp& act) const {
    using A = ops::Activation;
    if (act.outputs.size() != 1 || (act.kind != ir::OpKind::Clip && act.inputs.size() != 1)) return std::nullopt;
    switch (act.kind) {
      case ir::OpKind::Relu: return ops::Epilogue{A::Relu, 0, 0};
      case ir::OpKind::Sigmoid: return ops::Epilogue{A::Sigmoid, 0, 0};
      case ir::OpKind::Tanh: return ops::Epilogue{A::Tanh, 0, 0};
      case ir::OpKind::HardSwish: return ops::Epilogue{A::HardSwish, 0, 0};
      case ir::OpKind::LeakyRelu: return ops::Epilogue{A::LeakyRelu, std::get<ops::UnaryAttrs>(act.typed).alpha, 0};
      case ir::OpKind::HardSigmoid: {
        const auto& unary = std::get<ops::UnaryAttrs>(act.typed);
        return ops::Epilogue{A::HardSigmoid, unary.alpha, unary.beta};
      }
      case ir::OpKind::Clip: {
        auto bounds = clipBounds(act);
        if (!bounds) return std::nullopt;
        return ops::Epilogue{A::Clip, (*bounds)[0], (*bounds)[1]};
      }
      default: return std::nullopt;
    }
  }

  // Conv/Gemm/MatMul (float32) followed only by an activation run it as their epilogue; then a following Mul,
  // Add, Sub or Div by a one-value constant joins the epilogue as its scale and shift (y = act(x) * scale + shift).
  Expected<bool> fuseActivations() {
    bool changed = false;
    for (size_t i = 0; i < ops_.size(); ++i) {
      LOp& producer = ops_[i];
      bool fusable =
          producer.kind == ir::OpKind::Conv || producer.kind == ir::OpKind::Gemm || producer.kind == ir::OpKind::MatMul;
      const analysis::ValueFacts* f =
          fusable && producer.outputs.size() == 1 ? facts_.find(producer.outputs[0]) : nullptr;
      if (fusable && (!f || f->type == ir::ElemType::Float) && fuseSwish(i)) {
        changed = true;
        --i;
        continue;
      }
      auto j = fusable ? soleReader(i) : std::nullopt;
      if (!j || (f && f->type != ir::ElemType::Float)) continue;
      const LOp& next = ops_[*j];
      ops::Epilogue e = producer.epilogue.value_or(ops::Epilogue{});
      const bool plainSoFar = e.scale == 1.0f && e.shift == 0.0f;
      if (auto act = activationOf(next); act && plainSoFar && e.activation == ops::Activation::None) {
        e.activation = act->activation;
        e.alpha = act->alpha;
        e.beta = act->beta;
      } else if (next.inputs.size() == 2 && next.outputs.size() == 1 &&
                 (next.kind == ir::OpKind::Mul || next.kind == ir::OpKind::Add || next.kind == ir::OpKind::Sub ||
                  next.kind == ir::OpKind::Div)) {
        const bool first = next.inputs[0] == producer.outputs[0];
        auto v = scalarOf(next.inputs[first ? 1 : 0]);
        if (!v || (!first && (next.kind == ir::OpKind::Sub || next.kind == ir::OpKind::Div))) continue;
        if (next.kind == ir::OpKind::Mul) e.scale *= *v, e.shift *= *v;
        if (next.kind == ir::OpKind::Div) e.scale /= *v, e.shift /= *v;
        if (next.kind == ir::OpKind::Add) e.shift += *v;
        if (next.kind == ir::OpKind::Sub) e.shift -= *v;
      } else {
        continue;
      }
      producer.epilogue = e;
      producer.outputs = next.outputs;
      ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(*j));
      changed = true;
      --i;  // the same op may take the next one
    }
    return changed;
  }

  // x * Sigmoid(x) after op i (Swish/SiLU as PyTorch exports it: x read by exactly the Sigmoid and the Mul, the
  // Sigmoid's result by the Mul alone) becomes op i's Swish epilogue. The product rounds as the two ops did.
  bool fuseSwish(size_t i) {
    LOp& producer = ops_[i];
    const ops::Epilogue e = producer.epilogue.value_or(ops::Epilogue{});
    if (producer.outputs.size() != 1 || e.activation != ops::Activation::None || e.scale != 1.0f || e.shift != 0.0f)
      return false;
    const std::string& x = producer.outputs[0];
    if (usedOutside_.count(x) || readers(x) != 2) return false;
    std::optional<size_t> sigmoid, mul;
    for (size_t j = i + 1; j < ops_.size(); ++j) {
      const LOp& op = ops_[j];
      if (op.kind == ir::OpKind::Sigmoid && op.inputs.size() == 1 && op.inputs[0] == x && op.outputs.size() == 1)
        sigmoid = j;
      else if (op.kind == ir::OpKind::Mul && op.inputs.size() == 2 && op.outputs.size() == 1 &&
               (op.inputs[0] == x || op.inputs[1] == x))
        mul = j;
    }
    if (!sigmoid || !mul) return false;
    const std::string& s = ops_[*sigmoid].outputs[0];
    const LOp& m = ops_[*mul];
    if (m.inputs[0] != s && m.inputs[1] != s) return false;
    if (usedOutside_.count(s) || readers(s) != 1) return false;
    producer.epilogue = ops::Epilogue{ops::Activation::Swish, 0, 0};
    producer.outputs = m.outputs;
    ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(std::max(*sigmoid, *mul)));
    ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(std::min(*sigmoid, *mul)));
    return true;
  }

  // The source of `name` when it is produced by an op of `kind` (index), or nothing.
  std::optional<size_t> producerOf(const std::string& name, ir::OpKind kind) const {
    for (size_t i = 0; i < ops_.size(); ++i)
      if (ops_[i].kind == kind &&
          std::find(ops_[i].outputs.begin(), ops_[i].outputs.end(), name) != ops_[i].outputs.end())
        return i;
    return std::nullopt;
  }

  // Activations that a model spells out as arithmetic become the activation op, which fuse-epilogue can then fold:
  // x * Clip(x + 3, 0, 6) / 6 (the HardSwish of PyTorch/Paddle exports) becomes HardSwish(x), and the
  // intermediate values must have no other reader.
  Expected<bool> matchActivations() {
    bool changed = false;
    for (size_t d = 0; d < ops_.size(); ++d) {
      // y = Div(m, 6) or Mul(m, 1/6)
      const LOp& last = ops_[d];
      if ((last.kind != ir::OpKind::Div && last.kind != ir::OpKind::Mul) || last.inputs.size() != 2) continue;
      auto six = scalarOf(last.inputs[1]);
      if (!six || (last.kind == ir::OpKind::Div ? *six != 6.0f : std::abs(*six - 1.0f / 6.0f) > 1e-7f)) continue;
      auto mul = producerOf(last.inputs[0], ir::OpKind::Mul);
      if (!mul || readers(last.inputs[0]) != 1 || usedOutside_.count(last.inputs[0])) continue;
      // m = Mul(x, c) in either order, c = Clip(t, 0, 6), t = Add(x, 3)
      const LOp& m = ops_[*mul];
      bool matched = false;
      for (int side = 0; side < 2 && !matched; ++side) {
        const std::string& x = m.inputs[side];
        const std::string& c = m.inputs[1 - side];
        auto clip = producerOf(c, ir::OpKind::Clip);
        if (!clip || readers(c) != 1 || usedOutside_.count(c)) continue;
        auto bounds = clipBounds(ops_[*clip]);
        if (!bounds || (*bounds)[0] != 0.0f || (*bounds)[1] != 6.0f) continue;
        const std::string& t = ops_[*clip].inputs[0];
        auto add = producerOf(t, ir::OpKind::Add);
        if (!add || readers(t) != 1 || usedOutside_.count(t)) continue;
        const LOp& a = ops_[*add];
        const bool xFirst = a.inputs[0] == x;
        auto three = scalarOf(a.inputs[xFirst ? 1 : 0]);
        if ((!xFirst && a.inputs[1] != x) || !three || *three != 3.0f) continue;
        // Replace the four ops by HardSwish at the place of the last one (x is defined before all of them).
        LOp hs = madeOp(ir::OpKind::HardSwish, 14, last.name + ".hardswish", {x}, last.outputs);
        std::vector<size_t> gone{*add, *clip, *mul, d};
        std::sort(gone.begin(), gone.end());
        ops_[d] = std::move(hs);
        for (auto it = gone.rbegin(); it != gone.rend(); ++it)
          if (*it != d) ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(*it));
        matched = true;
      }
      if (matched) {
        changed = true;
        d = 0;  // indices moved; start over (each match removes three ops, so this ends)
      }
    }
    return changed;
  }

  // ---- fuse-qdq ----

  // The DequantizeLinear producing `value`: its index, and its data, scale and zero point inputs (zero point "" when
  // absent). Only per-tensor or per-axis quantization (no blocks).
  struct Dequantized {
    size_t index;
    std::string data, scale, zero;
    int64_t axis;
  };
  std::optional<Dequantized> dequantizedFrom(const std::string& value) const {
    auto dq = producerOf(value, ir::OpKind::DequantizeLinear);
    if (!dq) return std::nullopt;
    const LOp& op = ops_[*dq];
    const auto& quantize = std::get<ops::QuantizeAttrs>(op.typed);
    if (op.inputs.size() < 2 || quantize.blockSize != 0) return std::nullopt;
    if (!constantOf(op.inputs[1]) || (op.inputs.size() > 2 && !op.inputs[2].empty() && !constantOf(op.inputs[2])))
      return std::nullopt;
    return Dequantized{*dq, op.inputs[0], op.inputs[1], op.inputs.size() > 2 ? op.inputs[2] : "", quantize.axis};
  }

  // The element type of a value: a constant's, or what analysis knows.
  ir::ElemType typeOf(const std::string& value) const {
    if (const ir::Tensor* c = constantOf(value)) return c->type();
    const analysis::ValueFacts* f = facts_.find(value);
    return f ? f->type : ir::ElemType::Undefined;
  }

  // A zero point input for `data`: the given one, or a constant 0 of data's type when the model left it out.
  std::string zeroPointFor(const Dequantized& d) {
    if (!d.zero.empty()) return d.zero;
    const ir::ElemType type = typeOf(d.data);
    auto zero = ir::Tensor::allocate(type, {});  // zero-filled
    return addConstant(d.data + ".zero_point", std::move(zero).value());
  }

  // Removes the ops at `indices` whose outputs nobody reads any more.
  void eraseUnread(std::vector<size_t> indices) {
    std::sort(indices.rbegin(), indices.rend());
    for (size_t i : indices) {
      const LOp& op = ops_[i];
      bool read = std::any_of(op.outputs.begin(), op.outputs.end(), [&](const std::string& o) {
        return !o.empty() && (readers(o) > 0 || usedOutside_.count(o) > 0);
      });
      if (!read) ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  // A bias in QLinear units (int32, scale x_scale x w_scale per output channel, zero point 0): a DequantizeLinear
  // of int32 in exactly those units, or a float32 constant quantized to them (rounded half to even, as a quantizer
  // computes it). `channels` output channels, `wScales` weight scales (1 or one per channel). "" when it is neither;
  // `producer` gets the DequantizeLinear's index.
  std::string quantizedBias(const std::string& value, float xs, const ir::Tensor& ws, uint64_t channels,
                            std::optional<size_t>& producer) {
    auto scaleOf = [&](uint64_t c) {
      return static_cast<double>(xs) * ws.dataAs<float>()[ws.elementCount() == 1 ? 0 : c];
    };
    if (auto b = dequantizedFrom(value)) {
      const ir::Tensor* bq = constantOf(b->data);
      const ir::Tensor* bs = constantOf(b->scale);
      if (!bq || bq->type() != ir::ElemType::Int32 || bq->elementCount() != channels ||
          bs->type() != ir::ElemType::Float || (bs->elementCount() != 1 && bs->elementCount() != channels))
        return "";
      for (uint64_t c = 0; c < bs->elementCount(); ++c)
        if (std::abs(bs->dataAs<float>()[c] - scaleOf(c)) > 1e-6 * std::abs(scaleOf(c))) return "";
      if (const ir::Tensor* bz = b->zero.empty() ? nullptr : constantOf(b->zero))
        for (uint64_t c = 0; c < bz->elementCount(); ++c)
          if (bz->dataAs<int32_t>()[c] != 0) return "";
      producer = b->index;
      return b->data;
    }
    const ir::Tensor* bf = constantOf(value);
    if (!bf || bf->type() != ir::ElemType::Float || bf->elementCount() != channels) return "";
    std::vector<int32_t> q(channels);
    for (uint64_t c = 0; c < channels; ++c) {
      const double v = std::nearbyint(static_cast<double>(bf->dataAs<float>()[c]) / scaleOf(c));
      if (!std::isfinite(v) || std::abs(v) > 2147483647.0) return "";
      q[c] = static_cast<int32_t>(v);
    }
    return addConstant(value + ".quantized",
                       ir::Tensor::fromVector(ir::ElemType::Int32, {static_cast<int64_t>(channels)}, q));
  }

  // QDQ groups run as integer ops (docs/compiler.md#targets: int8 QDQ on npu-sim), in the forms ORT's quantizer and
  // other tools write: DequantizeLinear on an 8-bit activation and on a constant 8-bit weight (per tensor, or per
  // output channel), Conv, MatMul (optionally + Add of a bias) or Gemm, optionally Relu or Clip, then QuantizeLinear
  // to 8 bits becomes QLinearConv or QLinearMatMul. The bias is an int32 DequantizeLinear in x_scale x w_scale units or
  // a float32 constant quantized to them; the activation becomes the clamp of the requantization (exact: quantizing
  // is monotonic). The weights stay 8-bit constants, so the context stores them at 8-bit size. Runs first: folding
  // constants would turn the dequantized weights into float32.
  Expected<bool> fuseQdq() {
    bool changed = false;
    auto is8Bit = [](ir::ElemType t) { return t == ir::ElemType::Int8 || t == ir::ElemType::Uint8; };
    for (size_t i = 0; i < ops_.size(); ++i) {
      const LOp& op = ops_[i];
      const bool conv = op.kind == ir::OpKind::Conv, gemm = op.kind == ir::OpKind::Gemm,
                 matmul = op.kind == ir::OpKind::MatMul || gemm;
      if ((!conv && !matmul) || op.inputs.size() < 2 || op.outputs.size() != 1 || op.epilogue) continue;
      bool transB = false;
      if (gemm) {
        const auto& g = std::get<ops::GemmAttrs>(op.typed);
        if (g.transA || g.alpha != 1.0f || (g.beta != 1.0f && op.inputs.size() > 2 && !op.inputs[2].empty())) continue;
        transB = g.transB;
      }
      // What follows: for MatMul an Add of a bias, then a Relu or Clip, then the QuantizeLinear.
      std::vector<size_t> chain;  // the ops after `op` that the fused op replaces, the QuantizeLinear last
      std::string biasValue = conv || gemm ? (op.inputs.size() > 2 ? op.inputs[2] : "") : "";
      std::string last = op.outputs[0];
      auto next = soleReader(i);
      if (next && op.kind == ir::OpKind::MatMul && ops_[*next].kind == ir::OpKind::Add &&
          ops_[*next].inputs.size() == 2 && ops_[*next].outputs.size() == 1) {
        const LOp& add = ops_[*next];
        biasValue = add.inputs[0] == last ? add.inputs[1] : add.inputs[0];
        chain.push_back(*next);
        last = add.outputs[0];
        next = soleReader(*next);
      }
      std::optional<ops::Epilogue> activation;
      if (next && (ops_[*next].kind == ir::OpKind::Relu || ops_[*next].kind == ir::OpKind::Clip)) {
        activation = activationOf(ops_[*next]);
        if (!activation) continue;
        chain.push_back(*next);
        last = ops_[*next].outputs[0];
        next = soleReader(*next);
      }
      if (!next || ops_[*next].kind != ir::OpKind::QuantizeLinear || ops_[*next].inputs[0] != last) continue;
      const size_t q = *next;
      chain.push_back(q);
      const LOp& quant = ops_[q];
      if (quant.inputs.size() < 2 || !constantOf(quant.inputs[1]) || constantOf(quant.inputs[1])->elementCount() != 1 ||
          constantOf(quant.inputs[1])->type() != ir::ElemType::Float)
        continue;
      if (quant.inputs.size() < 3 || quant.inputs[2].empty() || !constantOf(quant.inputs[2]) ||
          !is8Bit(constantOf(quant.inputs[2])->type()))
        continue;  // the output type comes from the zero point
      auto x = dequantizedFrom(op.inputs[0]);
      // A Flatten or Reshape between the activation's DequantizeLinear and a MatMul moves onto the 8-bit values.
      std::optional<size_t> view;
      if (!x && matmul)
        for (ir::OpKind kind : {ir::OpKind::Flatten, ir::OpKind::Reshape})
          if (auto v = producerOf(op.inputs[0], kind);
              v && readers(op.inputs[0]) == 1 && !usedOutside_.count(op.inputs[0])) {
            x = dequantizedFrom(ops_[*v].inputs[0]);
            if (x) view = v;
            break;
          }
      auto w = dequantizedFrom(op.inputs[1]);
      if (!x || !w || constantOf(x->data) || !constantOf(w->data) || !is8Bit(typeOf(x->data)) ||
          !is8Bit(constantOf(w->data)->type()) || constantOf(x->scale)->elementCount() != 1)
        continue;
      if (constantOf(x->scale)->type() != ir::ElemType::Float || constantOf(w->scale)->type() != ir::ElemType::Float)
        continue;
      const ir::Tensor& wq = *constantOf(w->data);
      const ir::Tensor& wScale = *constantOf(w->scale);
      const uint64_t wScales = wScale.elementCount();
      if (matmul && wq.rank() != 2) continue;
      // Weight scales: per tensor, or per output channel (axis 0 of a Conv weight and of Gemm's [N, K] weight with
      // transB, axis 1 of a [K, N] weight).
      const int64_t channelAxis = conv || transB ? 0 : 1;
      if (wScales != 1 &&
          (wq.rank() < 2 || (w->axis < 0 ? w->axis + static_cast<int64_t>(wq.rank()) : w->axis) != channelAxis ||
           wScales != static_cast<uint64_t>(wq.shape()[static_cast<size_t>(channelAxis)])))
        continue;
      const auto channels = static_cast<uint64_t>(wq.shape()[static_cast<size_t>(channelAxis)]);
      std::string bias;
      std::optional<size_t> biasProducer;
      if (!biasValue.empty()) {
        bias = quantizedBias(biasValue, constantOf(x->scale)->dataAs<float>()[0], wScale, channels, biasProducer);
        if (bias.empty()) continue;
      }
      // QLinearMatMul reads B as [K, N]: Gemm's transposed weight is transposed once here.
      std::string weight = w->data;
      if (transB) {
        const auto n = static_cast<size_t>(wq.shape()[0]), k = static_cast<size_t>(wq.shape()[1]);
        auto t = ir::Tensor::allocate(wq.type(), {wq.shape()[1], wq.shape()[0]});
        if (!t) return t.takeError();
        const auto* src = wq.dataAs<uint8_t>();
        auto* dst = t->mutableDataAs<uint8_t>();
        for (size_t r = 0; r < n; ++r)
          for (size_t c = 0; c < k; ++c) dst[c * n + r] = src[r * k + c];
        weight = addConstant(w->data + ".transposed", std::move(t).value());
      }
      LOp fused{
          conv ? ir::OpKind::QLinearConv : ir::OpKind::QLinearMatMul,
          10,
          op.name,
          conv ? op.typed : ops::defaultAttrsFor(ir::OpKind::QLinearMatMul),
          {x->data, x->scale, zeroPointFor(*x), weight, w->scale, zeroPointFor(*w), quant.inputs[1], quant.inputs[2]},
          quant.outputs,
          activation};
      if (!bias.empty()) fused.inputs.push_back(bias);
      std::vector<size_t> producers{x->index, w->index};
      if (biasProducer) producers.push_back(*biasProducer);
      std::optional<LOp> quantizedView;
      if (view) {
        LOp v = ops_[*view];
        const std::string reshaped = v.outputs[0] + ".quantized";
        localShapes_[reshaped] = shapeOf(v.outputs[0]).value_or(ir::Shape{});
        v.name += ".quantized";
        v.inputs[0] = x->data;
        v.outputs = {reshaped};
        fused.inputs[0] = reshaped;
        quantizedView = std::move(v);
        producers.push_back(*view);
      }
      ops_[i] = std::move(fused);
      std::sort(chain.rbegin(), chain.rend());
      for (size_t c : chain) ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(c));
      if (quantizedView) ops_.insert(ops_.begin() + static_cast<std::ptrdiff_t>(i), std::move(*quantizedView));
      // (producers come before op i: erasing the chain after it left their indices as they were)
      eraseUnread(producers);
      changed = true;
      i = 0;  // indices moved
    }
    return changed;
  }

  // The layout a constant read as input `k` of `op` would be stored in: the target's GEMM panels for a 2-D
  // float32 B of MatMul or Gemm (transposed panels for Gemm with transB), transposed panels for the weight of a
  // Conv the kernels run as a GEMM on it (kernels::convOnPanels), nothing for
  // any other use.
  std::optional<ops::WeightLayout> gemmLayoutFor(const LOp& op, size_t k) const {
    const bool conv = op.kind == ir::OpKind::Conv;
    if (k != 1 || (op.kind != ir::OpKind::MatMul && op.kind != ir::OpKind::Gemm && !conv)) return std::nullopt;
    const ir::Tensor* b = constantOf(op.inputs[1]);
    if (!b || b->type() != ir::ElemType::Float || (conv ? b->rank() < 3 : b->rank() != 2)) return std::nullopt;
    if (conv && !convOnPanels(op, *b, std::get<ops::ConvAttrs>(op.typed))) return std::nullopt;
    bool transB = conv || (op.kind == ir::OpKind::Gemm && std::get<ops::GemmAttrs>(op.typed).transB);
    ops::WeightLayout layout = options_.gemmLayout;
    if (transB) layout.kind = ops::WeightLayoutKind::GemmPanelsTransposed;
    return layout;
  }

  // Whether prepared ops run this Conv (of a float32 weight) as a GEMM on its weight in panels
  // (kernels::convOnPanels, on the static input shape).
  bool convOnPanels(const LOp& op, const ir::Tensor& w, const ops::ConvAttrs& attrs) const {
    if (w.elementCount() == 0 || op.inputs[0].empty() || op.outputs.empty()) return false;
    auto x = shapeOf(op.inputs[0]);  // (the data is float32 as the weight is: Conv takes one type)
    return x && kernels::convOnPanels(attrs, *x, w.shape());
  }

  // Constant B operands of MatMul and Gemm are stored in the target's GEMM panel layout, packed once at compile
  // time (by the weight table, as it writes them) so that runs read them in place. A constant read any other way too
  // (or leaving the partition) stays plain.
  Expected<bool> chooseLayouts() {
    if (options_.gemmLayout.plain()) return false;
    std::map<std::string, std::optional<ops::WeightLayout>> uses;  // constant -> its one layout, or none
    for (const LOp& op : ops_)
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        const std::string& in = op.inputs[k];
        if (in.empty() || !constantOf(in)) continue;
        auto layout = gemmLayoutFor(op, k);
        auto [it, fresh] = uses.emplace(in, layout);
        if (!fresh && it->second != layout) it->second.reset();
      }
    bool changed = false;
    for (const auto& [name, layout] : uses)
      if (layout && !usedOutside_.count(name)) {
        layouts_[name] = *layout;
        changed = true;
      }
    return changed;
  }

  int32_t addTensor(TensorDesc desc) {
    result_.program.tensors.push_back(std::move(desc));
    lastUse_.push_back(0);
    firstUse_.push_back(0);
    return static_cast<int32_t>(result_.program.tensors.size() - 1);
  }

  Expected<int32_t> tensorFor(const std::string& name) {
    if (auto it = tensorOf_.find(name); it != tensorOf_.end()) return it->second;
    if (const ir::Tensor* c = constantOf(name)) {
      ops::WeightLayout layout;
      uint64_t size = c->byteSize();  // of the form the kernels read
      if (auto it = layouts_.find(name); it != layouts_.end()) {
        layout = it->second;
        auto elements = ops::layoutElements(layout, c->shape());
        if (!elements)
          return makeError(ErrorCode::Internal, "weight '{}': layout {} does not apply", name, ops::layoutName(layout));
        size = *elements * ir::elemSize(c->type());
      }
      // Stored packed (by the weight table, a few panels at a time: no packed copy here), or plain and packed at load.
      const ops::WeightLayout stored = options_.plainWeights ? ops::WeightLayout{} : layout;
      CTX_ASSIGN_OR_RETURN(uint32_t index, intern_(*c, stored).addContext(fmt::format("weight '{}'", name)));
      int32_t t = addTensor(TensorDesc{TensorKind::Weight, c->type(), program::toDims(c->shape()), index, 0, size,
                                       program::Name(name), layout});
      tensorOf_[name] = t;
      return t;
    }
    const analysis::ValueFacts* f = facts_.find(name);
    if (!f || !f->shape) return makeError(ErrorCode::Internal, "boundary value '{}' has no static shape", name);
    auto bytes = ir::storageBytes(f->type, ir::elementCount(*f->shape).value_or(0));
    if (!bytes)
      return makeError(ErrorCode::Unsupported, "value '{}' of type {} cannot be compiled", name,
                       ir::elemTypeName(f->type));
    auto position = static_cast<uint32_t>(result_.inputs.size());
    int32_t t = addTensor(TensorDesc{
        TensorKind::Input, f->type, program::toDims(*f->shape), position, 0, *bytes, program::Name(name), {}});
    result_.program.inputs.push_back(t);
    result_.inputs.push_back(name);
    tensorOf_[name] = t;
    return t;
  }

  void markRead(int32_t t) {
    if (t < 0) return;
    const TensorDesc& d = result_.program.tensors[t];
    if (d.kind == TensorKind::View) t = static_cast<int32_t>(d.index);
    lastUse_[t] = std::max(lastUse_[t], result_.program.ops.size());
  }

  Status emit(const LOp& op) {
    program::Indices inputs;
    std::vector<kernels::ValueDesc> descs;
    // A view needs only its data input; shape/axes inputs were used up by static shape inference.
    bool asView = ir::isView(op.kind) && op.outputs.size() == 1 && !usedOutside_.count(op.outputs[0]) &&
                  !op.inputs.empty() && !op.inputs[0].empty() && !constantOf(op.inputs[0]);
    for (const auto& in : op.inputs) {
      if (asView && !inputs.empty()) break;
      if (in.empty()) {
        inputs.push_back(-1);
        kernels::ValueDesc d;
        d.present = false;
        descs.push_back(d);
        continue;
      }
      CTX_ASSIGN_OR_RETURN(int32_t t, tensorFor(in));
      inputs.push_back(t);
      const TensorDesc& td = result_.program.tensors[t];
      descs.push_back(kernels::ValueDesc{td.type, program::toShape(td.shape), constantOf(in), true});
    }

    // Reshape-like ops alias their input's bytes unless the result must leave the partition.
    if (asView) {
      auto shape = shapeOf(op.outputs[0]);
      if (!shape) return makeError(ErrorCode::Internal, "view '{}' has no static shape", op.outputs[0]);
      const TensorDesc& base = result_.program.tensors[inputs[0]];
      uint32_t baseIndex = base.kind == TensorKind::View ? base.index : static_cast<uint32_t>(inputs[0]);
      tensorOf_[op.outputs[0]] = addTensor(TensorDesc{TensorKind::View,
                                                      base.type,
                                                      program::toDims(*shape),
                                                      baseIndex,
                                                      0,
                                                      base.size,
                                                      program::Name(op.outputs[0]),
                                                      {}});
      return Status::ok();
    }

    // Reshape-like ops whose result leaves the partition run as real ops: the kernel copies into the output.
    ir::OpKind kind = op.kind;
    kernels::OpContext ctx{kind, op.opset, op.onnx, op.name, nullptr, &op.typed};
    size_t outputCount = op.outputs.size();
    while (outputCount > 0 && op.outputs[outputCount - 1].empty()) --outputCount;
    CTX_ASSIGN_OR_RETURN(auto outs, kernels::inferOutputs(ctx, descs, outputCount));
    size_t opIndex = result_.program.ops.size();
    for (int32_t t : inputs) markRead(t);
    program::Indices outputs;
    for (size_t o = 0; o < outputCount; ++o) {
      const std::string& name = op.outputs[o];
      auto bytes = ir::storageBytes(outs[o].type, ir::elementCount(outs[o].shape).value_or(0));
      if (!bytes)
        return makeError(ErrorCode::Unsupported, "output '{}' of type {} cannot be compiled", name,
                         ir::elemTypeName(outs[o].type));
      int32_t t;
      if (!name.empty() && usedOutside_.count(name)) {
        auto position = static_cast<uint32_t>(result_.outputs.size());
        t = addTensor(TensorDesc{TensorKind::Output,
                                 outs[o].type,
                                 program::toDims(outs[o].shape),
                                 position,
                                 0,
                                 *bytes,
                                 program::Name(name),
                                 {}});
        result_.program.outputs.push_back(t);
        result_.outputs.push_back(name);
      } else {
        t = addTensor(TensorDesc{
            TensorKind::Arena, outs[o].type, program::toDims(outs[o].shape), 0, 0, *bytes, program::Name(name), {}});
        firstUse_[t] = lastUse_[t] = opIndex;
      }
      if (!name.empty()) tensorOf_[name] = t;
      outputs.push_back(t);
    }
    // A program keeps decoded attributes only, never ONNX names (kinds without typed attributes keep none).
    ops::OpAttrs typed = op.typed;
    if (op.epilogue)
      std::visit(
          [&](auto& a) {
            if constexpr (requires { a.epilogue; }) a.epilogue = *op.epilogue;
          },
          typed);
    result_.program.ops.push_back(
        program::Op{kind, op.opset, program::Name(op.name), std::move(inputs), std::move(outputs), std::move(typed)});
    return Status::ok();
  }

  Expected<bool> planArena() {
    std::vector<BufferRequest> requests;
    std::vector<size_t> owners;
    auto& tensors = result_.program.tensors;
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t].kind != TensorKind::Arena) continue;
      requests.push_back(BufferRequest{tensors[t].size, firstUse_[t], std::max(firstUse_[t], lastUse_[t])});
      owners.push_back(t);
    }
    MemoryPlan plan = planMemory(requests, options_.arenaAlignment);
    for (size_t r = 0; r < owners.size(); ++r) tensors[owners[r]].offset = plan.offsets[r];
    result_.program.arenaSize = plan.arenaSize;
    return !requests.empty();
  }

  const analysis::GraphFacts& facts_;
  const std::set<std::string>& usedOutside_;
  const WeightInterner& intern_;
  LowerOptions options_;
  std::vector<LOp> ops_;
  std::map<std::string, ir::Tensor> folded_;
  size_t folds_ = 0;                                  // fold-batchnorm and fold-affine: numbers the constants they make
  std::map<std::string, ops::WeightLayout> layouts_;  // choose-layouts: constants stored packed
  std::map<std::string, ir::Shape> localShapes_;      // values the lowering itself introduces
  std::map<std::string, int32_t> tensorOf_;
  std::vector<size_t> firstUse_, lastUse_;
  LoweredPartition result_;
  bool emitted_ = false;
};

}  // namespace

const std::vector<std::string_view>& loweringPassNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> n;
    for (const auto& p : Lowering::passes()) n.push_back(p.name);
    return n;
  }();
  return names;
}

Expected<LoweredPartition> lowerPartition(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                          const partitioner::Partition& partition,
                                          const std::set<std::string>& usedOutside, const WeightInterner& intern,
                                          const LowerOptions& options) {
  Lowering lowering(facts, usedOutside, intern, options);
  return lowering.run(graph, partition);
}

}  // namespace ctxkit::codegen
