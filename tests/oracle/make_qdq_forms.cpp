// Writes a QDQ model in the forms other quantizers write (not the ones ctxkit's own samples use), for the ONNX
// Runtime oracle: x [4, 3, 8, 8] float -> QuantizeLinear (uint8) -> DequantizeLinear, then four branches, each
// ending in QuantizeLinear -> DequantizeLinear to an output of its own:
//  - conv_relu: Conv (int8 weight per output channel, a float32 bias) -> Relu
//  - conv_clip: Conv (int8 weight per tensor, an int32 bias in x_scale x w_scale units) -> Clip(0, 6)
//  - gemm: Flatten -> Gemm (transB, int8 [N, K] weight per output channel, a float32 bias)
//  - matmul_add_relu: Flatten -> MatMul (int8 [K, N] weight per column) -> Add (float32 bias) -> Relu
// Weights are at most 63 in magnitude, so that no pair of uint8 x int8 products exceeds int16 (ONNX Runtime's AVX2
// int8 GEMM adds them in saturating 16-bit pairs) and ONNX Runtime's results are exact.
// usage: make_qdq_forms OUT.onnx
#include "../common/graph_builder.h"
#include "onnx_io/onnx_io.h"

#include <cstdio>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

template <typename T> ir::Initializer init(const std::string& name, ir::ElemType type, ir::Shape shape, std::vector<T> v) {
  return ir::Initializer{name, ir::Tensor::fromVector(type, std::move(shape), v), std::nullopt};
}

// Deterministic weights in [-63, 63].
std::vector<int8_t> weights(size_t n, int seed) {
  std::vector<int8_t> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = static_cast<int8_t>(static_cast<int>((i * 37 + seed * 11) % 127) - 63);
  return w;
}

// n values from `start` in steps of `step`.
std::vector<float> ramp(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

ir::Node withInt(ir::Node n, const char* name, int64_t v) {
  n.attrs.set(ir::Attribute::makeInt(name, v));
  return n;
}

ir::Model qdqForms() {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  ir::Graph& g = m.graph;
  g.name = "qdq_forms";
  g.inputs.push_back(floatValue("x", dims({4, 3, 8, 8})));
  const float xs = 2.0f / 255.0f, ys = 0.05f;
  g.initializers = {
      init("xs", ir::ElemType::Float, {}, std::vector<float>{xs}),
      init("xz", ir::ElemType::Uint8, {}, std::vector<uint8_t>{128}),
      init("ys", ir::ElemType::Float, {}, std::vector<float>{ys}),
      init("yz", ir::ElemType::Uint8, {}, std::vector<uint8_t>{128}),
      init("six", ir::ElemType::Float, {}, std::vector<float>{6.0f}),
      init("zero", ir::ElemType::Float, {}, std::vector<float>{0.0f}),
      // conv_relu
      init("w1", ir::ElemType::Int8, {4, 3, 3, 3}, weights(4 * 3 * 3 * 3, 1)),
      init("w1s", ir::ElemType::Float, {4}, std::vector<float>{0.004f, 0.007f, 0.002f, 0.005f}),
      init("b1", ir::ElemType::Float, {4}, std::vector<float>{0.1f, -0.3f, 0.05f, 0.0f}),
      // conv_clip
      init("w2", ir::ElemType::Int8, {2, 3, 1, 1}, weights(2 * 3, 2)),
      init("w2s", ir::ElemType::Float, {}, std::vector<float>{0.02f}),
      init("b2", ir::ElemType::Int32, {2}, std::vector<int32_t>{1500, -700}),
      init("b2s", ir::ElemType::Float, {}, std::vector<float>{xs * 0.02f}),
      // gemm
      init("w3", ir::ElemType::Int8, {5, 192}, weights(5 * 192, 3)),
      init("w3s", ir::ElemType::Float, {5}, ramp(5, 0.003f, 0.0015f)),
      init("b3", ir::ElemType::Float, {5}, ramp(5, 0.2f, -0.1f)),
      // matmul_add_relu
      init("w4", ir::ElemType::Int8, {192, 6}, weights(192 * 6, 4)),
      init("w4s", ir::ElemType::Float, {6}, ramp(6, 0.0035f, 0.001f)),
      init("b4", ir::ElemType::Float, {6}, ramp(6, -0.1f, 0.08f)),
  };
  auto qdq = [&](const std::string& in, const std::string& out, std::vector<ir::Dim> shape) {
    g.nodes.push_back(node("QuantizeLinear", {in, "ys", "yz"}, {out + "_q"}));
    g.nodes.push_back(node("DequantizeLinear", {out + "_q", "ys", "yz"}, {out}));
    g.outputs.push_back(floatValue(out, std::move(shape)));
  };
  g.nodes.push_back(node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}));
  g.nodes.push_back(node("DequantizeLinear", {"xq", "xs", "xz"}, {"xf"}));
  g.nodes.push_back(withInt(node("DequantizeLinear", {"w1", "w1s"}, {"w1f"}), "axis", 0));
  ir::Node conv1 = node("Conv", {"xf", "w1f", "b1"}, {"c1"});
  conv1.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
  g.nodes.push_back(conv1);
  g.nodes.push_back(node("Relu", {"c1"}, {"r1"}));
  qdq("r1", "conv_relu", dims({4, 4, 8, 8}));
  g.nodes.push_back(node("DequantizeLinear", {"w2", "w2s"}, {"w2f"}));
  g.nodes.push_back(node("DequantizeLinear", {"b2", "b2s"}, {"b2f"}));
  g.nodes.push_back(node("Conv", {"xf", "w2f", "b2f"}, {"c2"}));
  g.nodes.push_back(node("Clip", {"c2", "zero", "six"}, {"r2"}));
  qdq("r2", "conv_clip", dims({4, 2, 8, 8}));
  g.nodes.push_back(node("Flatten", {"xf"}, {"flat"}));
  g.nodes.push_back(withInt(node("DequantizeLinear", {"w3", "w3s"}, {"w3f"}), "axis", 0));
  g.nodes.push_back(withInt(node("Gemm", {"flat", "w3f", "b3"}, {"g3"}), "transB", 1));
  qdq("g3", "gemm", dims({4, 5}));
  g.nodes.push_back(node("Flatten", {"xf"}, {"flat4"}));
  g.nodes.push_back(withInt(node("DequantizeLinear", {"w4", "w4s"}, {"w4f"}), "axis", 1));
  g.nodes.push_back(node("MatMul", {"flat4", "w4f"}, {"m4"}));
  g.nodes.push_back(node("Add", {"m4", "b4"}, {"a4"}));
  g.nodes.push_back(node("Relu", {"a4"}, {"r4"}));
  qdq("r4", "matmul_add_relu", dims({4, 6}));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_qdq_forms OUT.onnx\n");
    return 2;
  }
  if (Status st = onnx_io::saveModel(qdqForms(), argv[1]); !st) {
    std::fprintf(stderr, "make_qdq_forms: %s\n", st.error().message().c_str());
    return 1;
  }
  return 0;
}
