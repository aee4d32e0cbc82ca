// Indexing (GatherElements/ScatterElements, GatherND/ScatterND, OneHot), CumSum/TopK, the losses, Einsum,
// Attention and the bitwise ops: semantics beyond the node tests' examples.
#include "kernel_test_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string_view>

using namespace ctxkit;
using namespace ctxkit::test;

TEST_CASE("ScatterElements reduces duplicates, GatherElements takes negative indices") {
  auto data = floats({1, 3}, {1, 2, 3});
  auto idx = int64s({1, 2}, {1, 1});
  auto upd = floats({1, 2}, {10, 20});
  requireClose(values<float>(Op(OpKind::ScatterElements, 18).i("axis", 1).s("reduction", "add").run1({&data, &idx, &upd})),
               {1, 32, 3});
  requireClose(values<float>(Op(OpKind::ScatterElements, 18).i("axis", 1).s("reduction", "max").run1({&data, &idx, &upd})),
               {1, 20, 3});
  auto neg = int64s({1, 2}, {-1, 0});
  requireClose(values<float>(Op(OpKind::GatherElements, 13).i("axis", 1).run1({&data, &neg})), {3, 1});
  auto bad = int64s({1, 1}, {3});
  REQUIRE(Op(OpKind::GatherElements, 13).i("axis", 1).fails({&data, &bad}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("ScatterElements and GatherElements on threads match the definition, duplicates combined in order") {
  // Reference: the ONNX definition's loop over the indices in row-major order (later duplicates win or combine).
  // Indices smaller than the data on the inner dims, negative ones, and enough elements to go to the pool's threads.
  kernels::ThreadPool pool(2);
  struct Case {
    ir::Shape data, idx;
    int64_t axis;
  };
  for (const Case& cs : {Case{{3, 40, 700}, {3, 40, 700}, 1}, Case{{6, 9, 30, 41}, {5, 7, 30, 40}, 2},
                         Case{{150, 8, 7, 7}, {150, 8, 7, 7}, 0}, Case{{2, 5, 30000}, {2, 5, 29999}, 2}}) {
    const size_t rank = cs.data.size();
    int64_t dataCount = 1, idxCount = 1;
    for (size_t d = 0; d < rank; ++d) dataCount *= cs.data[d], idxCount *= cs.idx[d];
    std::vector<float> dv(static_cast<size_t>(dataCount)), uv(static_cast<size_t>(idxCount));
    std::vector<int64_t> iv(static_cast<size_t>(idxCount));
    const int64_t dim = cs.data[static_cast<size_t>(cs.axis)];
    for (size_t i = 0; i < dv.size(); ++i) dv[i] = std::sin(0.37f * static_cast<float>(i));
    for (size_t i = 0; i < iv.size(); ++i) {
      iv[i] = static_cast<int64_t>((i * 7919) % static_cast<size_t>(dim));  // many duplicates along the axis
      if (i % 3 == 0) iv[i] -= dim;
      uv[i] = 0.5f + static_cast<float>(i % 97);
    }
    auto data = floats(cs.data, dv);
    auto idx = int64s(cs.idx, iv);
    auto upd = floats(cs.idx, uv);
    for (const char* reduction : {"none", "add"}) {
      std::vector<float> want = dv;
      std::vector<float> gathered(static_cast<size_t>(idxCount));
      std::vector<int64_t> pos(rank, 0);
      for (size_t k = 0; k < iv.size(); ++k) {
        int64_t off = 0;
        for (size_t d = 0; d < rank; ++d) {
          const int64_t at = d == static_cast<size_t>(cs.axis) ? (iv[k] < 0 ? iv[k] + dim : iv[k]) : pos[d];
          off = off * cs.data[d] + at;
        }
        float& w = want[static_cast<size_t>(off)];
        w = std::string_view(reduction) == "add" ? w + uv[k] : uv[k];
        gathered[k] = dv[static_cast<size_t>(off)];
        for (size_t d = rank; d-- > 0;) {
          if (++pos[d] < cs.idx[d]) break;
          pos[d] = 0;
        }
      }
      for (kernels::ThreadPool* p : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
        auto op = Op(OpKind::ScatterElements, 18).i("axis", cs.axis).s("reduction", reduction);
        REQUIRE(values<float>(op.run1({&data, &idx, &upd}, p)) == want);
        REQUIRE(values<float>(Op(OpKind::GatherElements, 13).i("axis", cs.axis).run1({&data, &idx}, p)) == gathered);
      }
    }
    auto bad = int64s(cs.idx, std::vector<int64_t>(iv.size(), dim));
    REQUIRE(Op(OpKind::GatherElements, 13).i("axis", cs.axis).fails({&data, &bad}).code() == ErrorCode::InvalidGraph);
    auto threaded = Op(OpKind::ScatterElements, 18).i("axis", cs.axis).eval({&data, &bad, &upd}, 1, &pool);
    REQUIRE_FALSE(threaded);
    REQUIRE(threaded.error().code() == ErrorCode::InvalidGraph);
  }
}

TEST_CASE("GatherND with batch_dims and ScatterND with slices") {
  auto data = floats({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto idx = int64s({2, 1}, {1, 0});
  auto g = Op(OpKind::GatherND, 13).i("batch_dims", 1).run1({&data, &idx});
  REQUIRE(g.shape() == ir::Shape{2, 2});
  requireClose(values<float>(g), {2, 3, 4, 5});
  auto rows = int64s({1, 1}, {1});
  auto upd = floats({1, 2, 2}, {9, 9, 9, 9});
  requireClose(values<float>(Op(OpKind::ScatterND, 18).run1({&data, &rows, &upd})), {0, 1, 2, 3, 9, 9, 9, 9});
}

TEST_CASE("OneHot wraps negative indices, CumSum exclusive and reverse, TopK breaks ties by index") {
  auto i = int64s({3}, {0, -1, 5});
  auto depth = floats({}, {3});
  auto vals = floats({2}, {0, 1});
  auto oh = Op(OpKind::OneHot, 11).run1({&i, &depth, &vals});
  REQUIRE(oh.shape() == ir::Shape{3, 3});
  requireClose(values<float>(oh), {1, 0, 0, 0, 0, 1, 0, 0, 0});  // 5 is out of range: all off
  auto x = floats({4}, {1, 2, 3, 4});
  auto axis = int32s({}, {0});
  requireClose(values<float>(Op(OpKind::CumSum, 14).i("exclusive", 1).i("reverse", 1).run1({&x, &axis})),
               {9, 7, 4, 0});
  auto t = floats({5}, {3, 1, 3, 2, 3});
  auto k = int64s({1}, {2});
  auto r = Op(OpKind::TopK, 11).eval({&t, &k}, 2);
  REQUIRE(r);
  requireClose(values<float>((*r)[0]), {3, 3});
  REQUIRE(values<int64_t>((*r)[1]) == std::vector<int64_t>{0, 2});
}

TEST_CASE("TopK of few among many keeps the sorted order with ties by the lower index, on rows and columns") {
  // 2 x 300 x 3 with values from a small set (many ties), k = 7 along axis 1 (strided by 3), then along the last axis
  // of a 6 x 400 view: each against a stable sort of the whole slice.
  std::vector<float> v(2 * 300 * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 23) - 11.0f;
  for (const bool largest : {true, false}) {
    for (const auto& [shape, axis] : {std::pair{ir::Shape{2, 300, 3}, int64_t{1}}, std::pair{ir::Shape{6, 300}, int64_t{1}}}) {
      const int64_t outer = shape[0], length = shape[1], inner = shape.size() == 3 ? shape[2] : 1;
      auto x = floats(shape, std::vector<float>(v.begin(), v.begin() + outer * length * inner));
      auto k = int64s({1}, {7});
      auto r = Op(OpKind::TopK, 11).i("axis", axis).i("largest", largest ? 1 : 0).eval({&x, &k}, 2);
      REQUIRE(r);
      const auto got = values<float>((*r)[0]);
      const auto idx = values<int64_t>((*r)[1]);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          std::vector<int64_t> order(static_cast<size_t>(length));
          std::iota(order.begin(), order.end(), int64_t{0});
          auto at = [&](int64_t l) { return v[static_cast<size_t>((o * length + l) * inner + i)]; };
          std::stable_sort(order.begin(), order.end(),
                           [&](int64_t p, int64_t q) { return largest ? at(p) > at(q) : at(p) < at(q); });
          for (int64_t j = 0; j < 7; ++j) {
            const auto dst = static_cast<size_t>((o * 7 + j) * inner + i);
            REQUIRE(idx[dst] == order[static_cast<size_t>(j)]);
            REQUIRE(got[dst] == at(order[static_cast<size_t>(j)]));
          }
        }
    }
  }
}

TEST_CASE("NegativeLogLikelihoodLoss mean divides by the weights of the targets not ignored") {
  auto logp = floats({2, 2}, {-1, -2, -3, -4});
  auto target = int64s({2}, {1, 0});
  auto w = floats({2}, {2, 3});
  requireClose(values<float>(Op(OpKind::NegativeLogLikelihoodLoss, 13).run1({&logp, &target, &w})),
               {(2 * 3 + 3 * 2) / 5.0f});  // -logp[target] * weight[target], over the weights
  requireClose(values<float>(Op(OpKind::NegativeLogLikelihoodLoss, 13).i("ignore_index", 0).run1({&logp, &target, &w})),
               {2.0f});
  auto sum = Op(OpKind::SoftmaxCrossEntropyLoss, 13).s("reduction", "sum").eval({&logp, &target}, 2);
  REQUIRE(sum);
  float lse0 = std::log(std::exp(-1.0f) + std::exp(-2.0f)), lse1 = std::log(std::exp(-3.0f) + std::exp(-4.0f));
  requireClose(values<float>((*sum)[0]), {(lse0 + 2) + (lse1 + 3)});
  requireClose(values<float>((*sum)[1]), {-1 - lse0, -2 - lse0, -3 - lse1, -4 - lse1});
}

TEST_CASE("Einsum: implicit output, diagonal, broadcast ellipsis") {
  auto a = floats({2, 2}, {1, 2, 3, 4});
  requireClose(values<float>(Op(OpKind::Einsum, 12).s("equation", "ii->i").run1({&a})), {1, 4});
  auto t = Op(OpKind::Einsum, 12).s("equation", "ji").run1({&a});  // implicit: labels in order, "ij"
  requireClose(values<float>(t), {1, 3, 2, 4});
  auto b = floats({3, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2, 0, 1, 1, 0});
  auto m = Op(OpKind::Einsum, 12).s("equation", "...ij,jk->...ik").run1({&b, &a});
  REQUIRE(m.shape() == ir::Shape{3, 2, 2});
  requireClose(values<float>(m), {1, 2, 3, 4, 2, 4, 6, 8, 3, 4, 1, 2});
}

TEST_CASE("Attention: grouped heads share a key/value head, causal masking counts the past") {
  // Q: 2 heads, 1 query; K/V: 1 head, 1 new key after 1 past key. Unit scores make the softmax plain.
  auto q = floats({1, 2, 1, 1}, {0, 0});
  auto k = floats({1, 1, 1, 1}, {0});
  auto v = floats({1, 1, 1, 1}, {4});
  auto pk = floats({1, 1, 1, 1}, {0});
  auto pv = floats({1, 1, 1, 1}, {2});
  auto r = Op(OpKind::Attention, 23).i("is_causal", 1).eval({&q, &k, &v, nullptr, &pk, &pv}, 3);
  REQUIRE(r);
  REQUIRE((*r)[0].shape() == ir::Shape{1, 2, 1, 1});
  requireClose(values<float>((*r)[0]), {3, 3});  // both keys visible (offset 1): mean of 2 and 4
  REQUIRE((*r)[1].shape() == ir::Shape{1, 1, 2, 1});
  requireClose(values<float>((*r)[2]), {2, 4});
  auto mask = typed<uint8_t>(ElemType::Bool, {1, 1}, {1});  // one column: the second key is padded away
  auto y = Op(OpKind::Attention, 23).eval({&q, &k, &v, &mask, &pk, &pv}, 1);
  REQUIRE(y);
  requireClose(values<float>((*y)[0]), {2, 2});
  auto none = typed<uint8_t>(ElemType::Bool, {1, 2}, {0, 0});  // a fully masked row: zeros, not NaN
  auto z = Op(OpKind::Attention, 23).eval({&q, &k, &v, &none, &pk, &pv}, 1);
  REQUIRE(z);
  requireClose(values<float>((*z)[0]), {0, 0});
}

TEST_CASE("BitShift past the width gives 0, Bitwise ops broadcast") {
  auto x = typed<uint8_t>(ElemType::Uint8, {3}, {1, 128, 255});
  auto s = typed<uint8_t>(ElemType::Uint8, {3}, {1, 1, 8});
  REQUIRE(values<uint8_t>(Op(OpKind::BitShift, 11).s("direction", "LEFT").run1({&x, &s})) ==
          std::vector<uint8_t>{2, 0, 0});
  REQUIRE(values<uint8_t>(Op(OpKind::BitShift, 11).s("direction", "RIGHT").run1({&x, &s})) ==
          std::vector<uint8_t>{0, 64, 0});
  auto m = typed<uint8_t>(ElemType::Uint8, {}, {0x0f});
  REQUIRE(values<uint8_t>(Op(OpKind::BitwiseAnd, 18).run1({&x, &m})) == std::vector<uint8_t>{1, 0, 15});
}

TEST_CASE("QuantizeLinear rounds halves to even and saturates, DequantizeLinear per axis and blocked") {
  auto x = floats({4}, {2.5f, 3.5f, -1000, 1000});
  auto scale = floats({}, {1});
  auto zp = typed<int8_t>(ElemType::Int8, {}, {0});
  REQUIRE(values<int8_t>(Op(OpKind::QuantizeLinear, 21).run1({&x, &scale, &zp})) ==
          std::vector<int8_t>{2, 4, -128, 127});
  auto q = typed<uint8_t>(ElemType::Uint8, {2, 2}, {10, 20, 30, 40});
  auto perAxis = floats({2}, {1, 2});
  auto zp2 = typed<uint8_t>(ElemType::Uint8, {2}, {10, 0});
  requireClose(values<float>(Op(OpKind::DequantizeLinear, 21).i("axis", 1).run1({&q, &perAxis, &zp2})),
               {0, 40, 20, 80});
  auto blocked = floats({2, 1}, {1, 10});  // block_size 2 along axis 1: one scale per row
  requireClose(values<float>(Op(OpKind::DequantizeLinear, 21).i("axis", 1).i("block_size", 2).run1({&q, &blocked})),
               {10, 20, 300, 400});
}

TEST_CASE("RotaryEmbedding rotates halves or interleaved pairs by the cached angle") {
  auto x = floats({1, 1, 1, 4}, {1, 2, 3, 4});  // [batch, heads, seq, head_size]
  auto cos = floats({1, 1, 2}, {0, 1});
  auto sin = floats({1, 1, 2}, {1, 0});
  // Halves: (x0, x2) rotated by 90 degrees, (x1, x3) unchanged.
  requireClose(values<float>(Op(OpKind::RotaryEmbedding, 23).run1({&x, &cos, &sin})), {-3, 2, 1, 4});
  requireClose(values<float>(Op(OpKind::RotaryEmbedding, 23).i("interleaved", 1).run1({&x, &cos, &sin})),
               {-2, 1, 3, 4});
}

TEST_CASE("Det pivots, ReverseSequence reverses each batch's prefix, DynamicQuantizeLinear covers zero") {
  auto m = floats({2, 2, 2}, {0, 1, 1, 0, 2, 1, 1, 3});  // a row swap: -1; then 2 * 3 - 1 = 5
  requireClose(values<float>(Op(OpKind::Det, 11).run1({&m})), {-1, 5});
  auto x = floats({3, 2}, {1, 10, 2, 20, 3, 30});  // [time, batch]
  auto lens = int64s({2}, {3, 1});
  requireClose(values<float>(Op(OpKind::ReverseSequence, 10).run1({&x, &lens})), {3, 10, 2, 20, 1, 30});
  auto v = floats({3}, {1, 2, 3});  // range [0, 3]: scale 3 / 255, zero point 0
  auto r = Op(OpKind::DynamicQuantizeLinear, 11).eval({&v}, 3);
  REQUIRE(r);
  REQUIRE(values<uint8_t>((*r)[0]) == std::vector<uint8_t>{85, 170, 255});
  REQUIRE(values<uint8_t>((*r)[2])[0] == 0);
  // All zeros: an empty range has scale 1 (the ONNX reference and ONNX Runtime), not 0.
  auto zeros = floats({4}, {0, 0, 0, 0});
  auto z = Op(OpKind::DynamicQuantizeLinear, 11).eval({&zeros}, 3);
  REQUIRE(z);
  CHECK(values<uint8_t>((*z)[0]) == std::vector<uint8_t>{0, 0, 0, 0});
  CHECK(values<float>((*z)[1]) == std::vector<float>{1.0f});
  CHECK(values<uint8_t>((*z)[2])[0] == 0);
  // A quotient at exactly .5 rounds to even: range [-1, 254] gives scale 1 and zero point 1; 1.5 -> 2 + 1, 2.5 -> 2 + 1.
  auto ties = floats({4}, {-1, 1.5f, 2.5f, 254});
  auto t = Op(OpKind::DynamicQuantizeLinear, 11).eval({&ties}, 3);
  REQUIRE(t);
  CHECK(values<uint8_t>((*t)[0]) == std::vector<uint8_t>{0, 3, 3, 255});
}
