// runtime::Generator on a small prefill/decode pair built in memory (no files, the runtime core alone): the greedy
// tokens and logits against the same arithmetic done here, the choice among decode variants, the key/value state
// written in place, and the errors for pairs and prompts the loop cannot drive.
#include "ops/node_attrs.h"
#include "runtime/generate.h"
#include "runtime/session.h"

#include <catch2/catch.hpp>

#include <set>

using namespace ctxkit;

namespace {

constexpr int64_t kVocab = 7, kWidth = 3;

// Embedding E [vocab, width] and projection W [width, vocab]: small integers, so every sum below is exact in float32.
std::vector<float> embedding() {
  std::vector<float> e(kVocab * kWidth);
  for (size_t i = 0; i < e.size(); ++i) e[i] = static_cast<float>((static_cast<int>(i) * 5 + 4) % 7 - 3);
  return e;
}
std::vector<float> projection() {
  std::vector<float> w(kWidth * kVocab);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>((static_cast<int>(i) * 2 + 3) % 5 - 2) + 0.125f * static_cast<float>(i % 4);
  return w;
}

ir::Dim dim(int64_t v) { return v < 0 ? ir::Dim::named("past") : ir::Dim::known(v); }

ir::ValueInfo value(const std::string& name, ir::ElemType type, std::vector<ir::Dim> dims) {
  return ir::ValueInfo{name, type, std::move(dims), {}};
}

ir::Node makeNode(const std::string& op, ir::OpKind kind, std::vector<std::string> ins, std::vector<std::string> outs,
                  std::vector<ir::Attribute> attrs = {}) {
  ir::Node n;
  n.name = op + "_" + outs[0];
  n.opType = op;
  n.kind = kind;
  n.opset = 17;
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  for (auto& a : attrs) n.attrs.set(std::move(a));
  return n;
}

struct PairNames {
  std::string tokens = "input_ids", past = "past_key_0", present = "present_key_0", logits = "logits";
  std::string prefillPresent = "present_key_0";
  std::string extraInput;  // an input the loop does not know, when set
};

// x = E[ids]; present = past ++ x (along axis 2 of [1, 1, T, width]); logits = (x + sum of present over T) W.
// prefill (pastLength < 0 unused): no past, prompt of `promptLength` tokens (-1: symbolic), logits [1, S, vocab].
// decode: one token after a past of `pastLength` (-1: symbolic), logits [1, 1, vocab].
ir::Model pairModel(bool decode, int64_t length, const PairNames& n = {}) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets.push_back(ir::OpsetImport{"", 17});
  ir::Graph& g = m.graph;
  g.name = decode ? "decode" : "prefill";
  const ir::Dim seq = decode ? ir::Dim::known(1) : (length < 0 ? ir::Dim::named("seq") : ir::Dim::known(length));
  g.inputs.push_back(value(n.tokens, ir::ElemType::Int64, {ir::Dim::known(1), seq}));
  g.initializers.push_back(
      {"E", ir::Tensor::fromVector(ir::ElemType::Float, {kVocab, kWidth}, embedding()), std::nullopt});
  g.initializers.push_back(
      {"W", ir::Tensor::fromVector(ir::ElemType::Float, {kWidth, kVocab}, projection()), std::nullopt});
  g.initializers.push_back(
      {"axis1", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, std::vector<int64_t>{1}), std::nullopt});
  g.initializers.push_back(
      {"axis2", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, std::vector<int64_t>{2}), std::nullopt});
  g.nodes.push_back(makeNode("Gather", ir::OpKind::Gather, {"E", n.tokens}, {"x"}));
  g.nodes.push_back(makeNode("Unsqueeze", ir::OpKind::Unsqueeze, {"x", "axis1"}, {"x4"}));
  const std::string present = decode ? n.present : n.prefillPresent;
  ir::Dim total = ir::Dim::named("total");
  if (decode) {
    g.inputs.push_back(value(n.past, ir::ElemType::Float, {dim(1), dim(1), dim(length), dim(kWidth)}));
    g.nodes.push_back(
        makeNode("Concat", ir::OpKind::Concat, {n.past, "x4"}, {present}, {ir::Attribute::makeInt("axis", 2)}));
    if (length >= 0) total = ir::Dim::known(length + 1);
  } else {
    g.nodes.push_back(makeNode("Identity", ir::OpKind::Identity, {"x4"}, {present}));
    if (length >= 0) total = ir::Dim::known(length);
  }
  if (!n.extraInput.empty()) {
    g.inputs.push_back(value(n.extraInput, ir::ElemType::Float, {dim(1)}));
    g.nodes.push_back(makeNode("Identity", ir::OpKind::Identity, {n.extraInput}, {"extra_out"}));
    g.outputs.push_back(value("extra_out", ir::ElemType::Float, {dim(1)}));
  }
  g.nodes.push_back(makeNode("ReduceSum", ir::OpKind::ReduceSum, {present, "axis2"}, {"sum"},
                             {ir::Attribute::makeInt("keepdims", 0)}));  // [1, 1, width]
  g.nodes.push_back(makeNode("Add", ir::OpKind::Add, {"x", "sum"}, {"mixed"}));
  g.nodes.push_back(makeNode("MatMul", ir::OpKind::MatMul, {"mixed", "W"}, {n.logits}));
  g.outputs.push_back(value(n.logits, ir::ElemType::Float, {dim(1), seq, dim(kVocab)}));
  g.outputs.push_back(value(present, ir::ElemType::Float, {dim(1), dim(1), total, dim(kWidth)}));
  ops::decodeGraph(g);
  return m;
}

