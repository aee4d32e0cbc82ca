// Writes a small CNN whose Concats ctxkit elides (docs/compiler.md#concat-elision), for the ONNX Runtime oracle
// (concat_elision.sh): a fire module (Conv+Relu 1x1 and 3x3 side by side), a DenseNet-style block (each layer reading
// the concatenation of all before it, the block output the concatenation of all) with its transition (Conv,
// AveragePool) into a second block, an Inception-style Concat of four branches nested in an outer Concat, and, as
// copies, a Concat at an axis whose outer product is not 1 and one listing an input twice. One image, 1x3x16x16. usage:
// make_concat_net OUT.onnx
#include "../common/graph_builder.h"
#include "onnx_io/onnx_io.h"

#include <cstdio>
#include <string>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

constexpr int64_t kOpset = 13;

// Deterministic weights in [-0.25, 0.25).
ir::Initializer weight(const std::string& name, ir::Shape shape, size_t seed) {
  std::vector<float> v(static_cast<size_t>(ir::elementCount(shape).value_or(0)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((i * 2654435761u + seed * 40503u) % 1000) / 2000.0f - 0.25f;
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), v), std::nullopt};
}

struct Builder {
  ir::Graph g;
  size_t seeds = 0;

  ir::Node& add(const std::string& type, std::vector<std::string> inputs, std::string output) {
    g.nodes.push_back(node(type, std::move(inputs), {std::move(output)}, kOpset));
    return g.nodes.back();
  }
  // Conv of `in` (`cin` channels) to `cout` channels, k x k, same padding, with a bias.
  std::string conv(const std::string& in, int64_t cin, int64_t cout, int64_t k, const std::string& out) {
    g.initializers.push_back(weight(out + "_w", {cout, cin, k, k}, ++seeds));
    g.initializers.push_back(weight(out + "_b", {cout}, ++seeds));
    ir::Node& n = add("Conv", {in, out + "_w", out + "_b"}, out);
    n.attrs.set(ir::Attribute::makeInts("pads", {k / 2, k / 2, k / 2, k / 2}));
    return out;
  }
  std::string relu(const std::string& in, const std::string& out) {
    add("Relu", {in}, out);
    return out;
  }
  std::string concat(std::vector<std::string> ins, int64_t axis, const std::string& out) {
    ir::Node& n = add("Concat", std::move(ins), out);
    n.attrs.set(ir::Attribute::makeInt("axis", axis));
    return out;
  }
};

ir::Model concatNet() {
  Builder b;
  b.g.name = "concat_net";
  b.g.inputs = {floatValue("x", dims({1, 3, 16, 16}))};
  // Fire: squeeze 1x1 to 8, expand 1x1 and 3x3 to 16 each, side by side.
  std::string s = b.relu(b.conv("x", 3, 8, 1, "sq"), "sq_r");
  std::string e1 = b.relu(b.conv(s, 8, 16, 1, "e1"), "e1_r");
  std::string e3 = b.relu(b.conv(s, 8, 16, 3, "e3"), "e3_r");
  std::string fire = b.concat({e1, e3}, 1, "fire");  // 32 channels
  // Dense block of 3 layers, growth 8, on the fire's output (its x0: an elided Concat's output).
  std::vector<std::string> feats = {fire};
  int64_t channels = 32;
  for (int j = 0; j < 3; ++j) {
    const std::string p = "d" + std::to_string(j);
    std::string in = b.concat(feats, 1, p + "_cat");
    feats.push_back(b.conv(b.relu(in, p + "_r"), channels, 8, 3, p + "_x"));
    channels += 8;
  }
  std::string block = b.concat(feats, 1, "block");  // 56 channels
  // Transition: Relu, 1x1 Conv to 16, 2x2 average pool, into a second block of 2 layers.
  std::string t = b.conv(b.relu(block, "t_r"), channels, 16, 1, "t_c");
  ir::Node& pool = b.add("AveragePool", {t}, "t_p");
  pool.attrs.set(ir::Attribute::makeInts("kernel_shape", {2, 2}));
  pool.attrs.set(ir::Attribute::makeInts("strides", {2, 2}));
  feats = {"t_p"};
  channels = 16;
  for (int j = 0; j < 2; ++j) {
    const std::string p = "f" + std::to_string(j);
    std::string in = b.concat(feats, 1, p + "_cat");
    feats.push_back(b.conv(b.relu(in, p + "_r"), channels, 16, 3, p + "_x"));
    channels += 16;
  }
  std::string block2 = b.concat(feats, 1, "block2");  // 48 channels, 8x8
  // Inception: four branches (a MaxPool branch among them), nested in an outer Concat with a fifth.
  std::string i1 = b.relu(b.conv(block2, 48, 16, 1, "i1"), "i1_r");
  std::string i2 = b.relu(b.conv(b.relu(b.conv(block2, 48, 8, 1, "i2a"), "i2a_r"), 8, 16, 3, "i2"), "i2_r");
  ir::Node& mp = b.add("MaxPool", {block2}, "i3_p");
  mp.attrs.set(ir::Attribute::makeInts("kernel_shape", {3, 3}));
  mp.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
  std::string i3 = b.relu(b.conv("i3_p", 48, 16, 1, "i3"), "i3_r");
  std::string i4 = b.conv(block2, 48, 16, 3, "i4");
  std::string inception = b.concat({i1, i2, i3, i4}, 1, "inception");  // 64 channels
  std::string i5 = b.conv(block2, 48, 16, 1, "i5");
  std::string outer = b.concat({inception, i5}, 1, "outer");  // 80 channels, 8x8
  // Copies: along the rows (outer product 80), and an input twice.
  std::string rows = b.concat({outer, b.relu(outer, "o_r")}, 2, "rows");  // 1x80x16x8
  std::string twice = b.concat({i5, i5}, 1, "twice");                     // 1x32x8x8
  ir::Node& avg = b.add("ReduceMean", {rows}, "rows_m");
  avg.attrs.set(ir::Attribute::makeInts("axes", {2, 3}));
  ir::Node& avg2 = b.add("ReduceMean", {twice}, "twice_m");
  avg2.attrs.set(ir::Attribute::makeInts("axes", {2, 3}));
  b.concat({"rows_m", "twice_m"}, 1, "y");  // 1x112x1x1, a program output
  b.g.outputs = {floatValue("y", dims({1, 112, 1, 1}))};
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", kOpset}};
  m.graph = std::move(b.g);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_concat_net OUT.onnx\n");
    return 2;
  }
  Status st = onnx_io::saveModel(concatNet(), argv[1]);
  if (!st) {
    std::fprintf(stderr, "make_concat_net: %s\n", st.error().message().c_str());
    return 1;
  }
  return 0;
}
