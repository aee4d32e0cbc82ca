// BatchNormalization, LayerNormalization, Softmax (opset < 13 vs 13+) and ReduceMean (axes attribute vs input).
#include "kernel_test_util.h"

using namespace ctxkit;
using namespace ctxkit::test;

TEST_CASE("BatchNormalization in inference mode") {
  auto x = floats({1, 2, 1, 2}, {1, 2, 3, 4});
  auto scale = floats({2}, {1, 2});
  auto bias = floats({2}, {0, 1});
  auto mean = floats({2}, {1, 3});
  auto var = floats({2}, {4, 1});
  auto y = Op(OpKind::BatchNormalization, 15).f("epsilon", 0.0f).run1({&x, &scale, &bias, &mean, &var});
  requireClose(values<float>(y), {0, 0.5f, 1, 3});
  Error training = Op(OpKind::BatchNormalization, 15).i("training_mode", 1).fails({&x, &scale, &bias, &mean, &var});
  REQUIRE(training.code() == ErrorCode::Unsupported);
  REQUIRE(Op(OpKind::BatchNormalization, 9).fails({&x, &scale, &bias, &mean, &var}, 5).code() ==
          ErrorCode::Unsupported);
  auto bad = floats({3}, {1, 1, 1});
  Error shapeErr = Op(OpKind::BatchNormalization, 15).fails({&x, &bad, &bias, &mean, &var});
  REQUIRE(shapeErr.message() ==
          "node 'n1' (BatchNormalization): input 1 (scale) has shape 3 but expected 2 values for input shape 1x2x1x2");
}

