// LSTM and GRU: hand-checkable one-unit cases, directions, sequence_lens, layout and omitted outputs.
#include "kernel_test_util.h"

using namespace ctxkit;
using namespace ctxkit::test;

namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

Op& strings(Op& op, const std::string& name, std::vector<std::string> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::Strings;
  a.strings = std::move(v);
  op.attrs.set(std::move(a));
  return op;
}

// One LSTM unit with input 1, every weight of W = 1, every weight of R = 0.5, no bias or peepholes.
struct LstmRef {
  float h = 0, c = 0;
  void step(float x) {
    float pre = x + 0.5f * h;
    float i = sigmoid(pre), o = sigmoid(pre), f = sigmoid(pre), g = std::tanh(pre);
    c = f * c + i * g;
    h = o * std::tanh(c);
  }
};

}  // namespace

TEST_CASE("LSTM with one unit over two steps") {
  auto x = floats({2, 1, 1}, {1, 2});
  auto w = floats({1, 4, 1}, {1, 1, 1, 1});
  auto r = floats({1, 4, 1}, {0.5f, 0.5f, 0.5f, 0.5f});
  auto r3 = Op(OpKind::LSTM, 14).i("hidden_size", 1).eval({&x, &w, &r}, 3);
  REQUIRE(r3.isOk());
  LstmRef ref;
  ref.step(1);
  float h1 = ref.h;
  ref.step(2);
  REQUIRE((*r3)[0].shape() == ir::Shape{2, 1, 1, 1});
  requireClose(values<float>((*r3)[0]), {h1, ref.h});
  requireClose(values<float>((*r3)[1]), {ref.h});
  requireClose(values<float>((*r3)[2]), {ref.c});

  // Reverse reads X from the end; bidirectional stacks both directions.
  LstmRef back;
  back.step(2);
  float b2 = back.h;
  back.step(1);
  auto rev = Op(OpKind::LSTM, 14).s("direction", "reverse").eval({&x, &w, &r}, 2);
  REQUIRE(rev.isOk());
  requireClose(values<float>((*rev)[0]), {back.h, b2});
  auto w2 = floats({2, 4, 1}, {1, 1, 1, 1, 1, 1, 1, 1});
  auto r2 = floats({2, 4, 1}, std::vector<float>(8, 0.5f));
  auto bi = Op(OpKind::LSTM, 14).s("direction", "bidirectional").eval({&x, &w2, &r2}, 2);
  REQUIRE(bi.isOk());
  REQUIRE((*bi)[0].shape() == ir::Shape{2, 2, 1, 1});
  requireClose(values<float>((*bi)[0]), {h1, back.h, ref.h, b2});
  requireClose(values<float>((*bi)[1]), {ref.h, back.h});
}

TEST_CASE("LSTM bias, peepholes, input_forget and initial state") {
  auto x = floats({1, 1, 1}, {0.5f});
  auto w = floats({1, 4, 1}, {1, 2, 3, 4});
  auto r = floats({1, 4, 1}, {0, 0, 0, 0});
  auto b = floats({1, 8}, {0.1f, 0.2f, 0.3f, 0.4f, 0.1f, 0.1f, 0.1f, 0.1f});
  auto h0 = floats({1, 1, 1}, {0});
  auto c0 = floats({1, 1, 1}, {2});
  auto p = floats({1, 3}, {0.5f, 0.25f, -0.5f});  // i, o, f
  auto out = Op(OpKind::LSTM, 7).eval({&x, &w, &r, &b, nullptr, &h0, &c0, &p}, 3);
  REQUIRE(out.isOk());
  float i = sigmoid(0.5f + 0.2f + 0.5f * 2), f = sigmoid(1.5f + 0.4f - 0.5f * 2), g = std::tanh(2.0f + 0.5f);
  float c = f * 2 + i * g;
  float o = sigmoid(1.0f + 0.3f + 0.25f * c);
  requireClose(values<float>((*out)[2]), {c});
  requireClose(values<float>((*out)[1]), {o * std::tanh(c)});
  // input_forget couples the forget gate to 1 - i.
  auto coupled = Op(OpKind::LSTM, 7).i("input_forget", 1).eval({&x, &w, &r, &b, nullptr, &h0, &c0, &p}, 3);
  REQUIRE(coupled.isOk());
  requireClose(values<float>((*coupled)[2]), {(1 - i) * 2 + i * g});
}

