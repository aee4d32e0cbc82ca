// The tiny CNN (two Conv/BatchNorm/Relu/MaxPool stages and a Gemm head): weights, ONNX graph and reference.
#include "samples/graph_builder.h"
#include "samples/prng.h"
#include "samples/sample_models.h"

#include <utility>

namespace ctxkit::samples {

namespace {

constexpr int64_t kImageChannels = 3, kImageSize = 32;
constexpr int64_t kChannels1 = 8, kChannels2 = 16, kClasses = 10;
constexpr int64_t kFlat = kChannels2 * (kImageSize / 4) * (kImageSize / 4);  // 1024 after two 2x2 pools
constexpr float kEpsilon = 1e-5f;

ir::Attribute ints(const char* name, std::vector<int64_t> v) { return ir::Attribute::makeInts(name, std::move(v)); }

ir::Model buildCnnModel(const CnnWeights& w) {
  GraphBuilder b("tiny_cnn", "cnn.");
  b.addInput("image", {1, kImageChannels, kImageSize, kImageSize});
  b.addOutput("logits", {1, kClasses});

  std::string v = "image";
  auto stage = [&](const std::string& n, int64_t cin, int64_t cout, const std::vector<float>& convW,
                   const std::vector<float>& convB, const std::vector<float>& bnScale, const std::vector<float>& bnBias,
                   const std::vector<float>& bnMean, const std::vector<float>& bnVar) {
    const std::string wName = b.addFloats(n + ".conv.weight", {cout, cin, 3, 3}, convW);
    const std::string bName = b.addFloats(n + ".conv.bias", {cout}, convB);
    v = b.addNode(n + "/conv", "Conv", {v, wName, bName},
                  {ints("kernel_shape", {3, 3}), ints("pads", {1, 1, 1, 1}), ints("strides", {1, 1})});
    const std::string scale = b.addFloats(n + ".bn.scale", {cout}, bnScale);
    const std::string bias = b.addFloats(n + ".bn.bias", {cout}, bnBias);
    const std::string mean = b.addFloats(n + ".bn.mean", {cout}, bnMean);
    const std::string var = b.addFloats(n + ".bn.var", {cout}, bnVar);
    v = b.addNode(n + "/bn", "BatchNormalization", {v, scale, bias, mean, var},
                  {ir::Attribute::makeFloat("epsilon", kEpsilon)});
    v = b.addNode(n + "/relu", "Relu", {v});
    v = b.addNode(n + "/pool", "MaxPool", {v}, {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})});
  };
  stage("stage1", kImageChannels, kChannels1, w.conv1W, w.conv1B, w.bn1Scale, w.bn1Bias, w.bn1Mean, w.bn1Var);
  stage("stage2", kChannels1, kChannels2, w.conv2W, w.conv2B, w.bn2Scale, w.bn2Bias, w.bn2Mean, w.bn2Var);

  v = b.addNode("head/flatten", "Flatten", {v}, {ir::Attribute::makeInt("axis", 1)});
  const std::string fcW = b.addFloats("head.fc.weight", {kClasses, kFlat}, w.fcW);
  // A weight held by a Constant node, so that loaders and weight sharing see one that is not an initializer.
  const std::string fcB = b.addConstant("head/fc_bias", {kClasses}, w.fcB);
  b.addNode("head/fc", "Gemm", {v, fcW, fcB}, {ir::Attribute::makeInt("transB", 1)}, "logits");

  return std::move(b).finish("ctxkit sample: tiny CNN, 2 x (Conv 3x3 + BatchNorm + Relu + MaxPool 2x2) + Gemm");
}

}  // namespace

CnnWeights makeCnnWeights(uint64_t seed) {
  SplitMix64 rng(seed);
  CnnWeights w;
  auto bn = [&](size_t c, std::vector<float>& scale, std::vector<float>& bias, std::vector<float>& mean,
                std::vector<float>& var) {
    scale = rng.uniformVector(c, 0.5f, 1.5f);
    bias = rng.uniformVector(c, -0.2f, 0.2f);
    mean = rng.uniformVector(c, -0.2f, 0.2f);
    var = rng.uniformVector(c, 0.5f, 1.5f);
  };
  w.conv1W = rng.uniformVector(kChannels1 * kImageChannels * 9, -0.2f, 0.2f);
  w.conv1B = rng.uniformVector(kChannels1, -0.1f, 0.1f);
  bn(kChannels1, w.bn1Scale, w.bn1Bias, w.bn1Mean, w.bn1Var);
  w.conv2W = rng.uniformVector(kChannels2 * kChannels1 * 9, -0.2f, 0.2f);
  w.conv2B = rng.uniformVector(kChannels2, -0.1f, 0.1f);
  bn(kChannels2, w.bn2Scale, w.bn2Bias, w.bn2Mean, w.bn2Var);
  w.fcW = rng.uniformVector(kClasses * kFlat, -0.2f, 0.2f);
  w.fcB = rng.uniformVector(kClasses, -0.1f, 0.1f);
  return w;
}

ref::Array runCnnReference(const CnnWeights& w, const ref::Array& image) {
  const ref::Array conv1W({kChannels1, kImageChannels, 3, 3}, w.conv1W);
  const ref::Array conv2W({kChannels2, kChannels1, 3, 3}, w.conv2W);
  const ref::Array fcW({kClasses, kFlat}, w.fcW);
  ref::Array v = ref::conv2d(image, conv1W, w.conv1B, 1, 1);
  v = ref::maxPool2d(ref::relu(ref::batchNorm(v, w.bn1Scale, w.bn1Bias, w.bn1Mean, w.bn1Var, kEpsilon)), 2, 2);
  v = ref::conv2d(v, conv2W, w.conv2B, 1, 1);
  v = ref::maxPool2d(ref::relu(ref::batchNorm(v, w.bn2Scale, w.bn2Bias, w.bn2Mean, w.bn2Var, kEpsilon)), 2, 2);
  return ref::gemmTransB(ref::flatten2d(v), fcW, w.fcB);
}

Sample makeTinyCnn(uint64_t inputSeed) {
  const CnnWeights weights = makeCnnWeights(kCnnWeightSeed);
  SplitMix64 rng(inputSeed);
  const ref::Array image({1, kImageChannels, kImageSize, kImageSize},
                         rng.uniformVector(kImageChannels * kImageSize * kImageSize, -1.0f, 1.0f));
  Sample s;
  s.stem = "tiny_cnn";
  s.model = buildCnnModel(weights);
  s.inputName = "image";
  s.input = toTensor(image);
  s.outputName = "logits";
  s.expectedOutput = toTensor(runCnnReference(weights, image));
  return s;
}

}  // namespace ctxkit::samples
