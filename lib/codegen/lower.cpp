// Partition lowering: from IR nodes to a program with weights, views and an arena plan.
#include "codegen/lower.h"

#include "codegen/memory_plan.h"
#include "kernels/kernels.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <deque>
#include <map>

namespace ctxkit::codegen {

namespace {

using program::TensorDesc;
using program::TensorKind;

struct LOp {
  ir::OpKind kind;
  int64_t opset;
  std::string name;
  ir::Attributes attrs;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

bool isViewOp(ir::OpKind kind) {
  return kind == ir::OpKind::Reshape || kind == ir::OpKind::Flatten || kind == ir::OpKind::Squeeze ||
         kind == ir::OpKind::Unsqueeze || kind == ir::OpKind::Identity;
}

class Lowering {
public:
  Lowering(const analysis::GraphFacts& facts, const std::set<std::string>& usedOutside, const WeightInterner& intern,
           const LowerOptions& options)
      : facts_(facts), usedOutside_(usedOutside), intern_(intern), options_(options) {}

  Expected<LoweredPartition> run(const ir::Graph& graph, const partitioner::Partition& partition) {
    for (size_t i : partition.nodes) {
      const ir::Node& n = graph.nodes[i];
      ops_.push_back(LOp{n.kind, n.opset, n.name.empty() ? n.opType + "_" + std::to_string(i) : n.name, n.attrs, n.inputs, n.outputs});
    }
    if (options_.foldBatchNorm) CTX_RETURN_IF_ERROR(foldBatchNorms());
    if (options_.fuseMatMulAdd) CTX_RETURN_IF_ERROR(fuseMatMulAdds());
    if (options_.fuseActivations) fuseActivations();
    for (const LOp& op : ops_) CTX_RETURN_IF_ERROR(emit(op).addContext(fmt::format("lowering node '{}'", op.name)));
    planArena();
    return std::move(result_);
  }

private:
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

