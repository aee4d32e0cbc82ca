// Writes a model of the transformer ops ONNX Runtime's exporters and optimizer emit in the com.microsoft domain (and
// SimplifiedLayerNormalization, which ONNX Runtime registers in the ONNX domain), for the ONNX Runtime oracle: inputs
// x and skip [2, 5, 16] float, one output per op and attribute form:
//  - skip_ln / skip_ln_sum: SkipLayerNormalization with beta and bias, and its input_skip_bias_sum output (3)
//  - skip_ln_bcast: SkipLayerNormalization with a [5, 16] skip repeated over the batch, no beta, default epsilon
//  - skip_sln / skip_sln_sum: SkipSimplifiedLayerNormalization (epsilon 1e-6) and its sum
//  - simplified_ln: SimplifiedLayerNormalization (epsilon 1e-6)
//  - gelu, bias_gelu, fast_gelu, fast_gelu_nobias, quick_gelu: com.microsoft's activations (QuickGelu alpha 1.5)
// and, with a second path, a model of MatMulNBits forms on h [2, 3, 100] (K = 100: the last block is partial; N = 37:
// a partial tile): 4-bit blocks of 32 with the default zero point and a bias; 4-bit blocks of 16 with packed zero
// points; 8-bit blocks of 64 with zero points; 4-bit with float zero points; 2-bit blocks of 32;
// 4-bit with g_idx.
// usage: make_transformer_contrib OUT.onnx [NBITS.onnx]
#include "contrib_builder.h"
#include "onnx_io/onnx_io.h"

#include <cstdio>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

ir::Initializer ramp(const std::string& name, ir::Shape shape, float start, float step) {
  std::vector<float> v(static_cast<size_t>(ir::elementCount(shape).value_or(0)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + step * static_cast<float>(i % 23);
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), v), std::nullopt};
}

ir::Node withEpsilon(ir::Node n, float epsilon) {
  n.attrs.set(ir::Attribute::makeFloat("epsilon", epsilon));
  return n;
}

ir::Model transformerContrib() {
  ir::Model m = contribModel("transformer_contrib");
  ir::Graph& g = m.graph;
  g.inputs = {floatValue("x", dims({2, 5, 16})), floatValue("skip", dims({2, 5, 16}))};
  g.initializers = {ramp("gamma", {16}, 0.6f, 0.07f), ramp("beta", {16}, -0.3f, 0.04f),
                    ramp("bias", {16}, -0.5f, 0.05f), ramp("skip2", {5, 16}, -1.0f, 0.09f)};
  auto output = [&](const std::string& name) { g.outputs.push_back(floatValue(name, dims({2, 5, 16}))); };
  g.nodes.push_back(withEpsilon(
      msNode("SkipLayerNormalization", {"x", "skip", "gamma", "beta", "bias"}, {"skip_ln", "", "", "skip_ln_sum"}),
      1e-5f));
  output("skip_ln");
  output("skip_ln_sum");
  g.nodes.push_back(msNode("SkipLayerNormalization", {"x", "skip2", "gamma"}, {"skip_ln_bcast"}));
  output("skip_ln_bcast");
  g.nodes.push_back(withEpsilon(
      msNode("SkipSimplifiedLayerNormalization", {"x", "skip", "gamma"}, {"skip_sln", "", "", "skip_sln_sum"}), 1e-6f));
  output("skip_sln");
  output("skip_sln_sum");
  g.nodes.push_back(withEpsilon(node("SimplifiedLayerNormalization", {"x", "gamma"}, {"simplified_ln"}), 1e-6f));
  output("simplified_ln");
  g.nodes.push_back(msNode("Gelu", {"x"}, {"gelu"}));
  output("gelu");
  g.nodes.push_back(msNode("BiasGelu", {"x", "bias"}, {"bias_gelu"}));
  output("bias_gelu");
  g.nodes.push_back(msNode("FastGelu", {"x", "bias"}, {"fast_gelu"}));
  output("fast_gelu");
  g.nodes.push_back(msNode("FastGelu", {"x"}, {"fast_gelu_nobias"}));
  output("fast_gelu_nobias");
  ir::Node quick = msNode("QuickGelu", {"x"}, {"quick_gelu"});
  quick.attrs.set(ir::Attribute::makeFloat("alpha", 1.5f));
  g.nodes.push_back(quick);
  output("quick_gelu");
  return m;
}

