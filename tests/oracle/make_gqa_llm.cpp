// Writes a small int4 decoder LLM as ONNX Runtime GenAI's model builder lays one out, as a prefill/decode pair for the
// generate oracle (tests/oracle/gqa_generate.sh) and bench/generate.sh:
//  - inputs input_ids int64 [batch_size, sequence_length] and attention_mask int64 [batch_size,
//    total_sequence_length]; the decode also past_key_values.<i>.key/value float [batch_size, 2, past_sequence_length,
//    32]; outputs logits [batch_size, sequence_length, 512] and present.<i>.key/value [batch_size, 2,
//    total_sequence_length, 32]. The prefill has no past (GroupQueryAttention's past inputs left empty) and names its
//    mask's length sequence_length (with no past the two are one length, and one ctxgen run can then bind the
//    decode's total_sequence_length per past length without touching the prefill);
//  - seqlens_k = Cast<int32>(ReduceSum(attention_mask, axis 1) - 1) and total_sequence_length =
//    Cast<int32>(Shape(attention_mask)[1]), computed in the graph as the model builder does;
//  - a float embedding (Gather), then 3 layers of SimplifiedLayerNormalization (the first) or
//    SkipSimplifiedLayerNormalization (the residual sum carried on), one packed QKV MatMulNBits (4-bit, blocks of
//    32), GroupQueryAttention (8 query heads over 2 key/value heads of 32, do_rotary with cos/sin cache
//    initializers of 64 positions, packed QKV), an o_proj MatMulNBits, SkipSimplifiedLayerNormalization and a SwiGLU
//    MLP of three MatMulNBits (gate, up, down: x sigmoid(x) x up); then the final SkipSimplifiedLayerNormalization
//    and an lm_head MatMulNBits. Layers 0 and 2 and the lm_head have packed 4-bit zero points, layer 1 the default 8.
// Both graphs hold the same initializers under the same names (ctxgen --share stores them once). Weights are
// seeded: codes uniform over 0-15, each block's scale such that a product keeps its input's magnitude, o_proj's and
// down_proj's twice that (each layer's attention and MLP then weigh on the residual stream as much as the embedding,
// so the context, not only the last token, picks the next) and the lm_head's such that the logits spread by a few
// units: greedy decoding wanders over the vocabulary rather than repeating one token or a short cycle. Also writes a prompt of 12 token ids (int64 [1, 12]) and prints the byte counts the
// benchmark reports: every initializer, and the MatMulNBits weights (codes, scales, zero points).
// usage: make_gqa_llm OUT_DIR   (writes OUT_DIR/prefill.onnx, decode.onnx, prompt.npy)
#include "contrib_builder.h"
#include "ir/npy.h"
#include "onnx_io/onnx_io.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

constexpr int64_t kVocab = 512, kHidden = 256, kHeads = 8, kKvHeads = 2, kHeadSize = 32, kInter = 512, kLayers = 3;
constexpr int64_t kBlock = 32, kPositions = 64, kPrompt = 12;
constexpr float kEpsilon = 1e-6f;

// A deterministic stream of numbers (the same on every machine: no standard-library distribution).
class Seeded {
public:
  explicit Seeded(uint32_t seed) : x_(seed * 2654435761u + 0x9E3779B9u) {}
  uint32_t next() {
    x_ = x_ * 1664525u + 1013904223u;
    return x_ >> 8;
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() & 0xFFFFFF) / 16777216.0f; }

private:
  uint32_t x_;
};

ir::Initializer floats(const std::string& name, ir::Shape shape, std::vector<float> v) {
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), std::move(v)),
                         std::nullopt};
}

ir::Initializer uniform(const std::string& name, ir::Shape shape, float lo, float hi, uint32_t seed) {
  Seeded r(seed);
  std::vector<float> v(static_cast<size_t>(ir::elementCount(shape).value_or(0)));
  for (float& x : v) x = r.uniform(lo, hi);
  return floats(name, std::move(shape), std::move(v));
}

ir::Node withInt(ir::Node n, const std::string& name, int64_t v) {
  n.attrs.set(ir::Attribute::makeInt(name, v));
  return n;
}

ir::Node withEpsilon(ir::Node n) {
  n.attrs.set(ir::Attribute::makeFloat("epsilon", kEpsilon));
  return n;
}

// The weights and nodes both graphs share, written once into each.
struct Builder {
  ir::Graph& g;
  bool decode;
  uint64_t nbitsBytes = 0;
  uint32_t seed = 1;