TEST_CASE("LSTM sequence_lens, layout 1 and omitted outputs") {
  // Batch of two, the second only one step long.
  auto x = floats({2, 2, 1}, {1, 3, 2, 4});  // [seq, batch, input]
  auto w = floats({1, 4, 1}, {1, 1, 1, 1});
  auto r = floats({1, 4, 1}, {0.5f, 0.5f, 0.5f, 0.5f});
  auto lens = int32s({2}, {2, 1});
  auto out = Op(OpKind::LSTM, 14).eval({&x, &w, &r, nullptr, &lens}, 3);
  REQUIRE(out.isOk());
  LstmRef a, b;
  a.step(1);
  float a1 = a.h;
  a.step(2);
  b.step(3);
  requireClose(values<float>((*out)[0]), {a1, b.h, a.h, 0});
  requireClose(values<float>((*out)[1]), {a.h, b.h});
  requireClose(values<float>((*out)[2]), {a.c, b.c});
  // Reverse with lengths: the short entry starts from its own last step.
  auto rev = Op(OpKind::LSTM, 14).s("direction", "reverse").eval({&x, &w, &r, nullptr, &lens}, 2);
  REQUIRE(rev.isOk());
  LstmRef ra;
  ra.step(2);
  float ra2 = ra.h;
  ra.step(1);
  requireClose(values<float>((*rev)[0]), {ra.h, b.h, ra2, 0});
  // layout 1: X is [batch, seq, input], Y [batch, seq, dirs, hidden], Y_h [batch, dirs, hidden].
  auto xb = floats({2, 2, 1}, {1, 2, 3, 4});
  auto l1 = Op(OpKind::LSTM, 14).i("layout", 1).eval({&xb, &w, &r, nullptr, &lens}, 2);
  REQUIRE(l1.isOk());
  REQUIRE((*l1)[0].shape() == ir::Shape{2, 2, 1, 1});
  REQUIRE((*l1)[1].shape() == ir::Shape{2, 1, 1});
  requireClose(values<float>((*l1)[0]), {a1, a.h, b.h, 0});
  // Y omitted: the kernel still produces Y_h.
  Op op(OpKind::LSTM, 14);
  auto ctx = op.ctx();
  std::vector<const ir::Tensor*> ins{&x, &w, &r};
  auto yh = ir::Tensor::allocate(ElemType::Float, {1, 2, 1});
  REQUIRE(yh.isOk());
  std::vector<ir::Tensor*> outs{nullptr, &*yh};
  REQUIRE(kernels::run(ctx, ins, outs).isOk());
  LstmRef c;
  c.step(3);
  c.step(4);
  requireClose(values<float>(*yh), {a.h, c.h});
}

