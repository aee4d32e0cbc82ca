// Float16 models for the ONNX Runtime oracle.
// usage: make_fp16 IN.onnx OUT.onnx [--round VALUE[:READER]...]
//   A float16 version of a float32 model: every float32 initializer, Constant value and graph input/output/value_info
//   becomes float16 (the way converters make half-precision models). Each --round value is then rounded to float16
//   explicitly, for all its readers or for node READER only: a Cast to float32 and a Cast back to float16 (nothing to
//   ONNX, where the value is float16 already; a rounding to a target that keeps float16 values as float32).
// usage: make_fp16 --explicit-casts OUT.onnx
//   A float16 graph with a float32 island in the middle, written with explicit Casts, and float16 Resize, Softmax and
//   LayerNormalization (opset 17), where a target computing float16 in float32 must round exactly at the explicit
//   Casts to float16 and at the outputs:
//     x [1, 4, 6, 6] -> Resize (linear, x2) -> Mul (per channel) -> Cast to float32 -> Mul 1.37 -> Cast to float16
//     (output `rounded`, also read on) -> Cast to float32 -> Add (float32 bias) -> Cast to float16 -> Reshape
//     [1, 4, 144] -> Softmax -> Mul 7 -> LayerNormalization -> Add (the Softmax product) -> output `y`.
#include "../common/graph_builder.h"
#include "cpu/convert.h"
#include "onnx_io/onnx_io.h"

#include <cstdio>
#include <cstring>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

ir::Tensor toHalf(const ir::Tensor& t) {
  if (t.type() != ir::ElemType::Float) return t;
  auto half = ir::Tensor::allocate(ir::ElemType::Float16, t.shape()).value();
  for (uint64_t i = 0; i < t.elementCount(); ++i) half.mutableDataAs<uint16_t>()[i] = cpu::floatToHalf(t.dataAs<float>()[i]);
  return half;
}

void convertGraph(ir::Graph& g) {
  for (auto& init : g.initializers) init.tensor = toHalf(init.tensor);
  for (auto* list : {&g.inputs, &g.outputs, &g.valueInfo})
    for (auto& v : *list)
      if (v.type == ir::ElemType::Float) v.type = ir::ElemType::Float16;
  for (auto& n : g.nodes) {
    std::vector<ir::Attribute> attrs = n.attrs.all();
    for (auto& a : attrs) {
      if (a.type == ir::AttrType::Tensor) a.t = toHalf(a.t);
      if (a.type == ir::AttrType::Graph && a.g) convertGraph(*a.g);
      n.attrs.set(a);
    }
  }
}

ir::ValueInfo halfValue(const std::string& name, std::vector<ir::Dim> shape) {
  ir::ValueInfo v = floatValue(name, std::move(shape));
  v.type = ir::ElemType::Float16;
  return v;
}

// n values from a fixed sequence in [lo, hi], as float32 or (`half`) float16.
ir::Initializer values(const std::string& name, ir::Shape shape, float lo, float hi, bool half) {
  const auto n = static_cast<size_t>(ir::elementCount(shape).value_or(0));
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * static_cast<float>((i * 37 + 11) % 101) / 100.0f;
  ir::Tensor t = ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), v);
  return ir::Initializer{name, half ? toHalf(t) : t, std::nullopt};
}

ir::Node cast(const std::string& in, const std::string& out, ir::ElemType to) {
  ir::Node n = node("Cast", {in}, {out});
  n.attrs.set(ir::Attribute::makeInt("to", static_cast<int64_t>(to)));
  return n;
}

// Rounds `value` to float16 explicitly for node `reader` (every reader when empty), right after its producer.
void roundExplicitly(ir::Graph& g, const std::string& value, const std::string& reader) {
  const std::string wide = value + "/round_float32", rounded = value + "/round_float16";
  size_t at = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs)
      if (o == value) at = i + 1;
  for (auto& n : g.nodes) {
    if (!reader.empty() && n.name != reader) continue;
    for (auto& in : n.inputs)
      if (in == value) in = rounded;
  }
  ir::Node up = cast(value, wide, ir::ElemType::Float), down = cast(wide, rounded, ir::ElemType::Float16);
  up.name = value + "/round_up";
  down.name = value + "/round_down";
  g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(at), {up, down});
}