  // A MatMulNBits of K inputs to N outputs named `name` (model builder: <module>.MatMul), reading `x`, writing
  // `out` (default <name>/output_0): codes
  // uniform over 0-15, scales of magnitude gain / (4.6 sqrt(K)) (4.6: the spread of codes about 8), zero points
  // uniform over 7-9 when `zeroPoints`.
  std::string matMulNBits(const std::string& name, const std::string& x, int64_t k, int64_t n, float gain,
                          bool zeroPoints, std::string out = {}) {
    const int64_t blocks = (k + kBlock - 1) / kBlock, blob = kBlock / 2;
    Seeded r(seed++);
    std::vector<uint8_t> codes(static_cast<size_t>(n * blocks * blob));
    for (auto& c : codes) c = static_cast<uint8_t>(r.next() & 0xFF);
    std::vector<float> scales(static_cast<size_t>(n * blocks));
    const float base = gain / (4.6f * std::sqrt(static_cast<float>(k)));
    for (auto& s : scales) s = base * r.uniform(0.75f, 1.25f);
    std::vector<std::string> ins{x, name + ".weight_Q4", name + ".weight_scales"};
    g.initializers.push_back(ir::Initializer{
        ins[1], ir::Tensor::fromVector(ir::ElemType::Uint8, {n, blocks, blob}, codes), std::nullopt});
    g.initializers.push_back(floats(ins[2], {n * blocks}, scales));
    nbitsBytes += codes.size() + scales.size() * sizeof(float);
    if (zeroPoints) {
      const int64_t perRow = (blocks + 1) / 2;
      std::vector<uint8_t> zp(static_cast<size_t>(n * perRow));
      for (auto& z : zp) z = static_cast<uint8_t>((7 + r.next() % 3) | ((7 + r.next() % 3) << 4));
      ins.push_back(name + ".weight_zp");
      g.initializers.push_back(
          ir::Initializer{ins.back(), ir::Tensor::fromVector(ir::ElemType::Uint8, {n * perRow}, zp), std::nullopt});
      nbitsBytes += zp.size();
    }
    if (out.empty()) out = name + "/output_0";
    ir::Node m = msNode("MatMulNBits", ins, {out});
    for (auto [attr, v] : {std::pair<const char*, int64_t>{"K", k}, {"N", n}, {"bits", 4}, {"block_size", kBlock}})
      m = withInt(std::move(m), attr, v);
    g.nodes.push_back(std::move(m));
    return out;
  }

  std::string normWeight(const std::string& name) {
    g.initializers.push_back(uniform(name, {kHidden}, 0.8f, 1.2f, seed++));
    return name;
  }

  // A SkipSimplifiedLayerNormalization of `residual` + `x`: the normalized sum and the sum (the next residual).
  std::pair<std::string, std::string> skipNorm(const std::string& name, const std::string& residual,
                                               const std::string& x) {
    const std::string w = normWeight(name + ".weight");
    const std::string out = name + "/output_0", sum = name + "/output_3";
    g.nodes.push_back(withEpsilon(msNode("SkipSimplifiedLayerNormalization", {residual, x, w}, {out, "", "", sum})));
    return {out, sum};
  }

  void layer(int64_t i, std::string& residual, std::string& pending) {
    const std::string p = "model.layers." + std::to_string(i);
    const bool zp = i != 1;
    std::string normed;
    if (i == 0) {
      const std::string w = normWeight(p + ".input_layernorm.weight");
      normed = p + ".input_layernorm/output_0";
      g.nodes.push_back(withEpsilon(node("SimplifiedLayerNormalization", {residual, w}, {normed})));
    } else {
      std::tie(normed, residual) = skipNorm(p + ".input_layernorm", residual, pending);
    }
    const std::string qkv =
        matMulNBits(p + ".attn.qkv_proj.MatMul", normed, kHidden, (kHeads + 2 * kKvHeads) * kHeadSize, 1.0f, zp);
    const std::string k = "past_key_values." + std::to_string(i) + ".key";
    const std::string v = "past_key_values." + std::to_string(i) + ".value";
    const std::string attn = p + ".attn.GroupQueryAttention/output_0";
    ir::Node gqa = msNode("GroupQueryAttention",
                          {qkv, "", "", decode ? k : "", decode ? v : "", "attn_mask_seqlens_k",
                           "attn_mask_total_seq_len", "cos_cache", "sin_cache"},
                          {attn, "present." + std::to_string(i) + ".key", "present." + std::to_string(i) + ".value"});
    gqa = withInt(withInt(withInt(std::move(gqa), "num_heads", kHeads), "kv_num_heads", kKvHeads), "do_rotary", 1);
    g.nodes.push_back(std::move(gqa));
    const std::string o = matMulNBits(p + ".attn.o_proj.MatMul", attn, kHeads * kHeadSize, kHidden, 2.0f, zp);
    auto [mlpIn, sum] = skipNorm(p + ".post_attention_layernorm", residual, o);
    residual = sum;
    const std::string gate = matMulNBits(p + ".mlp.gate_proj.MatMul", mlpIn, kHidden, kInter, 1.0f, zp);
    const std::string up = matMulNBits(p + ".mlp.up_proj.MatMul", mlpIn, kHidden, kInter, 1.0f, zp);
    g.nodes.push_back(node("Sigmoid", {gate}, {p + ".mlp.act_fn/Sigmoid/output_0"}));
    g.nodes.push_back(node("Mul", {gate, p + ".mlp.act_fn/Sigmoid/output_0"}, {p + ".mlp.act_fn/Mul/output_0"}));
    g.nodes.push_back(node("Mul", {p + ".mlp.act_fn/Mul/output_0", up}, {p + ".mlp.Mul/output_0"}));
    pending = matMulNBits(p + ".mlp.down_proj.MatMul", p + ".mlp.Mul/output_0", kInter, kHidden, 2.0f, zp);
  }
};

