// Writes one-op benchmark models (depthwise and small 3x3 Conv, pooling, fused activations, GridSample) with random inputs,
// for bench/kernels.sh to time with ctxrun and ONNX Runtime, and for the ONNX Runtime oracle (tests/oracle), which
// checks the Resize models bit for bit. usage: make_kernel_models OUT_DIR [NAME_PREFIX] (only the models named so)
#include "ir/npy.h"
#include "onnx_io/onnx_io.h"
#include "samples/graph_builder.h"
#include "samples/prng.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <limits>

using namespace ctxkit;
using ir::Attribute;

namespace {

std::vector<float> randomFloats(size_t n, uint64_t seed) { return samples::SplitMix64(seed).uniformVector(n, -1, 1); }

size_t count(const ir::Shape& s) {
  size_t n = 1;
  for (int64_t d : s) n *= static_cast<size_t>(d);
  return n;
}

struct Bench {
  std::string name;
  ir::Shape in, out;
};

std::string gOnly;  // NAME_PREFIX: models whose name does not start with it are not written

// One model: input "x" of shape b.in through `build`, output "y" of shape b.out; input_0.npy beside it.
template <typename Build> bool write(const std::filesystem::path& dir, const Bench& b, Build build) {
  if (b.name.rfind(gOnly, 0) != 0) return true;
  samples::GraphBuilder g(b.name, "");
  g.addInput("x", b.in);
  build(g);
  g.addOutput("y", b.out);
  ir::Model model = std::move(g).finish("ctxkit kernel benchmark " + b.name);
  std::filesystem::path data = dir / b.name;
  std::filesystem::create_directories(data);
  Status s = onnx_io::saveModel(model, dir / (b.name + ".onnx"));
  if (s.isOk())
    s = ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, b.in, randomFloats(count(b.in), 7)),
                    data / "input_0.npy");
  if (!s.isOk()) std::fprintf(stderr, "%s: %s\n", b.name.c_str(), s.error().message().c_str());
  return s.isOk();
}

// Conv of `m` output channels over x with a kxk kernel (padded to keep the size at stride 1); `act` ("" for none) is
// applied after it.
bool conv(const std::filesystem::path& dir, const Bench& b, int64_t m, int64_t k, int64_t stride, int64_t group,
          const std::string& act, std::vector<Attribute> actAttrs = {}, int64_t dilation = 1) {
  return write(dir, b, [&](samples::GraphBuilder& g) {
    int64_t cg = b.in[1] / group;
    std::string w = g.addFloats("w", {m, cg, k, k}, randomFloats(static_cast<size_t>(m * cg * k * k), 11));
    std::string bias = g.addFloats("b", {m}, randomFloats(static_cast<size_t>(m), 13));
    int64_t p = dilation * (k / 2);
    std::string out = act.empty() ? "y" : "";
    std::string c = g.addNode("conv", "Conv", {"x", w, bias},
                              {Attribute::makeInts("kernel_shape", {k, k}), Attribute::makeInts("pads", {p, p, p, p}),
                               Attribute::makeInts("strides", {stride, stride}), Attribute::makeInt("group", group),
                               Attribute::makeInts("dilations", {dilation, dilation})},
                              out);
    if (!act.empty()) g.addNode("act", act, {c}, std::move(actAttrs), "y");
  });
}

// A depthwise Conv of odd geometry for the ONNX Runtime oracle (tests/oracle/ort_oracle.sh): `c` channels of an h x w
// map, a kh x kw kernel with strides, dilations and pads {top, left, bottom, right}; `act` ("" for none) after it.
struct Depthwise {
  std::string name;
  int64_t c, h, w, kh, kw, sh, sw, dh, dw;
  std::array<int64_t, 4> pads;
  bool bias;
  std::string act;
};

bool depthwise(const std::filesystem::path& dir, const Depthwise& d) {
  const int64_t oh = (d.h + d.pads[0] + d.pads[2] - d.dh * (d.kh - 1) - 1) / d.sh + 1;
  const int64_t ow = (d.w + d.pads[1] + d.pads[3] - d.dw * (d.kw - 1) - 1) / d.sw + 1;
  return write(dir, {d.name, {1, d.c, d.h, d.w}, {1, d.c, oh, ow}}, [&](samples::GraphBuilder& g) {
    std::string w = g.addFloats("w", {d.c, 1, d.kh, d.kw}, randomFloats(static_cast<size_t>(d.c * d.kh * d.kw), 11));
    std::vector<std::string> inputs{"x", w};
    if (d.bias) inputs.push_back(g.addFloats("b", {d.c}, randomFloats(static_cast<size_t>(d.c), 13)));
    std::string c = g.addNode("conv", "Conv", inputs,
                              {Attribute::makeInts("kernel_shape", {d.kh, d.kw}),
                               Attribute::makeInts("pads", {d.pads[0], d.pads[1], d.pads[2], d.pads[3]}),
                               Attribute::makeInts("strides", {d.sh, d.sw}), Attribute::makeInt("group", d.c),
                               Attribute::makeInts("dilations", {d.dh, d.dw})},
                              d.act.empty() ? "y" : "");
    if (!d.act.empty()) g.addNode("act", d.act, {c}, {}, "y");
  });
}

