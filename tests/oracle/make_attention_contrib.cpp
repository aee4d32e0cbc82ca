// Writes a model of ONNX Runtime's com.microsoft attention ops in the forms its exporters write, for the ONNX Runtime
// oracle. GroupQueryAttention as GenAI's model builder writes it (num_heads 4, kv_num_heads 2; seqlens_k and
// total_sequence_length constants, as the model's attention-mask arithmetic makes them for one shape), one output
// triple (output, present key, present value) per form:
//  - gqa_prefill: packed QKV [1, 5, 8 x 16], no past, rotary (halves)
//  - gqa_prefill_b2: separate Q/K/V, batch 2, an empty past [2, 2, 0, 16], scale 0.3, softcap 5, local window 2
//  - gqa_decode: packed QKV, one token after a past of 7, interleaved rotary
//  - gqa_decode_b2: separate Q/K/V of head size 32, batch 2 with a past of 6 holding 6 and 4 valid rows, rotary of
//    the first 16 elements of each head, local window 3
// and, with a second path, a model of com.microsoft RotaryEmbedding and the quantizers' integer products:
//  - rope_offset: [2, 3, 4 x 16] halves, position_ids one offset (2); rope_ids: interleaved, position_ids [2, 3]
//  - rope_partial: [2, 3, 4 x 32] rotating the first 16 of each head (rotary_embedding_dim 16, num_heads 4)
//  - rope_bnsh: [2, 4, 3, 16] (BNSH input), position_ids [2, 3]
//  - mmitf_*: MatMulIntegerToFloat of uint8 A [2, 3, 24] by int8 or uint8 B [24, 10]: per-tensor scale and zero
//    points; per-column scales and zero points with a bias; no zero points
//  - dqmm_*: DynamicQuantizeMatMul of float A [2, 3, 24]: int8 B (codes within +-60) per tensor; uint8 B per column
//    with a bias
// and, with a fourth path, ONNX Runtime's BERT-style ops (masks as graph inputs take ctxrun's seeded values 0-3):
//  - mha_self: MultiHeadAttention, Q/K/V [2, 5, 32] (4 heads) with a projection bias, no mask
//  - mha_masked: unidirectional, a raw [B, T] key padding mask input and an attention bias [1, 4, 5, 5]
//  - mha_past: one query after a past of 6 (past_key/past_value inputs, present outputs), end positions [B], scale 0.2
//  - mha_cross: K and V already in heads [2, 4, 7, 8], a [B, S, T] mask input, mask_filter_value -1000
//  - mha_vwide: V's head size 12 (value [2, 5, 48]) with a bias of 32 + 32 + 48
//  - attn_bert: Attention of [2, 6, 24] by merged weights [24, 96] and bias, raw mask input [2, 6]
//  - attn_gpt2: unidirectional, 3 tokens after a past [2, 2, 4, 4, 8] (present output), raw mask [2, 7]
//  - attn_sizes: qkv_hidden_sizes 32, 32, 16, mask index of end and start positions [2B] (constant)
//  - attn_bias: attention bias [2, 1, 6, 6], a [B, S, T] mask input
//  - eln_bert: EmbedLayerNormalization of input and segment ids [2, 7] with mask (all three outputs)
//  - eln_pos: no segments, no mask, position_ids [1, 7] reversed
// usage: make_attention_contrib GQA.onnx [ROPE_QUANT.onnx [GQA_TOTAL_INPUT.onnx [BERT_ATTENTION.onnx]]]
#include "contrib_builder.h"
#include "onnx_io/onnx_io.h"

#include <cmath>
#include <cstdio>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

ir::Initializer int32s(const std::string& name, ir::Shape shape, std::vector<int32_t> values) {
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Int32, std::move(shape), values), std::nullopt};
}

struct GqaForm {
  std::string name;
  int64_t batch, seq, headSize, past;  // past -1: no past inputs
  bool packed, rotary, interleaved;
  std::vector<int32_t> seqlensK;
  int32_t total;
  float scale = 0, softcap = 0;
  int64_t window = -1;
  bool emptyPast = false;  // the past is a [B, Nkv, 0, H] constant
  bool totalInput = false;  // total_sequence_length is a graph input, its value unknown when the op is prepared
};

