// The Reduce* family, ArgMax/ArgMin, Mod, the unary math ops, LogSoftmax/Hardmax, Trilu, CastLike and
// RMSNormalization: the semantics the node tests exercise only in part.
#include "kernel_test_util.h"

#include <limits>

using namespace ctxkit;
using namespace ctxkit::test;

TEST_CASE("Reduce ops take axes from the attribute before opset 18 and from input 1 after") {
  auto x = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto y = Op(OpKind::ReduceMax, 13).ints("axes", {1}).i("keepdims", 0).run1({&x});
  REQUIRE(y.shape() == ir::Shape{2});
  requireClose(values<float>(y), {3, 6});
  auto axes = int64s({1}, {0});
  auto s = Op(OpKind::ReduceSum, 13).run1({&x, &axes});  // ReduceSum moved to the input form at 13
  REQUIRE(s.shape() == ir::Shape{1, 3});
  requireClose(values<float>(s), {5, 7, 9});
  auto all = Op(OpKind::ReduceProd, 18).run1({&x, nullptr});  // no axes: every axis
  REQUIRE(all.shape() == ir::Shape{1, 1});
  requireClose(values<float>(all), {720});
  auto noop = Op(OpKind::ReduceL2, 18).i("noop_with_empty_axes", 1).run1({&x, nullptr});
  requireClose(values<float>(noop), {1, 2, 3, 4, 5, 6});  // the input unchanged
}

TEST_CASE("Reduce ops over an empty set give their identity") {
  auto x = floats({2, 0, 3}, {});
  auto axes = int64s({1}, {1});
  requireClose(values<float>(Op(OpKind::ReduceSum, 18).run1({&x, &axes})), {0, 0, 0, 0, 0, 0});
  requireClose(values<float>(Op(OpKind::ReduceProd, 18).run1({&x, &axes})), {1, 1, 1, 1, 1, 1});
  auto mn = values<float>(Op(OpKind::ReduceMin, 18).run1({&x, &axes}));
  REQUIRE(mn[0] == std::numeric_limits<float>::infinity());
  auto lse = values<float>(Op(OpKind::ReduceLogSumExp, 18).run1({&x, &axes}));
  REQUIRE(lse[0] == -std::numeric_limits<float>::infinity());
}

TEST_CASE("ReduceLogSumExp does not overflow and ReduceL1/SumSquare/LogSum follow their definitions") {
  auto x = floats({1, 2}, {1000, 1000});
  requireClose(values<float>(Op(OpKind::ReduceLogSumExp, 13).ints("axes", {1}).run1({&x})),
               {1000 + std::log(2.0f)});
  auto v = floats({3}, {-1, 2, -2});
  requireClose(values<float>(Op(OpKind::ReduceL1, 13).run1({&v})), {5});
  requireClose(values<float>(Op(OpKind::ReduceSumSquare, 13).run1({&v})), {9});
  auto p = floats({2}, {1, 2});
  requireClose(values<float>(Op(OpKind::ReduceLogSum, 13).run1({&p})), {std::log(3.0f)});
}

TEST_CASE("ReduceMax on bool is any, ReduceMin is all, integer sums are exact") {
  auto b = typed<uint8_t>(ElemType::Bool, {2, 2}, {0, 1, 0, 0});
  auto axes = int64s({1}, {1});
  REQUIRE(values<bool>(Op(OpKind::ReduceMax, 20).i("keepdims", 0).run1({&b, &axes})) == std::vector<bool>{true, false});
  REQUIRE(values<bool>(Op(OpKind::ReduceMin, 20).i("keepdims", 0).run1({&b, &axes})) ==
          std::vector<bool>{false, false});
  auto big = int64s({2}, {(int64_t{1} << 60) + 1, 1});
  REQUIRE(values<int64_t>(Op(OpKind::ReduceSum, 13).run1({&big, nullptr}))[0] == (int64_t{1} << 60) + 2);
}

TEST_CASE("ArgMax and ArgMin break ties by the first index unless select_last_index") {
  auto x = floats({2, 3}, {1, 3, 3, 2, 2, 0});
  auto first = Op(OpKind::ArgMax, 13).i("axis", 1).run1({&x});
  REQUIRE(first.shape() == ir::Shape{2, 1});
  REQUIRE(values<int64_t>(first) == std::vector<int64_t>{1, 0});
  auto last = Op(OpKind::ArgMax, 13).i("axis", 1).i("keepdims", 0).i("select_last_index", 1).run1({&x});
  REQUIRE(last.shape() == ir::Shape{2});
  REQUIRE(values<int64_t>(last) == std::vector<int64_t>{2, 1});
  REQUIRE(values<int64_t>(Op(OpKind::ArgMin, 13).i("axis", 0).run1({&x})) == std::vector<int64_t>{0, 1, 1});
}

