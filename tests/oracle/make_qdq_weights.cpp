// Writes a weight-only quantized model (float activations, weights behind DequantizeLinear, no QuantizeLinear), for
// the ONNX Runtime oracle: no integer op takes these weights, so the compiler keeps them quantized in the context
// binary and the runtime dequantizes them once at load. Opset 21 (int4 DequantizeLinear). Outputs, one per form:
//  - matmul_pc:     a [8, 128] x DQ(int8 [128, 96], per column, int8 zero points)
//  - matmul_add:    a [8, 128] x DQ(uint8 [128, 80], per tensor, zero point 131) + bias [80] (a Gemm on load-time B)
//  - matmul_t:      a [8, 128] x Transpose(DQ(int8 [64, 128], per row, no zero point)) (an op after the DQ, at load)
//  - matmul_int4:   a [8, 128] x DQ(int4 [128, 64], per column, int4 zero points)
//  - gather_u8:     Gather(DQ(uint8 table [256, 64], per tensor, zero point 128), ids x 61 + 7)
//  - conv_pc:       Conv(x [1, 8, 16, 16], DQ(int8 [32, 8, 3, 3], per output channel), float bias), pads 1
//  - convt_u8:      ConvTranspose(x, DQ(uint8 [8, 16, 4, 4], per tensor, zero point 120)), stride 2, pads 1
// The quantized weights total QUANTIZED_BYTES bytes (printed on stdout) for the oracle's size check.
// usage: make_qdq_weights OUT.onnx [FORM...]   (only the named forms; all by default)
#include "../common/graph_builder.h"
#include "onnx_io/onnx_io.h"

#include <cstdio>
#include <set>
#include <string>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

constexpr int64_t kOpset = 21;

uint64_t quantizedBytes = 0;  // of the weights DequantizeLinear takes (their codes, not scales or zero points)

template <typename T>
ir::Initializer init(const std::string& name, ir::ElemType type, ir::Shape shape, std::vector<T> v) {
  return ir::Initializer{name, ir::Tensor::fromVector(type, std::move(shape), v), std::nullopt};
}

// A deterministic code for element i of a weight, in [lo, hi].
int code(size_t i, int seed, int lo, int hi) {
  const int span = hi - lo + 1;
  return lo +
         static_cast<int>((i * 7919 + static_cast<size_t>(seed) * 104729 + (i >> 3) * 31) % static_cast<size_t>(span));
}

