// MatMul and Gemm ops, checked against naive loops, with and without threads.
#include "../common/random.h"
#include "kernel_test_util.h"

#include <cstring>
#include <random>

using namespace ctxkit;
using ctxkit::testing::randomFloats;
using namespace ctxkit::test;

TEST_CASE("MatMul 2-D, batched with broadcasting, and 1-D operands") {
  auto a = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = floats({3, 2}, {1, 0, 0, 1, 1, 1});
  auto y = Op(OpKind::MatMul).run1({&a, &b});
  REQUIRE(y.shape() == ir::Shape{2, 2});
  requireClose(values<float>(y), {4, 5, 10, 11});

  auto v = floats({3}, {1, 1, 1});
  auto yv = Op(OpKind::MatMul).run1({&v, &b});  // (3) x (3,2) -> (2)
  REQUIRE(yv.shape() == ir::Shape{2});
  requireClose(values<float>(yv), {2, 2});
  auto ym = Op(OpKind::MatMul).run1({&a, &v});  // (2,3) x (3) -> (2)
  REQUIRE(ym.shape() == ir::Shape{2});
  requireClose(values<float>(ym), {6, 15});
  auto yd = Op(OpKind::MatMul).run1({&v, &v});  // dot product -> scalar
  REQUIRE(yd.shape().empty());
  requireClose(values<float>(yd), {3});

  // (2,1,2,3) x (3,3,2) -> (2,3,2,2): batch dims broadcast both ways.
  std::vector<float> av = randomFloats(12, 7), bv = randomFloats(18, 8);
  auto ba = floats({2, 1, 2, 3}, av);
  auto bb = floats({3, 3, 2}, bv);
  auto yb = Op(OpKind::MatMul).run1({&ba, &bb});
  REQUIRE(yb.shape() == ir::Shape{2, 3, 2, 2});
  auto got = values<float>(yb);
  for (size_t p = 0; p < 2; ++p)
    for (size_t q = 0; q < 3; ++q)
      for (size_t i = 0; i < 2; ++i)
        for (size_t j = 0; j < 2; ++j) {
          float acc = 0;
          for (size_t k = 0; k < 3; ++k) acc += av[p * 6 + i * 3 + k] * bv[q * 6 + k * 2 + j];
          REQUIRE(std::fabs(got[((p * 3 + q) * 2 + i) * 2 + j] - acc) < 1e-5f);
        }
}

TEST_CASE("MatMul on integers and its shape errors") {
  auto a = int64s({2, 2}, {1, 2, 3, 4});
  auto y = Op(OpKind::MatMul).run1({&a, &a});
  REQUIRE(values<int64_t>(y) == std::vector<int64_t>{7, 10, 15, 22});
  auto b = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Error err = Op(OpKind::MatMul).fails({&b, &b});
  REQUIRE(err.code() == ErrorCode::InvalidGraph);
  REQUIRE(err.message() == "node 'n1' (MatMul): inputs have shapes 2x3 and 2x3 whose inner dimensions 3 and 2 differ");
}

TEST_CASE("MatMul with many batches uses threads and stays exact") {
  kernels::ThreadPool pool(2);
  auto av = randomFloats(16 * 5 * 7, 9), bv = randomFloats(16 * 7 * 3, 10);
  auto a = floats({16, 5, 7}, av), b = floats({16, 7, 3}, bv);
  auto serial = values<float>(Op(OpKind::MatMul).run1({&a, &b}));
  auto threaded = values<float>(Op(OpKind::MatMul).run1({&a, &b}, &pool));
  REQUIRE(serial == threaded);
}

TEST_CASE("Gemm transposes, alpha, beta and broadcast C") {
  auto a = floats({3, 2}, {1, 4, 2, 5, 3, 6});  // A^T = [[1,2,3],[4,5,6]]
  auto b = floats({2, 3}, {1, 0, 1, 0, 1, 1});  // B^T = [[1,0],[0,1],[1,1]]
  auto c = floats({2}, {10, 20});               // broadcast along rows
  auto y = Op(OpKind::Gemm).i("transA", 1).i("transB", 1).f("alpha", 2.0f).f("beta", 0.5f).run1({&a, &b, &c});
  REQUIRE(y.shape() == ir::Shape{2, 2});
  // A^T B^T = [[4,5],[10,11]]; 2x + 0.5c
  requireClose(values<float>(y), {13, 20, 25, 32});
  auto col = floats({2, 1}, {1, 2});
  auto y2 = Op(OpKind::Gemm).i("transA", 1).i("transB", 1).run1({&a, &b, &col});
  requireClose(values<float>(y2), {5, 6, 12, 13});
  auto y3 = Op(OpKind::Gemm, 13).i("transA", 1).i("transB", 1).run1({&a, &b, nullptr});
  requireClose(values<float>(y3), {4, 5, 10, 11});
  auto scalar = floats({}, {1});
  auto y4 = Op(OpKind::Gemm).i("transA", 1).i("transB", 1).run1({&a, &b, &scalar});
  requireClose(values<float>(y4), {5, 6, 11, 12});
}

TEST_CASE("Gemm on int32 and its errors") {
  auto a = int32s({2, 2}, {1, 2, 3, 4});
  auto c = int32s({1}, {100});
  REQUIRE(values<int32_t>(Op(OpKind::Gemm).run1({&a, &a, &c})) == std::vector<int32_t>{107, 110, 115, 122});
  auto f = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto badC = floats({3}, {1, 2, 3});
  REQUIRE(Op(OpKind::Gemm).fails({&f, &f}).code() == ErrorCode::InvalidGraph);
  auto ft = floats({3, 2}, {1, 2, 3, 4, 5, 6});
  Error err = Op(OpKind::Gemm).fails({&f, &ft, &badC});
  REQUIRE(err.message() == "node 'n1' (Gemm): input 2 has shape 3 which does not broadcast to the output shape 2x2");
  auto r3 = floats({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  REQUIRE(Op(OpKind::Gemm).fails({&r3, &ft}).message() ==
          "node 'n1' (Gemm): input 0 has shape 1x2x3 but expected rank 2");
}