  // Conv followed only by BatchNormalization (inference) becomes one Conv with rescaled weights and bias.
  Status foldBatchNorms() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      LOp& conv = ops_[i];
      if (conv.kind != ir::OpKind::Conv || conv.outputs.size() != 1 || usedOutside_.count(conv.outputs[0])) continue;
      if (readers(conv.outputs[0]) != 1) continue;
      size_t j = i + 1;
      while (j < ops_.size() && (ops_[j].inputs.empty() || ops_[j].inputs[0] != conv.outputs[0])) ++j;
      if (j == ops_.size()) continue;
      const LOp& bn = ops_[j];
      if (bn.kind != ir::OpKind::BatchNormalization || bn.inputs.size() != 5 || bn.attrs.getInt("training_mode", 0) != 0)
        continue;
      bool extraOutputs = false;
      for (size_t o = 1; o < bn.outputs.size(); ++o) extraOutputs |= !bn.outputs[o].empty();
      if (extraOutputs || conv.inputs.size() < 2) continue;
      const ir::Tensor* w = constantOf(conv.inputs[1]);
      const ir::Tensor* b = conv.inputs.size() > 2 && !conv.inputs[2].empty() ? constantOf(conv.inputs[2]) : nullptr;
      if (conv.inputs.size() > 2 && !conv.inputs[2].empty() && !b) continue;
      const ir::Tensor* params[4];
      bool ok = w && w->type() == ir::ElemType::Float && w->rank() >= 3;
      for (int k = 0; k < 4 && ok; ++k) {
        params[k] = constantOf(bn.inputs[1 + k]);
        ok = params[k] && params[k]->type() == ir::ElemType::Float && params[k]->rank() == 1 &&
             params[k]->shape()[0] == w->shape()[0];
      }
      if (!ok || (b && (b->type() != ir::ElemType::Float || b->elementCount() != static_cast<uint64_t>(w->shape()[0]))))
        continue;
      const int64_t m = w->shape()[0];
      const uint64_t perFilter = w->elementCount() / static_cast<uint64_t>(m);
      const float eps = bn.attrs.getFloat("epsilon", 1e-5f);
      CTX_ASSIGN_OR_RETURN(ir::Tensor newW, ir::Tensor::allocate(ir::ElemType::Float, w->shape()));
      CTX_ASSIGN_OR_RETURN(ir::Tensor newB, ir::Tensor::allocate(ir::ElemType::Float, {m}));
      const float* scale = params[0]->dataAs<float>();
      const float* bias = params[1]->dataAs<float>();
      const float* mean = params[2]->dataAs<float>();
      const float* var = params[3]->dataAs<float>();
      for (int64_t c = 0; c < m; ++c) {
        double factor = scale[c] / std::sqrt(static_cast<double>(var[c]) + eps);
        for (uint64_t k = 0; k < perFilter; ++k)
          newW.mutableDataAs<float>()[c * perFilter + k] = static_cast<float>(w->dataAs<float>()[c * perFilter + k] * factor);
        double b0 = b ? b->dataAs<float>()[c] : 0.0;
        newB.mutableDataAs<float>()[c] = static_cast<float>((b0 - mean[c]) * factor + bias[c]);
      }
      std::string wName = conv.name + ".bn_folded_weight", bName = conv.name + ".bn_folded_bias";
      folded_.emplace(wName, std::move(newW));
      folded_.emplace(bName, std::move(newB));
      conv.inputs = {conv.inputs[0], wName, bName};
      conv.outputs = {bn.outputs[0]};
      ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(j));
    }
    return Status::ok();
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
  Status fuseMatMulAdds() {
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
      while (j < ops_.size() && std::find(ops_[j].inputs.begin(), ops_[j].inputs.end(), out) == ops_[j].inputs.end()) ++j;
      if (j == ops_.size() || ops_[j].kind != ir::OpKind::Add || ops_[j].inputs.size() != 2 || ops_[j].outputs.size() != 1) continue;
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
      std::string outShapeName = addConstant(base + ".y_shape", ir::Tensor::fromVector(ir::ElemType::Int64, {static_cast<int64_t>(outShape.size())}, outShape));
      std::string cName = addConstant(base + ".c", std::move(c));
      std::string a2 = base + ".a", y2 = base + ".y", finalOut = add.outputs[0];
      localShapes_[a2] = ir::Shape{rows, k};
      localShapes_[y2] = ir::Shape{rows, n};
      LOp flatten{ir::OpKind::Reshape, 14, base + ".flatten", {}, {mm.inputs[0], inShape}, {a2}};
      LOp gemm{ir::OpKind::Gemm, 13, mm.name, {}, {a2, mm.inputs[1], cName}, {y2}};
      LOp restore{ir::OpKind::Reshape, 14, base + ".restore", {}, {y2, outShapeName}, {finalOut}};
      ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(j));
      ops_[i] = std::move(gemm);
      ops_.insert(ops_.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(restore));
      ops_.insert(ops_.begin() + static_cast<std::ptrdiff_t>(i), std::move(flatten));
      i += 2;
    }
    return Status::ok();
  }

  // Clip's bounds as fused-activation parameters: attributes before opset 11, constant inputs after.
  std::optional<std::vector<float>> clipBounds(const LOp& clip) const {
    float lo = -INFINITY, hi = INFINITY;
    if (clip.opset < 11) {
      lo = clip.attrs.getFloat("min", lo);
      hi = clip.attrs.getFloat("max", hi);
      return std::vector<float>{lo, hi};
    }
    for (size_t k = 1; k < clip.inputs.size() && k < 3; ++k) {
      if (clip.inputs[k].empty()) continue;
      const ir::Tensor* t = constantOf(clip.inputs[k]);
      if (!t || t->type() != ir::ElemType::Float || t->elementCount() != 1) return std::nullopt;
      (k == 1 ? lo : hi) = t->dataAs<float>()[0];
    }
    return std::vector<float>{lo, hi};
  }

  // Conv/Gemm/MatMul followed only by an activation run the activation as their epilogue (float32).
  void fuseActivations() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      LOp& producer = ops_[i];
      bool fusable = producer.kind == ir::OpKind::Conv || producer.kind == ir::OpKind::Gemm || producer.kind == ir::OpKind::MatMul;
      if (!fusable || producer.outputs.size() != 1 || producer.attrs.has("activation")) continue;
      const std::string& out = producer.outputs[0];
      const analysis::ValueFacts* f = facts_.find(out);
      if (usedOutside_.count(out) || readers(out) != 1 || (f && f->type != ir::ElemType::Float)) continue;
      size_t j = i + 1;
      while (j < ops_.size() && std::find(ops_[j].inputs.begin(), ops_[j].inputs.end(), out) == ops_[j].inputs.end()) ++j;
      if (j == ops_.size()) continue;
      const LOp& act = ops_[j];
      std::vector<float> params;
      switch (act.kind) {
        case ir::OpKind::Relu:
        case ir::OpKind::Sigmoid:
        case ir::OpKind::Tanh: break;
        case ir::OpKind::LeakyRelu: params = {act.attrs.getFloat("alpha", 0.01f)}; break;
        case ir::OpKind::HardSigmoid: params = {act.attrs.getFloat("alpha", 0.2f), act.attrs.getFloat("beta", 0.5f)}; break;
        case ir::OpKind::Clip: {
          auto bounds = clipBounds(act);
          if (!bounds) continue;
          params = *bounds;
          break;
        }
        default: continue;
      }
      if ((act.kind != ir::OpKind::Clip && act.inputs.size() != 1) || act.outputs.size() != 1) continue;
      producer.attrs.set(ir::Attribute::makeString("activation", std::string(ir::opKindName(act.kind))));
      if (!params.empty()) producer.attrs.set(ir::Attribute::makeFloats("activation_params", params));
      producer.outputs = act.outputs;
      ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(j));
    }
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
      CTX_ASSIGN_OR_RETURN(uint32_t index, intern_(*c).addContext(fmt::format("weight '{}'", name)));
      int32_t t = addTensor(TensorDesc{TensorKind::Weight, c->type(), c->shape(), index, 0, c->byteSize(), name});
      tensorOf_[name] = t;
      return t;
    }
    const analysis::ValueFacts* f = facts_.find(name);
    if (!f || !f->shape) return makeError(ErrorCode::Internal, "boundary value '{}' has no static shape", name);
    auto bytes = ir::storageBytes(f->type, ir::elementCount(*f->shape).value_or(0));
    if (!bytes) return makeError(ErrorCode::Unsupported, "value '{}' of type {} cannot be compiled", name, ir::elemTypeName(f->type));
    auto position = static_cast<uint32_t>(result_.inputs.size());
    int32_t t = addTensor(TensorDesc{TensorKind::Input, f->type, *f->shape, position, 0, *bytes, name});
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
    std::vector<int32_t> inputs;
    std::vector<kernels::ValueDesc> descs;
    // A view needs only its data input; shape/axes inputs were used up by static shape inference.
    bool asView = isViewOp(op.kind) && op.outputs.size() == 1 && !usedOutside_.count(op.outputs[0]) && !op.inputs.empty() &&
                  !op.inputs[0].empty() && !constantOf(op.inputs[0]);
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
      descs.push_back(kernels::ValueDesc{td.type, td.shape, constantOf(in), true});
    }

    // Reshape-like ops alias their input's bytes unless the result must leave the partition.
    if (asView) {
      auto shape = shapeOf(op.outputs[0]);
      if (!shape) return makeError(ErrorCode::Internal, "view '{}' has no static shape", op.outputs[0]);
      const TensorDesc& base = result_.program.tensors[inputs[0]];
      uint32_t baseIndex = base.kind == TensorKind::View ? base.index : static_cast<uint32_t>(inputs[0]);
      tensorOf_[op.outputs[0]] = addTensor(TensorDesc{TensorKind::View, base.type, *shape, baseIndex, 0, base.size, op.outputs[0]});
      return Status::ok();
    }

    // Reshape-like ops whose result leaves the partition run as real ops: the kernel copies into the output.
    ir::OpKind kind = op.kind;
    ir::Attributes attrs = op.attrs;
    kernels::OpContext ctx{kind, op.opset, attrs, op.name};
    size_t outputCount = op.outputs.size();
    while (outputCount > 0 && op.outputs[outputCount - 1].empty()) --outputCount;
    CTX_ASSIGN_OR_RETURN(auto outs, kernels::inferOutputs(ctx, descs, outputCount));
    size_t opIndex = result_.program.ops.size();
    for (int32_t t : inputs) markRead(t);
    std::vector<int32_t> outputs;
    for (size_t o = 0; o < outputCount; ++o) {
      const std::string& name = op.outputs[o];
      auto bytes = ir::storageBytes(outs[o].type, ir::elementCount(outs[o].shape).value_or(0));
      if (!bytes) return makeError(ErrorCode::Unsupported, "output '{}' of type {} cannot be compiled", name, ir::elemTypeName(outs[o].type));
      int32_t t;
      if (!name.empty() && usedOutside_.count(name)) {
        auto position = static_cast<uint32_t>(result_.outputs.size());
        t = addTensor(TensorDesc{TensorKind::Output, outs[o].type, outs[o].shape, position, 0, *bytes, name});
        result_.program.outputs.push_back(t);
        result_.outputs.push_back(name);
      } else {
        t = addTensor(TensorDesc{TensorKind::Arena, outs[o].type, outs[o].shape, 0, 0, *bytes, name});
        firstUse_[t] = lastUse_[t] = opIndex;
      }
      if (!name.empty()) tensorOf_[name] = t;
      outputs.push_back(t);
    }
    result_.program.ops.push_back(program::Op{kind, op.opset, op.name, std::move(attrs), std::move(inputs), std::move(outputs)});
    return Status::ok();
  }

  void planArena() {
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
  }

  const analysis::GraphFacts& facts_;
  const std::set<std::string>& usedOutside_;
  const WeightInterner& intern_;
  LowerOptions options_;
  std::vector<LOp> ops_;
  std::map<std::string, ir::Tensor> folded_;
  std::map<std::string, ir::Shape> localShapes_;  // values the lowering itself introduces
  std::map<std::string, int32_t> tensorOf_;
  std::vector<size_t> firstUse_, lastUse_;
  LoweredPartition result_;
};

}  // namespace

Expected<LoweredPartition> lowerPartition(const ir::Graph& graph, const analysis::GraphFacts& facts,
                                          const partitioner::Partition& partition,
                                          const std::set<std::string>& usedOutside, const WeightInterner& intern,
                                          const LowerOptions& options) {
  Lowering lowering(facts, usedOutside, intern, options);
  return lowering.run(graph, partition);
}

}  // namespace ctxkit::codegen