// Resize (linear) of the spatial dims by `scale` (b.out must be floor(in x scale)) in coordinate mode `coord`.
bool resizeLinear(const std::filesystem::path& dir, const Bench& b, float scaleH = 2, float scaleW = 2,
                  const std::string& coord = "half_pixel") {
  return write(dir, b, [&](samples::GraphBuilder& g) {
    std::string scales = g.addFloats("scales", {4}, {1, 1, scaleH, scaleW});
    g.addNode("resize", "Resize", {"x", "", scales},
              {Attribute::makeString("mode", "linear"), Attribute::makeString("coordinate_transformation_mode", coord)},
              "y");
  });
}

bool pool(const std::filesystem::path& dir, const Bench& b, const std::string& op, int64_t k, int64_t stride,
          int64_t pad, std::vector<Attribute> extra = {}) {
  return write(dir, b, [&](samples::GraphBuilder& g) {
    std::vector<Attribute> attrs{Attribute::makeInts("kernel_shape", {k, k}),
                                 Attribute::makeInts("pads", {pad, pad, pad, pad}),
                                 Attribute::makeInts("strides", {stride, stride})};
    for (Attribute& a : extra) attrs.push_back(std::move(a));
    g.addNode("pool", op, {"x"}, std::move(attrs), "y");
  });
}

// GridSample (opset 16 names) over x [1, 3, 5, 6] at a constant grid [1, 6, 8, 2] whose values run through points
// inside, on and far outside the image, and NaN and infinities (RAFT divides by a 1-pixel level's W - 1 = 0): what
// ONNX Runtime gives for each mode, padding and align_corners, for the oracle.
bool gridSample(const std::filesystem::path& dir, const std::string& mode, const std::string& padding, int64_t align) {
  const std::string name = "gridsample_" + mode + "_" + padding + "_" + std::to_string(align);
  return write(dir, {name, {1, 3, 5, 6}, {1, 3, 6, 8}}, [&](samples::GraphBuilder& g) {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> points{-0.93f, 0.41f, 1.0f,  -1.0f, 0.07f, -1.37f, 1.62f, 0.55f, -0.21f, 3.9f, -4.6f,
                                    0.88f,  nan,   -0.64f, inf,  0.33f, -inf,   0.12f, 1e30f, -0.5f,  -1e30f};
    std::vector<float> grid(6 * 8 * 2);
    for (size_t i = 0; i < grid.size(); ++i) grid[i] = points[(i * 7) % points.size()];
    std::string gr = g.addFloats("grid", {1, 6, 8, 2}, grid);
    g.addNode("gs", "GridSample", {"x", gr},
              {Attribute::makeString("mode", mode), Attribute::makeString("padding_mode", padding),
               Attribute::makeInt("align_corners", align)},
              "y");
  });
}

