// Elementwise kernels: broadcasting arithmetic, integer division, Pow with mixed types, activations, errors.
#include "kernel_test_util.h"

#include "cpu/convert.h"
#include "cpu/vec_math.h"

#include <limits>

using namespace ctxkit;
using namespace ctxkit::test;

TEST_CASE("Add broadcasts both ways") {
  auto a = floats({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  auto b = floats({4, 1}, {10, 20, 30, 40});
  auto y = Op(OpKind::Add).run1({&a, &b});
  REQUIRE(y.shape() == ir::Shape{2, 4, 3});
  auto v = values<float>(y);
  REQUIRE(v[0] == 11);
  REQUIRE(v[3] == 21);   // [0][1][0] = 1 + 20
  REQUIRE(v[12] == 14);  // [1][0][0] = 4 + 10
  REQUIRE(v[23] == 46);  // [1][3][2] = 6 + 40
}

TEST_CASE("Sub, Mul with a scalar and a same-shape operand") {
  auto a = floats({2, 2}, {1, 2, 3, 4});
  auto s = floats({}, {2});
  requireClose(values<float>(Op(OpKind::Sub).run1({&a, &s})), {-1, 0, 1, 2});
  requireClose(values<float>(Op(OpKind::Sub).run1({&s, &a})), {1, 0, -1, -2});
  requireClose(values<float>(Op(OpKind::Mul).run1({&a, &a})), {1, 4, 9, 16});
}

TEST_CASE("Div on integers truncates toward zero like C") {
  auto a = int32s({4}, {7, -7, 7, -7});
  auto b = int32s({4}, {2, 2, -2, -2});
  REQUIRE(values<int32_t>(Op(OpKind::Div).run1({&a, &b})) == std::vector<int32_t>{3, -3, -3, 3});
  auto z = int32s({4}, {0, 1, 1, 1});
  auto r = values<int32_t>(Op(OpKind::Div).run1({&a, &z}));  // division by zero does not trap
  REQUIRE(r[0] == 0);
  auto mn = int64s({1}, {std::numeric_limits<int64_t>::min()});
  auto m1 = int64s({1}, {-1});
  REQUIRE(values<int64_t>(Op(OpKind::Div).run1({&mn, &m1}))[0] == std::numeric_limits<int64_t>::min());
}

TEST_CASE("integer Add wraps and keeps its type") {
  auto a = typed<uint8_t>(ElemType::Uint8, {2}, {250, 3});
  auto b = typed<uint8_t>(ElemType::Uint8, {2}, {10, 4});
  auto y = Op(OpKind::Add).run1({&a, &b});
  REQUIRE(y.type() == ElemType::Uint8);
  REQUIRE(values<uint8_t>(y) == std::vector<uint8_t>{4, 7});
}

TEST_CASE("Pow with float base and integer exponent") {
  auto a = floats({3}, {2, 3, 0.5f});
  auto e = int64s({3}, {3, 0, -1});
  auto y = Op(OpKind::Pow, 15).run1({&a, &e});
  REQUIRE(y.type() == ElemType::Float);
  requireClose(values<float>(y), {8, 1, 2});
  auto ib = int32s({3}, {2, -3, 5});
  auto fe = floats({1}, {2.0f});
  auto yi = Op(OpKind::Pow, 15).run1({&ib, &fe});
  REQUIRE(yi.type() == ElemType::Int32);
  REQUIRE(values<int32_t>(yi) == std::vector<int32_t>{4, 9, 25});
  auto big = int64s({1}, {3});
  auto ex = int64s({1}, {39});
  REQUIRE(values<int64_t>(Op(OpKind::Pow, 15).run1({&big, &ex}))[0] == 4052555153018976267LL);
}

TEST_CASE("Pow before opset 12 needs matching types") {
  auto a = floats({1}, {2});
  auto e = int64s({1}, {3});
  Error err = Op(OpKind::Pow, 7).fails({&a, &e});
  REQUIRE(err.code() == ErrorCode::InvalidGraph);
}

TEST_CASE("binary ops reject shapes that do not broadcast, naming the node") {
  auto a = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = floats({2}, {1, 2});
  Error err = Op(OpKind::Add).fails({&a, &b});
  REQUIRE(err.code() == ErrorCode::InvalidGraph);
  REQUIRE(err.message() == "node 'n1' (Add): input shapes 2x3 and 2 do not broadcast");
  auto i = int32s({2}, {1, 2});
  Error typeErr = Op(OpKind::Add).fails({&b, &i});
  REQUIRE(typeErr.message().find("input 1 has type int32 but input 0 has type float32") != std::string::npos);
  Error countErr = Op(OpKind::Add).fails({&b});
  REQUIRE(countErr.message() == "node 'n1' (Add): expected 2 inputs but got 1");
}

TEST_CASE("broadcasting over many elements matches a scalar loop, with threads") {
  kernels::ThreadPool pool(2);
  std::vector<float> av(37 * 1 * 513), bv(5 * 1);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i % 97) * 0.5f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i) + 1;
  auto a = floats({37, 1, 513}, av);
  auto b = floats({1, 5, 1}, bv);
  auto y = Op(OpKind::Mul).run1({&a, &b}, &pool);
  REQUIRE(y.shape() == ir::Shape{37, 5, 513});
  auto v = values<float>(y);
  for (size_t i = 0; i < 37; ++i)
    for (size_t j = 0; j < 5; ++j)
      for (size_t k = 0; k < 513; ++k) REQUIRE(v[(i * 5 + j) * 513 + k] == av[i * 513 + k] * bv[j]);
}