TEST_CASE("LSTM shape and attribute errors name the node") {
  auto x = floats({2, 1, 1}, {1, 2});
  auto w = floats({1, 4, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
  auto r = floats({1, 4, 1}, {0, 0, 0, 0});
  REQUIRE(Op(OpKind::LSTM, 14).fails({&x, &w, &r}).message() ==
          "node 'n1' (LSTM): input 1 (W) has shape 1x4x2 but expected 1x4x1");
  auto w1 = floats({1, 4, 1}, {1, 1, 1, 1});
  Op bad(OpKind::LSTM, 14);
  strings(bad, "activations", {"Sigmoid", "Tanh", "Swish"});
  REQUIRE(bad.fails({&x, &w1, &r}).code() == ErrorCode::Unsupported);
  REQUIRE(Op(OpKind::LSTM, 14).s("direction", "sideways").fails({&x, &w1, &r}).code() == ErrorCode::InvalidGraph);
  auto lens = int32s({1}, {3});
  REQUIRE(Op(OpKind::LSTM, 14).fails({&x, &w1, &r, nullptr, &lens}).message() ==
          "node 'n1' (LSTM): sequence_lens[0] is 3 but must be in [0, 2]");
}

TEST_CASE("LSTM with Relu activations and clip") {
  auto x = floats({1, 1, 1}, {3});
  auto w = floats({1, 4, 1}, {1, 1, 1, 1});
  auto r = floats({1, 4, 1}, {0, 0, 0, 0});
  Op op(OpKind::LSTM, 14);
  strings(op, "activations", {"Relu", "Relu", "Relu"});
  auto out = op.eval({&x, &w, &r}, 3);
  REQUIRE(out.isOk());
  requireClose(values<float>((*out)[2]), {9});   // c = 3 * 3
  requireClose(values<float>((*out)[1]), {27});  // h = 3 * relu(9)
  op.f("clip", 2.0f);
  auto clipped = op.eval({&x, &w, &r}, 3);
  REQUIRE(clipped.isOk());
  requireClose(values<float>((*clipped)[2]), {4});  // gates clipped to 2
  requireClose(values<float>((*clipped)[1]), {8});
}

TEST_CASE("GRU with one unit: linear_before_reset 0 and 1") {
  auto x = floats({2, 1, 1}, {1, -1});
  auto w = floats({1, 3, 1}, {1, 1, 1});                            // z, r, h
  auto r = floats({1, 3, 1}, {0.5f, 0.5f, 0.5f});
  auto b = floats({1, 6}, {0.1f, 0.2f, 0.3f, 0.0f, 0.0f, 0.4f});   // Wb[zrh], Rb[zrh]
  auto h0 = floats({1, 1, 1}, {0.5f});
  for (int lbr : {0, 1}) {
    INFO("linear_before_reset " << lbr);
    float h = 0.5f;
    std::vector<float> ys;
    for (float xt : {1.0f, -1.0f}) {
      float z = sigmoid(xt + 0.5f * h + 0.1f), rg = sigmoid(xt + 0.5f * h + 0.2f);
      float cand = lbr ? std::tanh(xt + 0.3f + rg * (0.5f * h + 0.4f)) : std::tanh(xt + 0.3f + 0.5f * (rg * h) + 0.4f);
      h = (1 - z) * cand + z * h;
      ys.push_back(h);
    }
    auto out = Op(OpKind::GRU, 14).i("linear_before_reset", lbr).eval({&x, &w, &r, &b, nullptr, &h0}, 2);
    REQUIRE(out.isOk());
    requireClose(values<float>((*out)[0]), ys);
    requireClose(values<float>((*out)[1]), {h});
  }
}

TEST_CASE("GRU bidirectional with sequence_lens and layout 1") {
  auto x = floats({2, 2, 1}, {1, 3, 2, 4});  // batch 2, seq 2 in layout 1: entry 0 is {1, 3}, entry 1 {2, 4}
  auto w = floats({2, 3, 1}, {1, 1, 1, 1, 1, 1});
  auto r = floats({2, 3, 1}, std::vector<float>(6, 0.5f));
  auto lens = int32s({2}, {2, 1});
  auto out = Op(OpKind::GRU, 14).i("layout", 1).s("direction", "bidirectional").eval({&x, &w, &r, nullptr, &lens}, 2);
  REQUIRE(out.isOk());
  auto step = [](float h, float xt) {
    float z = sigmoid(xt + 0.5f * h), rg = sigmoid(xt + 0.5f * h);
    float cand = std::tanh(xt + 0.5f * (rg * h));
    return (1 - z) * cand + z * h;
  };
  float f1 = step(0, 1), f2 = step(f1, 3);  // entry 0 forward
  float r3 = step(0, 3), r1 = step(r3, 1);  // entry 0 reverse
  float e = step(0, 2);                     // entry 1, one step either way
  REQUIRE((*out)[0].shape() == ir::Shape{2, 2, 2, 1});
  requireClose(values<float>((*out)[0]), {f1, r1, f2, r3, e, e, 0, 0});
  REQUIRE((*out)[1].shape() == ir::Shape{2, 2, 1});
  requireClose(values<float>((*out)[1]), {f2, r1, e, e});
}

TEST_CASE("LSTM, GRU and RNN prepared with constant weights (packed once) match evaluation, bidirectional, with a "
          "thread pool") {
  struct Case {
    OpKind kind;
    int64_t gates;
    bool linearBeforeReset;
  };
  const int64_t seq = 5, batch = 3, input = 37, hidden = 19, dirs = 2;
  uint32_t state = 7;
  auto random = [&](ir::Shape shape) {
    std::vector<float> v(static_cast<size_t>(ir::elementCount(shape).value()));
    for (float& f : v) {
      state = state * 1664525u + 1013904223u;
      f = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) - 0.5f;
    }
    return floats(shape, v);
  };
  kernels::ThreadPool pool(2);
  for (const Case& c : {Case{OpKind::LSTM, 4, false}, Case{OpKind::GRU, 3, false}, Case{OpKind::GRU, 3, true},
                        Case{OpKind::RNN, 1, false}}) {
    CAPTURE(ir::opKindName(c.kind), c.linearBeforeReset);
    auto x = random({seq, batch, input});
    auto w = random({dirs, c.gates * hidden, input});
    auto r = random({dirs, c.gates * hidden, hidden});
    auto b = random({dirs, 2 * c.gates * hidden});
    Op op(c.kind, 14);
    op.s("direction", "bidirectional").i("hidden_size", hidden);
    if (c.kind == OpKind::GRU) op.i("linear_before_reset", c.linearBeforeReset ? 1 : 0);
    const size_t outputs = 2;
    auto evaluated = op.eval({&x, &w, &r, &b}, outputs);
    REQUIRE(evaluated.isOk());
    std::vector<const ir::Tensor*> inputs{&x, &w, &r, &b};
    std::vector<kernels::ValueDesc> descs;
    for (size_t i = 0; i < inputs.size(); ++i)
      descs.push_back({inputs[i]->type(), inputs[i]->shape(), i == 0 ? nullptr : inputs[i]});
    auto prepared = kernels::prepare(op.ctx(), descs, outputs);
    REQUIRE(prepared.isOk());
    std::vector<ir::Tensor> ys;
    for (const auto& d : (*prepared)->outputs()) ys.push_back(ir::Tensor::allocate(d.type, d.shape).value());
    ir::Tensor* outs[] = {&ys[0], &ys[1]};
    for (kernels::ThreadPool* p : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
      REQUIRE((*prepared)->run(inputs, outs, p).isOk());
      for (size_t o = 0; o < outputs; ++o) requireClose(values<float>(ys[o]), values<float>((*evaluated)[o]), 1e-5f);
    }
  }
}