TEST_CASE("BatchNormalization opset 7 per-activation (spatial = 0)") {
  auto x = floats({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto one = floats({2, 2}, {1, 1, 1, 1});
  auto zero = floats({2, 2}, {0, 0, 0, 0});
  auto mean = floats({2, 2}, {1, 2, 3, 4});
  auto y = Op(OpKind::BatchNormalization, 7).i("spatial", 0).f("epsilon", 0.0f).run1({&x, &one, &zero, &mean, &one});
  requireClose(values<float>(y), {0, 0, 0, 0, 4, 4, 4, 4});
}

TEST_CASE("LayerNormalization over the last axes with Mean and InvStdDev") {
  auto x = floats({2, 2}, {1, 3, 2, 6});
  auto scale = floats({2}, {1, 2});
  auto bias = floats({2}, {0, 1});
  auto r = Op(OpKind::LayerNormalization).f("epsilon", 0.0f).eval({&x, &scale, &bias}, 3);
  REQUIRE(r.isOk());
  requireClose(values<float>((*r)[0]), {-1, 3, -1, 3});
  REQUIRE((*r)[1].shape() == ir::Shape{2, 1});
  REQUIRE((*r)[1].type() == ElemType::Float);
  requireClose(values<float>((*r)[1]), {2, 4});
  requireClose(values<float>((*r)[2]), {1, 0.5f});
  // axis 0 normalizes everything; scale broadcasts from 1 value; no bias.
  auto s1 = floats({1}, {1});
  auto y0 = Op(OpKind::LayerNormalization).i("axis", 0).f("epsilon", 0.0f).run1({&x, &s1, nullptr});
  float sd = std::sqrt(3.5f);
  requireClose(values<float>(y0), {-2 / sd, 0, -1 / sd, 3 / sd});
  auto badScale = floats({3}, {1, 1, 1});
  REQUIRE(Op(OpKind::LayerNormalization).fails({&x, &badScale}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("LayerNormalization over rows of 16 to 100 channels, parameters in place or broadcast") {
  // Rows shorter than one 64-float block (LayerNorms over 32 or 48 channels) and with tails of 16 and of single
  // floats, against the formula in double; the scale and bias as [d] (read in place), the scale as [d] with one bias
  // value, and both as one value (broadcast).
  for (int64_t d : {16, 32, 48, 100}) {
    INFO("d " << d);
    const int64_t rows = 7;
    std::vector<float> xv(static_cast<size_t>(rows * d)), sv(static_cast<size_t>(d)), bv(static_cast<size_t>(d));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 29) % 17) * 0.37f - 2.5f;
    for (size_t i = 0; i < sv.size(); ++i) sv[i] = 0.5f + 0.1f * static_cast<float>(i % 5), bv[i] = -0.3f * static_cast<float>(i % 3);
    auto x = floats({rows, d}, xv);
    for (int form = 0; form < 3; ++form) {
      INFO("parameters form " << form);
      auto scale = form == 2 ? floats({1}, {1.5f}) : floats({d}, sv);
      auto bias = form == 0 ? floats({d}, bv) : floats({1}, {-0.25f});
      auto y = values<float>(Op(OpKind::LayerNormalization).f("epsilon", 1e-5f).run1({&x, &scale, &bias}));
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int64_t k = 0; k < d; ++k) mean += xv[static_cast<size_t>(r * d + k)];
        mean /= static_cast<double>(d);
        for (int64_t k = 0; k < d; ++k) {
          const double c = xv[static_cast<size_t>(r * d + k)] - mean;
          var += c * c;
        }
        const double inv = 1.0 / std::sqrt(var / static_cast<double>(d) + 1e-5);
        for (int64_t k = 0; k < d; ++k) {
          const auto ks = static_cast<size_t>(k);
          const double g = form == 2 ? 1.5 : sv[ks], b = form == 0 ? bv[ks] : -0.25;
          const double want = (xv[static_cast<size_t>(r * d + k)] - mean) * inv * g + b;
          CHECK(y[static_cast<size_t>(r * d + k)] == Approx(want).epsilon(1e-5).margin(1e-5));
        }
      }
    }
  }
}

TEST_CASE("Softmax before opset 13 coerces to 2-D at axis") {
  auto x = floats({2, 2}, {0, 0, 0, std::log(3.0f)});
  // opset 11, default axis 1 over a 2x2 is a per-row softmax.
  requireClose(values<float>(Op(OpKind::Softmax, 11).run1({&x})), {0.5f, 0.5f, 0.25f, 0.75f});
  // opset 11, axis 0 flattens everything into one row of four.
  requireClose(values<float>(Op(OpKind::Softmax, 11).i("axis", 0).run1({&x})), {1.0f / 6, 1.0f / 6, 1.0f / 6, 0.5f});
  // opset 13, axis 0 is per column.
  requireClose(values<float>(Op(OpKind::Softmax, 13).i("axis", 0).run1({&x})), {0.5f, 0.25f, 0.5f, 0.75f});
  auto x3 = floats({1, 2, 2}, {0, 0, 0, std::log(3.0f)});
  // opset 11 default axis 1 on rank 3: one row of 4 per batch; opset 13 default -1: rows of 2.
  requireClose(values<float>(Op(OpKind::Softmax, 11).run1({&x3})), {1.0f / 6, 1.0f / 6, 1.0f / 6, 0.5f});
  requireClose(values<float>(Op(OpKind::Softmax, 13).run1({&x3})), {0.5f, 0.5f, 0.25f, 0.75f});
  auto big = floats({3}, {1000, 1000, -INFINITY});
  requireClose(values<float>(Op(OpKind::Softmax, 13).run1({&big})), {0.5f, 0.5f, 0});
  REQUIRE(Op(OpKind::Softmax, 13).i("axis", 3).fails({&x3}).message() ==
          "node 'n1' (Softmax): attribute axis 3 is out of range for rank 3 (expected -3 to 2)");
}

TEST_CASE("Softmax over rows shorter than a block: 17, 32, 49 and 63 values") {
  // Attention over 32 or 49 keys: whole lanes of 16 and single values after them, against the formula in double.
  for (int64_t n : {17, 32, 49, 63}) {
    INFO("row of " << n);
    std::vector<float> v(static_cast<size_t>(3 * n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 41) % 23) * 0.45f - 4.0f;
    v[5] = 9.0f;  // the largest value in the first row's first lanes
    auto x = floats({3, n}, v);
    auto y = values<float>(Op(OpKind::Softmax, 13).run1({&x}));
    for (int64_t r = 0; r < 3; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < n; ++k) mx = std::max<double>(mx, v[static_cast<size_t>(r * n + k)]);
      for (int64_t k = 0; k < n; ++k) sum += std::exp(v[static_cast<size_t>(r * n + k)] - mx);
      for (int64_t k = 0; k < n; ++k)
        CHECK(y[static_cast<size_t>(r * n + k)] ==
              Approx(std::exp(v[static_cast<size_t>(r * n + k)] - mx) / sum).epsilon(1e-5).margin(1e-7));
    }
  }
}