TEST_CASE("unary math and activations") {
  auto x = floats({5}, {-2, -0.5f, 0, 0.5f, 2});
  requireClose(values<float>(Op(OpKind::Relu).run1({&x})), {0, 0, 0, 0.5f, 2});
  requireClose(values<float>(Op(OpKind::LeakyRelu).f("alpha", 0.1f).run1({&x})), {-0.2f, -0.05f, 0, 0.5f, 2});
  requireClose(values<float>(Op(OpKind::LeakyRelu).run1({&x})), {-0.02f, -0.005f, 0, 0.5f, 2});
  requireClose(values<float>(Op(OpKind::HardSigmoid).run1({&x})), {0.1f, 0.4f, 0.5f, 0.6f, 0.9f});
  requireClose(values<float>(Op(OpKind::HardSigmoid).f("alpha", 0.5f).f("beta", 0.6f).run1({&x})),
               {0, 0.35f, 0.6f, 0.85f, 1});
  requireClose(values<float>(Op(OpKind::Abs).run1({&x})), {2, 0.5f, 0, 0.5f, 2});
  requireClose(values<float>(Op(OpKind::Neg).run1({&x})), {2, 0.5f, 0, -0.5f, -2});
  std::vector<float> sig, th, ex, erf, gelu, geluT;
  for (float v : {-2.0f, -0.5f, 0.0f, 0.5f, 2.0f}) {
    sig.push_back(1 / (1 + std::exp(-v)));
    th.push_back(std::tanh(v));
    ex.push_back(std::exp(v));
    erf.push_back(std::erf(v));
    gelu.push_back(0.5f * v * (1 + std::erf(v / std::sqrt(2.0f))));
    geluT.push_back(0.5f * v * (1 + std::tanh(std::sqrt(2 / 3.14159265f) * (v + 0.044715f * v * v * v))));
  }
  requireClose(values<float>(Op(OpKind::Sigmoid).run1({&x})), sig);
  requireClose(values<float>(Op(OpKind::Tanh).run1({&x})), th);
  requireClose(values<float>(Op(OpKind::Exp).run1({&x})), ex);
  requireClose(values<float>(Op(OpKind::Erf).run1({&x})), erf);
  requireClose(values<float>(Op(OpKind::Gelu, 20).run1({&x})), gelu);
  requireClose(values<float>(Op(OpKind::Gelu, 20).s("approximate", "tanh").run1({&x})), geluT);
  auto p = floats({3}, {4, 0.25f, 1});
  requireClose(values<float>(Op(OpKind::Sqrt).run1({&p})), {2, 0.5f, 1});
  requireClose(values<float>(Op(OpKind::Reciprocal).run1({&p})), {0.25f, 4, 1});
  requireClose(values<float>(Op(OpKind::Log).run1({&p})), {std::log(4.0f), std::log(0.25f), 0});
  REQUIRE(Op(OpKind::Gelu, 20).s("approximate", "fast").fails({&x}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("integer Abs, Neg and Relu, float-only ops reject integers") {
  auto x = int32s({3}, {-3, 0, 4});
  REQUIRE(values<int32_t>(Op(OpKind::Abs).run1({&x})) == std::vector<int32_t>{3, 0, 4});
  REQUIRE(values<int32_t>(Op(OpKind::Neg).run1({&x})) == std::vector<int32_t>{3, 0, -4});
  REQUIRE(values<int32_t>(Op(OpKind::Relu).run1({&x})) == std::vector<int32_t>{0, 0, 4});
  REQUIRE_FALSE(Op(OpKind::Sqrt).eval({&x}).isOk());
}

TEST_CASE("double precision elementwise") {
  auto a = doubles({2}, {1e-12, 2});
  auto b = doubles({1}, {1});
  auto y = Op(OpKind::Add).run1({&a, &b});
  REQUIRE(y.type() == ElemType::Double);
  REQUIRE(values<double>(y)[0] == 1.0 + 1e-12);
  REQUIRE(values<double>(Op(OpKind::Sqrt).run1({&a}))[1] == std::sqrt(2.0));
}

TEST_CASE("vectorized math stays close to libm over a wide range") {
  std::vector<float> xs;
  for (float v = -120.0f; v <= 120.0f; v += 0.0137f) xs.push_back(v);
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  xs.push_back(INFINITY);
  xs.push_back(-INFINITY);
  std::vector<float> out(xs.size());
  cpu::vecExp(xs.data(), out.data(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    float want = std::exp(xs[i]);
    INFO("exp(" << xs[i] << ") = " << out[i] << " want " << want);
    if (std::isnan(want))
      REQUIRE(std::isnan(out[i]));
    else if (std::isinf(want))
      REQUIRE(out[i] == want);
    else
      REQUIRE(std::fabs(out[i] - want) <= 3e-7f * want + 1e-44f);
  }
  cpu::vecTanh(xs.data(), out.data(), xs.size());
  for (size_t i = 0; i + 1 < xs.size(); ++i)
    if (!std::isnan(xs[i])) REQUIRE(std::fabs(out[i] - std::tanh(xs[i])) <= 3e-7f);
  cpu::vecErf(xs.data(), out.data(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i)
    if (!std::isnan(xs[i])) REQUIRE(std::fabs(out[i] - std::erf(xs[i])) <= 3e-7f);
  cpu::vecSigmoid(xs.data(), out.data(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i)
    if (!std::isnan(xs[i])) REQUIRE(std::fabs(out[i] - 1.0f / (1.0f + std::exp(-xs[i]))) <= 3e-7f);
  // Tiny inputs keep their relative accuracy (no cancellation near zero).
  float tiny[2] = {1e-6f, -3e-5f}, r[2];
  cpu::vecTanh(tiny, r, 2);
  REQUIRE(std::fabs(r[0] - 1e-6f) < 1e-12f);
  cpu::vecErf(tiny, r, 2);
  REQUIRE(std::fabs(r[1] - std::erf(-3e-5f)) < 1e-11f);
}

TEST_CASE("float16 inputs compute through float32") {
  std::vector<uint16_t> a{cpu::floatToHalf(1.5f), cpu::floatToHalf(-2.0f)};
  std::vector<uint16_t> b{cpu::floatToHalf(0.25f), cpu::floatToHalf(4.0f)};
  auto ta = typed(ElemType::Float16, {2}, a);
  auto tb = typed(ElemType::Float16, {2}, b);
  auto y = Op(OpKind::Mul).run1({&ta, &tb});
  REQUIRE(y.type() == ElemType::Float16);
  auto v = values<uint16_t>(y);
  REQUIRE(cpu::halfToFloat(v[0]) == 0.375f);
  REQUIRE(cpu::halfToFloat(v[1]) == -8.0f);
  auto r = Op(OpKind::Relu).run1({&ta});
  REQUIRE(cpu::halfToFloat(values<uint16_t>(r)[1]) == 0.0f);
}

TEST_CASE("fused activation attribute on Gemm") {
  auto a = floats({1, 2}, {1, -1});
  auto b = floats({2, 2}, {1, 0, 0, 1});
  auto y = Op(OpKind::Gemm).s("activation", "Relu").run1({&a, &b});
  requireClose(values<float>(y), {1, 0});
  auto yl = Op(OpKind::Gemm).s("activation", "LeakyRelu").fl("activation_params", {0.5f}).run1({&a, &b});
  requireClose(values<float>(yl), {1, -0.5f});
  REQUIRE(Op(OpKind::Gemm).s("activation", "Swish").fails({&a, &b}).code() == ErrorCode::Unsupported);
}
