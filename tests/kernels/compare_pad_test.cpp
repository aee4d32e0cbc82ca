// Comparison, logic, Where, Max/Min, Clip, HardSwish, ConstantOfShape, Expand, Range and Pad on small
// hand-computed cases, plus the shape rules that need an input's value.
#include "kernel_test_util.h"

using namespace ctxkit;
using namespace ctxkit::test;

namespace {
std::vector<uint8_t> bools(const ir::Tensor& t) {
  const auto* p = reinterpret_cast<const uint8_t*>(t.data());
  return std::vector<uint8_t>(p, p + t.elementCount());
}
ir::Tensor boolT(ir::Shape shape, std::vector<uint8_t> v) { return typed(ElemType::Bool, std::move(shape), v); }
} // namespace

TEST_CASE("comparisons broadcast and give bool") {
  auto a = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = floats({3}, {2, 2, 7});
  auto eq = Op(OpKind::Equal, 13).run1({&a, &b});
  REQUIRE(eq.type() == ElemType::Bool);
  REQUIRE(eq.shape() == ir::Shape{2, 3});
  REQUIRE(bools(eq) == std::vector<uint8_t>{0, 1, 0, 0, 0, 0});
  REQUIRE(bools(Op(OpKind::Greater, 13).run1({&a, &b})) == std::vector<uint8_t>{0, 0, 0, 1, 1, 0});
  REQUIRE(bools(Op(OpKind::Less, 13).run1({&a, &b})) == std::vector<uint8_t>{1, 0, 1, 0, 0, 1});
  REQUIRE(bools(Op(OpKind::GreaterOrEqual, 16).run1({&a, &b})) == std::vector<uint8_t>{0, 1, 0, 1, 1, 0});
  REQUIRE(bools(Op(OpKind::LessOrEqual, 16).run1({&a, &b})) == std::vector<uint8_t>{1, 1, 1, 0, 0, 1});
  auto i = int64s({2}, {5, -1});
  auto j = int64s({}, {5});
  REQUIRE(bools(Op(OpKind::Equal, 13).run1({&i, &j})) == std::vector<uint8_t>{1, 0});
  auto c = floats({4}, {1, 2, 3, 4});
  REQUIRE(Op(OpKind::Less, 13).fails({&a, &c}).message() ==
          "node 'n1' (Less): input shapes 2x3 and 4 do not broadcast");
  REQUIRE(Op(OpKind::Less, 13).fails({&a, &i}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("Not, And, Or and Where") {
  auto p = boolT({4}, {1, 1, 0, 0});
  auto q = boolT({4}, {1, 0, 1, 0});
  REQUIRE(bools(Op(OpKind::Not, 1).run1({&p})) == std::vector<uint8_t>{0, 0, 1, 1});
  REQUIRE(bools(Op(OpKind::And, 7).run1({&p, &q})) == std::vector<uint8_t>{1, 0, 0, 0});
  REQUIRE(bools(Op(OpKind::Or, 7).run1({&p, &q})) == std::vector<uint8_t>{1, 1, 1, 0});
  auto f = floats({4}, {1, 0, 1, 0});
  REQUIRE(Op(OpKind::Not, 1).fails({&f}).code() == ErrorCode::Unsupported); // not a bool input

  auto cond = boolT({2, 1}, {1, 0});
  auto x = floats({3}, {1, 2, 3});
  auto y = floats({}, {-1});
  auto w = Op(OpKind::Where, 16).run1({&cond, &x, &y});
  REQUIRE(w.shape() == ir::Shape{2, 3});
  REQUIRE(values<float>(w) == std::vector<float>{1, 2, 3, -1, -1, -1});
  auto xi = int64s({2, 2}, {1, 2, 3, 4});
  auto yi = int64s({2, 2}, {9, 8, 7, 6});
  auto ci = boolT({2}, {0, 1});
  REQUIRE(values<int64_t>(Op(OpKind::Where, 16).run1({&ci, &xi, &yi})) == std::vector<int64_t>{9, 2, 7, 4});
  REQUIRE(Op(OpKind::Where, 16).fails({&ci, &xi, &x}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("Max and Min are variadic with broadcasting") {
  auto a = floats({3}, {1, 5, 3});
  auto b = floats({2, 1}, {2, 4});
  auto c = floats({}, {0});
  auto mx = Op(OpKind::Max, 13).run1({&a, &b, &c});
  REQUIRE(mx.shape() == ir::Shape{2, 3});
  REQUIRE(values<float>(mx) == std::vector<float>{2, 5, 3, 4, 5, 4});
  REQUIRE(values<float>(Op(OpKind::Min, 13).run1({&a, &b})) == std::vector<float>{1, 2, 2, 1, 4, 3});
  REQUIRE(values<float>(Op(OpKind::Max, 13).run1({&a})) == std::vector<float>{1, 5, 3});
  auto i = int32s({2}, {-3, 7});
  auto j = int32s({2}, {4, -8});
  REQUIRE(values<int32_t>(Op(OpKind::Min, 13).run1({&i, &j})) == std::vector<int32_t>{-3, -8});
}

TEST_CASE("Clip: attributes before opset 11, optional inputs from 11") {
  auto x = floats({5}, {-3, -1, 0, 1, 3});
  REQUIRE(values<float>(Op(OpKind::Clip, 6).f("min", -1).f("max", 2).run1({&x})) ==
          std::vector<float>{-1, -1, 0, 1, 2});
  REQUIRE(values<float>(Op(OpKind::Clip, 6).f("max", 0.5f).run1({&x})) == std::vector<float>{-3, -1, 0, 0.5f, 0.5f});
  auto lo = floats({}, {-2});
  auto hi = floats({}, {1});
  REQUIRE(values<float>(Op(OpKind::Clip, 13).run1({&x, &lo, &hi})) == std::vector<float>{-2, -1, 0, 1, 1});
  REQUIRE(values<float>(Op(OpKind::Clip, 13).run1({&x, nullptr, &hi})) == std::vector<float>{-3, -1, 0, 1, 1});
  REQUIRE(values<float>(Op(OpKind::Clip, 13).run1({&x})) == std::vector<float>{-3, -1, 0, 1, 3});
  // min > max: everything becomes max.
  auto big = floats({}, {5});
  REQUIRE(values<float>(Op(OpKind::Clip, 13).run1({&x, &big, &hi})) == std::vector<float>{1, 1, 1, 1, 1});
  auto xi = typed<int8_t>(ElemType::Int8, {3}, {-100, 5, 100});
  auto loi = typed<int8_t>(ElemType::Int8, {}, {0});
  REQUIRE(values<int8_t>(Op(OpKind::Clip, 13).run1({&xi, &loi})) == std::vector<int8_t>{0, 5, 100});
  REQUIRE(Op(OpKind::Clip, 13).fails({&x, &loi}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("HardSwish") {
  auto x = floats({4}, {-4, -1.5f, 0.5f, 4});
  requireClose(values<float>(Op(OpKind::HardSwish, 14).run1({&x})), {0, -0.375f, 0.5f * (0.5f / 6 + 0.5f), 4});
}

TEST_CASE("ConstantOfShape with default and given values") {
  auto shape = int64s({2}, {2, 3});
  auto z = Op(OpKind::ConstantOfShape, 9).run1({&shape});
  REQUIRE(z.type() == ElemType::Float);
  REQUIRE(values<float>(z) == std::vector<float>(6, 0.0f));
  Op op(OpKind::ConstantOfShape, 9);
  op.attrs.set(ir::Attribute::makeTensor("value", int32s({1}, {7})));
  auto s = op.run1({&shape});
  REQUIRE(s.type() == ElemType::Int32);
  REQUIRE(values<int32_t>(s) == std::vector<int32_t>(6, 7));
  auto scalarShape = int64s({0}, {});
  REQUIRE(op.run1({&scalarShape}).shape() == ir::Shape{});
  std::vector<kernels::ValueDesc> descs{{ElemType::Int64, {2}, nullptr, true}};
  auto r = kernels::inferOutputs(op.ctx(), descs, 1);
  REQUIRE(r.error().code() == ErrorCode::Unsupported);
  REQUIRE(r.error().message() ==
          "node 'n1' (ConstantOfShape): input 0 (input) must be a known constant to infer the output shape");
}

TEST_CASE("Expand broadcasts both ways") {
  auto x = floats({3, 1}, {1, 2, 3});
  auto shape = int64s({3}, {2, 1, 2});
  auto y = Op(OpKind::Expand, 13).run1({&x, &shape});
  REQUIRE(y.shape() == ir::Shape{2, 3, 2});
  REQUIRE(values<float>(y) == std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  auto small = int64s({1}, {1});
  REQUIRE(Op(OpKind::Expand, 13).run1({&x, &small}).shape() == ir::Shape{3, 1});
  auto bad = int64s({2}, {2, 2});
  REQUIRE(Op(OpKind::Expand, 13).fails({&x, &bad}).code() == ErrorCode::InvalidGraph);
  std::vector<kernels::ValueDesc> descs{{ElemType::Float, {3, 1}, nullptr, true},
                                        {ElemType::Int64, {3}, nullptr, true}};
  auto r = kernels::inferOutputs(Op(OpKind::Expand, 13).ctx(), descs, 1);
  REQUIRE(r.error().message() ==
          "node 'n1' (Expand): input 1 (shape) must be a known constant to infer the output shape");
}

TEST_CASE("Range counts ceil((limit - start) / delta) elements") {
  auto s = floats({}, {1}), l = floats({}, {2}), d = floats({}, {0.3f});
  requireClose(values<float>(Op(OpKind::Range, 11).run1({&s, &l, &d})), {1, 1.3f, 1.6f, 1.9f});
  auto si = int32s({}, {10}), li = int32s({}, {4}), di = int32s({}, {-3});
  REQUIRE(values<int32_t>(Op(OpKind::Range, 11).run1({&si, &li, &di})) == std::vector<int32_t>{10, 7});
  auto up = int32s({}, {3});
  REQUIRE(Op(OpKind::Range, 11).run1({&si, &li, &up}).shape() == ir::Shape{0});
  std::vector<kernels::ValueDesc> descs{
      {ElemType::Int64, {}, nullptr, true}, {ElemType::Int64, {}, nullptr, true}, {ElemType::Int64, {}, nullptr, true}};
  auto r = kernels::inferOutputs(Op(OpKind::Range, 11).ctx(), descs, 1);
  REQUIRE(r.error().message() ==
          "node 'n1' (Range): input 0 (start) must be a known constant to infer the output shape");
}

TEST_CASE("Pad modes, negative pads, axes and opset 2 attributes") {
  auto x = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto pads = int64s({4}, {0, 2, 1, 0});
  auto cv = floats({}, {9});
  auto c = Op(OpKind::Pad, 13).run1({&x, &pads, &cv});
  REQUIRE(c.shape() == ir::Shape{3, 5});
  REQUIRE(values<float>(c) == std::vector<float>{9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9, 9, 9, 9});
  auto r = Op(OpKind::Pad, 13).s("mode", "reflect").run1({&x, &pads});
  REQUIRE(values<float>(r) == std::vector<float>{3, 2, 1, 2, 3, 6, 5, 4, 5, 6, 3, 2, 1, 2, 3});
  auto e = Op(OpKind::Pad, 13).s("mode", "edge").run1({&x, &pads});
  REQUIRE(values<float>(e) == std::vector<float>{1, 1, 1, 2, 3, 4, 4, 4, 5, 6, 4, 4, 4, 5, 6});
  auto wrapPads = int64s({4}, {0, 1, 0, 1});
  auto w = Op(OpKind::Pad, 19).s("mode", "wrap").run1({&x, &wrapPads});
  REQUIRE(values<float>(w) == std::vector<float>{3, 1, 2, 3, 1, 6, 4, 5, 6, 4});
  auto crop = int64s({4}, {0, -1, 0, 1});
  REQUIRE(values<float>(Op(OpKind::Pad, 13).run1({&x, &crop})) == std::vector<float>{2, 3, 0, 5, 6, 0});
  auto axes = int64s({1}, {-1});
  auto axisPads = int64s({2}, {1, 0});
  REQUIRE(values<float>(Op(OpKind::Pad, 18).run1({&x, &axisPads, nullptr, &axes})) ==
          std::vector<float>{0, 1, 2, 3, 0, 4, 5, 6});
  auto old = Op(OpKind::Pad, 2).ints("pads", {1, 0, 0, 0}).f("value", 1.5f).run1({&x});
  REQUIRE(values<float>(old) == std::vector<float>{1.5f, 1.5f, 1.5f, 1, 2, 3, 4, 5, 6});
  auto tooMuch = int64s({4}, {0, -4, 0, 0});
  REQUIRE(Op(OpKind::Pad, 13).fails({&x, &tooMuch}).code() == ErrorCode::InvalidGraph);
  std::vector<kernels::ValueDesc> descs{{ElemType::Float, {2, 3}, nullptr, true},
                                        {ElemType::Int64, {4}, nullptr, true}};
  auto inf = kernels::inferOutputs(Op(OpKind::Pad, 13).ctx(), descs, 1);
  REQUIRE(inf.error().message() ==
          "node 'n1' (Pad): input 1 (pads) must be a known constant to infer the output shape");
}