void addGqa(ir::Graph& g, const GqaForm& f) {
  constexpr int64_t N = 4, NKV = 2;
  const int64_t B = f.batch, S = f.seq, H = f.headSize;
  std::vector<std::string> ins;
  if (f.packed) {
    g.inputs.push_back(floatValue(f.name + "_qkv", dims({B, S, (N + 2 * NKV) * H})));
    ins = {f.name + "_qkv", "", ""};
  } else {
    g.inputs.push_back(floatValue(f.name + "_q", dims({B, S, N * H})));
    g.inputs.push_back(floatValue(f.name + "_k", dims({B, S, NKV * H})));
    g.inputs.push_back(floatValue(f.name + "_v", dims({B, S, NKV * H})));
    ins = {f.name + "_q", f.name + "_k", f.name + "_v"};
  }
  if (f.emptyPast) {
    for (const char* which : {"_past_k", "_past_v"})
      g.initializers.push_back(ir::Initializer{
          f.name + which, ir::Tensor::fromVector(ir::ElemType::Float, {B, NKV, 0, H}, std::vector<float>{}),
          std::nullopt});
  } else if (f.past >= 0) {
    g.inputs.push_back(floatValue(f.name + "_past_k", dims({B, NKV, f.past, H})));
    g.inputs.push_back(floatValue(f.name + "_past_v", dims({B, NKV, f.past, H})));
  }
  const bool hasPast = f.emptyPast || f.past >= 0;
  ins.push_back(hasPast ? f.name + "_past_k" : "");
  ins.push_back(hasPast ? f.name + "_past_v" : "");
  g.initializers.push_back(int32s(f.name + "_seqlens", {B}, f.seqlensK));
  if (f.totalInput)
    g.inputs.push_back(ir::ValueInfo{f.name + "_total", ir::ElemType::Int32, std::vector<ir::Dim>{}, {}});
  else
    g.initializers.push_back(int32s(f.name + "_total", {}, {f.total}));
  ins.push_back(f.name + "_seqlens");
  ins.push_back(f.name + "_total");
  if (f.rotary) {
    addRotaryCaches(g, f.name + "_cos", f.name + "_sin", 16, 8);
    ins.push_back(f.name + "_cos");
    ins.push_back(f.name + "_sin");
  }
  ir::Node n = msNode("GroupQueryAttention", ins, {f.name, f.name + "_present_k", f.name + "_present_v"});
  n.attrs.set(ir::Attribute::makeInt("num_heads", N));
  n.attrs.set(ir::Attribute::makeInt("kv_num_heads", NKV));
  if (f.rotary) n.attrs.set(ir::Attribute::makeInt("do_rotary", 1));
  if (f.interleaved) n.attrs.set(ir::Attribute::makeInt("rotary_interleaved", 1));
  if (f.scale > 0) n.attrs.set(ir::Attribute::makeFloat("scale", f.scale));
  if (f.softcap > 0) n.attrs.set(ir::Attribute::makeFloat("softcap", f.softcap));
  if (f.window > 0) n.attrs.set(ir::Attribute::makeInt("local_window_size", f.window));
  g.nodes.push_back(n);
  const int64_t present = std::max<int64_t>(f.total, std::max<int64_t>(f.past, 0));
  g.outputs.push_back(floatValue(f.name, dims({B, S, N * H})));
  g.outputs.push_back(floatValue(f.name + "_present_k", dims({B, NKV, present, H})));
  g.outputs.push_back(floatValue(f.name + "_present_v", dims({B, NKV, present, H})));
}

ir::Model groupQueryAttention() {
  ir::Model m = contribModel("gqa");
  ir::Graph& g = m.graph;
  addGqa(g, {"gqa_prefill", 1, 5, 16, -1, true, true, false, {4}, 5});
  GqaForm prefillB2{"gqa_prefill_b2", 2, 4, 16, 0, false, false, false, {3, 3}, 4, 0.3f, 5.0f, 2};
  prefillB2.emptyPast = true;
  addGqa(g, prefillB2);
  addGqa(g, {"gqa_decode", 1, 1, 16, 7, true, true, true, {7}, 8});
  addGqa(g, {"gqa_decode_b2", 2, 1, 32, 6, false, true, false, {6, 4}, 7, 0, 0, 3});
  return m;
}