std::unique_ptr<runtime::Session> load(ir::Model m, const std::string& name) {
  auto s = runtime::Session::load(std::move(m), ".", {}, name);
  INFO((s ? std::string() : s.error().message()));
  REQUIRE(s);
  return std::move(s).value();
}

ir::Tensor promptOf(const std::vector<int64_t>& ids) {
  return ir::Tensor::fromVector(ir::ElemType::Int64, {1, static_cast<int64_t>(ids.size())}, ids);
}

// The pair's arithmetic done directly: the tokens and each step's last-position logits.
struct Reference {
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;
};
Reference expectedRun(const std::vector<int64_t>& prompt, size_t count) {
  const auto e = embedding(), w = projection();
  std::vector<float> sum(kWidth, 0);
  Reference out;
  std::vector<int64_t> fed = prompt;
  for (size_t step = 0; step < count; ++step) {
    for (int64_t t : fed)
      for (int64_t c = 0; c < kWidth; ++c) sum[c] += e[t * kWidth + c];
    const int64_t last = fed.back();
    std::vector<float> logits(kVocab, 0);
    for (int64_t v = 0; v < kVocab; ++v)
      for (int64_t c = 0; c < kWidth; ++c) logits[v] += (e[last * kWidth + c] + sum[c]) * w[c * kVocab + v];
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    out.tokens.push_back(best);
    out.logits.push_back(logits);
    fed = {best};
  }
  return out;
}

runtime::GenerateResult generate(const runtime::Session& prefill, std::vector<runtime::PairModel> decodes,
                                 const std::vector<int64_t>& prompt, size_t count, runtime::GenerateOptions o = {}) {
  o.keepLogits = true;
  auto g = runtime::Generator::create({&prefill, "prefill"}, std::move(decodes), o);
  INFO((g ? std::string() : g.error().message()));
  REQUIRE(g);
  auto r = g->run(promptOf(prompt), count);
  INFO((r ? std::string() : r.error().message()));
  REQUIRE(r);
  return std::move(r).value();
}

