// The tiny transformer block (prefill and decode variants): weights, ONNX graph and reference forward pass.
#include "samples/graph_builder.h"
#include "samples/prng.h"
#include "samples/sample_models.h"

#include <array>
#include <cmath>
#include <utility>

namespace ctxkit::samples {

namespace {

constexpr float kEpsilon = 1e-5f;
constexpr float kAttentionScale = 0.25f;  // 1 / sqrt(kHeadDim)
constexpr std::array<int64_t, 4> kHeadsFirst = {0, 2, 1, 3};
constexpr std::array<int64_t, 4> kKeyTransposed = {0, 2, 3, 1};

ir::Attribute intAttr(const char* name, int64_t v) { return ir::Attribute::makeInt(name, v); }
ir::Attribute floatAttr(const char* name, float v) { return ir::Attribute::makeFloat(name, v); }
ir::Attribute permAttr(const std::array<int64_t, 4>& perm) {
  return ir::Attribute::makeInts("perm", std::vector<int64_t>(perm.begin(), perm.end()));
}

// Builds the block graph. Value names describe the dataflow; node names are the same as their outputs.
ir::Model buildBlockModel(const BlockWeights& w, int64_t seqLen, const std::string& prefix, const std::string& name) {
  GraphBuilder b(name, prefix);
  const ir::Shape io = {1, seqLen, kHidden};
  b.addInput("x", io);
  b.addOutput("y", io);

  const std::string ln1Scale = b.addFloats("ln1.scale", {kHidden}, w.ln1Scale);
  const std::string ln1Bias = b.addFloats("ln1.bias", {kHidden}, w.ln1Bias);
  const std::string headShape = b.addInt64s("attn.head_shape", {4}, {1, seqLen, kHeads, kHeadDim});
  const std::string mergedShape = b.addInt64s("attn.merged_shape", {3}, {1, seqLen, kHidden});
  const std::string scale = b.addFloats("attn.scale", {}, {kAttentionScale});

  std::string h = b.addNode("ln1", "LayerNormalization", {"x", ln1Scale, ln1Bias},
                            {intAttr("axis", -1), floatAttr("epsilon", kEpsilon)});

  // Q, K and V: projection, bias, split into heads, heads first (K also transposed for Q x K^T).
  auto project = [&](const char* role, const std::vector<float>& weight, const std::vector<float>& bias,
                     const std::array<int64_t, 4>& perm) {
    const std::string r(role);
    const std::string wName = b.addFloats("attn.w" + r, {kHidden, kHidden}, weight);
    const std::string bName = b.addFloats("attn.b" + r, {kHidden}, bias);
    std::string v = b.addNode("attn/" + r + "_matmul", "MatMul", {h, wName});
    v = b.addNode("attn/" + r + "_add", "Add", {v, bName});
    v = b.addNode("attn/" + r + "_reshape", "Reshape", {v, headShape});
    return b.addNode("attn/" + r + "_transpose", "Transpose", {v}, {permAttr(perm)});
  };
  const std::string q = project("q", w.wq, w.bq, kHeadsFirst);
  const std::string k = project("k", w.wk, w.bk, kKeyTransposed);
  const std::string v = project("v", w.wv, w.bv, kHeadsFirst);

  std::string a = b.addNode("attn/scores", "MatMul", {q, k});
  a = b.addNode("attn/scaled", "Mul", {a, scale});
  a = b.addNode("attn/probs", "Softmax", {a}, {intAttr("axis", -1)});
  a = b.addNode("attn/context", "MatMul", {a, v});
  a = b.addNode("attn/context_transpose", "Transpose", {a}, {permAttr(kHeadsFirst)});
  a = b.addNode("attn/context_merge", "Reshape", {a, mergedShape});
  const std::string wo = b.addFloats("attn.wo", {kHidden, kHidden}, w.wo);
  const std::string bo = b.addFloats("attn.bo", {kHidden}, w.bo);
  a = b.addNode("attn/out_matmul", "MatMul", {a, wo});
  a = b.addNode("attn/out_add", "Add", {a, bo});
  const std::string residual = b.addNode("residual1", "Add", {a, "x"});

  const std::string ln2Scale = b.addFloats("ln2.scale", {kHidden}, w.ln2Scale);
  const std::string ln2Bias = b.addFloats("ln2.bias", {kHidden}, w.ln2Bias);
  h = b.addNode("ln2", "LayerNormalization", {residual, ln2Scale, ln2Bias},
                {intAttr("axis", -1), floatAttr("epsilon", kEpsilon)});

  const std::string w1 = b.addFloats("ffn.w1", {kHidden, kFeedForward}, w.w1);
  const std::string b1 = b.addFloats("ffn.b1", {kFeedForward}, w.b1);
  const std::string sqrt2 = b.addFloats("ffn.sqrt2", {}, {static_cast<float>(std::sqrt(2.0))});
  const std::string one = b.addFloats("ffn.one", {}, {1.0f});
  const std::string half = b.addFloats("ffn.half", {}, {0.5f});
  std::string f = b.addNode("ffn/up_matmul", "MatMul", {h, w1});
  f = b.addNode("ffn/up_add", "Add", {f, b1});
  std::string g = b.addNode("ffn/gelu_div", "Div", {f, sqrt2});
  g = b.addNode("ffn/gelu_erf", "Erf", {g});
  g = b.addNode("ffn/gelu_add", "Add", {g, one});
  g = b.addNode("ffn/gelu_mul", "Mul", {f, g});
  g = b.addNode("ffn/gelu_half", "Mul", {g, half});
  const std::string w2 = b.addFloats("ffn.w2", {kFeedForward, kHidden}, w.w2);
  const std::string b2 = b.addFloats("ffn.b2", {kHidden}, w.b2);
  g = b.addNode("ffn/down_matmul", "MatMul", {g, w2});
  g = b.addNode("ffn/down_add", "Add", {g, b2});
  b.addNode("residual2", "Add", {g, residual}, {}, "y");

  return std::move(b).finish(
      "ctxkit sample: pre-LayerNorm transformer block (4 heads x 16, erf GELU feed-forward 128), seq length " +
      std::to_string(seqLen));
}

}  // namespace

BlockWeights makeBlockWeights(uint64_t seed) {
  SplitMix64 rng(seed);
  BlockWeights w;
  const size_t hid = kHidden, ff = kFeedForward;
  w.ln1Scale = rng.uniformVector(hid, 0.8f, 1.2f);
  w.ln1Bias = rng.uniformVector(hid, -0.1f, 0.1f);
  w.wq = rng.uniformVector(hid * hid, -0.2f, 0.2f);
  w.bq = rng.uniformVector(hid, -0.1f, 0.1f);
  w.wk = rng.uniformVector(hid * hid, -0.2f, 0.2f);
  w.bk = rng.uniformVector(hid, -0.1f, 0.1f);
  w.wv = rng.uniformVector(hid * hid, -0.2f, 0.2f);
  w.bv = rng.uniformVector(hid, -0.1f, 0.1f);
  w.wo = rng.uniformVector(hid * hid, -0.2f, 0.2f);
  w.bo = rng.uniformVector(hid, -0.1f, 0.1f);
  w.ln2Scale = rng.uniformVector(hid, 0.8f, 1.2f);
  w.ln2Bias = rng.uniformVector(hid, -0.1f, 0.1f);
  w.w1 = rng.uniformVector(hid * ff, -0.2f, 0.2f);
  w.b1 = rng.uniformVector(ff, -0.1f, 0.1f);
  w.w2 = rng.uniformVector(ff * hid, -0.2f, 0.2f);
  w.b2 = rng.uniformVector(hid, -0.1f, 0.1f);
  return w;
}

ref::Array runBlockReference(const BlockWeights& w, const ref::Array& x) {
  const int64_t seqLen = x.dim(1);
  const ref::Array wq({kHidden, kHidden}, w.wq), wk({kHidden, kHidden}, w.wk), wv({kHidden, kHidden}, w.wv);
  const ref::Array wo({kHidden, kHidden}, w.wo), w1({kHidden, kFeedForward}, w.w1), w2({kFeedForward, kHidden}, w.w2);
  const std::vector<int64_t> headShape = {1, seqLen, kHeads, kHeadDim};

  const ref::Array h = ref::layerNorm(x, w.ln1Scale, w.ln1Bias, kEpsilon);
  auto heads = [&](const ref::Array& weight, const std::vector<float>& bias, const std::array<int64_t, 4>& perm) {
    return ref::transpose(ref::reshape(ref::addLastAxis(ref::matMul(h, weight), bias), headShape), perm);
  };
  const ref::Array q = heads(wq, w.bq, kHeadsFirst);   // [1, 4, S, 16]
  const ref::Array k = heads(wk, w.bk, kKeyTransposed);  // [1, 4, 16, S]
  const ref::Array v = heads(wv, w.bv, kHeadsFirst);   // [1, 4, S, 16]
  const ref::Array probs = ref::softmaxLastAxis(ref::mulScalar(ref::matMul(q, k), kAttentionScale));
  ref::Array context = ref::transpose(ref::matMul(probs, v), kHeadsFirst);
  context = ref::reshape(std::move(context), {1, seqLen, kHidden});
  const ref::Array attention = ref::addLastAxis(ref::matMul(context, wo), w.bo);
  const ref::Array residual = ref::add(attention, x);

  const ref::Array h2 = ref::layerNorm(residual, w.ln2Scale, w.ln2Bias, kEpsilon);
  const ref::Array up = ref::geluErf(ref::addLastAxis(ref::matMul(h2, w1), w.b1));
  const ref::Array down = ref::addLastAxis(ref::matMul(up, w2), w.b2);
  return ref::add(down, residual);
}

Sample makeTinyBlock(std::string stem, int64_t seqLen, std::string initializerPrefix, uint64_t inputSeed) {
  const BlockWeights weights = makeBlockWeights(kBlockWeightSeed);
  SplitMix64 rng(inputSeed);
  const ref::Array x({1, seqLen, kHidden}, rng.uniformVector(static_cast<size_t>(seqLen * kHidden), -1.0f, 1.0f));

  Sample s;
  s.model = buildBlockModel(weights, seqLen, initializerPrefix, stem);
  s.stem = std::move(stem);
  s.inputName = "x";
  s.input = toTensor(x);
  s.outputName = "y";
  s.expectedOutput = toTensor(runBlockReference(weights, x));
  return s;
}

}  // namespace ctxkit::samples