ir::Initializer int64s(const std::string& name, ir::Shape shape, std::vector<int64_t> values) {
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Int64, std::move(shape), values), std::nullopt};
}

ir::Initializer floats(const std::string& name, ir::Shape shape, float start, float step) {
  std::vector<float> v(static_cast<size_t>(ir::elementCount(shape).value_or(0)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + step * static_cast<float>(i % 13);
  return ir::Initializer{name, ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), v), std::nullopt};
}

// Integer codes spread over `range` values (centred on zero for int8).
template <typename T>
ir::Initializer codes(const std::string& name, ir::Shape shape, ir::ElemType type, int seed, int range = 200) {
  std::vector<T> v(static_cast<size_t>(ir::elementCount(shape).value_or(0)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<T>((static_cast<int>(i) * 37 + seed * 11) % range - (type == ir::ElemType::Int8 ? range / 2 : 0));
  return ir::Initializer{name, ir::Tensor::fromVector(type, std::move(shape), v), std::nullopt};
}

ir::Model ropeAndQuant() {
  ir::Model m = contribModel("rope_quant");
  ir::Graph& g = m.graph;
  addRotaryCaches(g, "rope16_cos", "rope16_sin", 16, 8);
  g.initializers.push_back(int64s("pos_offset", {1}, {2}));
  g.initializers.push_back(int64s("pos_ids", {2, 3}, {0, 1, 2, 5, 6, 7}));
  auto rope = [&](const std::string& name, std::vector<int64_t> shape, const std::string& positions, bool interleaved,
                  int64_t numHeads, int64_t rotaryDim) {
    std::vector<ir::Dim> d;
    for (int64_t v : shape) d.push_back(ir::Dim::known(v));
    g.inputs.push_back(floatValue(name + "_x", d));
    ir::Node n = msNode("RotaryEmbedding", {name + "_x", positions, "rope16_cos", "rope16_sin"}, {name});
    if (interleaved) n.attrs.set(ir::Attribute::makeInt("interleaved", 1));
    if (numHeads) n.attrs.set(ir::Attribute::makeInt("num_heads", numHeads));
    if (rotaryDim) n.attrs.set(ir::Attribute::makeInt("rotary_embedding_dim", rotaryDim));
    g.nodes.push_back(n);
    g.outputs.push_back(floatValue(name, d));
  };
  rope("rope_offset", {2, 3, 64}, "pos_offset", false, 0, 0);
  rope("rope_ids", {2, 3, 64}, "pos_ids", true, 0, 0);
  rope("rope_partial", {2, 3, 128}, "pos_ids", false, 4, 16);
  rope("rope_bnsh", {2, 4, 3, 16}, "pos_ids", false, 0, 0);

  constexpr int64_t K = 24, N = 10;
  ir::ValueInfo qa;
  qa.name = "qa";
  qa.type = ir::ElemType::Uint8;
  qa.shape = dims({2, 3, K});
  g.inputs.push_back(qa);
  g.inputs.push_back(floatValue("fa", dims({2, 3, K})));
  g.initializers.push_back(codes<int8_t>("b_s8", {K, N}, ir::ElemType::Int8, 1));
  g.initializers.push_back(codes<uint8_t>("b_u8", {K, N}, ir::ElemType::Uint8, 2));
  // int8 codes within +-60 for DynamicQuantizeMatMul, whose A spans the whole uint8 range: ONNX Runtime's AVX2 int8
  // GEMM on a CPU without VNNI adds u8 x s8 products in saturating 16-bit pairs, exact only while 2 x 255 x |b| fits.
  g.initializers.push_back(codes<int8_t>("b_s8_narrow", {K, N}, ir::ElemType::Int8, 1, 120));
  g.initializers.push_back(floats("a_scale", {}, 0.02f, 0));
  g.initializers.push_back(codes<uint8_t>("a_zero", {}, ir::ElemType::Uint8, 5));
  g.initializers.push_back(floats("b_scale", {}, 0.01f, 0));
  g.initializers.push_back(floats("b_scales", {N}, 0.005f, 0.001f));
  g.initializers.push_back(codes<int8_t>("b_zero_s8", {}, ir::ElemType::Int8, 3));
  g.initializers.push_back(codes<uint8_t>("b_zeros_u8", {N}, ir::ElemType::Uint8, 4));
  g.initializers.push_back(floats("q_bias", {N}, -0.3f, 0.05f));
  auto product = [&](const std::string& name, const std::string& op, std::vector<std::string> ins) {
    g.nodes.push_back(msNode(op, std::move(ins), {name}));
    g.outputs.push_back(floatValue(name, dims({2, 3, N})));
  };
  product("mmitf_tensor", "MatMulIntegerToFloat", {"qa", "b_s8", "a_scale", "b_scale", "a_zero", "b_zero_s8"});
  product("mmitf_column", "MatMulIntegerToFloat",
          {"qa", "b_u8", "a_scale", "b_scales", "a_zero", "b_zeros_u8", "q_bias"});
  product("mmitf_nozero", "MatMulIntegerToFloat", {"qa", "b_s8", "a_scale", "b_scales"});
  product("dqmm_tensor", "DynamicQuantizeMatMul", {"fa", "b_s8_narrow", "b_scale", "b_zero_s8"});
  product("dqmm_column", "DynamicQuantizeMatMul", {"fa", "b_u8", "b_scales", "b_zeros_u8", "q_bias"});
  return m;
}

}  // namespace

// A decode step whose total_sequence_length is a graph input: its present buffers are planned for past + 1 rows, and a
// run that feeds another total must be refused, not written past their end (the hostile-input check of
// ort_oracle.sh).
ir::Model gqaTotalInput() {
  ir::Model m = contribModel("gqa_total_input");
  GqaForm decode{"gqa_t", 1, 1, 16, 7, true, false, false, {7}, 8};
  decode.totalInput = true;
  addGqa(m.graph, decode);
  return m;
}

ir::ValueInfo int32Value(const std::string& name, std::vector<ir::Dim> d) {
  return typedValue(name, ir::ElemType::Int32, std::move(d));
}

ir::Model bertAttention() {
  ir::Model m = contribModel("bert_attention");
  ir::Graph& g = m.graph;
  // MultiHeadAttention: 4 heads of 8.
  auto mha = [&](const std::string& name, std::vector<std::string> ins, std::vector<int64_t> outShape, int presents,
                 std::vector<int64_t> presentShape, float scale = 0, bool unidirectional = false, float filter = 0) {
    std::vector<std::string> outs{name};
    for (int i = 0; i < presents; ++i) outs.push_back(name + (i == 0 ? "_present_k" : "_present_v"));
    ir::Node n = msNode("MultiHeadAttention", std::move(ins), outs);
    n.attrs.set(ir::Attribute::makeInt("num_heads", 4));
    if (scale > 0) n.attrs.set(ir::Attribute::makeFloat("scale", scale));
    if (unidirectional) n.attrs.set(ir::Attribute::makeInt("unidirectional", 1));
    if (filter != 0) n.attrs.set(ir::Attribute::makeFloat("mask_filter_value", filter));
    g.nodes.push_back(n);
    g.outputs.push_back(floatValue(name, dims({outShape[0], outShape[1], outShape[2]})));
    for (int i = 0; i < presents; ++i)
      g.outputs.push_back(floatValue(outs[static_cast<size_t>(i) + 1],
                                     dims({presentShape[0], presentShape[1], presentShape[2], presentShape[3]})));
  };
  for (const char* which : {"mha_self", "mha_masked", "mha_vwide"}) {
    const std::string n = which;
    g.inputs.push_back(floatValue(n + "_q", dims({2, 5, 32})));
    g.inputs.push_back(floatValue(n + "_k", dims({2, 5, 32})));
    g.inputs.push_back(floatValue(n + "_v", dims({2, 5, n == "mha_vwide" ? 48 : 32})));
  }
  g.initializers.push_back(floats("mha_bias", {96}, -0.2f, 0.03f));
  g.initializers.push_back(floats("mha_bias_wide", {112}, -0.1f, 0.02f));
  mha("mha_self", {"mha_self_q", "mha_self_k", "mha_self_v", "mha_bias"}, {2, 5, 32}, 0, {});
  g.inputs.push_back(int32Value("mha_masked_mask", dims({2, 5})));
  g.initializers.push_back(floats("mha_masked_attn_bias", {1, 4, 5, 5}, -0.5f, 0.08f));
  mha("mha_masked", {"mha_masked_q", "mha_masked_k", "mha_masked_v", "", "mha_masked_mask", "mha_masked_attn_bias"},
      {2, 5, 32}, 0, {}, 0, true);
  mha("mha_vwide", {"mha_vwide_q", "mha_vwide_k", "mha_vwide_v", "mha_bias_wide"}, {2, 5, 48}, 2, {2, 4, 5, 8});
  g.outputs.back().shape = dims({2, 4, 5, 12});
  g.inputs.push_back(floatValue("mha_past_q", dims({2, 1, 32})));
  g.inputs.push_back(floatValue("mha_past_k", dims({2, 1, 32})));
  g.inputs.push_back(floatValue("mha_past_v", dims({2, 1, 32})));
  g.inputs.push_back(floatValue("mha_past_pk", dims({2, 4, 6, 8})));
  g.inputs.push_back(floatValue("mha_past_pv", dims({2, 4, 6, 8})));
  g.initializers.push_back(int32s("mha_past_lens", {2}, {7, 5}));
  mha("mha_past",
      {"mha_past_q", "mha_past_k", "mha_past_v", "mha_bias", "mha_past_lens", "", "mha_past_pk", "mha_past_pv"},
      {2, 1, 32}, 2, {2, 4, 7, 8}, 0.2f);
  g.inputs.push_back(floatValue("mha_cross_q", dims({2, 3, 32})));
  g.inputs.push_back(floatValue("mha_cross_k", dims({2, 4, 7, 8})));
  g.inputs.push_back(floatValue("mha_cross_v", dims({2, 4, 7, 8})));
  g.inputs.push_back(int32Value("mha_cross_mask", dims({2, 3, 7})));
  mha("mha_cross", {"mha_cross_q", "mha_cross_k", "mha_cross_v", "", "mha_cross_mask"}, {2, 3, 32}, 0, {}, 0, false,
      -1000.0f);

  // Attention: input width 24, 4 heads of 8 (V of 4 in attn_sizes), two heads of 8 in attn_gpt2.
  auto attention = [&](const std::string& name, std::vector<std::string> ins, int64_t heads, int64_t seq,
                       int64_t vHidden, bool present, std::vector<int64_t> presentShape, bool unidirectional,
                       std::vector<int64_t> qkvSizes) {
    std::vector<std::string> outs{name};
    if (present) outs.push_back(name + "_present");
    ir::Node n = msNode("Attention", std::move(ins), outs);
    n.attrs.set(ir::Attribute::makeInt("num_heads", heads));
    if (unidirectional) n.attrs.set(ir::Attribute::makeInt("unidirectional", 1));
    if (!qkvSizes.empty()) n.attrs.set(ir::Attribute::makeInts("qkv_hidden_sizes", qkvSizes));
    g.nodes.push_back(n);
    g.outputs.push_back(floatValue(name, dims({2, seq, vHidden})));
    if (present)
      g.outputs.push_back(floatValue(outs[1], dims({presentShape[0], presentShape[1], presentShape[2], presentShape[3],
                                                    presentShape[4]})));
  };
  g.initializers.push_back(floats("attn_w", {24, 96}, -0.3f, 0.05f));
  g.initializers.push_back(floats("attn_w_sizes", {24, 80}, -0.25f, 0.04f));
  g.initializers.push_back(floats("attn_b", {96}, -0.1f, 0.02f));
  g.initializers.push_back(floats("attn_b_sizes", {80}, 0.1f, -0.015f));
  g.inputs.push_back(floatValue("attn_bert_x", dims({2, 6, 24})));
  g.inputs.push_back(int32Value("attn_bert_mask", dims({2, 6})));
  attention("attn_bert", {"attn_bert_x", "attn_w", "attn_b", "attn_bert_mask"}, 4, 6, 32, false, {}, false, {});
  g.inputs.push_back(floatValue("attn_gpt2_x", dims({2, 3, 24})));
  g.inputs.push_back(int32Value("attn_gpt2_mask", dims({2, 7})));
  g.inputs.push_back(floatValue("attn_gpt2_past", dims({2, 2, 2, 4, 16})));
  attention("attn_gpt2", {"attn_gpt2_x", "attn_w", "attn_b", "attn_gpt2_mask", "attn_gpt2_past"}, 2, 3, 32, true,
            {2, 2, 2, 7, 16}, true, {});
  g.inputs.push_back(floatValue("attn_sizes_x", dims({2, 6, 24})));
  g.initializers.push_back(int32s("attn_sizes_index", {4}, {5, 6, 1, 0}));
  attention("attn_sizes", {"attn_sizes_x", "attn_w_sizes", "attn_b_sizes", "attn_sizes_index"}, 4, 6, 16, false, {},
            false, {32, 32, 16});
  g.inputs.push_back(floatValue("attn_bias_x", dims({2, 6, 24})));
  g.inputs.push_back(int32Value("attn_bias_mask", dims({2, 6, 6})));
  g.initializers.push_back(floats("attn_bias_add", {2, 1, 6, 6}, -0.4f, 0.07f));
  attention("attn_bias", {"attn_bias_x", "attn_w", "attn_b", "attn_bias_mask", "", "attn_bias_add"}, 4, 6, 32, false, {},
            false, {});

  // EmbedLayerNormalization: hidden 16, ids and segment ids in 0-3 (ctxrun's seeded int32 inputs).
  g.initializers.push_back(floats("eln_word", {6, 16}, -0.6f, 0.11f));
  g.initializers.push_back(floats("eln_pos", {9, 16}, 0.3f, -0.07f));
  g.initializers.push_back(floats("eln_seg", {4, 16}, -0.2f, 0.05f));
  g.initializers.push_back(floats("eln_gamma", {16}, 0.8f, 0.03f));
  g.initializers.push_back(floats("eln_beta", {16}, -0.1f, 0.02f));
  g.initializers.push_back(int32s("eln_pos_ids", {1, 7}, {6, 5, 4, 3, 2, 1, 0}));
  for (const char* ids : {"eln_ids", "eln_segs", "eln_mask"}) g.inputs.push_back(int32Value(ids, dims({2, 7})));
  ir::Node bert = msNode("EmbedLayerNormalization",
                         {"eln_ids", "eln_segs", "eln_word", "eln_pos", "eln_seg", "eln_gamma", "eln_beta", "eln_mask"},
                         {"eln_bert", "eln_bert_mask_index", "eln_bert_sum"});
  bert.attrs.set(ir::Attribute::makeFloat("epsilon", 1e-5f));
  g.nodes.push_back(bert);
  g.outputs.push_back(floatValue("eln_bert", dims({2, 7, 16})));
  g.outputs.push_back(int32Value("eln_bert_mask_index", dims({2})));
  g.outputs.push_back(floatValue("eln_bert_sum", dims({2, 7, 16})));
  g.nodes.push_back(msNode("EmbedLayerNormalization",
                           {"eln_ids", "", "eln_word", "eln_pos", "", "eln_gamma", "eln_beta", "", "eln_pos_ids"},
                           {"eln_pos_out", "eln_pos_mask_index"}));
  g.outputs.push_back(floatValue("eln_pos_out", dims({2, 7, 16})));
  g.outputs.push_back(int32Value("eln_pos_mask_index", dims({2})));
  return m;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 5) {
    std::fprintf(stderr, "usage: make_attention_contrib GQA.onnx [ROPE_QUANT.onnx [GQA_TOTAL_INPUT.onnx "
                         "[BERT_ATTENTION.onnx]]]\n");
    return 2;
  }
  Status st = onnx_io::saveModel(groupQueryAttention(), argv[1]);
  if (st && argc >= 3) st = onnx_io::saveModel(ropeAndQuant(), argv[2]);
  if (st && argc >= 4) st = onnx_io::saveModel(gqaTotalInput(), argv[3]);
  if (st && argc == 5) st = onnx_io::saveModel(bertAttention(), argv[4]);
  if (!st) {
    std::fprintf(stderr, "make_attention_contrib: %s\n", st.error().message().c_str());
    return 1;
  }
  return 0;
}
