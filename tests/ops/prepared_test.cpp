// Prepared ops compute what the table's one-shot path computes, check their inputs, and fail at prepare time.
#include "cpu/gemm.h"
#include "kernels/kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

using namespace ctxkit;
using ir::Attribute;
using ir::ElemType;
using ir::OpKind;

namespace {

ir::Tensor randomTensor(ElemType type, ir::Shape shape, uint32_t seed) {
  auto t = ir::Tensor::allocate(ElemType::Float, shape);
  REQUIRE(t);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  float* p = t->mutableDataAs<float>();
  for (uint64_t i = 0; i < t->elementCount(); ++i) p[i] = dist(rng);
  if (type == ElemType::Float) return *t;
  // float16 inputs: one kernel evaluation of Cast converts them, independently of the prepared path.
  ir::Attributes to;
  to.set(Attribute::makeInt("to", static_cast<int64_t>(type)));
  kernels::OpContext cast{OpKind::Cast, 13, to, "cast"};
  const ir::Tensor* in = &*t;
  auto out = kernels::evaluate(cast, std::span(&in, 1), 1);
  REQUIRE(out);
  return (*out)[0];
}

kernels::ValueDesc describe(const ir::Tensor& t, bool constant) {
  kernels::ValueDesc d;
  d.type = t.type();
  d.shape = t.shape();
  d.value = constant ? &t : nullptr;
  return d;
}

bool sameBits(const ir::Tensor& a, const ir::Tensor& b) {
  return a.type() == b.type() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.byteSize()) == 0;
}

// Prepares with `constants` marking weights, runs once, and compares with kernels::evaluate bit for bit.
void expectSameAsEvaluate(const kernels::OpContext& ctx, const std::vector<ir::Tensor>& inputs,
                          const std::vector<bool>& constants) {
  std::vector<kernels::ValueDesc> descs;
  std::vector<const ir::Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    descs.push_back(describe(inputs[i], constants[i]));
    ptrs.push_back(&inputs[i]);
  }
  auto prepared = kernels::prepare(ctx, descs, 1);
  INFO((prepared ? std::string() : prepared.error().message()));
  REQUIRE(prepared);
  const auto& od = (*prepared)->outputs()[0];
  auto out = ir::Tensor::allocate(od.type, od.shape);
  REQUIRE(out);
  ir::Tensor* outs[] = {&*out};
  REQUIRE((*prepared)->run(ptrs, outs, nullptr));
  auto reference = kernels::evaluate(ctx, ptrs, 1);
  REQUIRE(reference);
  CHECK(sameBits(*out, (*reference)[0]));
}

}  // namespace

TEST_CASE("a prepared Conv with a fused activation computes what evaluate computes", "[ops][prepared]") {
  ir::Attributes attrs;
  attrs.set(Attribute::makeInts("pads", {1, 1, 1, 1}));
  attrs.set(Attribute::makeInts("strides", {2, 2}));
  attrs.set(Attribute::makeString("activation", "Relu"));
  kernels::OpContext ctx{OpKind::Conv, 13, attrs, "conv"};
  expectSameAsEvaluate(ctx,
                       {randomTensor(ElemType::Float, {1, 3, 9, 9}, 1), randomTensor(ElemType::Float, {4, 3, 3, 3}, 2),
                        randomTensor(ElemType::Float, {4}, 3)},
                       {false, true, true});
}

TEST_CASE("a prepared float16 MatMul widens its constant weight once and matches evaluate", "[ops][prepared]") {
  ir::Attributes attrs;
  kernels::OpContext ctx{OpKind::MatMul, 13, attrs, "mm16"};
  expectSameAsEvaluate(ctx, {randomTensor(ElemType::Float16, {2, 5, 8}, 4), randomTensor(ElemType::Float16, {8, 6}, 5)},
                       {false, true});
}

