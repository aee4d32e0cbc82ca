// The lowering tests' shared helpers (lower_helpers.h).
#include "lower_helpers.h"

#include "../common/graph_builder.h"
#include "../common/random.h"
#include "cpu/convert.h"
#include "cpu/gemm.h"
#include "kernels/kernels.h"
#include "partitioner/partitioner.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

namespace ctxkit::testing {

// The ids lowerPartition takes for values read outside a partition: ascending.
std::vector<ir::ValueId> outsideIds(const analysis::GraphFacts& facts, std::initializer_list<std::string_view> names) {
  std::vector<ir::ValueId> ids;
  for (std::string_view name : names) ids.push_back(facts.table.id(name));
  std::sort(ids.begin(), ids.end());
  return ids;
}

ir::Tensor randomInput(ir::Shape shape, uint32_t seed) {
  auto v = randomFloats(static_cast<size_t>(ir::elementCount(shape).value_or(0)), seed);
  return ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), v);
}

// The source graph, evaluated node by node with the kernels (no lowering involved).
ir::Tensor evaluateGraph(const ir::Graph& g, const ir::Tensor& x) {
  return evaluateNodes(g, {{g.inputs[0].name, x}}).at(g.outputs[0].name);
}

// Executes a lowered program (lower_helpers.h).
ir::Tensor executeProgram(const program::Program& p, const weightshare::WeightPool& pool, const ir::Tensor& x) {
  std::vector<ir::Tensor> bound(p.tensors.size());
  auto arena = ir::Tensor::allocate(ir::ElemType::Uint8, {static_cast<int64_t>(p.arenaSize)});
  REQUIRE(arena);
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    const auto& d = p.tensors[t];
    if (d.kind == program::TensorKind::Weight) {
      // The pool keeps a packed weight as its plain source and packs it when the container is written; a
      // float16-widened weight is stored as float16 and widened when loaded, as the runtime does.
      const auto& w = pool.weights()[d.index];
      auto stored = w.layout.plain() ? Expected<ir::Tensor>(w.tensor) : cpu::packWeight(w.layout, w.tensor);
      REQUIRE(stored);
      bound[t] = *stored;
      if (d.layout.kind == cpu::WeightLayoutKind::Float16Widened) {
        REQUIRE(w.tensor.type() == ir::ElemType::Float16);
        auto wide = ir::Tensor::allocate(ir::ElemType::Float, w.tensor.shape());
        REQUIRE(wide);
        for (uint64_t i = 0; i < w.tensor.elementCount(); ++i)
          wide->mutableDataAs<float>()[i] = cpu::halfToFloat(w.tensor.dataAs<uint16_t>()[i]);
        bound[t] = *wide;
      }
    }
    if (d.kind == program::TensorKind::Input) bound[t] = x;
    if (d.kind == program::TensorKind::Arena) {
      REQUIRE(d.offset <= p.arenaSize);
      REQUIRE(d.size <= p.arenaSize - d.offset);
      auto placed = ir::Tensor::mutableView(d.type, program::toShape(d.shape), arena->mutableData() + d.offset, d.size);
      REQUIRE(placed);
      bound[t] = *placed;
    }
    if (d.kind == program::TensorKind::Output || d.kind == program::TensorKind::LoadTime) {
      auto buffer = ir::Tensor::allocate(d.type, program::toShape(d.shape));
      REQUIRE(buffer);
      bound[t] = *buffer;
    }
  }
  for (size_t t = 0; t < p.tensors.size(); ++t)
    if (p.tensors[t].kind == program::TensorKind::View) {
      auto v = bound[p.tensors[t].index].reshaped(program::toShape(p.tensors[t].shape));
      REQUIRE(v);
      bound[t] = *v;
    }
  for (const auto& op : p.ops) {
    // Prepared as the runtime prepares them: weights are constants, packed ones read in their layout.
    std::vector<kernels::ValueDesc> descs;
    std::vector<cpu::WeightLayout> layouts;
    std::vector<const ir::Tensor*> ins;
    std::vector<ir::Tensor*> outs;
    for (int32_t i : op.inputs) {
      ins.push_back(i < 0 ? nullptr : &bound[i]);
      kernels::ValueDesc v;
      v.present = i >= 0;
      if (i >= 0) {
        v.type = p.tensors[i].type;
        v.shape = program::toShape(p.tensors[i].shape);
        // (a load-time tensor is computed, and packed, by the time an op reads it)
        if (p.tensors[i].kind == program::TensorKind::Weight || p.tensors[i].kind == program::TensorKind::LoadTime)
          v.value = &bound[i];
      }
      descs.push_back(v);
      const bool widened = i >= 0 && p.tensors[i].layout.kind == cpu::WeightLayoutKind::Float16Widened;
      layouts.push_back(i >= 0 && !widened ? p.tensors[i].layout : cpu::WeightLayout{});
    }
    for (int32_t o : op.outputs) outs.push_back(&bound[o]);
    const ir::Attributes none;  // a program op has typed attributes only
    kernels::OpContext ctx{op.kind, op.opset, none, op.name, nullptr, &op.typed};
    auto prepared = kernels::prepare(ctx, descs, outs.size(), layouts);
    INFO((prepared ? std::string() : prepared.error().message()));
    REQUIRE(prepared);
    auto s = (*prepared)->run(ins, outs, nullptr);
    INFO((s ? std::string() : s.error().message()));
    REQUIRE(s);
    for (int32_t o : op.outputs)
      if (p.tensors[o].kind == program::TensorKind::LoadTime && !p.tensors[o].layout.plain()) {
        auto packed = cpu::packWeight(p.tensors[o].layout, bound[o]);
        REQUIRE(packed);
        bound[o] = *packed;
      }
  }
  return bound[p.outputs[0]];
}