// Deterministic bytes.
std::vector<uint8_t> bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 12345u;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

ir::Model matMulNBits() {
  ir::Model m = contribModel("matmul_nbits");
  ir::Graph& g = m.graph;
  constexpr int64_t K = 100, N = 37;
  g.inputs = {floatValue("h", dims({2, 3, K}))};
  g.initializers.push_back(ramp("nbias", {N}, -0.2f, 0.03f));
  // One MatMulNBits form: its weight codes, scales and the given zero points; `extra` adds inputs after them.
  auto form = [&](const std::string& out, int64_t bits, int64_t block, std::vector<std::string> extraInputs,
                  int64_t accuracy) {
    const int64_t blocks = (K + block - 1) / block, blob = block * bits / 8;
    const uint32_t seed = static_cast<uint32_t>(g.nodes.size() + 1);
    g.initializers.push_back(ir::Initializer{
        out + "_b", ir::Tensor::fromVector(ir::ElemType::Uint8, {N, blocks, blob}, bytes(N * blocks * blob, seed)),
        std::nullopt});
    g.initializers.push_back(ramp(out + "_s", {N * blocks}, 0.01f, 0.002f));
    std::vector<std::string> ins{"h", out + "_b", out + "_s"};
    for (auto& e : extraInputs) ins.push_back(e);
    ir::Node n = msNode("MatMulNBits", ins, {out});
    n.attrs.set(ir::Attribute::makeInt("K", K));
    n.attrs.set(ir::Attribute::makeInt("N", N));
    n.attrs.set(ir::Attribute::makeInt("bits", bits));
    n.attrs.set(ir::Attribute::makeInt("block_size", block));
    if (accuracy) n.attrs.set(ir::Attribute::makeInt("accuracy_level", accuracy));
    g.nodes.push_back(n);
    g.outputs.push_back(floatValue(out, dims({2, 3, N})));
  };
  form("nbits4", 4, 32, {"", "", "nbias"}, 0);
  // Packed 4-bit zero points: ceil(7 blocks / 2) bytes per row.
  g.initializers.push_back(ir::Initializer{
      "zp4", ir::Tensor::fromVector(ir::ElemType::Uint8, {N * 4}, bytes(N * 4, 99)), std::nullopt});
  form("nbits4_zp", 4, 16, {"zp4"}, 0);
  g.initializers.push_back(ir::Initializer{
      "zp8", ir::Tensor::fromVector(ir::ElemType::Uint8, {N * 2}, bytes(N * 2, 7)), std::nullopt});
  form("nbits8_zp", 8, 64, {"zp8"}, 0);
  // Zero points of A's type (ONNX Runtime's unpacked path, which takes 2 and 4 bits only): 4 blocks of 32.
  g.initializers.push_back(ramp("zpf", {N * 4}, 6.5f, 0.25f));
  form("nbits4_fzp", 4, 32, {"zpf"}, 0);
  form("nbits2", 2, 32, {}, 0);
  // Act order: position k takes block (k * 3) mod 4's scale and zero point (4-bit blocks of 32: 4 blocks).
  std::vector<int32_t> groups(K);
  for (int64_t k = 0; k < K; ++k) groups[static_cast<size_t>(k)] = static_cast<int32_t>((k * 3) % 4);
  g.initializers.push_back(
      ir::Initializer{"gidx", ir::Tensor::fromVector(ir::ElemType::Int32, {K}, groups), std::nullopt});
  form("nbits4_gidx", 4, 32, {"", "gidx"}, 0);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: make_transformer_contrib OUT.onnx [NBITS.onnx]\n");
    return 2;
  }
  Status st = onnx_io::saveModel(transformerContrib(), argv[1]);
  if (st && argc == 3) st = onnx_io::saveModel(matMulNBits(), argv[2]);
  if (!st) {
    std::fprintf(stderr, "make_transformer_contrib: %s\n", st.error().message().c_str());
    return 1;
  }
  return 0;
}
