// ConvTranspose (strides, pads, groups, bias, output_padding, output_shape) and Resize (nearest and linear
// modes, coordinate transformation modes, scales vs sizes, opset 10) on small hand-computed cases.
#include "kernel_test_util.h"

#include <limits>

using namespace ctxkit;
using namespace ctxkit::test;

TEST_CASE("ConvTranspose scatters each input pixel through the kernel") {
  auto x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  auto w = floats({1, 1, 2, 2}, {1, 1, 1, 1});
  auto y = Op(OpKind::ConvTranspose, 11).run1({&x, &w});
  REQUIRE(y.shape() == ir::Shape{1, 1, 3, 3});
  REQUIRE(values<float>(y) == std::vector<float>{1, 3, 2, 4, 10, 6, 3, 7, 4});
  auto s2 = Op(OpKind::ConvTranspose, 11).ints("strides", {2, 2}).run1({&x, &w});
  REQUIRE(values<float>(s2) == std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  auto b = floats({1}, {0.5f});
  auto cropped = Op(OpKind::ConvTranspose, 11).ints("pads", {1, 1, 1, 1}).run1({&x, &w, &b});
  REQUIRE(cropped.shape() == ir::Shape{1, 1, 1, 1});
  REQUIRE(values<float>(cropped) == std::vector<float>{10.5f});
  auto padded = Op(OpKind::ConvTranspose, 11).ints("strides", {2, 2}).ints("output_padding", {1, 1}).run1({&x, &w});
  REQUIRE(padded.shape() == ir::Shape{1, 1, 5, 5});
  REQUIRE(values<float>(padded)[24] == 0.0f);
  auto shaped = Op(OpKind::ConvTranspose, 11).ints("strides", {2, 2}).ints("output_shape", {4, 4}).run1({&x, &w});
  REQUIRE(values<float>(shaped) == values<float>(s2));
  auto same = Op(OpKind::ConvTranspose, 11).ints("strides", {2, 2}).s("auto_pad", "SAME_UPPER").run1({&x, &w});
  REQUIRE(same.shape() == ir::Shape{1, 1, 4, 4});
}

TEST_CASE("ConvTranspose with groups and shape errors") {
  auto x = floats({1, 2, 1, 1}, {1, 2});
  auto w = floats({2, 1, 1, 1}, {3, 4});
  auto y = Op(OpKind::ConvTranspose, 11).i("group", 2).run1({&x, &w});
  REQUIRE(y.shape() == ir::Shape{1, 2, 1, 1});
  REQUIRE(values<float>(y) == std::vector<float>{3, 8});
  auto ungrouped = Op(OpKind::ConvTranspose, 11).run1({&x, &w}); // weight 2x1: 1 output channel, sums inputs
  REQUIRE(values<float>(ungrouped) == std::vector<float>{11});
  auto bad = floats({3, 1, 1, 1}, {1, 2, 3});
  REQUIRE(Op(OpKind::ConvTranspose, 11).fails({&x, &bad}).message() ==
          "node 'n1' (ConvTranspose): input 0 has 2 channels but weight shape 3x1x1x1 expects 3");
}

TEST_CASE("Resize nearest upsampling with default half_pixel and round_prefer_floor") {
  auto x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  auto scales = floats({4}, {1, 1, 2, 2});
  auto y = Op(OpKind::Resize, 13).run1({&x, nullptr, &scales});
  REQUIRE(y.shape() == ir::Shape{1, 1, 4, 4});
  REQUIRE(values<float>(y) == std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  // Opset 10: scales is input 1, asymmetric coordinates.
  auto y10 = Op(OpKind::Resize, 10).run1({&x, &scales});
  REQUIRE(values<float>(y10) == values<float>(y));
  // Downsampling 1x4 -> 1x2 by sizes: half_pixel gives 0.5 and 2.5, round_prefer_floor picks 0 and 2.
  auto row = floats({1, 4}, {10, 20, 30, 40});
  auto sizes = int64s({2}, {1, 2});
  REQUIRE(values<float>(Op(OpKind::Resize, 13).run1({&row, nullptr, nullptr, &sizes})) == std::vector<float>{10, 30});
  REQUIRE(values<float>(
              Op(OpKind::Resize, 13).s("nearest_mode", "round_prefer_ceil").run1({&row, nullptr, nullptr, &sizes})) ==
          std::vector<float>{20, 40});
}

TEST_CASE("Resize linear with half_pixel, align_corners and asymmetric") {
  auto x = floats({1, 1, 1, 2}, {0, 4});
  auto scales = floats({4}, {1, 1, 1, 2});
  auto y = Op(OpKind::Resize, 13).s("mode", "linear").run1({&x, nullptr, &scales});
  requireClose(values<float>(y), {0, 1, 3, 4});
  auto sizes = int64s({4}, {1, 1, 1, 4});
  auto ac = Op(OpKind::Resize, 13)
                .s("mode", "linear")
                .s("coordinate_transformation_mode", "align_corners")
                .run1({&x, nullptr, nullptr, &sizes});
  requireClose(values<float>(ac), {0, 4.0f / 3, 8.0f / 3, 4});
  auto as = Op(OpKind::Resize, 13)
                .s("mode", "linear")
                .s("coordinate_transformation_mode", "asymmetric")
                .run1({&x, nullptr, &scales});
  requireClose(values<float>(as), {0, 2, 4, 4});
  // Both axes: bilinear on a 2x2 image doubled with align_corners gives the 3x3 midpoint grid.
  auto img = floats({1, 1, 2, 2}, {0, 2, 4, 6});
  auto s3 = int64s({4}, {1, 1, 3, 3});
  auto bi = Op(OpKind::Resize, 13)
                .s("mode", "linear")
                .s("coordinate_transformation_mode", "align_corners")
                .run1({&img, nullptr, nullptr, &s3});
  requireClose(values<float>(bi), {0, 1, 2, 2, 3, 4, 4, 5, 6});
}

TEST_CASE("Resize shape rule needs scales or sizes values") {
  std::vector<kernels::ValueDesc> descs{{ElemType::Float, {1, 1, 2, 2}, nullptr, true},
                                        {ElemType::Undefined, {}, nullptr, false},
                                        {ElemType::Float, {4}, nullptr, true}};
  auto r = kernels::inferOutputs(Op(OpKind::Resize, 13).ctx(), descs, 1);
  REQUIRE(r.error().code() == ErrorCode::Unsupported);
  REQUIRE(r.error().message() ==
          "node 'n1' (Resize): input 2 (scales) must be a known constant to infer the output shape");
  descs.resize(2);
  descs.push_back({ElemType::Float, {0}, nullptr, true});
  descs.push_back({ElemType::Int64, {4}, nullptr, true});
  auto s = kernels::inferOutputs(Op(OpKind::Resize, 13).ctx(), descs, 1);
  REQUIRE(s.error().message() ==
          "node 'n1' (Resize): input 3 (sizes) must be a known constant to infer the output shape");
  auto x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  auto scales = floats({4}, {1, 1, 2, 2});
  auto sizes = int64s({4}, {1, 1, 4, 4});
  REQUIRE(Op(OpKind::Resize, 13).fails({&x, nullptr, &scales, &sizes}).code() == ErrorCode::InvalidGraph);
  REQUIRE(Op(OpKind::Resize, 13)
              .s("coordinate_transformation_mode", "tf_crop_and_resize")
              .fails({&x, nullptr, &scales})
              .code() == ErrorCode::Unsupported);
}

TEST_CASE("Resize refuses scales and crop boxes that give no extent a tensor can have") {
  auto x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {inf, 1e30f}) {
    auto scales = floats({4}, {1, 1, bad, 2});
    const Error e = Op(OpKind::Resize, 13).fails({&x, nullptr, &scales});
    REQUIRE(e.code() == ErrorCode::InvalidGraph);
    REQUIRE_THAT(e.message(), Catch::Contains("(scales) holds") && Catch::Contains("axis 2 of 2 would have"));
  }
  // tf_crop_and_resize: a NaN or reversed crop box.
  auto scales = floats({4}, {1, 1, 2, 2});
  for (float corner : {std::numeric_limits<float>::quiet_NaN(), -0.5f}) {
    auto roi = floats({8}, {0, 0, 0.9f, 0, 1, 1, corner, 1});
    const Error e = Op(OpKind::Resize, 13)
                        .s("coordinate_transformation_mode", "tf_crop_and_resize")
                        .fails({&x, &roi, &scales});
    REQUIRE(e.code() == ErrorCode::InvalidGraph);
  }
}

TEST_CASE("ConvTranspose matches the scatter definition on random data, with groups, dilations and threads") {
  // Reference: every input pixel scattered through the kernel, written out from the ONNX definition.
  struct Case {
    int64_t c, m, group, h, w, k, stride, dilation, pad;
  };
  kernels::ThreadPool pool(2);
  for (const Case& cs : {Case{4, 6, 1, 5, 7, 2, 2, 1, 0}, Case{6, 4, 2, 6, 5, 3, 2, 2, 1}, Case{3, 3, 3, 4, 4, 3, 1, 1, 1},
                         Case{8, 5, 1, 9, 3, 4, 3, 1, 2}}) {
    const int64_t mg = cs.m / cs.group, cg = cs.c / cs.group;
    std::vector<float> xv(static_cast<size_t>(cs.c * cs.h * cs.w)), wv(static_cast<size_t>(cs.c * mg * cs.k * cs.k)),
        bv(static_cast<size_t>(cs.m));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.37f * static_cast<float>(i));
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = std::cos(0.11f * static_cast<float>(i));
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = 0.1f * static_cast<float>(i);
    const int64_t oh = (cs.h - 1) * cs.stride + (cs.k - 1) * cs.dilation + 1 - 2 * cs.pad;
    const int64_t ow = (cs.w - 1) * cs.stride + (cs.k - 1) * cs.dilation + 1 - 2 * cs.pad;
    std::vector<double> want(static_cast<size_t>(cs.m * oh * ow));
    for (int64_t oc = 0; oc < cs.m; ++oc)
      for (int64_t i = 0; i < oh * ow; ++i) want[static_cast<size_t>(oc * oh * ow + i)] = bv[static_cast<size_t>(oc)];
    for (int64_t ic = 0; ic < cs.c; ++ic)
      for (int64_t m = 0; m < mg; ++m)
        for (int64_t y = 0; y < cs.h; ++y)
          for (int64_t x = 0; x < cs.w; ++x)
            for (int64_t ky = 0; ky < cs.k; ++ky)
              for (int64_t kx = 0; kx < cs.k; ++kx) {
                int64_t py = y * cs.stride + ky * cs.dilation - cs.pad, px = x * cs.stride + kx * cs.dilation - cs.pad;
                if (py < 0 || py >= oh || px < 0 || px >= ow) continue;
                int64_t oc = (ic / cg) * mg + m;
                want[static_cast<size_t>((oc * oh + py) * ow + px)] +=
                    double(xv[static_cast<size_t>((ic * cs.h + y) * cs.w + x)]) *
                    wv[static_cast<size_t>(((ic * mg + m) * cs.k + ky) * cs.k + kx)];
              }
    auto xt = floats({1, cs.c, cs.h, cs.w}, xv);
    auto wt = floats({cs.c, mg, cs.k, cs.k}, wv);
    auto bt = floats({cs.m}, bv);
    for (kernels::ThreadPool* threads : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
      auto y = Op(OpKind::ConvTranspose, 11)
                   .i("group", cs.group)
                   .ints("strides", {cs.stride, cs.stride})
                   .ints("dilations", {cs.dilation, cs.dilation})
                   .ints("pads", {cs.pad, cs.pad, cs.pad, cs.pad})
                   .run1({&xt, &wt, &bt}, threads);
      REQUIRE(y.shape() == ir::Shape{1, cs.m, oh, ow});
      auto got = values<float>(y);
      for (size_t i = 0; i < got.size(); ++i) REQUIRE(std::fabs(got[i] - want[i]) < 1e-4);
    }
  }
}

TEST_CASE("Resize tf_crop_and_resize samples the roi box and extrapolates outside the input") {
  auto x = floats({1, 3}, {0, 10, 20});
  auto sizes = int64s({2}, {1, 3});
  // Axis 1 spans input positions roi * (3 - 1): [0.5, 1.5] in three steps.
  auto roi = floats({4}, {0, 0.25f, 1, 0.75f});
  auto y = Op(OpKind::Resize, 13).s("mode", "linear").s("coordinate_transformation_mode", "tf_crop_and_resize")
               .run1({&x, &roi, nullptr, &sizes});
  requireClose(values<float>(y), {5, 10, 15});
  auto beyond = floats({4}, {0, 0.5f, 1, 1.5f});  // positions 1, 2, 3: the last is outside
  auto e = Op(OpKind::Resize, 13).s("mode", "linear").s("coordinate_transformation_mode", "tf_crop_and_resize")
               .f("extrapolation_value", 7).run1({&x, &beyond, nullptr, &sizes});
  requireClose(values<float>(e), {10, 20, 7});
}