TEST_CASE("Softmax on a middle axis over many rows, with threads") {
  kernels::ThreadPool pool(2);
  std::vector<float> v(64 * 5 * 7);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 11) * 0.3f;
  auto x = floats({64, 5, 7}, v);
  auto y = values<float>(Op(OpKind::Softmax, 13).i("axis", 1).run1({&x}, &pool));
  for (size_t b = 0; b < 64; ++b)
    for (size_t k = 0; k < 7; ++k) {
      float sum = 0;
      for (size_t l = 0; l < 5; ++l) sum += y[(b * 5 + l) * 7 + k];
      REQUIRE(std::fabs(sum - 1) < 1e-5f);
    }
}

TEST_CASE("ReduceMean axes from the attribute before opset 18, from the input after") {
  auto x = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto y = Op(OpKind::ReduceMean, 13).ints("axes", {1}).run1({&x});
  REQUIRE(y.shape() == ir::Shape{2, 1});
  requireClose(values<float>(y), {2, 5});
  auto all = Op(OpKind::ReduceMean, 13).i("keepdims", 0).run1({&x});
  REQUIRE(all.shape().empty());
  requireClose(values<float>(all), {3.5f});
  auto axes = int64s({1}, {-2});
  auto y18 = Op(OpKind::ReduceMean, 18).i("keepdims", 0).run1({&x, &axes});
  REQUIRE(y18.shape() == ir::Shape{3});
  requireClose(values<float>(y18), {2.5f, 3.5f, 4.5f});
  auto noop = Op(OpKind::ReduceMean, 18).i("noop_with_empty_axes", 1).run1({&x});
  REQUIRE(noop.shape() == ir::Shape{2, 3});
  auto empty = int64s({0}, {});
  REQUIRE(Op(OpKind::ReduceMean, 18).run1({&x, &empty}).shape() == ir::Shape{1, 1});
  // Non-trailing axes of a rank-3 input.
  auto x3 = floats({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  requireClose(values<float>(Op(OpKind::ReduceMean, 13).ints("axes", {0, 2}).run1({&x3})), {3.5f, 5.5f});
  auto i = int32s({3}, {1, 2, 2});
  REQUIRE(values<int32_t>(Op(OpKind::ReduceMean, 13).run1({&i}))[0] == 1);
  REQUIRE(Op(OpKind::ReduceMean, 13).ints("axes", {1, 1}).fails({&x}).code() == ErrorCode::InvalidGraph);
}

TEST_CASE("ReduceMean without a known axes value cannot infer its shape") {
  kernels::ValueDesc in{ElemType::Float, {2, 3}, nullptr, true};
  kernels::ValueDesc axes{ElemType::Int64, {1}, nullptr, true};
  std::vector<kernels::ValueDesc> descs{in, axes};
  Op op(OpKind::ReduceMean, 18);
  auto r = kernels::inferOutputs(op.ctx(), descs, 1);
  REQUIRE_FALSE(r.isOk());
  REQUIRE(r.error().code() == ErrorCode::Unsupported);
  REQUIRE(r.error().message() ==
          "node 'n1' (ReduceMean): input 1 (axes) must be a known constant to infer the output shape");
}
