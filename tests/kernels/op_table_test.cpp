// The op table's coverage and entry points (run checks outputs), and the thread pool.
#include "kernel_test_util.h"

#include <atomic>
#include <thread>

using namespace ctxkit;
using namespace ctxkit::test;

TEST_CASE("every op kind but EPContext and control flow has a kernel") {
  for (uint32_t i = 0;; ++i) {
    auto kind = ir::opKindFromInt(i);
    if (!kind) break;
    INFO(ir::opKindName(*kind));
    REQUIRE(kernels::hasKernel(*kind) == (*kind != OpKind::EPContext && !ir::isControlFlow(*kind)));
  }
  REQUIRE_FALSE(kernels::hasKernel(OpKind::Unknown));
  REQUIRE(kernels::supportsType(OpKind::Conv, ElemType::Float));
  REQUIRE(kernels::supportsType(OpKind::Conv, ElemType::Float16));
  REQUIRE_FALSE(kernels::supportsType(OpKind::Conv, ElemType::Int32));
  REQUIRE(kernels::supportsType(OpKind::Add, ElemType::Uint16));
  REQUIRE(kernels::supportsType(OpKind::Transpose, ElemType::Bool));
  REQUIRE_FALSE(kernels::supportsType(OpKind::Transpose, ElemType::String));
  REQUIRE_FALSE(kernels::supportsType(OpKind::EPContext, ElemType::Float));
}

TEST_CASE("an op without a kernel is a clear error") {
  auto x = floats({1}, {1});
  Error e = Op(OpKind::EPContext).fails({&x});
  REQUIRE(e.code() == ErrorCode::Unsupported);
  REQUIRE(e.message() == "node 'n1' (EPContext): no CPU kernel for op EPContext");
  Op unnamed(OpKind::Add);
  unnamed.name = "";
  REQUIRE(unnamed.fails({&x}).message() == "unnamed node (Add): expected 2 inputs but got 1");
}

TEST_CASE("run checks the outputs it is given") {
  auto a = floats({2}, {1, 2});
  auto wrong = ir::Tensor::allocate(ElemType::Float, {3}).value();
  std::vector<const ir::Tensor*> ins{&a, &a};
  std::vector<ir::Tensor*> outs{&wrong};
  Op op(OpKind::Add);
  Status s = kernels::run(op.ctx(), ins, outs);
  REQUIRE_FALSE(s.isOk());
  REQUIRE(s.error().message() ==
          "node 'n1' (Add): output 0 is a float32 tensor of shape 3 but expected float32 of shape 2");
  std::vector<float> backing{0, 0};
  auto readOnly =
      ir::Tensor::view(ElemType::Float, {2}, reinterpret_cast<const std::byte*>(backing.data()), 8, nullptr).value();
  std::vector<ir::Tensor*> ro{&readOnly};
  REQUIRE_FALSE(kernels::run(op.ctx(), ins, ro).isOk());
  auto good = ir::Tensor::allocate(ElemType::Float, {2}).value();
  std::vector<ir::Tensor*> ok{&good};
  REQUIRE(kernels::run(op.ctx(), ins, ok).isOk());
  REQUIRE(values<float>(good) == std::vector<float>{2, 4});
}

TEST_CASE("inference rejects negative dimensions and type mismatches") {
  std::vector<kernels::ValueDesc> descs{{ElemType::Float, {2, -1}, nullptr, true}};
  auto r = kernels::inferOutputs(Op(OpKind::Relu).ctx(), descs, 1);
  REQUIRE(r.error().code() == ErrorCode::InvalidGraph);
  std::vector<kernels::ValueDesc> str{{ElemType::String, {2}, nullptr, true}};
  REQUIRE(kernels::inferOutputs(Op(OpKind::Relu).ctx(), str, 1).error().code() == ErrorCode::Unsupported);
  // Shape reads no data, so any element type is fine.
  auto s = kernels::inferOutputs(Op(OpKind::Shape).ctx(), str, 1);
  REQUIRE(s.isOk());
  REQUIRE((*s)[0].shape == ir::Shape{1});
}

TEST_CASE("ThreadPool covers the range exactly once, nests and serializes concurrent callers") {
  for (int threads : {1, 2, 4}) {
    kernels::ThreadPool pool(threads);
    REQUIRE(pool.threads() == threads);
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(100003)}) {
      std::vector<std::atomic<int>> hits(count);
      std::atomic<bool> badRange{false};  // Catch2 assertions are not thread-safe: check after the loop
      pool.parallelFor(count, 3, [&](size_t b, size_t e) {
        if (b > e || e > count) badRange = true;
        for (size_t i = b; i < e && i < count; ++i) hits[i].fetch_add(1);
      });
      REQUIRE_FALSE(badRange.load());
      for (size_t i = 0; i < count; ++i) REQUIRE(hits[i].load() == 1);
    }
    // Nested loops run inline instead of deadlocking.
    std::atomic<size_t> total{0};
    pool.parallelFor(16, 1, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) pool.parallelFor(10, 1, [&](size_t x, size_t y) { total += y - x; });
    });
    REQUIRE(total.load() == 160);
    // Two outside threads sharing one pool.
    std::atomic<size_t> sum{0};
    auto work = [&] {
      for (int rep = 0; rep < 50; ++rep) pool.parallelFor(1000, 10, [&](size_t b, size_t e) { sum += e - b; });
    };
    std::thread t1(work), t2(work);
    t1.join();
    t2.join();
    REQUIRE(sum.load() == 100000);
  }
}
