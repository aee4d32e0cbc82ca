// Rewrites a float model the way ONNX Runtime's dynamic quantizer (quantize_dynamic) does, for the oracle's checks
// of dynamically quantized nets: every Conv whose weight is a float constant becomes
//   DynamicQuantizeLinear(x) -> ConvInteger(x_q, W_q uint8, x_zero, W_zero) -> Cast(float) -> Mul(x_scale * W_scale)
//   [-> Add(bias as [1, M, 1, ...])]
// with W quantized to uint8 per tensor, asymmetric (ONNX Runtime's CPU ConvInteger takes uint8 weights), and every
// MatMul by a 2-D float constant becomes the same chain through MatMulInteger with W quantized to int8, symmetric (zero
// point 0, the quantizer's default for int8 weights). A value that several such ops read is quantized once. The
// weight codes follow the quantizer's rule: scale (max - min) / 255 (or max |W| / 127) over a range that holds 0, codes
// rounded half to even. With --expose, the float result of the last rewritten op is also a graph output, so that the
// oracle can compare the quantized pipeline itself bit for bit (a float reduction after it may differ in the last ulp).
// The quantizer's other MatMul weight forms: --per-channel (per_channel=True: one scale, and zero point, per column of
// W, the quantizer's axis 1) and --uint8-weights (weight_type=QUInt8, its default before 1.16: uint8 asymmetric, so
// the zero points are not 0). Conv weights stay per tensor uint8 either way: ONNX Runtime's CPU ConvInteger takes only
// a scalar weight zero point.
// Prints "conv N matmul M kept K weight_bytes B exposed NAME" (K: Conv and MatMul ops left float, such as products of
// two activations).
// usage: make_dynamic_quant IN.onnx OUT.onnx [--expose] [--per-channel] [--uint8-weights]
#include "onnx_io/onnx_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>

using namespace ctxkit;