void requireMatches(const runtime::GenerateResult& r, const std::vector<int64_t>& prompt, size_t count) {
  const Reference want = expectedRun(prompt, count);
  REQUIRE(r.tokens == want.tokens);
  REQUIRE(r.stepMs.size() == count);
  REQUIRE(r.logits.size() == count);
  for (size_t i = 0; i < count; ++i) {
    REQUIRE(r.logits[i].shape() == ir::Shape{1, kVocab});
    const float* got = r.logits[i].dataAs<float>();
    for (int64_t v = 0; v < kVocab; ++v) REQUIRE(got[v] == want.logits[i][v]);
  }
}

std::string errorOf(const Expected<runtime::Generator>& g) { return g ? std::string("no error") : g.error().message(); }

}  // namespace

TEST_CASE("a prefill and a decode with a symbolic past generate as the arithmetic says", "[generate][runtime]") {
  const std::vector<int64_t> prompt{3, 1, 4, 1, 5};
  // The test would prove little if the tokens did not change with the state.
  const auto reference = expectedRun(prompt, 8).tokens;
  REQUIRE(std::set<int64_t>(reference.begin(), reference.end()).size() >= 3);
  auto prefill = load(pairModel(false, -1), "prefill");
  auto decode = load(pairModel(true, -1), "decode");
  auto r = generate(*prefill, {{decode.get(), "decode"}}, prompt, 8);
  requireMatches(r, prompt, 8);
  // The present's shape follows from the past's (the axis the declared past and present differ in): in place.
  REQUIRE(r.presentsInPlace == 7);
  REQUIRE(r.decodeModel == std::vector<size_t>(7, 0));
  REQUIRE(r.ttftMs() >= 0);
  REQUIRE(r.decodeTokensPerSecond() > 0);
}

TEST_CASE("each step runs the decode variant that takes its past length", "[generate][runtime]") {
  const std::vector<int64_t> prompt{2, 6, 0};
  auto prefill = load(pairModel(false, 3), "prefill");
  std::vector<std::unique_ptr<runtime::Session>> sessions;
  std::vector<runtime::PairModel> decodes;
  for (int64_t past : {5, 3, 6, 4}) {  // in no particular order
    sessions.push_back(load(pairModel(true, past), "decode_p" + std::to_string(past)));
    decodes.push_back({sessions.back().get(), "decode_p" + std::to_string(past)});
  }
  SECTION("every length has its variant") {
    auto r = generate(*prefill, decodes, prompt, 5);
    requireMatches(r, prompt, 5);
    REQUIRE(r.decodeModel == std::vector<size_t>{1, 3, 0, 2});
    REQUIRE(r.presentsInPlace == 4);
    std::vector<size_t> seen;
    auto g = runtime::Generator::create({prefill.get(), "prefill"}, decodes);
    REQUIRE(g);
    REQUIRE(g->run(promptOf(prompt), 3, [&](size_t i, const runtime::GenerateResult& so) {
      seen.push_back(i);
      REQUIRE(so.tokens.size() == i + 1);
    }));
    REQUIRE(seen == std::vector<size_t>{0, 1, 2});
  }
  SECTION("a length no variant takes fails before the prefill runs, naming the lengths they take") {
    auto g = runtime::Generator::create({prefill.get(), "prefill"}, decodes);
    REQUIRE(g);
    auto r = g->run(promptOf(prompt), 6);
    REQUIRE_FALSE(r);
    REQUIRE(r.error().code() == ErrorCode::NotFound);
    REQUIRE_THAT(r.error().message(),
                 Catch::Contains("token 5 needs a decode model for a past of 7 tokens ('past_key_0' of shape "
                                 "1x1x7x3), and no decode model given takes it: 'decode_p5' takes 1x1x5x3"));
  }
  SECTION("the prompt must be int64 [1, S]") {
    auto g = runtime::Generator::create({prefill.get(), "prefill"}, decodes);
    REQUIRE(g);
    auto asFloat = ir::Tensor::fromVector(ir::ElemType::Float, {1, 3}, std::vector<float>{2, 6, 0});
    auto r = g->run(asFloat, 2);
    REQUIRE_FALSE(r);
    REQUIRE_THAT(r.error().message(), Catch::Contains("the prompt must be int64 token ids of shape [1, S]"));
    auto twoRows = ir::Tensor::fromVector(ir::ElemType::Int64, {2, 3}, std::vector<int64_t>{2, 6, 0, 2, 6, 0});
    REQUIRE_FALSE(g->run(twoRows, 2));
    // A prompt of another length than the compiled prefill's: the run says which input and shape.
    auto r2 = g->run(promptOf({1, 2}), 2);
    REQUIRE_FALSE(r2);
    REQUIRE_THAT(r2.error().message(), Catch::Contains("generate: prefill 'prefill' on the prompt of 2 tokens"));
  }
}