// Einsum of x by a constant operand of shape `yShape` (x by itself when `yShape` is empty), equation `eq`: the
// batched-GEMM forms attention and MaxViT export (contracted labels last in both, broadcast "...", outputs in another
// order) and the forms that sum directly (a diagonal, a label summed out of one operand).
bool einsum(const std::filesystem::path& dir, const Bench& b, const ir::Shape& yShape, const std::string& eq) {
  return write(dir, b, [&](samples::GraphBuilder& g) {
    const std::string y = yShape.empty() ? "x" : g.addFloats("e", yShape, randomFloats(count(yShape), 17));
    g.addNode("einsum", "Einsum", {"x", y}, {Attribute::makeString("equation", eq)}, "y");
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: make_kernel_models OUT_DIR [NAME_PREFIX]\n");
    return 2;
  }
  if (argc == 3) gOnly = argv[2];
  std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  bool ok = true;
  ok &= einsum(dir, {"einsum_scores", {1, 4, 2, 7, 5}, {1, 4, 2, 7, 9}}, {1, 4, 2, 9, 5}, "bnhid,bnhjd->bnhij");
  ok &= einsum(dir, {"einsum_values", {1, 4, 2, 7, 9}, {1, 4, 2, 7, 5}}, {1, 4, 2, 9, 5}, "bnhij,bnhjd->bnhid");
  ok &= einsum(dir, {"einsum_ellipsis", {2, 1, 3, 4}, {2, 5, 3, 6}}, {1, 5, 4, 6}, "...ij,...jk->...ik");
  ok &= einsum(dir, {"einsum_permuted", {3, 4, 5}, {6, 3, 4}}, {5, 6}, "bij,jk->kbi");
  ok &= einsum(dir, {"einsum_self", {3, 4}, {3, 3, 4}}, {}, "ij,kj->ikj");
  ok &= einsum(dir, {"einsum_diagonal", {4, 4}, {4}}, {}, "ii,ij->j");
  ok &= einsum(dir, {"einsum_summed_alone", {3, 4, 5}, {3, 6}}, {4, 6}, "ijk,jl->il");
  ok &= conv(dir, {"dw3x3_s1", {1, 64, 112, 112}, {1, 64, 112, 112}}, 64, 3, 1, 64, "");
  ok &= conv(dir, {"dw3x3_s2", {1, 64, 112, 112}, {1, 64, 56, 56}}, 64, 3, 2, 64, "");
  ok &= conv(dir, {"dw5x5_s1", {1, 96, 28, 28}, {1, 96, 28, 28}}, 96, 5, 1, 96, "");
  // EfficientNet-B0's and MobileNetV3's depthwise convs on mid-size maps (channels not a multiple of 16 among them).
  ok &= conv(dir, {"dw3x3_s2_c96", {1, 96, 56, 56}, {1, 96, 28, 28}}, 96, 3, 2, 96, "");
  ok &= conv(dir, {"dw3x3_s1_c144", {1, 144, 28, 28}, {1, 144, 28, 28}}, 144, 3, 1, 144, "");
  ok &= conv(dir, {"dw5x5_s2_c144", {1, 144, 28, 28}, {1, 144, 14, 14}}, 144, 5, 2, 144, "");
  ok &= conv(dir, {"dw5x5_s1_c240", {1, 240, 14, 14}, {1, 240, 14, 14}}, 240, 5, 1, 240, "");
  ok &= conv(dir, {"dw3x3_s1_c32", {1, 32, 56, 56}, {1, 32, 56, 56}}, 32, 3, 1, 32, "");
  ok &= conv(dir, {"dw5x5_s1_c72", {1, 72, 28, 28}, {1, 72, 28, 28}}, 72, 5, 1, 72, "");
  ok &= conv(dir, {"dw5x5_s1_c288_8x8", {1, 288, 8, 8}, {1, 288, 8, 8}}, 288, 5, 1, 288, "");
  ok &= conv(dir, {"dw5x5_s2_c96_16x16", {1, 96, 16, 16}, {1, 96, 8, 8}}, 96, 5, 2, 96, "");
  ok &= conv(dir, {"dw5x5_s2_c72_80x80", {1, 72, 80, 80}, {1, 72, 40, 40}}, 72, 5, 2, 72, "");
  ok &= conv(dir, {"dw3x3_s2_c64_160x160", {1, 64, 160, 160}, {1, 64, 80, 80}}, 64, 3, 2, 64, "");
  // Odd depthwise geometries (the oracle's sweep): widths below, at and past 8 and 16 outputs, row counts not a
  // multiple of four, channels not a multiple of 16, 3/5/7 and non-square kernels, dilation, asymmetric pads.
  const std::vector<Depthwise> odd{
      {"dwodd_3x3_s1_w9", 19, 7, 9, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, ""},
      {"dwodd_3x3_s1_w17_relu", 21, 13, 17, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, "Relu"},
      {"dwodd_3x3_s2_w67", 17, 29, 67, 3, 3, 2, 2, 1, 1, {0, 1, 1, 0}, false, ""},
      {"dwodd_5x5_s2_w41_sigmoid", 23, 22, 41, 5, 5, 2, 2, 1, 1, {2, 2, 2, 2}, true, "Sigmoid"},
      {"dwodd_5x5_s1_w14", 40, 14, 14, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, true, ""},
      {"dwodd_7x7_s1_w23", 9, 11, 23, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true, "HardSwish"},
      {"dwodd_3x3_d2_w30", 13, 18, 30, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, true, ""},
      {"dwodd_3x5_s1x2_w37", 11, 9, 37, 3, 5, 1, 2, 1, 1, {1, 0, 2, 3}, false, "Relu"},
      {"dwodd_9x9_s1_w20", 5, 21, 20, 9, 9, 1, 1, 1, 1, {4, 4, 4, 4}, true, ""},
  };
  for (const Depthwise& d : odd) ok &= depthwise(dir, d);
  ok &= pool(dir, {"maxpool3x3_s2", {1, 64, 112, 112}, {1, 64, 56, 56}}, "MaxPool", 3, 2, 1);
  ok &= pool(dir, {"maxpool2x2_s2", {1, 64, 112, 112}, {1, 64, 56, 56}}, "MaxPool", 2, 2, 0);
  ok &= pool(dir, {"maxpool3x3_s1", {1, 64, 56, 56}, {1, 64, 56, 56}}, "MaxPool", 3, 1, 1);
  ok &= pool(dir, {"avgpool3x3_s1", {1, 64, 56, 56}, {1, 64, 56, 56}}, "AveragePool", 3, 1, 1);
  ok &= pool(dir, {"avgpool2x2_s2", {1, 64, 112, 112}, {1, 64, 56, 56}}, "AveragePool", 2, 2, 0);
  ok &= pool(dir, {"avgpool3x3_s2_pad", {1, 64, 112, 112}, {1, 64, 56, 56}}, "AveragePool", 3, 2, 1,
             {Attribute::makeInt("count_include_pad", 1)});
  // The corpus's small-map pools (SqueezeNet 1.1 and GoogLeNet at 96x96: 3x3 stride 2 in ceil mode, GoogLeNet's
  // 3x3 stride-1 branch pools on 12x12 and 6x6, Inception v3's 3x3 stride-1 averages counting the padding on a 9x9
  // map) and a global average over 7x7.
  const std::vector<Attribute> ceilMode{Attribute::makeInt("ceil_mode", 1)};
  ok &= pool(dir, {"maxpool3x3_s2_ceil_c64_47", {1, 64, 47, 47}, {1, 64, 23, 23}}, "MaxPool", 3, 2, 0, ceilMode);
  ok &= pool(dir, {"maxpool3x3_s2_ceil_c128_23", {1, 128, 23, 23}, {1, 128, 11, 11}}, "MaxPool", 3, 2, 0, ceilMode);
  ok &= pool(dir, {"maxpool3x3_s2_ceil_c256_11", {1, 256, 11, 11}, {1, 256, 5, 5}}, "MaxPool", 3, 2, 0, ceilMode);
  ok &= pool(dir, {"maxpool3x3_s2_ceil_c64_48", {1, 64, 48, 48}, {1, 64, 24, 24}}, "MaxPool", 3, 2, 0, ceilMode);
  ok &= pool(dir, {"maxpool3x3_s1_ceil_c192_12", {1, 192, 12, 12}, {1, 192, 12, 12}}, "MaxPool", 3, 1, 1, ceilMode);
  ok &= pool(dir, {"maxpool3x3_s1_ceil_c832_6", {1, 832, 6, 6}, {1, 832, 6, 6}}, "MaxPool", 3, 1, 1, ceilMode);
  ok &= pool(dir, {"maxpool2x2_s2_ceil_c832_6", {1, 832, 6, 6}, {1, 832, 3, 3}}, "MaxPool", 2, 2, 0, ceilMode);
  ok &= pool(dir, {"avgpool3x3_s1_pad_c288_9", {1, 288, 9, 9}, {1, 288, 9, 9}}, "AveragePool", 3, 1, 1,
             {Attribute::makeInt("count_include_pad", 1)});
  ok &= write(dir, {"globalavgpool_c1280_7", {1, 1280, 7, 7}, {1, 1280, 1, 1}},
              [](samples::GraphBuilder& g) { g.addNode("pool", "GlobalAveragePool", {"x"}, {}, "y"); });
  ok &= conv(dir, {"conv3x3_leaky", {1, 16, 112, 112}, {1, 32, 112, 112}}, 32, 3, 1, 1, "LeakyRelu",
             {Attribute::makeFloat("alpha", 0.1f)});
  ok &= conv(dir, {"conv1x1_hardsigmoid", {1, 64, 56, 56}, {1, 64, 56, 56}}, 64, 1, 1, 1, "HardSigmoid",
             {Attribute::makeFloat("alpha", 0.2f), Attribute::makeFloat("beta", 0.5f)});
  ok &= conv(dir, {"conv3x3_c3_s2", {1, 3, 224, 224}, {1, 16, 112, 112}}, 16, 3, 2, 1, "");
  ok &= conv(dir, {"conv3x3_c16_s1", {1, 16, 56, 56}, {1, 16, 56, 56}}, 16, 3, 1, 1, "");
  ok &= conv(dir, {"conv3x3_c32_s1", {1, 32, 56, 56}, {1, 32, 56, 56}}, 32, 3, 1, 1, "");
  ok &= conv(dir, {"conv3x3_c64_s1", {1, 64, 28, 28}, {1, 64, 28, 28}}, 64, 3, 1, 1, "");
  ok &= conv(dir, {"conv3x3_c16_s2", {1, 16, 112, 112}, {1, 32, 56, 56}}, 32, 3, 2, 1, "");
  // Dense convs of ResNet-like stages (many channels: im2col + GEMM rather than the direct path).
  ok &= conv(dir, {"conv3x3_c128_s1", {1, 128, 28, 28}, {1, 128, 28, 28}}, 128, 3, 1, 1, "Relu");
  ok &= conv(dir, {"conv3x3_c256_s1", {1, 256, 14, 14}, {1, 256, 14, 14}}, 256, 3, 1, 1, "");
  ok &= conv(dir, {"conv3x3_c512_s1", {1, 512, 7, 7}, {1, 512, 7, 7}}, 512, 3, 1, 1, "");
  ok &= conv(dir, {"conv3x3_c128_s2", {1, 128, 56, 56}, {1, 256, 28, 28}}, 256, 3, 2, 1, "");
  ok &= conv(dir, {"conv1x1_c256_s2", {1, 256, 56, 56}, {1, 512, 28, 28}}, 512, 1, 2, 1, "");
  ok &= conv(dir, {"conv1x1_c256_s1", {1, 256, 28, 28}, {1, 64, 28, 28}}, 64, 1, 1, 1, "");
  // ResNet-50's late stages: its 1x1 bottleneck convs and 3x3 at 14x14 and 7x7, and a grouped 3x3 (ResNeXt, RegNet).
  ok &= conv(dir, {"conv1x1_c1024_s1", {1, 1024, 14, 14}, {1, 256, 14, 14}}, 256, 1, 1, 1, "Relu");
  ok &= conv(dir, {"conv1x1_c2048_s1", {1, 2048, 7, 7}, {1, 512, 7, 7}}, 512, 1, 1, 1, "Relu");
  ok &= conv(dir, {"conv1x1_c512_x4", {1, 512, 7, 7}, {1, 2048, 7, 7}}, 2048, 1, 1, 1, "");
  ok &= conv(dir, {"conv3x3_c128_14", {1, 128, 14, 14}, {1, 128, 14, 14}}, 128, 3, 1, 1, "Relu");
  ok &= conv(dir, {"conv3x3_c512_4", {1, 512, 4, 4}, {1, 512, 4, 4}}, 512, 3, 1, 1, "Relu");
  ok &= conv(dir, {"conv3x3_g32_c256", {1, 256, 14, 14}, {1, 256, 14, 14}}, 256, 3, 1, 32, "Relu");
  // Pointwise convs of the mobile detectors (SSDlite, Faster R-CNN's MobileNetV3 body at 320x320): few input
  // channels onto a large map, many onto a small one.
  ok &= conv(dir, {"conv1x1_c16_160", {1, 16, 160, 160}, {1, 64, 160, 160}}, 64, 1, 1, 1, "Relu");
  ok &= conv(dir, {"conv1x1_c72_80", {1, 72, 80, 80}, {1, 24, 80, 80}}, 24, 1, 1, 1, "");
  ok &= conv(dir, {"conv1x1_c112_20", {1, 112, 20, 20}, {1, 672, 20, 20}}, 672, 1, 1, 1, "");
  // The dense and dilated 3x3 convs of a DeepLab ASPP head (issue 29): at dilation 36 on 20x20 only the centre tap
  // reaches the input.
  for (int64_t d : {1, 6, 36})
    ok &= conv(dir, {"conv3x3_c960_d" + std::to_string(d), {1, 960, 20, 20}, {1, 256, 20, 20}}, 256, 3, 1, 1, "", {}, d);
  ok &= resizeLinear(dir, {"resize_linear_x2", {1, 32, 80, 80}, {1, 32, 160, 160}});
  // Scales whose source coordinates are not exact binary fractions, where rounding differs between formulas.
  ok &= resizeLinear(dir, {"resize_linear_odd", {1, 16, 37, 53}, {1, 16, 62, 121}}, 1.7f, 2.3f);
  ok &= resizeLinear(dir, {"resize_linear_down", {1, 16, 75, 90}, {1, 16, 33, 27}}, 0.45f, 0.3f, "align_corners");
  ok &= resizeLinear(dir, {"resize_linear_asym", {1, 16, 20, 30}, {1, 16, 58, 87}}, 2.9f, 2.9f, "asymmetric");
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (int64_t align : {0, 1}) ok &= gridSample(dir, mode, padding, align);
  return ok ? 0 : 1;
}