TEST_CASE("ReduceMax and ReduceMin give NaN for a row holding one, over long rows and across rows") {
  // Rows of 200 (past the vector blocks): row 0 has a NaN at 150, row 1 infinities only (the NaN check's false alarm),
  // row 2 plain values with its extremes in the tail.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> v(600);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i * 37 % 101) - 50);
  v[150] = nan;
  v[210] = inf;
  v[333] = -inf;
  v[598] = 77;
  v[599] = -66;
  auto x = floats({3, 200}, v);
  auto mx = values<float>(Op(OpKind::ReduceMax, 13).ints("axes", {1}).i("keepdims", 0).run1({&x}));
  auto mn = values<float>(Op(OpKind::ReduceMin, 13).ints("axes", {1}).i("keepdims", 0).run1({&x}));
  REQUIRE(std::isnan(mx[0]));
  REQUIRE(std::isnan(mn[0]));
  REQUIRE(mx[1] == inf);
  REQUIRE(mn[1] == -inf);
  REQUIRE(mx[2] == 77);
  REQUIRE(mn[2] == -66);
  // Across rows (axis 0): the column holding the NaN, and the columns of the infinities.
  auto cols = values<float>(Op(OpKind::ReduceMax, 13).ints("axes", {0}).i("keepdims", 0).run1({&x}));
  REQUIRE(std::isnan(cols[150]));
  REQUIRE(cols[10] == inf);
  REQUIRE(cols[198] == 77);
  auto colMin = values<float>(Op(OpKind::ReduceMin, 13).ints("axes", {0}).i("keepdims", 0).run1({&x}));
  REQUIRE(std::isnan(colMin[150]));
  REQUIRE(colMin[133] == -inf);
  REQUIRE(colMin[199] == -66);
}

TEST_CASE("ArgMax over a leading axis compares plane by plane, ties by the first or last index") {
  // [3, 2, 2] along axis 0 (inner 4): per position the best of three planes, with ties in positions 1 and 3.
  auto x = floats({3, 2, 2}, {1, 5, 0, 2,  /**/ 4, 5, -1, 2, /**/ 3, 1, -2, 2});
  REQUIRE(values<int64_t>(Op(OpKind::ArgMax, 13).i("axis", 0).i("keepdims", 0).run1({&x})) ==
          std::vector<int64_t>{1, 0, 0, 0});
  REQUIRE(values<int64_t>(Op(OpKind::ArgMax, 13).i("axis", 0).i("select_last_index", 1).run1({&x})) ==
          std::vector<int64_t>{1, 1, 0, 2});
  REQUIRE(values<int64_t>(Op(OpKind::ArgMin, 13).i("axis", 0).i("select_last_index", 1).run1({&x})) ==
          std::vector<int64_t>{0, 2, 2, 2});
}

TEST_CASE("Mod takes the divisor's sign, or the dividend's with fmod = 1") {
  auto a = int32s({4}, {7, -7, 7, -7});
  auto b = int32s({4}, {3, 3, -3, -3});
  REQUIRE(values<int32_t>(Op(OpKind::Mod, 13).run1({&a, &b})) == std::vector<int32_t>{1, 2, -2, -1});
  REQUIRE(values<int32_t>(Op(OpKind::Mod, 13).i("fmod", 1).run1({&a, &b})) == std::vector<int32_t>{1, -1, 1, -1});
  auto z = int32s({1}, {0});
  REQUIRE(values<int32_t>(Op(OpKind::Mod, 13).run1({&a, &z}))[0] == 0);  // no trap on division by zero
  auto f = floats({2}, {-4.5f, 4.5f});
  auto g = floats({2}, {2, -2});
  requireClose(values<float>(Op(OpKind::Mod, 13).i("fmod", 1).run1({&f, &g})), {-0.5f, 0.5f});
  REQUIRE(Op(OpKind::Mod, 13).fails({&f, &g}).code() == ErrorCode::InvalidGraph);  // floats need fmod = 1
}

TEST_CASE("Round rounds halves to even, Sign, IsInf and Shrink follow their attributes") {
  auto x = floats({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f});
  requireClose(values<float>(Op(OpKind::Round, 11).run1({&x})), {0, 2, 2, -0.0f, -2, 2});
  auto i = int32s({3}, {-5, 0, 9});
  REQUIRE(values<int32_t>(Op(OpKind::Sign, 13).run1({&i})) == std::vector<int32_t>{-1, 0, 1});
  const float inf = std::numeric_limits<float>::infinity();
  auto v = floats({3}, {inf, -inf, 1});
  REQUIRE(values<bool>(Op(OpKind::IsInf, 20).i("detect_positive", 0).run1({&v})) ==
          std::vector<bool>{false, true, false});
  auto s = floats({3}, {-2, 0.2f, 2});
  requireClose(values<float>(Op(OpKind::Shrink, 9).f("lambd", 1).f("bias", 0.5f).run1({&s})), {-1.5f, 0, 1.5f});
}