TEST_CASE("a prepared op refuses inputs of another shape or type, naming both", "[ops][prepared]") {
  ir::Attributes attrs;
  kernels::OpContext ctx{OpKind::Add, 14, attrs, "add"};
  ir::Tensor a = randomTensor(ElemType::Float, {2, 3}, 6), b = randomTensor(ElemType::Float, {3}, 7);
  std::vector<kernels::ValueDesc> descs{describe(a, false), describe(b, false)};
  auto prepared = kernels::prepare(ctx, descs, 1);
  REQUIRE(prepared);
  CHECK((*prepared)->outputs()[0].shape == ir::Shape{2, 3});
  ir::Tensor wrong = randomTensor(ElemType::Float, {2, 4}, 8);
  auto out = ir::Tensor::allocate(ElemType::Float, {2, 3});
  REQUIRE(out);
  ir::Tensor* outs[] = {&*out};
  const ir::Tensor* ins[] = {&wrong, &b};
  auto s = (*prepared)->run(ins, outs, nullptr);
  REQUIRE(!s);
  CHECK(s.error().message().find("node 'add'") != std::string::npos);
  CHECK(s.error().message().find("2x4") != std::string::npos);
  CHECK(s.error().message().find("2x3") != std::string::npos);
}

TEST_CASE("bad attributes fail when the op is prepared, not when it runs", "[ops][prepared]") {
  ir::Attributes attrs;
  attrs.set(Attribute::makeInt("group", 0));
  kernels::OpContext ctx{OpKind::Conv, 13, attrs, "badconv"};
  ir::Tensor x = randomTensor(ElemType::Float, {1, 2, 4, 4}, 9), w = randomTensor(ElemType::Float, {2, 2, 1, 1}, 10);
  std::vector<kernels::ValueDesc> descs{describe(x, false), describe(w, true)};
  auto prepared = kernels::prepare(ctx, descs, 1);
  REQUIRE(!prepared);
  CHECK(prepared.error().message().find("node 'badconv'") != std::string::npos);
  CHECK(prepared.error().message().find("group is 0") != std::string::npos);
}

TEST_CASE("a prepared MatMul reads B stored in panels in place and computes the one-shot result", "[ops][prepared]") {
  const ir::Tensor a = randomTensor(ElemType::Float, {2, 3, 40}, 11);
  const ir::Tensor b = randomTensor(ElemType::Float, {40, 70}, 12);
  ir::Attributes none;
  kernels::OpContext ctx{OpKind::MatMul, 13, none, "mm"};
  std::vector<const ir::Tensor*> ins{&a, &b};
  auto want = kernels::evaluate(ctx, ins, 1);
  REQUIRE(want);
  for (size_t width : {8, 16, 32}) {
    const cpu::WeightLayout layout{cpu::WeightLayoutKind::GemmPanels, static_cast<uint16_t>(width), 16};
    auto packed = cpu::packWeight(layout, b);
    REQUIRE(packed);
    std::vector<kernels::ValueDesc> descs{describe(a, false), describe(b, true)};
    descs[1].value = &*packed;  // the stored tensor; the desc keeps B's logical shape
    std::vector<cpu::WeightLayout> layouts{{}, layout};
    auto op = kernels::prepare(ctx, descs, 1, layouts);
    INFO((op ? std::string() : op.error().message()));
    REQUIRE(op);
    CHECK((*op)->suboptimal().empty() == (width >= cpu::sgemmNaturalPanelWidth()));  // narrower panels warn
    auto y = ir::Tensor::allocate(ElemType::Float, {2, 3, 70});
    REQUIRE(y);
    std::vector<const ir::Tensor*> runIns{&a, &*packed};
    std::vector<ir::Tensor*> outs{&*y};
    REQUIRE((*op)->run(runIns, outs, nullptr));
    for (uint64_t i = 0; i < y->elementCount(); ++i)
      REQUIRE(std::fabs(y->dataAs<float>()[i] - (*want)[0].dataAs<float>()[i]) < 1e-4f);
  }
}

TEST_CASE("a packed weight in a place that does not read panels is refused at prepare", "[ops][prepared]") {
  const ir::Tensor x = randomTensor(ElemType::Float, {8, 8}, 13);
  const ir::Tensor w = randomTensor(ElemType::Float, {8, 8}, 14);
  const cpu::WeightLayout panels{cpu::WeightLayoutKind::GemmPanels, 8, 256};
  auto packed = cpu::packWeight(panels, w);
  REQUIRE(packed);
  ir::Attributes none;
  std::vector<kernels::ValueDesc> descs{describe(x, false), describe(w, true)};
  descs[1].value = &*packed;
  std::vector<cpu::WeightLayout> layouts{{}, panels};
  auto add = kernels::prepare(kernels::OpContext{OpKind::Add, 14, none, "add"}, descs, 1, layouts);
  REQUIRE_FALSE(add);
  CHECK_THAT(add.error().message(), Catch::Contains("input 1 is stored in layout gemm-panels(8x256), which this op does not read"));
  // Gemm with transB = 1 reads transposed panels only.
  ir::Attributes transB;
  transB.set(Attribute::makeInt("transB", 1));
  auto gemm = kernels::prepare(kernels::OpContext{OpKind::Gemm, 13, transB, "gemm"}, descs, 1, layouts);
  REQUIRE_FALSE(gemm);
  CHECK_THAT(gemm.error().message(), Catch::Contains("which this op does not read"));
  CHECK_FALSE(cpu::packWeight(panels, x.reshaped({64}).value()));
}