struct Written {
  ir::Model model;
  uint64_t nbitsBytes = 0;
};

Written llm(bool decode) {
  Written w{contribModel(decode ? "gqa_llm_decode" : "gqa_llm_prefill"), 0};
  ir::Graph& g = w.model.graph;
  const ir::Dim batch = ir::Dim::named("batch_size"), seq = ir::Dim::named("sequence_length");
  const ir::Dim total = decode ? ir::Dim::named("total_sequence_length") : seq;
  g.inputs.push_back(typedValue("input_ids", ir::ElemType::Int64, {batch, seq}));
  g.inputs.push_back(typedValue("attention_mask", ir::ElemType::Int64, {batch, total}));
  for (int64_t i = 0; i < kLayers && decode; ++i)
    for (const char* which : {".key", ".value"})
      g.inputs.push_back(floatValue("past_key_values." + std::to_string(i) + which,
                                    {batch, ir::Dim::known(kKvHeads), ir::Dim::named("past_sequence_length"),
                                     ir::Dim::known(kHeadSize)}));
  g.outputs.push_back(floatValue("logits", {batch, seq, ir::Dim::known(kVocab)}));
  for (int64_t i = 0; i < kLayers; ++i)
    for (const char* which : {".key", ".value"})
      g.outputs.push_back(floatValue("present." + std::to_string(i) + which,
                                     {batch, ir::Dim::known(kKvHeads), total, ir::Dim::known(kHeadSize)}));

  // The attention-mask arithmetic every GroupQueryAttention reads.
  g.initializers.push_back(
      ir::Initializer{"one_axis", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, std::vector<int64_t>{1}),
                      std::nullopt});
  g.initializers.push_back(
      ir::Initializer{"one", ir::Tensor::fromVector(ir::ElemType::Int64, {}, std::vector<int64_t>{1}), std::nullopt});
  constexpr int64_t kInt32 = 6;  // TensorProto.INT32
  g.nodes.push_back(withInt(node("ReduceSum", {"attention_mask", "one_axis"}, {"attn_mask_reduce_sum"}), "keepdims", 0));
  g.nodes.push_back(node("Sub", {"attn_mask_reduce_sum", "one"}, {"attn_mask_sub"}));
  g.nodes.push_back(withInt(node("Cast", {"attn_mask_sub"}, {"attn_mask_seqlens_k"}), "to", kInt32));
  g.nodes.push_back(node("Shape", {"attention_mask"}, {"attn_mask_shape"}));
  g.nodes.push_back(node("Gather", {"attn_mask_shape", "one"}, {"attn_mask_shape_1"}));
  g.nodes.push_back(withInt(node("Cast", {"attn_mask_shape_1"}, {"attn_mask_total_seq_len"}), "to", kInt32));
  addRotaryCaches(g, "cos_cache", "sin_cache", kPositions, kHeadSize / 2);

  Builder b{g, decode};
  g.initializers.push_back(uniform("model.embed_tokens.weight", {kVocab, kHidden}, -1.0f, 1.0f, 1000));
  std::string residual = "model.embed_tokens/output_0", pending;
  g.nodes.push_back(node("Gather", {"model.embed_tokens.weight", "input_ids"}, {residual}));
  for (int64_t i = 0; i < kLayers; ++i) b.layer(i, residual, pending);
  auto [normed, sum] = b.skipNorm("model.layers." + std::to_string(kLayers) + ".final_norm_layernorm", residual, pending);
  (void)sum;
  b.matMulNBits("lm_head.MatMul", normed, kHidden, kVocab, 4.0f, true, "logits");
  w.nbitsBytes = b.nbitsBytes;
  return w;
}

uint64_t initializerBytes(const ir::Graph& g) {
  uint64_t n = 0;
  for (const auto& i : g.initializers) n += i.tensor.byteSize();
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_gqa_llm OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  Written prefill = llm(false), decode = llm(true);
  std::vector<int64_t> ids;
  Seeded r(77);
  for (int64_t i = 0; i < kPrompt; ++i) ids.push_back(static_cast<int64_t>(r.next() % kVocab));
  Status st = onnx_io::saveModel(prefill.model, dir / "prefill.onnx");
  if (st) st = onnx_io::saveModel(decode.model, dir / "decode.onnx");
  if (st) st = ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Int64, {1, kPrompt}, ids), dir / "prompt.npy");
  if (!st) {
    std::fprintf(stderr, "make_gqa_llm: %s\n", st.error().message().c_str());
    return 1;
  }
  std::printf("{\"initializer_bytes\": %llu, \"nbits_bytes\": %llu, \"prompt_tokens\": %lld}\n",
              static_cast<unsigned long long>(initializerBytes(decode.model.graph)),
              static_cast<unsigned long long>(decode.nbitsBytes), static_cast<long long>(kPrompt));
  return 0;
}
