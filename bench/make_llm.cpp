// Writes a synthetic LLM-sized model for bench/llm_scale.sh (issue 11 item 7): LAYERS residual MLP blocks over
// x [1, seq, HIDDEN] with a symbolic sequence length, float32 weights in ONNX external data (LAYERS x 2 x HIDDEN x
// FF x 4 bytes: 32 x 2 x 1024 x 4096 x 4 = 1 GiB by default). usage: make_llm OUT.onnx [LAYERS [HIDDEN [FF]]]
#include "onnx_io/onnx_io.h"
#include "samples/prng.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

using namespace ctxkit;

namespace {

ir::Node makeNode(const std::string& op, std::vector<std::string> inputs, const std::string& output) {
  ir::Node n;
  n.name = output;
  n.opType = op;
  n.kind = ir::opKindFromName("", op);
  n.opset = 17;
  n.inputs = std::move(inputs);
  n.outputs = {output};
  return n;
}

ir::Initializer weight(const std::string& name, int64_t rows, int64_t cols, uint64_t seed) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(rows));  // keeps activations bounded through the layers
  auto values = samples::SplitMix64(seed).uniformVector(static_cast<size_t>(rows * cols), -scale, scale);
  return {name, ir::Tensor::fromVector(ir::ElemType::Float, {rows, cols}, values), std::nullopt};
}

ir::Model makeLlm(int64_t layers, int64_t hidden, int64_t ff) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  m.producerName = "ctxkit bench/make_llm";
  ir::Graph& g = m.graph;
  g.name = "synthetic_llm";
  const std::vector<ir::Dim> io{ir::Dim::known(1), ir::Dim::named("seq"), ir::Dim::known(hidden)};
  g.inputs = {ir::ValueInfo{"x", ir::ElemType::Float, io, ""}};
  g.outputs = {ir::ValueInfo{"y", ir::ElemType::Float, io, ""}};
  std::string h = "x";
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    g.initializers.push_back(weight(p + "up", hidden, ff, 1000 + 2 * static_cast<uint64_t>(l)));
    g.initializers.push_back(weight(p + "down", ff, hidden, 1001 + 2 * static_cast<uint64_t>(l)));
    g.nodes.push_back(makeNode("MatMul", {h, p + "up"}, p + "up_out"));
    g.nodes.push_back(makeNode("Relu", {p + "up_out"}, p + "act"));
    g.nodes.push_back(makeNode("MatMul", {p + "act", p + "down"}, p + "down_out"));
    const std::string next = l + 1 == layers ? "y" : p + "out";
    g.nodes.push_back(makeNode("Add", {h, p + "down_out"}, next));
    h = next;
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 5) {
    std::fprintf(stderr, "usage: make_llm OUT.onnx [LAYERS [HIDDEN [FF]]]\n");
    return 2;
  }
  const int64_t layers = argc > 2 ? std::atoll(argv[2]) : 32, hidden = argc > 3 ? std::atoll(argv[3]) : 1024,
                ff = argc > 4 ? std::atoll(argv[4]) : 4096;
  if (layers < 1 || hidden < 1 || ff < 1) {
    std::fprintf(stderr, "make_llm: LAYERS, HIDDEN and FF must be positive\n");
    return 2;
  }
  const std::filesystem::path out = argv[1];
  const std::string data = out.filename().string() + ".data";
  if (auto s = onnx_io::saveModelWithExternalData(makeLlm(layers, hidden, ff), out, data, 1024); !s) {
    std::fprintf(stderr, "make_llm: %s\n", s.error().message().c_str());
    return 1;
  }
  std::printf("wrote %s and %s (%lld layers, hidden %lld, ff %lld: %lld weight bytes)\n", out.string().c_str(),
              data.c_str(), static_cast<long long>(layers), static_cast<long long>(hidden), static_cast<long long>(ff),
              static_cast<long long>(layers * 2 * hidden * ff * 4));
  return 0;
}