TEST_CASE("a prepared Conv with few output positions multiplies by its packed weight and matches the one-shot path",
          "[ops][prepared]") {
  struct Case {
    ir::Shape x, w;
    std::vector<int64_t> strides, pads;
  };
  // A 1-D front end (many taps, 4 outputs), a 3x3 conv onto a 2x2 map with padding, a pointwise 1x1, and a dense 3x3
  // conv of 128 channels onto 30x32 (its unfolded input, 1152 x 960, is built in five blocks of rows; 12 outputs keep
  // it off Winograd).
  for (const Case& c : {Case{{2, 2, 40}, {7, 2, 16}, {8}, {0, 0}}, Case{{1, 5, 3, 3}, {6, 5, 3, 3}, {2, 2}, {1, 1, 1, 1}},
                        Case{{1, 64, 2, 2}, {33, 64, 1, 1}, {1, 1}, {0, 0, 0, 0}},
                        Case{{2, 128, 30, 32}, {12, 128, 3, 3}, {1, 1}, {1, 1, 1, 1}}}) {
    const ir::Tensor x = randomTensor(ElemType::Float, c.x, 21);
    const ir::Tensor w = randomTensor(ElemType::Float, c.w, 22);
    const ir::Tensor b = randomTensor(ElemType::Float, {c.w[0]}, 23);
    ir::Attributes attrs;
    attrs.set(Attribute::makeInts("strides", c.strides));
    attrs.set(Attribute::makeInts("pads", c.pads));
    kernels::OpContext ctx{OpKind::Conv, 13, attrs, "conv"};
    std::vector<const ir::Tensor*> ins{&x, &w, &b};
    auto want = kernels::evaluate(ctx, ins, 1);
    REQUIRE(want);
    std::vector<kernels::ValueDesc> descs{describe(x, false), describe(w, true), describe(b, true)};
    auto op = kernels::prepare(ctx, descs, 1);
    REQUIRE(op);
    auto y = ir::Tensor::allocate(ElemType::Float, (*want)[0].shape());
    REQUIRE(y);
    std::vector<ir::Tensor*> outs{&*y};
    REQUIRE((*op)->run(ins, outs, nullptr));
    for (uint64_t i = 0; i < y->elementCount(); ++i)
      REQUIRE(std::fabs(y->dataAs<float>()[i] - (*want)[0].dataAs<float>()[i]) < 1e-4f);
    // The weight stored in transposed panels of [M, C x taps] (as the compiler stores it) is read in place, bound
    // as its stored 1-D tensor; depth 16 cuts K into several blocks.
    for (uint16_t width : {8, 16, 32}) {
      const cpu::WeightLayout layout{cpu::WeightLayoutKind::GemmPanelsTransposed, width, 16};
      auto packed = cpu::packWeight(layout, w);
      REQUIRE(packed);
      std::vector<kernels::ValueDesc> stored = descs;
      stored[1].value = &*packed;
      std::vector<cpu::WeightLayout> layouts{{}, layout, {}};
      auto inPlace = kernels::prepare(ctx, stored, 1, layouts);
      INFO((inPlace ? std::string() : inPlace.error().message()));
      REQUIRE(inPlace);
      auto z = ir::Tensor::allocate(ElemType::Float, (*want)[0].shape());
      REQUIRE(z);
      std::vector<const ir::Tensor*> storedIns{&x, &*packed, &b};
      std::vector<ir::Tensor*> zs{&*z};
      REQUIRE((*inPlace)->run(storedIns, zs, nullptr));
      for (uint64_t i = 0; i < z->elementCount(); ++i)
        REQUIRE(std::fabs(z->dataAs<float>()[i] - (*want)[0].dataAs<float>()[i]) < 1e-4f);
    }
  }
}