TEST_CASE("LogSoftmax and Hardmax along an axis, 2-D coerced before opset 13") {
  auto x = floats({2, 2}, {1, 3, 5, 5});
  auto h = Op(OpKind::Hardmax, 13).i("axis", 0).run1({&x});
  requireClose(values<float>(h), {0, 0, 1, 1});
  auto ties = Op(OpKind::Hardmax, 13).run1({&x});
  requireClose(values<float>(ties), {0, 1, 1, 0});  // the first of equal maxima
  auto l = Op(OpKind::LogSoftmax, 11).i("axis", 0).run1({&x});  // one row of 4 elements
  float lse = std::log(std::exp(1.0f) + std::exp(3.0f) + 2 * std::exp(5.0f));
  requireClose(values<float>(l), {1 - lse, 3 - lse, 5 - lse, 5 - lse});
}

TEST_CASE("Trilu keeps a triangle shifted by k") {
  auto x = floats({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  requireClose(values<float>(Op(OpKind::Trilu, 14).run1({&x, nullptr})), {1, 2, 3, 0, 5, 6, 0, 0, 9});
  auto k = int64s({}, {-1});
  requireClose(values<float>(Op(OpKind::Trilu, 14).i("upper", 0).run1({&x, &k})), {0, 0, 0, 4, 0, 0, 7, 8, 0});
  auto big = int64s({}, {5});
  requireClose(values<float>(Op(OpKind::Trilu, 14).run1({&x, &big})), {0, 0, 0, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("CastLike casts to the type of its second input, RMSNormalization does not center") {
  auto x = floats({2}, {1.7f, -2.2f});
  auto like = int32s({1}, {0});
  auto y = Op(OpKind::CastLike, 19).run1({&x, &like});
  REQUIRE(y.type() == ElemType::Int32);
  REQUIRE(values<int32_t>(y) == std::vector<int32_t>{1, -2});
  auto v = floats({1, 2}, {3, 4});
  auto scale = floats({2}, {1, 2});
  float inv = 1.0f / std::sqrt(12.5f + 1e-5f);
  requireClose(values<float>(Op(OpKind::RMSNormalization, 23).run1({&v, &scale})), {3 * inv, 8 * inv});
}

TEST_CASE("GroupNormalization and InstanceNormalization refuse scale and bias of another type than the input") {
  auto x = floats({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  auto half = typed<uint16_t>(ElemType::Float16, {2}, {0x3c00, 0x3c00});  // 1.0 in float16
  auto ones = floats({2}, {1, 1});
  auto zeros = floats({2}, {0, 0});
  auto e = Op(OpKind::InstanceNormalization, 6).fails({&x, &half, &zeros});
  CHECK_THAT(e.message(), Catch::Contains("float16"));
  e = Op(OpKind::GroupNormalization, 21).i("num_groups", 1).fails({&x, &ones, &half});
  CHECK_THAT(e.message(), Catch::Contains("float16"));
  auto y = Op(OpKind::InstanceNormalization, 6).run1({&x, &ones, &zeros});
  requireClose(values<float>(y), {-1.2247f, 0, 1.2247f, -1.2247f, 0, 1.2247f}, 1e-3f);
}

TEST_CASE("MelWeightMatrix refuses a non-finite rate or edge and clips bands far outside the spectrum") {
  auto bins = int64s({}, {4});
  auto dft = int64s({}, {16});
  auto lower = floats({}, {0});
  auto upper = floats({}, {4000});
  for (float badRate : {0.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto rate = floats({}, {badRate});
    const Error e = Op(OpKind::MelWeightMatrix, 17).fails({&bins, &dft, &rate, &lower, &upper});
    CHECK(e.code() == ErrorCode::InvalidGraph);
    CHECK_THAT(e.message(), Catch::Contains("must be finite, the rate positive"));
  }
  // A rate of 1e-30 puts every band edge about 1e34 bins out: clamped, clipped to the 9 spectrum rows, no long loop.
  auto tiny = floats({}, {1e-30f});
  auto y = Op(OpKind::MelWeightMatrix, 17).run1({&bins, &dft, &tiny, &lower, &upper});
  REQUIRE(y.shape() == ir::Shape{9, 4});
  // The first band starts at 0 Hz: row 0 of band 0 is its left edge (weight 0) at any rate.
  CHECK(values<float>(y)[0] == 0.0f);
}