ir::Model explicitCasts() {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  ir::Graph& g = m.graph;
  g.name = "fp16_explicit_casts";
  g.inputs = {halfValue("x", dims({1, 4, 6, 6}))};
  g.outputs = {halfValue("y", dims({1, 4, 144})), halfValue("rounded", dims({1, 4, 12, 12}))};
  const std::vector<int64_t> shape = {1, 4, 144};
  g.initializers = {
      ir::Initializer{"roi", ir::Tensor::fromVector(ir::ElemType::Float, {0}, std::vector<float>{}), std::nullopt},
      ir::Initializer{"scales", ir::Tensor::fromVector(ir::ElemType::Float, {4}, std::vector<float>{1, 1, 2, 2}),
                      std::nullopt},
      values("channel_scale", {4, 1, 1}, -2.5f, 2.5f, true),
      ir::Initializer{"k", ir::Tensor::fromVector(ir::ElemType::Float, {}, std::vector<float>{1.37f}), std::nullopt},
      values("bias", {12}, -0.3f, 0.3f, false),
      ir::Initializer{"shape", ir::Tensor::fromVector(ir::ElemType::Int64, {3}, shape), std::nullopt},
      ir::Initializer{"seven", toHalf(ir::Tensor::fromVector(ir::ElemType::Float, {}, std::vector<float>{7.0f})),
                      std::nullopt},
      values("gamma", {144}, 0.5f, 1.5f, true),
      values("beta", {144}, -0.2f, 0.2f, true),
  };
  ir::Node resize = node("Resize", {"x", "roi", "scales"}, {"resized"});
  resize.attrs.set(ir::Attribute::makeString("mode", "linear"));
  ir::Node softmax = node("Softmax", {"flat"}, {"probs"});
  softmax.attrs.set(ir::Attribute::makeInt("axis", -1));
  ir::Node norm = node("LayerNormalization", {"spread", "gamma", "beta"}, {"normed"});
  norm.attrs.set(ir::Attribute::makeInt("axis", -1));
  norm.attrs.set(ir::Attribute::makeFloat("epsilon", 1e-5f));
  const auto f16 = ir::ElemType::Float16, f32 = ir::ElemType::Float;
  g.nodes = {resize,
             node("Mul", {"resized", "channel_scale"}, {"scaled"}),
             cast("scaled", "scaled32", f32),
             node("Mul", {"scaled32", "k"}, {"times_k"}),
             cast("times_k", "rounded", f16),
             cast("rounded", "rounded32", f32),
             node("Add", {"rounded32", "bias"}, {"shifted"}),
             cast("shifted", "shifted16", f16),
             node("Reshape", {"shifted16", "shape"}, {"flat"}),
             softmax,
             node("Mul", {"probs", "seven"}, {"spread"}),
             norm,
             node("Add", {"normed", "spread"}, {"y"})};
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--explicit-casts") == 0) {
    if (Status st = onnx_io::saveModel(explicitCasts(), argv[2]); !st) {
      std::fprintf(stderr, "make_fp16: %s\n", st.error().message().c_str());
      return 1;
    }
    return 0;
  }
  if (argc < 3 || (argc > 3 && std::strcmp(argv[3], "--round") != 0) || argc == 4) {
    std::fprintf(stderr,
                 "usage: make_fp16 IN.onnx OUT.onnx [--round VALUE[:READER]...] | make_fp16 --explicit-casts OUT.onnx\n");
    return 2;
  }
  auto model = onnx_io::loadModel(argv[1]);
  if (!model) {
    std::fprintf(stderr, "make_fp16: %s\n", model.error().message().c_str());
    return 1;
  }
  convertGraph(model->graph);
  for (int a = 4; a < argc; ++a) {
    const std::string spec = argv[a];
    const auto colon = spec.find(':');
    roundExplicitly(model->graph, spec.substr(0, colon), colon == std::string::npos ? "" : spec.substr(colon + 1));
  }
  if (auto s = onnx_io::saveModel(*model, argv[2]); !s) {
    std::fprintf(stderr, "make_fp16: %s\n", s.error().message().c_str());
    return 1;
  }
  return 0;
}