TEST_CASE("key/value pairs given by name", "[generate][runtime]") {
  PairNames names;
  names.past = "cache_in";
  names.present = names.prefillPresent = "cache_out";
  auto prefill = load(pairModel(false, -1, names), "prefill");
  auto decode = load(pairModel(true, -1, names), "decode");
  const std::vector<int64_t> prompt{1, 2};
  // Names no exporter convention pairs: refused, saying how to name them.
  auto g = runtime::Generator::create({prefill.get(), "prefill"}, {{decode.get(), "decode"}});
  REQUIRE_THAT(errorOf(g), Catch::Contains("decode 'decode' has no past key/value input with a present output of the "
                                           "matching name"));
  runtime::GenerateOptions o;
  o.kv = {{"cache_in", "cache_out"}};
  requireMatches(generate(*prefill, {{decode.get(), "decode"}}, prompt, 4, o), prompt, 4);
  o.kv = {{"cache_in", "nothing"}};
  REQUIRE_THAT(errorOf(runtime::Generator::create({prefill.get(), "prefill"}, {{decode.get(), "decode"}}, o)),
               Catch::Contains("decode 'decode' has no output 'nothing'"));
}

TEST_CASE("pairs the loop cannot drive are refused, naming the model and the value", "[generate][runtime]") {
  auto decode = load(pairModel(true, -1), "decode");
  SECTION("a prefill without the present a decode past reads") {
    PairNames names;
    names.prefillPresent = "present_k0";
    auto prefill = load(pairModel(false, -1, names), "prefill");
    REQUIRE_THAT(errorOf(runtime::Generator::create({prefill.get(), "prefill"}, {{decode.get(), "decode"}})),
                 Catch::Contains("prefill 'prefill' has no output 'present_key_0' for the decode input 'past_key_0' "
                                 "(outputs: 'logits', 'present_k0')"));
  }
  SECTION("a decode input the loop does not feed") {
    PairNames names;
    names.extraInput = "cache_position";
    auto prefill = load(pairModel(false, -1), "prefill");
    auto odd = load(pairModel(true, -1, names), "odd");
    REQUIRE_THAT(
        errorOf(runtime::Generator::create({prefill.get(), "prefill"}, {{decode.get(), "decode"}, {odd.get(), "odd"}})),
        Catch::Contains("decode 'odd': input 'cache_position' (float32 1) is none of what the generate loop "
                        "feeds"));
  }
  SECTION("a prefill given as the decode") {
    auto prefill = load(pairModel(false, -1), "prefill");
    REQUIRE_THAT(errorOf(runtime::Generator::create({prefill.get(), "prefill"}, {{prefill.get(), "prefill too"}})),
                 Catch::Contains("decode 'prefill too' has no past key/value input"));
  }
  SECTION("a token input of another type") {
    auto prefill = load(pairModel(false, -1), "prefill");
    ir::Model m = pairModel(true, -1);
    m.graph.inputs[0].type = ir::ElemType::Int32;
    auto int32 = runtime::Session::load(std::move(m), ".", {}, "int32");
    REQUIRE(int32);
    REQUIRE_THAT(errorOf(runtime::Generator::create({prefill.get(), "prefill"}, {{int32->get(), "int32"}})),
                 Catch::Contains("int64"));
  }
}
