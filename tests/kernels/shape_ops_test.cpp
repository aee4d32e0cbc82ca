// Data movement ops: Reshape, Flatten, Squeeze/Unsqueeze (attribute vs input axes), Shape, Transpose, Concat,
// Gather, Slice (attributes vs inputs), Identity, Cast and Constant.
#include "kernel_test_util.h"

#include "cpu/convert.h"

#include <algorithm>
#include <limits>

using namespace ctxkit;
using namespace ctxkit::test;

namespace {
std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
}  // namespace

TEST_CASE("Reshape with 0, -1 and allowzero") {
  auto x = floats({2, 3, 4}, iota(24));
  auto s = int64s({3}, {0, -1, 2});
  auto y = Op(OpKind::Reshape, 13).run1({&x, &s});
  REQUIRE(y.shape() == ir::Shape{2, 6, 2});
  REQUIRE(values<float>(y) == iota(24));
  auto empty = floats({0, 3}, {});
  auto z = int64s({2}, {3, 0});
  REQUIRE(Op(OpKind::Reshape, 14).i("allowzero", 1).run1({&empty, &z}).shape() == ir::Shape{3, 0});
  Error bad = Op(OpKind::Reshape, 14).i("allowzero", 1).fails({&x, &s});
  REQUIRE(bad.message() == "node 'n1' (Reshape): shape 0x-1x2 has both 0 and -1, which allowzero = 1 forbids");
  auto wrong = int64s({2}, {5, 5});
  REQUIRE(Op(OpKind::Reshape, 13).fails({&x, &wrong}).message() ==
          "node 'n1' (Reshape): input shape 2x3x4 (24 elements) cannot be reshaped to 5x5");
  auto twoNeg = int64s({2}, {-1, -1});
  REQUIRE(Op(OpKind::Reshape, 13).fails({&x, &twoNeg}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("Reshape shape inference needs the shape value") {
  std::vector<kernels::ValueDesc> descs{{ElemType::Float, {2, 3}, nullptr, true},
                                        {ElemType::Int64, {2}, nullptr, true}};
  Op op(OpKind::Reshape, 13);
  auto r = kernels::inferOutputs(op.ctx(), descs, 1);
  REQUIRE_FALSE(r.isOk());
  REQUIRE(r.error().code() == ErrorCode::Unsupported);
  REQUIRE(r.error().message() ==
          "node 'n1' (Reshape): input 1 (shape) must be a known constant to infer the output shape");
  auto shape = int64s({2}, {3, 2});
  descs[1].value = &shape;
  auto ok = kernels::inferOutputs(op.ctx(), descs, 1);
  REQUIRE(ok.isOk());
  REQUIRE((*ok)[0].shape == ir::Shape{3, 2});
}

TEST_CASE("Flatten with positive, zero and negative axis") {
  auto x = floats({2, 3, 4}, iota(24));
  REQUIRE(Op(OpKind::Flatten).run1({&x}).shape() == ir::Shape{2, 12});
  REQUIRE(Op(OpKind::Flatten).i("axis", 0).run1({&x}).shape() == ir::Shape{1, 24});
  REQUIRE(Op(OpKind::Flatten).i("axis", 3).run1({&x}).shape() == ir::Shape{24, 1});
  REQUIRE(Op(OpKind::Flatten).i("axis", -1).run1({&x}).shape() == ir::Shape{6, 4});
  REQUIRE(Op(OpKind::Flatten).i("axis", 4).fails({&x}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("Squeeze and Unsqueeze: attribute axes before opset 13, input axes from 13") {
  auto x = floats({1, 3, 1, 2}, iota(6));
  REQUIRE(Op(OpKind::Squeeze, 11).run1({&x}).shape() == ir::Shape{3, 2});
  REQUIRE(Op(OpKind::Squeeze, 11).ints("axes", {-2}).run1({&x}).shape() == ir::Shape{1, 3, 2});
  auto axes = int64s({1}, {0});
  REQUIRE(Op(OpKind::Squeeze, 13).run1({&x, &axes}).shape() == ir::Shape{3, 1, 2});
  REQUIRE(Op(OpKind::Squeeze, 13).run1({&x, nullptr}).shape() == ir::Shape{3, 2});
  auto bad = int64s({1}, {1});
  REQUIRE(Op(OpKind::Squeeze, 13).fails({&x, &bad}).message() ==
          "node 'n1' (Squeeze): cannot squeeze axis 1 of input shape 1x3x1x2: its size is not 1");
  auto v = floats({3}, {1, 2, 3});
  REQUIRE(Op(OpKind::Unsqueeze, 11).ints("axes", {0, -1}).run1({&v}).shape() == ir::Shape{1, 3, 1});
  auto ax = int64s({2}, {2, 0});
  REQUIRE(Op(OpKind::Unsqueeze, 13).run1({&v, &ax}).shape() == ir::Shape{1, 3, 1});
  REQUIRE(Op(OpKind::Unsqueeze, 13).fails({&v}).code() == ErrorCode::InvalidGraph);
  auto dup = int64s({2}, {0, -3});
  REQUIRE(Op(OpKind::Unsqueeze, 13).fails({&v, &dup}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("Identity, Shape with start/end, and Transpose") {
  auto x = floats({2, 3, 4}, iota(24));
  REQUIRE(values<float>(Op(OpKind::Identity).run1({&x})) == iota(24));
  REQUIRE(values<int64_t>(Op(OpKind::Shape).run1({&x})) == std::vector<int64_t>{2, 3, 4});
  REQUIRE(values<int64_t>(Op(OpKind::Shape, 15).i("start", 1).run1({&x})) == std::vector<int64_t>{3, 4});
  REQUIRE(values<int64_t>(Op(OpKind::Shape, 15).i("start", -1).run1({&x})) == std::vector<int64_t>{4});
  REQUIRE(values<int64_t>(Op(OpKind::Shape, 15).i("end", -1).run1({&x})) == std::vector<int64_t>{2, 3});
  REQUIRE(Op(OpKind::Shape, 15).i("start", 2).i("end", 1).run1({&x}).shape() == ir::Shape{0});
  REQUIRE(values<int64_t>(Op(OpKind::Shape, 13).i("start", 1).run1({&x})).size() == 3);  // no start before 15
  auto t = Op(OpKind::Transpose).run1({&x});
  REQUIRE(t.shape() == ir::Shape{4, 3, 2});
  auto tv = values<float>(t);
  REQUIRE(tv[1] == 12);  // [0][0][1] = x[1][0][0]
  REQUIRE(tv[2] == 4);   // [0][1][0] = x[0][1][0]
  auto p = Op(OpKind::Transpose).ints("perm", {1, 0, 2}).run1({&x});
  REQUIRE(p.shape() == ir::Shape{3, 2, 4});
  REQUIRE(values<float>(p)[4] == 12);
  REQUIRE(Op(OpKind::Transpose).ints("perm", {0, 0, 1}).fails({&x}).code() == ErrorCode::InvalidGraph);
  auto b = typed<uint8_t>(ElemType::Bool, {2, 2}, {1, 0, 0, 1});
  REQUIRE(values<uint8_t>(Op(OpKind::Transpose).run1({&b})) == std::vector<uint8_t>{1, 0, 0, 1});
}

TEST_CASE("Concat on any axis, negative included") {
  auto a = floats({2, 1}, {1, 2});
  auto b = floats({2, 2}, {3, 4, 5, 6});
  auto y = Op(OpKind::Concat).i("axis", -1).run1({&a, &b});
  REQUIRE(y.shape() == ir::Shape{2, 3});
  REQUIRE(values<float>(y) == std::vector<float>{1, 3, 4, 2, 5, 6});
  auto y0 = Op(OpKind::Concat).i("axis", 0).run1({&b, &b});
  REQUIRE(y0.shape() == ir::Shape{4, 2});
  REQUIRE(Op(OpKind::Concat).i("axis", 0).fails({&a, &b}).code() == ErrorCode::InvalidGraph);
  REQUIRE(Op(OpKind::Concat).fails({&a, &a}).message() == "node 'n1' (Concat): required attribute axis is missing");
}

TEST_CASE("Concat of large unequal inputs, split by bytes across threads, matches an index loop") {
  kernels::ThreadPool pool(2);
  // Axis 1 of [2, C, 37, 41] with channel counts 3, 61 and 1 (a chunk boundary falls inside rows and inputs), and
  // axis 0 of flat tensors; serial and on 2 threads.
  const std::vector<int64_t> channels{3, 61, 1};
  std::vector<ir::Tensor> ins;
  for (size_t i = 0; i < channels.size(); ++i) {
    std::vector<float> v(static_cast<size_t>(2 * channels[i] * 37 * 41));
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(i * 1000000 + k);
    ins.push_back(floats({2, channels[i], 37, 41}, v));
  }
  for (kernels::ThreadPool* p : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
    auto y = Op(OpKind::Concat).i("axis", 1).run1({&ins[0], &ins[1], &ins[2]}, p);
    REQUIRE(y.shape() == ir::Shape{2, 65, 37, 41});
    const auto v = values<float>(y);
    size_t wrong = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 65; ++c) {
        size_t i = 0;
        int64_t base = 0;  // the first output channel of input i
        while (c >= base + channels[i]) base += channels[i++];
        for (int64_t q = 0; q < 37 * 41; ++q) {
          const float want = static_cast<float>(i * 1000000 + static_cast<size_t>((n * channels[i] + c - base) * 37 * 41 + q));
          wrong += v[static_cast<size_t>((n * 65 + c) * 37 * 41 + q)] != want;
        }
      }
    CHECK(wrong == 0);
  }
  auto a = floats({70001}, iota(70001));
  auto b = floats({5}, {-1, -2, -3, -4, -5});
  auto flat = values<float>(Op(OpKind::Concat).i("axis", 0).run1({&b, &a, &b}, &pool));
  REQUIRE(flat.size() == 70011);
  CHECK(flat[0] == -1);
  CHECK(flat[5] == 0);
  CHECK(flat[70005] == 70000);
  CHECK(flat[70010] == -5);
}

TEST_CASE("Gather with negative indices on any axis and int32 indices") {
  auto x = floats({3, 2}, {1, 2, 3, 4, 5, 6});
  auto idx = int64s({2}, {-1, 0});
  auto y = Op(OpKind::Gather).run1({&x, &idx});
  REQUIRE(y.shape() == ir::Shape{2, 2});
  REQUIRE(values<float>(y) == std::vector<float>{5, 6, 1, 2});
  auto idx2 = int32s({2, 2}, {1, 1, 0, 1});
  auto y1 = Op(OpKind::Gather).i("axis", 1).run1({&x, &idx2});
  REQUIRE(y1.shape() == ir::Shape{3, 2, 2});
  REQUIRE(values<float>(y1) == std::vector<float>{2, 2, 1, 2, 4, 4, 3, 4, 6, 6, 5, 6});
  auto scalar = int64s({}, {1});
  auto ys = Op(OpKind::Gather).run1({&x, &scalar});
  REQUIRE(ys.shape() == ir::Shape{2});
  auto out = int64s({1}, {3});
  REQUIRE(Op(OpKind::Gather).fails({&x, &out}).message() ==
          "node 'n1' (Gather): index 3 is out of range for a gathered dimension of size 3");
}

TEST_CASE("Slice with inputs (opset 10+): negative, clamped and stepped") {
  auto x = floats({3, 4}, iota(12));
  auto starts = int64s({2}, {1, -1});
  auto ends = int64s({2}, {kMax, kMin});
  auto axes = int64s({2}, {0, 1});
  auto steps = int64s({2}, {1, -2});
  auto y = Op(OpKind::Slice, 13).run1({&x, &starts, &ends, &axes, &steps});
  REQUIRE(y.shape() == ir::Shape{2, 2});
  REQUIRE(values<float>(y) == std::vector<float>{7, 5, 11, 9});
  auto s2 = int64s({1}, {-100});
  auto e2 = int64s({1}, {2});
  auto a2 = int64s({1}, {-1});
  auto y2 = Op(OpKind::Slice, 13).run1({&x, &s2, &e2, &a2, nullptr});
  REQUIRE(y2.shape() == ir::Shape{3, 2});
  REQUIRE(values<float>(y2) == std::vector<float>{0, 1, 4, 5, 8, 9});
  auto e3 = int64s({1}, {1});
  auto s3 = int64s({1}, {3});
  REQUIRE(Op(OpKind::Slice, 13).run1({&x, &s3, &e3}).shape() == ir::Shape{0, 4});  // empty, not an error
  auto zero = int64s({1}, {0});
  REQUIRE(Op(OpKind::Slice, 13).fails({&x, &s2, &e2, &a2, &zero}).message() ==
          "node 'n1' (Slice): steps has a 0 for axis 1");
}

TEST_CASE("Slice with attributes (opset 1-9)") {
  auto x = floats({3, 4}, iota(12));
  auto y = Op(OpKind::Slice, 9).ints("starts", {0, 1}).ints("ends", {2, 1000}).run1({&x});
  REQUIRE(y.shape() == ir::Shape{2, 3});
  REQUIRE(values<float>(y) == std::vector<float>{1, 2, 3, 5, 6, 7});
  auto a = Op(OpKind::Slice, 9).ints("starts", {-2}).ints("ends", {kMax}).ints("axes", {1}).run1({&x});
  REQUIRE(values<float>(a) == std::vector<float>{2, 3, 6, 7, 10, 11});
  REQUIRE(Op(OpKind::Slice, 9).ints("starts", {0}).fails({&x}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("Slice inference without known starts is unsupported") {
  std::vector<kernels::ValueDesc> descs{{ElemType::Float, {3, 4}, nullptr, true},
                                        {ElemType::Int64, {1}, nullptr, true},
                                        {ElemType::Int64, {1}, nullptr, true}};
  auto r = kernels::inferOutputs(Op(OpKind::Slice, 13).ctx(), descs, 1);
  REQUIRE(r.error().code() == ErrorCode::Unsupported);
  REQUIRE(r.error().message().find("input 1 (starts)") != std::string::npos);
}

TEST_CASE("Cast between numeric types, bool and float16") {
  auto x = floats({5}, {-1.7f, 0, 2.9f, 300, std::numeric_limits<float>::quiet_NaN()});
  auto i = Op(OpKind::Cast).i("to", 6).run1({&x});
  REQUIRE(i.type() == ElemType::Int32);
  auto iv = values<int32_t>(i);
  REQUIRE(iv[0] == -1);
  REQUIRE(iv[2] == 2);
  REQUIRE(iv[3] == 300);
  auto b = Op(OpKind::Cast).i("to", 9).run1({&x});
  REQUIRE(values<uint8_t>(b) == std::vector<uint8_t>{1, 0, 1, 1, 1});
  auto h = Op(OpKind::Cast).i("to", 10).run1({&x});
  auto hv = values<uint16_t>(h);
  REQUIRE(cpu::halfToFloat(hv[0]) == Approx(-1.7f).epsilon(1e-3));
  REQUIRE(std::isnan(cpu::halfToFloat(hv[4])));
  auto back = Op(OpKind::Cast).i("to", 1).run1({&h});
  REQUIRE(values<float>(back)[3] == 300);
  auto big = int64s({2}, {(1LL << 40) + 5, -1});
  REQUIRE(values<int32_t>(Op(OpKind::Cast).i("to", 6).run1({&big})) == std::vector<int32_t>{5, -1});
  REQUIRE(values<uint8_t>(Op(OpKind::Cast).i("to", 2).run1({&big}))[1] == 255);
  auto d = Op(OpKind::Cast).i("to", 11).run1({&big});
  REQUIRE(values<double>(d)[0] == double((1LL << 40) + 5));
  auto bf = Op(OpKind::Cast).i("to", 16).run1({&x});
  REQUIRE(cpu::bfloat16ToFloat(values<uint16_t>(bf)[3]) == 300);
  REQUIRE(Op(OpKind::Cast).i("to", 8).fails({&x}).code() == ErrorCode::Unsupported);
  REQUIRE(Op(OpKind::Cast).fails({&x}).message() == "node 'n1' (Cast): required attribute to is missing");
}

TEST_CASE("float16 conversion rounds to nearest even and handles subnormals and overflow") {
  REQUIRE(cpu::floatToHalf(1.0f) == 0x3c00);
  REQUIRE(cpu::floatToHalf(65504.0f) == 0x7bff);
  REQUIRE(cpu::floatToHalf(65520.0f) == 0x7c00);
  REQUIRE(cpu::floatToHalf(-0.0f) == 0x8000);
  REQUIRE(cpu::floatToHalf(5.9604645e-8f) == 0x0001);       // smallest subnormal
  REQUIRE(cpu::floatToHalf(2.98e-8f) == 0x0000);            // just below half of it
  REQUIRE(cpu::floatToHalf(1.0f + 1.0f / 2048) == 0x3c00);  // tie to even
  REQUIRE(cpu::floatToHalf(1.0f + 3.0f / 2048) == 0x3c02);
  for (uint32_t h = 0; h < 0x7c00; ++h) REQUIRE(cpu::floatToHalf(cpu::halfToFloat(uint16_t(h))) == h);
}

TEST_CASE("Constant from value, value_float(s) and value_int(s)") {
  Op c(OpKind::Constant, 13);
  c.attrs.set(ir::Attribute::makeTensor("value", floats({2}, {1, 2})));
  REQUIRE(values<float>(c.run1({})) == std::vector<float>{1, 2});
  REQUIRE(values<float>(Op(OpKind::Constant, 13).f("value_float", 3).run1({})) == std::vector<float>{3});
  REQUIRE(Op(OpKind::Constant, 13).f("value_float", 3).run1({}).shape().empty());
  REQUIRE(values<int64_t>(Op(OpKind::Constant, 13).ints("value_ints", {4, 5}).run1({})) == std::vector<int64_t>{4, 5});
  REQUIRE(values<int64_t>(Op(OpKind::Constant, 13).i("value_int", 7).run1({})) == std::vector<int64_t>{7});
  REQUIRE(Op(OpKind::Constant, 13).s("value_string", "a").fails({}).code() == ErrorCode::Unsupported);
  REQUIRE(Op(OpKind::Constant, 13).fails({}).code() == ErrorCode::InvalidGraph);
  REQUIRE(Op(OpKind::Constant, 13).i("value_int", 1).f("value_float", 1).fails({}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("Transpose matches index arithmetic for every permutation of a rank-4 tensor, with threads") {
  kernels::ThreadPool pool(2);
  ir::Shape shape{3, 17, 5, 19};
  auto x = floats(shape, iota(3 * 17 * 5 * 19));
  std::vector<int64_t> perm{0, 1, 2, 3};
  do {
    auto y = Op(OpKind::Transpose).ints("perm", perm).run1({&x}, &pool);
    ir::Shape os(4);
    for (size_t i = 0; i < 4; ++i) os[i] = shape[static_cast<size_t>(perm[i])];
    REQUIRE(y.shape() == os);
    auto v = values<float>(y);
    int64_t in[4];
    size_t k = 0;
    for (int64_t a = 0; a < os[0]; ++a)
      for (int64_t b = 0; b < os[1]; ++b)
        for (int64_t c = 0; c < os[2]; ++c)
          for (int64_t d = 0; d < os[3]; ++d, ++k) {
            int64_t out[4] = {a, b, c, d};
            for (size_t i = 0; i < 4; ++i) in[perm[i]] = out[i];
            float want = static_cast<float>(((in[0] * shape[1] + in[1]) * shape[2] + in[2]) * shape[3] + in[3]);
            if (v[k] != want) FAIL("perm " << perm[0] << perm[1] << perm[2] << perm[3] << " element " << k);
          }
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST_CASE("Cast to and from float8, float4 and packed 4-bit integers") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto x = floats({7}, {1.0f, -0.0f, 448.0f, 500.0f, nan, INFINITY, 0.0068359375f});
  auto e4 = Op(OpKind::Cast, 19).i("to", static_cast<int64_t>(ElemType::Float8E4M3FN)).run1({&x});
  REQUIRE(e4.byteSize() == 7);
  // 0.0068359375 is 3.5 subnormal units of 2^-9: the tie rounds to the even code 4.
  REQUIRE(values<uint8_t>(e4) == std::vector<uint8_t>{0x38, 0x80, 0x7E, 0x7E, 0x7F, 0x7E, 0x04});
  auto e4ns = Op(OpKind::Cast, 19).i("to", static_cast<int64_t>(ElemType::Float8E4M3FN)).i("saturate", 0).run1({&x});
  REQUIRE(values<uint8_t>(e4ns)[3] == 0x7F);  // overflow without saturation is NaN (no infinity)
  auto fnuz = Op(OpKind::Cast, 19).i("to", static_cast<int64_t>(ElemType::Float8E4M3FNUZ)).run1({&x});
  REQUIRE(values<uint8_t>(fnuz)[0] == 0x40);  // bias 8
  REQUIRE(values<uint8_t>(fnuz)[1] == 0x00);  // no negative zero
  REQUIRE(values<uint8_t>(fnuz)[4] == 0x80);  // NaN
  auto e5 = Op(OpKind::Cast, 19).i("to", static_cast<int64_t>(ElemType::Float8E5M2)).i("saturate", 0).run1({&x});
  REQUIRE(values<uint8_t>(e5)[0] == 0x3C);
  REQUIRE(values<uint8_t>(e5)[5] == 0x7C);  // infinity survives without saturation
  auto back = Op(OpKind::Cast, 19).i("to", 1).run1({&e4});
  auto bv = values<float>(back);
  REQUIRE(bv[0] == 1.0f);
  REQUIRE(bv[2] == 448.0f);
  REQUIRE(std::isnan(bv[4]));
  REQUIRE(bv[6] == 0.0078125f);

  auto f4in = floats({4}, {0.25f, 3.5f, -8.0f, 1.0f});
  auto f4 = Op(OpKind::Cast, 23).i("to", static_cast<int64_t>(ElemType::Float4E2M1)).run1({&f4in});
  REQUIRE(f4.byteSize() == 2);
  REQUIRE(bytesOf(f4) == std::vector<uint8_t>{0x60, 0x2F});  // 0, 4 | -6, 1 (low nibble first)

  auto ints = int32s({3}, {1, -1, 9});
  auto i4 = Op(OpKind::Cast, 21).i("to", static_cast<int64_t>(ElemType::Int4)).run1({&ints});
  REQUIRE(i4.byteSize() == 2);
  REQUIRE(bytesOf(i4) == std::vector<uint8_t>{0xF1, 0x09});  // 9 wraps to -7 (0x9)
  auto wide = Op(OpKind::Cast, 21).i("to", 6).run1({&i4});
  REQUIRE(values<int32_t>(wide) == std::vector<int32_t>{1, -1, -7});
}

TEST_CASE("Transpose and broadcast Add past rank 8, where their shape arithmetic leaves inline storage") {
  const ir::Shape shape{2, 1, 2, 1, 2, 1, 2, 1, 2, 3};  // rank 10: Dims keeps 8 inline
  auto x = floats(shape, iota(96));
  auto t = Op(OpKind::Transpose).run1({&x});
  REQUIRE(t.shape() == ir::Shape(shape.rbegin(), shape.rend()));
  REQUIRE(values<float>(t)[1] == 48);  // t[0]..[0][1] = x[1][0]..[0]: x's first dim has stride 48
  auto back = Op(OpKind::Transpose).run1({&t});
  REQUIRE(values<float>(back) == iota(96));
  auto y = floats({3}, {100, 200, 300});
  auto sum = values<float>(Op(OpKind::Add).run1({&x, &y}));
  REQUIRE(sum.size() == 96);
  for (size_t i = 0; i < sum.size(); ++i)
    REQUIRE(sum[i] == static_cast<float>(i) + 100.0f * static_cast<float>(i % 3 + 1));
}
