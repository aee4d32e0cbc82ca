// Writes a model of the transformer ops ONNX Runtime's exporters and optimizer emit in the com.microsoft domain (and
// SimplifiedLayerNormalization, which ONNX Runtime registers in the ONNX domain), for the ONNX Runtime oracle: inputs
// x and skip [2, 5, 16] float, one output per op and attribute form:
//  - skip_ln / skip_ln_sum: SkipLayerNormalization with beta and bias, and its input_skip_bias_sum output (3)
//  - skip_ln_bcast: SkipLayerNormalization with a [5, 16] skip repeated over the batch, no beta, default epsilon
//  - skip_sln / skip_sln_sum: SkipSimplifiedLayerNormalization (epsilon 1e-6) and its sum
//  - simplified_ln: SimplifiedLayerNormalization (epsilon 1e-6)
//  - gelu, bias_gelu, fast_gelu, fast_gelu_nobias, quick_gelu: com.microsoft's activations (QuickGelu alpha 1.5)
// usage: make_transformer_contrib OUT.onnx
#include "../common/graph_builder.h"
#include "onnx_io/onnx_io.h"

#include <cstdio>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

constexpr const char* kMs = "com.microsoft";

ir::Initializer ramp(const std::string& name, ir::Shape shape, float start, float step) {
  std::vector<float> v(static_cast<size_t>(ir::elementCount(shape).value_or(0)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + step * static_cast<float>(i % 23);
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), v), std::nullopt};
}

ir::Node msNode(const std::string& opType, std::vector<std::string> inputs, std::vector<std::string> outputs) {
  ir::Node n = node(opType, std::move(inputs), std::move(outputs), 1);
  n.domain = kMs;
  n.kind = ir::opKindFromName(kMs, opType);
  return n;
}

ir::Node withEpsilon(ir::Node n, float epsilon) {
  n.attrs.set(ir::Attribute::makeFloat("epsilon", epsilon));
  return n;
}

ir::Model transformerContrib() {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}, {kMs, 1}};
  ir::Graph& g = m.graph;
  g.name = "transformer_contrib";
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_transformer_contrib OUT.onnx\n");
    return 2;
  }
  if (Status st = onnx_io::saveModel(transformerContrib(), argv[1]); !st) {
    std::fprintf(stderr, "make_transformer_contrib: %s\n", st.error().message().c_str());
    return 1;
  }
  return 0;
}