namespace {

struct Quantized {
  ir::Tensor codes, scale, zero;
};

// uint8 asymmetric or int8 symmetric codes of a float weight: per tensor, or (perColumn) per column of a 2-D weight,
// each column's range holding 0; codes rounded half to even.
Quantized quantize(const ir::Tensor& w, bool asUint8, bool perColumn) {
  const float* x = w.dataAs<float>();
  const auto n = static_cast<size_t>(w.elementCount());
  const size_t columns = perColumn ? static_cast<size_t>(w.shape()[1]) : 1;
  std::vector<float> lo(columns, 0.0f), hi(columns, 0.0f), scale(columns, 1.0f), zero(columns, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    const size_t c = i % columns;
    lo[c] = std::min(lo[c], x[i]), hi[c] = std::max(hi[c], x[i]);
  }
  for (size_t c = 0; c < columns; ++c) {
    if (asUint8) {
      if (hi[c] > lo[c]) scale[c] = (hi[c] - lo[c]) / 255.0f;
      zero[c] = std::clamp(std::nearbyint(-lo[c] / scale[c]), 0.0f, 255.0f);
    } else if (const float m = std::max(hi[c], -lo[c]); m > 0) {
      scale[c] = m / 127.0f;
    }
  }
  const ir::ElemType type = asUint8 ? ir::ElemType::Uint8 : ir::ElemType::Int8;
  Quantized q;
  q.codes = ir::Tensor::allocate(type, w.shape()).value();
  for (size_t i = 0; i < n; ++i) {
    const size_t c = i % columns;
    const float v = std::nearbyint(x[i] / scale[c]) + zero[c];
    if (asUint8) q.codes.mutableDataAs<uint8_t>()[i] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
    else q.codes.mutableDataAs<int8_t>()[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
  }
  const ir::Shape shape = perColumn ? ir::Shape{static_cast<int64_t>(columns)} : ir::Shape{};
  q.scale = ir::Tensor::fromVector(ir::ElemType::Float, shape, scale);
  std::vector<uint8_t> codes(columns);
  for (size_t c = 0; c < columns; ++c)
    codes[c] = asUint8 ? static_cast<uint8_t>(zero[c]) : uint8_t{0};  // int8 zero points are all 0: same bytes
  q.zero = ir::Tensor::fromVector(type, shape, codes);
  return q;
}

ir::Node make(const std::string& op, const std::string& name, std::vector<std::string> ins,
              std::vector<std::string> outs) {
  ir::Node n;
  n.opType = op;
  n.name = name;
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_dynamic_quant IN.onnx OUT.onnx [--expose] [--per-channel] [--uint8-weights]\n");
    return 2;
  }
  bool expose = false, perChannel = false, uint8Weights = false;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--expose") == 0) expose = true;
    else if (std::strcmp(argv[i], "--per-channel") == 0) perChannel = true;
    else if (std::strcmp(argv[i], "--uint8-weights") == 0) uint8Weights = true;
    else {
      std::fprintf(stderr, "make_dynamic_quant: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  auto loaded = onnx_io::loadModel(argv[1]);
  if (!loaded) {
    std::fprintf(stderr, "make_dynamic_quant: %s\n", loaded.error().message().c_str());
    return 1;
  }
  ir::Model model = std::move(*loaded);
  ir::Graph& g = model.graph;
  std::map<std::string, const ir::Tensor*> constants;
  for (const ir::Initializer& init : g.initializers) constants[init.name] = &init.tensor;
  // The exporter writes a weight equal to another as an Identity of it.
  for (const ir::Node& n : g.nodes)
    if (n.opType == "Identity" && n.inputs.size() == 1 && constants.count(n.inputs[0]) != 0)
      constants[n.outputs[0]] = constants[n.inputs[0]];
  std::vector<ir::Initializer> added;
  std::map<std::string, std::string> quantizedInput;  // float value -> prefix of its DynamicQuantizeLinear outputs
  std::vector<ir::Node> nodes;
  size_t convs = 0, matmuls = 0, kept = 0;  // kept: Conv and MatMul left float (no constant float weight)
  uint64_t weightBytes = 0;
  std::string last;
  for (ir::Node& n : g.nodes) {
    const bool conv = n.opType == "Conv" && n.domain.empty() && n.inputs.size() >= 2;
    const bool matmul = n.opType == "MatMul" && n.domain.empty() && n.inputs.size() == 2;
    auto w = (conv || matmul) ? constants.find(n.inputs[1]) : constants.end();
    if (w == constants.end() || w->second->type() != ir::ElemType::Float || (matmul && w->second->rank() != 2)) {
      if (conv || matmul) ++kept;
      nodes.push_back(std::move(n));
      continue;
    }
    const std::string& x = n.inputs[0];
    const std::string base = n.outputs[0];
    auto [q, fresh] = quantizedInput.emplace(x, x + "_dq");
    if (fresh)
      nodes.push_back(make("DynamicQuantizeLinear", x + "_DynamicQuantizeLinear", {x},
                           {q->second + "_q", q->second + "_scale", q->second + "_zero"}));
    Quantized wq = quantize(*w->second, conv || uint8Weights, matmul && perChannel);
    weightBytes += wq.codes.byteSize();
    const std::string wn = n.inputs[1] + "_quantized";
    added.push_back({wn, std::move(wq.codes), std::nullopt});
    added.push_back({wn + "_scale", std::move(wq.scale), std::nullopt});
    added.push_back({wn + "_zero", std::move(wq.zero), std::nullopt});
    ir::Node integer = make(conv ? "ConvInteger" : "MatMulInteger", n.name + "_quant",
                            {q->second + "_q", wn, q->second + "_zero", wn + "_zero"}, {base + "_int32"});
    if (conv) integer.attrs = n.attrs;
    nodes.push_back(std::move(integer));
    ir::Node cast = make("Cast", n.name + "_cast", {base + "_int32"}, {base + "_cast"});
    cast.attrs.set(ir::Attribute::makeInt("to", 1));
    nodes.push_back(std::move(cast));
    nodes.push_back(make("Mul", n.name + "_scales_mul", {q->second + "_scale", wn + "_scale"}, {base + "_scales"}));
    const bool bias = conv && n.inputs.size() > 2 && !n.inputs[2].empty();
    nodes.push_back(make("Mul", n.name + "_output_scale_mul", {base + "_cast", base + "_scales"},
                         {bias ? base + "_scaled" : base}));
    if (bias) {
      auto b = constants.find(n.inputs[2]);
      if (b == constants.end()) {
        std::fprintf(stderr, "make_dynamic_quant: %s: the bias %s is not a constant\n", n.name.c_str(), n.inputs[2].c_str());
        return 1;
      }
      ir::Shape shape(w->second->rank(), 1);
      shape[1] = b->second->elementCount();
      ir::Tensor reshaped = ir::Tensor::allocate(ir::ElemType::Float, shape).value();
      std::memcpy(reshaped.mutableData(), b->second->data(), b->second->byteSize());
      added.push_back({n.inputs[2] + "_reshaped", std::move(reshaped), std::nullopt});
      nodes.push_back(make("Add", n.name + "_bias_add", {base + "_scaled", n.inputs[2] + "_reshaped"}, {base}));
    }
    ++(conv ? convs : matmuls);
    last = base;
  }
  g.nodes = std::move(nodes);
  for (ir::Initializer& init : added) g.initializers.push_back(std::move(init));
  // Weights no node reads any more are dropped, as the quantizer drops them.
  std::set<std::string> read;
  for (const ir::Node& n : g.nodes) ir::collectNodeReads(n, read);
  std::erase_if(g.initializers, [&](const ir::Initializer& i) { return read.count(i.name) == 0; });
  if (expose && !last.empty()) {
    ir::ValueInfo v;
    v.name = last;
    v.type = ir::ElemType::Float;
    g.outputs.push_back(v);
  }
  for (ir::OpsetImport& o : model.opsets)
    if (o.domain.empty()) o.version = std::max<int64_t>(o.version, 11);
  if (Status s = onnx_io::saveModel(model, argv[2]); !s.isOk()) {
    std::fprintf(stderr, "make_dynamic_quant: %s\n", s.error().message().c_str());
    return 1;
  }
  std::printf("conv %zu matmul %zu kept %zu weight_bytes %llu exposed %s\n", convs, matmuls, kept,
              static_cast<unsigned long long>(weightBytes), expose && !last.empty() ? last.c_str() : "-");
  return convs + matmuls > 0 ? 0 : 1;
}