void requireClose(const ir::Tensor& a, const ir::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  for (uint64_t i = 0; i < a.elementCount(); ++i) {
    float x = a.dataAs<float>()[i], y = b.dataAs<float>()[i];
    INFO("element " << i);
    REQUIRE(std::abs(x - y) <= 1e-4f + 1e-4f * std::abs(y));
  }
}

std::vector<ir::OpKind> Lowered::kinds() const {
  std::vector<ir::OpKind> k;
  for (const auto& op : partition.program.ops) k.push_back(op.kind);
  return k;
}

const ir::PassRun& Lowered::run(const std::string& pass) const {
  auto it = std::find_if(partition.passes.begin(), partition.passes.end(),
                         [&](const ir::PassRun& p) { return p.name == pass; });
  if (it == partition.passes.end()) FAIL("pass " << pass << " did not run");
  return *it;
}

// Lowers all of `g`'s nodes as one partition (even nodes the partitioner would fold), skipping `skip`, computing
// float16 as `float16Compute` says.
std::unique_ptr<Lowered> lowerAll(const ir::Graph& g, std::set<std::string> skip,
                                  partitioner::Float16Compute float16Compute, bool plainWeights,
                                  std::vector<std::string> outside) {
  auto facts = analysis::analyzeGraph(g, {});
  INFO((facts ? std::string() : facts.error().message()));
  REQUIRE(facts);
  partitioner::Partition all;
  for (size_t i : facts->order) {
    // A weightless lowering is given the partition as partitionGraph makes it: without the nodes the analysis folded.
    const auto outs = facts->table.outputsOf(i);
    if (plainWeights && std::all_of(outs.begin(), outs.end(), [&](ir::ValueId o) { return facts->values[o].constant; }))
      continue;
    all.nodes.push_back(i);
  }
  if (outside.empty()) outside.push_back(g.outputs[0].name);
  std::vector<ir::ValueId> usedOutside;
  for (const std::string& name : outside) usedOutside.push_back(facts->table.id(name));
  std::sort(usedOutside.begin(), usedOutside.end());
  auto out = std::make_unique<Lowered>();
  codegen::LowerOptions options;
  options.skipPasses = std::move(skip);
  options.gemmLayout = kPanels32;
  options.float16Compute = float16Compute;
  options.plainWeights = plainWeights;
  auto lowered = codegen::lowerPartition(
      g, *facts, all, usedOutside,
      [&](const ir::Tensor& t, const cpu::WeightLayout& l) { return out->pool.intern(t, l); }, options);
  INFO((lowered ? std::string() : lowered.error().message()));
  REQUIRE(lowered);
  out->partition = std::move(lowered).value();
  return out;
}

// The program's weight tensors by name.
std::map<std::string, program::TensorDesc> weightDescs(const Lowered& l) {
  std::map<std::string, program::TensorDesc> weights;
  for (const auto& t : l.partition.program.tensors)
    if (t.kind == program::TensorKind::Weight) weights[std::string(t.name)] = t;
  return weights;
}

void checkComputesSource(const ir::Graph& g, const Lowered& l, ir::Shape inputShape) {
  ir::Tensor x = randomInput(std::move(inputShape), 42);
  requireClose(executeProgram(l.partition.program, l.pool, x), evaluateGraph(g, x));
}

}  // namespace ctxkit::testing