template <typename T>
ir::Initializer codes(const std::string& name, ir::ElemType type, ir::Shape shape, int seed, int lo, int hi) {
  std::vector<T> v(static_cast<size_t>(ir::elementCount(shape).value_or(0)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(code(i, seed, lo, hi));
  quantizedBytes += v.size() * sizeof(T);
  return init(name, type, std::move(shape), v);
}

// Int4 codes, two per byte, the first element in the low nibble (ONNX's packing).
ir::Initializer int4Values(const std::string& name, ir::Shape shape, std::vector<int> values, bool count) {
  auto t = ir::Tensor::allocate(ir::ElemType::Int4, std::move(shape)).value();
  auto* bytes = t.mutableDataAs<uint8_t>();
  for (size_t i = 0; i < values.size(); ++i) {
    const auto nibble = static_cast<uint8_t>(values[i] & 0x0f);
    bytes[i / 2] =
        static_cast<uint8_t>(i % 2 == 0 ? (bytes[i / 2] & 0xf0) | nibble : (bytes[i / 2] & 0x0f) | (nibble << 4));
  }
  if (count) quantizedBytes += t.byteSize();
  return ir::Initializer{name, std::move(t), std::nullopt};
}

std::vector<float> ramp(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i % 17);
  return v;
}

ir::Node at(ir::Node n) {
  n.opset = kOpset;
  return n;
}
ir::Node withInt(ir::Node n, const char* name, int64_t v) {
  n.attrs.set(ir::Attribute::makeInt(name, v));
  return at(std::move(n));
}

ir::Model qdqWeights(const std::set<std::string>& only) {
  auto want = [&](const char* form) { return only.empty() || only.count(form) != 0; };
  ir::Model m;
  m.irVersion = 10;
  m.opsets = {{"", kOpset}};
  ir::Graph& g = m.graph;
  g.name = "qdq_weights";
  g.inputs.push_back(floatValue("a", dims({8, 128})));
  ir::ValueInfo ids;
  ids.name = "ids";
  ids.type = ir::ElemType::Int64;
  ids.shape = dims({2, 5});
  g.inputs.push_back(ids);
  g.inputs.push_back(floatValue("x", dims({1, 8, 16, 16})));

  // matmul_pc
  if (want("matmul_pc")) {
    g.initializers.push_back(codes<int8_t>("w1", ir::ElemType::Int8, {128, 96}, 1, -127, 127));
    g.initializers.push_back(init("w1s", ir::ElemType::Float, {96}, ramp(96, 0.002f, 0.0003f)));
    std::vector<int8_t> z1(96);
    for (size_t i = 0; i < z1.size(); ++i) z1[i] = static_cast<int8_t>(static_cast<int>(i % 9) - 4);
    g.initializers.push_back(init("w1z", ir::ElemType::Int8, {96}, z1));
    g.nodes.push_back(withInt(node("DequantizeLinear", {"w1", "w1s", "w1z"}, {"w1f"}), "axis", 1));
    g.nodes.push_back(at(node("MatMul", {"a", "w1f"}, {"matmul_pc"})));
    g.outputs.push_back(floatValue("matmul_pc", dims({8, 96})));
  }
  // matmul_add
  if (want("matmul_add")) {
    g.initializers.push_back(codes<uint8_t>("w2", ir::ElemType::Uint8, {128, 80}, 2, 0, 255));
    g.initializers.push_back(init("w2s", ir::ElemType::Float, {}, std::vector<float>{0.0031f}));
    g.initializers.push_back(init("w2z", ir::ElemType::Uint8, {}, std::vector<uint8_t>{131}));
    g.initializers.push_back(init("b2", ir::ElemType::Float, {80}, ramp(80, -0.4f, 0.05f)));
    g.nodes.push_back(at(node("DequantizeLinear", {"w2", "w2s", "w2z"}, {"w2f"})));
    g.nodes.push_back(at(node("MatMul", {"a", "w2f"}, {"m2"})));
    g.nodes.push_back(at(node("Add", {"m2", "b2"}, {"matmul_add"})));
    g.outputs.push_back(floatValue("matmul_add", dims({8, 80})));
  }
  // matmul_t
  if (want("matmul_t")) {
    g.initializers.push_back(codes<int8_t>("w3", ir::ElemType::Int8, {64, 128}, 3, -100, 100));
    g.initializers.push_back(init("w3s", ir::ElemType::Float, {64}, ramp(64, 0.003f, 0.0002f)));
    g.nodes.push_back(withInt(node("DequantizeLinear", {"w3", "w3s"}, {"w3f"}), "axis", 0));
    // An explicit perm: ONNX Runtime 1.30 aborts (an unengaged optional) on a Transpose without one after a
    // DequantizeLinear of a constant.
    ir::Node transpose = at(node("Transpose", {"w3f"}, {"w3t"}));
    transpose.attrs.set(ir::Attribute::makeInts("perm", {1, 0}));
    g.nodes.push_back(transpose);
    g.nodes.push_back(at(node("MatMul", {"a", "w3t"}, {"matmul_t"})));
    g.outputs.push_back(floatValue("matmul_t", dims({8, 64})));
  }
  // matmul_int4
  if (want("matmul_int4")) {
    {
      std::vector<int> w(128 * 64), z(64);
      for (size_t i = 0; i < w.size(); ++i) w[i] = code(i, 4, -8, 7);
      for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<int>(i % 5) - 2;
      g.initializers.push_back(int4Values("w4", {128, 64}, w, true));
      g.initializers.push_back(int4Values("w4z", {64}, z, false));
    }
    g.initializers.push_back(init("w4s", ir::ElemType::Float, {64}, ramp(64, 0.02f, 0.001f)));
    g.nodes.push_back(withInt(node("DequantizeLinear", {"w4", "w4s", "w4z"}, {"w4f"}), "axis", 1));
    g.nodes.push_back(at(node("MatMul", {"a", "w4f"}, {"matmul_int4"})));
    g.outputs.push_back(floatValue("matmul_int4", dims({8, 64})));
  }
  // gather_u8: ctxrun's random int64 inputs are 0 to 3; rows 7, 68, 129 and 190 are read
  if (want("gather_u8")) {
    g.initializers.push_back(codes<uint8_t>("table", ir::ElemType::Uint8, {256, 64}, 5, 0, 255));
    g.initializers.push_back(init("ts", ir::ElemType::Float, {}, std::vector<float>{0.0125f}));
    g.initializers.push_back(init("tz", ir::ElemType::Uint8, {}, std::vector<uint8_t>{128}));
    g.initializers.push_back(init("stride", ir::ElemType::Int64, {}, std::vector<int64_t>{61}));
    g.initializers.push_back(init("first", ir::ElemType::Int64, {}, std::vector<int64_t>{7}));
    g.nodes.push_back(at(node("DequantizeLinear", {"table", "ts", "tz"}, {"tablef"})));
    g.nodes.push_back(at(node("Mul", {"ids", "stride"}, {"ids_s"})));
    g.nodes.push_back(at(node("Add", {"ids_s", "first"}, {"rows"})));
    g.nodes.push_back(at(node("Gather", {"tablef", "rows"}, {"gather_u8"})));
    g.outputs.push_back(floatValue("gather_u8", dims({2, 5, 64})));
  }
  // conv_pc
  if (want("conv_pc")) {
    g.initializers.push_back(codes<int8_t>("w5", ir::ElemType::Int8, {32, 8, 3, 3}, 6, -127, 127));
    g.initializers.push_back(init("w5s", ir::ElemType::Float, {32}, ramp(32, 0.004f, 0.0005f)));
    g.initializers.push_back(init("b5", ir::ElemType::Float, {32}, ramp(32, -0.3f, 0.04f)));
    g.nodes.push_back(withInt(node("DequantizeLinear", {"w5", "w5s"}, {"w5f"}), "axis", 0));
    ir::Node conv = at(node("Conv", {"x", "w5f", "b5"}, {"conv_pc"}));
    conv.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
    g.nodes.push_back(conv);
    g.outputs.push_back(floatValue("conv_pc", dims({1, 32, 16, 16})));
  }
  // convt_u8
  if (want("convt_u8")) {
    g.initializers.push_back(codes<uint8_t>("w6", ir::ElemType::Uint8, {8, 16, 4, 4}, 7, 60, 180));
    g.initializers.push_back(init("w6s", ir::ElemType::Float, {}, std::vector<float>{0.006f}));
    g.initializers.push_back(init("w6z", ir::ElemType::Uint8, {}, std::vector<uint8_t>{120}));
    g.nodes.push_back(at(node("DequantizeLinear", {"w6", "w6s", "w6z"}, {"w6f"})));
    ir::Node convt = at(node("ConvTranspose", {"x", "w6f"}, {"convt_u8"}));
    convt.attrs.set(ir::Attribute::makeInts("strides", {2, 2}));
    convt.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
    g.nodes.push_back(convt);
    g.outputs.push_back(floatValue("convt_u8", dims({1, 16, 32, 32})));
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_qdq_weights OUT.onnx [FORM...]\n");
    return 2;
  }
  const std::set<std::string> only(argv + 2, argv + argc);
  if (Status st = onnx_io::saveModel(qdqWeights(only), argv[1]); !st) {
    std::fprintf(stderr, "make_qdq_weights: %s\n", st.error().message().c_str());
    return 1;
  }
  std::printf("%llu\n", static_cast<unsigned long long>(quantizedBytes));
  return 0;
}