TEST_CASE("convOnPanels: dense convs run on panels, the direct, pointwise and banded paths do not", "[ops][prepared]") {
  auto decide = [](ir::Shape x, ir::Shape w, std::vector<int64_t> pads, int64_t dilation = 1, int64_t group = 1,
                   int64_t stride = 1) {
    ops::ConvAttrs a;
    a.group = group;
    a.window.strides = ops::IntList{stride, stride};
    a.window.pads = ops::IntList(pads.begin(), pads.end());
    a.window.dilations = ops::IntList{dilation, dilation};
    return kernels::convOnPanels(a, x, w);
  };
  CHECK_FALSE(decide({1, 960, 20, 20}, {256, 960, 3, 3}, {1, 1, 1, 1}));    // Winograd (stride 1, 25 tiles)
  CHECK(decide({1, 960, 20, 20}, {256, 960, 3, 3}, {1, 1, 1, 1}, 1, 1, 2));  // unfolds into 8640 x 100 values
  CHECK_FALSE(decide({1, 384, 10, 10}, {256, 384, 3, 3}, {1, 1, 1, 1}));    // Winograd (9 tiles)
  CHECK(decide({1, 384, 10, 10}, {256, 384, 3, 3}, {1, 1, 1, 1}, 1, 1, 2));  // 3456 x 25: one range, panels
  CHECK_FALSE(decide({1, 512, 7, 7}, {512, 512, 3, 3}, {1, 1, 1, 1}));      // Winograd (4 tiles, 262144 pairs)
  CHECK(decide({1, 960, 20, 20}, {256, 960, 3, 3}, {6, 6, 6, 6}, 6));       // dilated, every tap reaches the input
  CHECK_FALSE(decide({1, 960, 20, 20}, {256, 960, 3, 3}, {36, 36, 36, 36}, 36));  // most taps in the padding: bands
  CHECK_FALSE(decide({1, 32, 56, 56}, {32, 32, 3, 3}, {1, 1, 1, 1}));       // few channels: direct
  CHECK_FALSE(decide({1, 256, 28, 28}, {64, 256, 1, 1}, {0, 0, 0, 0}));     // pointwise: GEMM on the input planes
  CHECK(decide({1, 2048, 7, 7}, {512, 2048, 1, 1}, {0, 0, 0, 0}));          // ... unless the weight outweighs them
  CHECK(decide({1, 2048, 56, 56}, {512, 2048, 1, 1}, {0, 0, 0, 0}, 1, 1, 2));  // 1x1 of stride 2, 2048 x 784
  CHECK_FALSE(decide({1, 256, 28, 28}, {64, 256, 1, 1}, {1, 1, 1, 1}));     // padded 1x1: the border rows skip it
  CHECK(decide({1, 8, 2, 2}, {4, 8, 1, 1}, {0, 0, 0, 0}));                  // few positions: always
  CHECK_FALSE(decide({1, 256, 14, 14}, {256, 128, 3, 3}, {1, 1, 1, 1}, 1, 2));  // groups
  CHECK_FALSE(decide({1, 255, 14, 14}, {256, 256, 3, 3}, {1, 1, 1, 1}));    // channels disagree
}

TEST_CASE("a Conv weight in panels is refused where the op cannot read it", "[ops][prepared]") {
  const ir::Tensor x = randomTensor(ElemType::Float, {1, 4, 2, 2}, 24);
  const ir::Tensor w = randomTensor(ElemType::Float, {4, 2, 1, 1}, 25);
  const cpu::WeightLayout layout{cpu::WeightLayoutKind::GemmPanelsTransposed, 8, 256};
  auto packed = cpu::packWeight(layout, w);
  REQUIRE(packed);
  std::vector<kernels::ValueDesc> descs{describe(x, false), describe(w, true)};
  descs[1].value = &*packed;
  std::vector<cpu::WeightLayout> layouts{{}, layout};
  ir::Attributes grouped;
  grouped.set(Attribute::makeInt("group", 2));
  auto op = kernels::prepare(kernels::OpContext{OpKind::Conv, 13, grouped, "grouped"}, descs, 1, layouts);
  REQUIRE_FALSE(op);
  CHECK_THAT(op.error().message(), Catch::Contains("which this op does not read"));
  // Untransposed panels hold 2-D weights only.
  CHECK_FALSE(cpu::packWeight(cpu::WeightLayout{cpu::WeightLayoutKind::GemmPanels, 8, 256}, w));
}
