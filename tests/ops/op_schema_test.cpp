// The op id table is pinned (programs store these numbers), and the decoder turns ONNX attributes into typed ones.
#include "ops/op_schema.h"
#include "ops/typed_attrs.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace ctxkit;
using ir::Attribute;
using ir::OpKind;

TEST_CASE("every op id is pinned: released ids never change, new ops append", "[ops]") {
  // Written out by hand: reordering or inserting a line in ops.def changes an id and breaks every .bin.
  const std::vector<std::pair<uint16_t, std::string>> golden = {
      {0, "Add"},
      {1, "Sub"},
      {2, "Mul"},
      {3, "Div"},
      {4, "Pow"},
      {5, "Sqrt"},
      {6, "Erf"},
      {7, "Exp"},
      {8, "Log"},
      {9, "Neg"},
      {10, "Abs"},
      {11, "Reciprocal"},
      {12, "MatMul"},
      {13, "Gemm"},
      {14, "Relu"},
      {15, "LeakyRelu"},
      {16, "Sigmoid"},
      {17, "HardSigmoid"},
      {18, "Tanh"},
      {19, "Gelu"},
      {20, "Softmax"},
      {21, "Conv"},
      {22, "MaxPool"},
      {23, "AveragePool"},
      {24, "GlobalAveragePool"},
      {25, "BatchNormalization"},
      {26, "LayerNormalization"},
      {27, "Reshape"},
      {28, "Transpose"},
      {29, "Concat"},
      {30, "Flatten"},
      {31, "Squeeze"},
      {32, "Unsqueeze"},
      {33, "Identity"},
      {34, "Constant"},
      {35, "Gather"},
      {36, "Slice"},
      {37, "ReduceMean"},
      {38, "Cast"},
      {39, "Shape"},
      {40, "Clip"},
      {41, "Equal"},
      {42, "Greater"},
      {43, "Less"},
      {44, "GreaterOrEqual"},
      {45, "LessOrEqual"},
      {46, "Not"},
      {47, "And"},
      {48, "Or"},
      {49, "Where"},
      {50, "ConstantOfShape"},
      {51, "Expand"},
      {52, "Range"},
      {53, "Pad"},
      {54, "HardSwish"},
      {55, "Max"},
      {56, "Min"},
      {57, "ConvTranspose"},
      {58, "Resize"},
      {59, "If"},
      {60, "Loop"},
      {61, "Scan"},
      {62, "LSTM"},
      {63, "GRU"},
      {64, "Split"},
      {65, "Size"},
      {66, "CastLike"},
      {67, "ReduceSum"},
      {68, "ReduceMax"},
      {69, "ReduceMin"},
      {70, "ReduceProd"},
      {71, "ReduceL1"},
      {72, "ReduceL2"},
      {73, "ReduceLogSum"},
      {74, "ReduceLogSumExp"},
      {75, "ReduceSumSquare"},
      {76, "ArgMax"},
      {77, "ArgMin"},
      {78, "Mod"},
      {79, "Sin"},
      {80, "Cos"},
      {81, "Tan"},
      {82, "Asin"},
      {83, "Acos"},
      {84, "Atan"},
      {85, "Sinh"},
      {86, "Cosh"},
      {87, "Asinh"},
      {88, "Acosh"},
      {89, "Atanh"},
      {90, "Floor"},
      {91, "Ceil"},
      {92, "Round"},
      {93, "Sign"},
      {94, "IsNaN"},
      {95, "IsInf"},
      {96, "Elu"},
      {97, "Selu"},
      {98, "Celu"},
      {99, "Softplus"},
      {100, "Softsign"},
      {101, "ThresholdedRelu"},
      {102, "Shrink"},
      {103, "Mish"},
      {104, "Swish"},
      {105, "LogSoftmax"},
      {106, "Hardmax"},
      {107, "Trilu"},
      {108, "RMSNormalization"},
      {109, "Xor"},
      {110, "BitShift"},
      {111, "BitwiseAnd"},
      {112, "BitwiseOr"},
      {113, "BitwiseXor"},
      {114, "BitwiseNot"},
      {115, "PRelu"},
      {116, "GatherElements"},
      {117, "ScatterElements"},
      {118, "GatherND"},
      {119, "ScatterND"},
      {120, "OneHot"},
      {121, "CumSum"},
      {122, "CumProd"},
      {123, "TopK"},
      {124, "Tile"},
      {125, "DepthToSpace"},
      {126, "SpaceToDepth"},
      {127, "EyeLike"},
      {128, "Dropout"},
      {129, "NegativeLogLikelihoodLoss"},
      {130, "SoftmaxCrossEntropyLoss"},
      {131, "InstanceNormalization"},
      {132, "GroupNormalization"},
      {133, "LpNormalization"},
      {134, "MeanVarianceNormalization"},
      {135, "Sum"},
      {136, "Mean"},
      {137, "Attention"},
      {138, "Einsum"},
      {139, "BitCast"},
      {140, "RotaryEmbedding"},
      {141, "GlobalMaxPool"},
      {142, "QuantizeLinear"},
      {143, "DequantizeLinear"},
      {144, "DynamicQuantizeLinear"},
      {145, "LRN"},
      {146, "ReverseSequence"},
      {147, "Det"},
      {148, "MatMulInteger"},
      {149, "ConvInteger"},
      {150, "QLinearMatMul"},
      {151, "QLinearConv"},
      {152, "HannWindow"},
      {153, "HammingWindow"},
      {154, "BlackmanWindow"},
      {155, "MelWeightMatrix"},
      {156, "Upsample"},
      {157, "Scatter"},
      {158, "NonZero"},
      {159, "Compress"},
      {160, "RNN"},
      {161, "NonMaxSuppression"},
      {162, "GridSample"},
      {163, "LpPool"},
      {164, "CenterCropPad"},
      {165, "Col2Im"},
      {166, "MaxUnpool"},
      {167, "AffineGrid"},
      {168, "Unique"},
      {169, "TensorScatter"},
      {170, "DeformConv"},
      {171, "Binarizer"},
      {172, "ArrayFeatureExtractor"},
      {173, "TfIdfVectorizer"},
      {174, "RoiAlign"},
      {175, "SimplifiedLayerNormalization"},
      {176, "SkipLayerNormalization"},
      {177, "SkipSimplifiedLayerNormalization"},
      {178, "Gelu"},  // com.microsoft's
      {179, "BiasGelu"},
      {180, "FastGelu"},
      {181, "QuickGelu"},
      {182, "MatMulNBits"},
      {183, "GroupQueryAttention"},
      {184, "RotaryEmbedding"},  // com.microsoft's
      {185, "MatMulIntegerToFloat"},
      {186, "DynamicQuantizeMatMul"},
      {187, "MultiHeadAttention"},
      {188, "Attention"},  // com.microsoft's
      {189, "EmbedLayerNormalization"},
  };
  for (const auto& [id, name] : golden) {
    auto kind = ir::opKindFromInt(id);
    INFO("id " << id << " expected " << name);
    REQUIRE(kind);
    CHECK(ir::opKindName(*kind) == name);
    CHECK(ops::stableOpId(*kind) == id);
  }
  // EPContext never appears in a program; it stays after every program op, so new ops take the next ids.
  CHECK(ops::stableOpId(OpKind::EPContext) >= golden.size());
}

TEST_CASE("a fused activation decodes to an enum with its parameters", "[ops]") {
  ir::Attributes attrs;
  attrs.set(Attribute::makeString("activation", "LeakyRelu"));
  attrs.set(Attribute::makeFloats("activation_params", {0.25f}));
  auto conv = ops::decodeAttrs(OpKind::Conv, 13, attrs);
  REQUIRE(conv);
  const auto& c = std::get<ops::ConvAttrs>(*conv);
  CHECK(c.epilogue.activation == ops::Activation::LeakyRelu);
  CHECK(c.epilogue.alpha == 0.25f);

  ir::Attributes clip;
  clip.set(Attribute::makeString("activation", "Clip"));
  auto gemm = ops::decodeAttrs(OpKind::Gemm, 13, clip);
  REQUIRE(gemm);
  const auto& g = std::get<ops::GemmAttrs>(*gemm);
  CHECK(g.epilogue.activation == ops::Activation::Clip);
  CHECK(std::isinf(g.epilogue.alpha));
  CHECK(g.epilogue.alpha < 0);
  CHECK(g.alpha == 1.0f);
  CHECK(!g.transA);

  ir::Attributes bad;
  bad.set(Attribute::makeString("activation", "Softplus"));
  auto refused = ops::decodeAttrs(OpKind::MatMul, 13, bad);
  REQUIRE(!refused);
  CHECK(refused.error().code() == ErrorCode::Unsupported);
  CHECK(refused.error().message().find("Softplus") != std::string::npos);
}

TEST_CASE("opset differences are decided by the decoder", "[ops]") {
  ir::Attributes none;
  auto old = ops::decodeAttrs(OpKind::Softmax, 11, none);
  auto now = ops::decodeAttrs(OpKind::Softmax, 13, none);
  REQUIRE(old);
  REQUIRE(now);
  CHECK(std::get<ops::SoftmaxAttrs>(*old).coerce2d);
  CHECK(std::get<ops::SoftmaxAttrs>(*old).axis == 1);
  CHECK(!std::get<ops::SoftmaxAttrs>(*now).coerce2d);
  CHECK(std::get<ops::SoftmaxAttrs>(*now).axis == -1);

  CHECK(std::get<ops::BinaryAttrs>(*ops::decodeAttrs(OpKind::Pow, 7, none)).sameTypeOperands);
  CHECK(!std::get<ops::BinaryAttrs>(*ops::decodeAttrs(OpKind::Pow, 15, none)).sameTypeOperands);

  ir::Attributes spatial;
  spatial.set(Attribute::makeInt("spatial", 0));
  CHECK(std::get<ops::BatchNormAttrs>(*ops::decodeAttrs(OpKind::BatchNormalization, 7, spatial)).perActivation);
  CHECK(!std::get<ops::BatchNormAttrs>(*ops::decodeAttrs(OpKind::BatchNormalization, 9, spatial)).perActivation);
}

TEST_CASE("attribute values are checked once, with what was found and expected", "[ops]") {
  auto decodeWith = [](OpKind kind, Attribute a) {
    ir::Attributes attrs;
    attrs.set(std::move(a));
    if (kind == OpKind::MaxPool || kind == OpKind::AveragePool || kind == OpKind::LpPool)
      attrs.set(Attribute::makeInts("kernel_shape", {2, 2}));
    return ops::decodeAttrs(kind, 13, attrs);
  };
  struct Case {
    OpKind kind;
    Attribute attr;
    std::string expect;
  };
  std::vector<Case> cases = {
      {OpKind::Conv, Attribute::makeInt("group", 0), "group is 0"},
      {OpKind::Conv, Attribute::makeInts("strides", {1, 0}), "strides has value 0"},
      {OpKind::Conv, Attribute::makeInts("pads", {0, -1, 0, 0}), "pads has value -1"},
      {OpKind::Conv, Attribute::makeString("auto_pad", "SAME"), "auto_pad is 'SAME'"},
      {OpKind::MaxPool, Attribute::makeInt("storage_order", 2), "storage_order is 2"},
      {OpKind::AveragePool, Attribute::makeInt("count_include_pad", 3), "count_include_pad is 3"},
      {OpKind::AveragePool, Attribute::makeInt("ceil_mode", 5), "ceil_mode is 5"},
      {OpKind::LpPool, Attribute::makeInt("p", 0), "attribute p is 0"},
      {OpKind::LpPool, Attribute::makeInt("ceil_mode", 2), "ceil_mode is 2"},
      {OpKind::Gemm, Attribute::makeInt("transA", 2), "transA is 2"},
      {OpKind::Gelu, Attribute::makeString("approximate", "fast"), "approximate is 'fast'"},
      {OpKind::LayerNormalization, Attribute::makeInt("stash_type", 10), "stash_type 10"},
      {OpKind::BatchNormalization, Attribute::makeInt("training_mode", 1), "training_mode"},
  };
  for (const auto& c : cases) {
    auto r = decodeWith(c.kind, c.attr);
    INFO(ir::opKindName(c.kind) << ": " << c.expect);
    REQUIRE(!r);
    CHECK(r.error().message().find(c.expect) != std::string::npos);
  }
  ir::Attributes noKernel;
  auto pool = ops::decodeAttrs(OpKind::MaxPool, 13, noKernel);
  REQUIRE(!pool);
  CHECK(pool.error().message().find("kernel_shape") != std::string::npos);
}

TEST_CASE("the families typed in program version 4 decode and check their ONNX attributes", "[ops]") {
  auto decoded = [](OpKind kind, int64_t opset, const ir::Attributes& attrs) {
    auto a = ops::decodeAttrs(kind, opset, attrs);
    INFO((a ? std::string() : a.error().message()));
    REQUIRE(a);
    return ops::attrsText(*a);
  };
  auto refused = [](OpKind kind, int64_t opset, const ir::Attributes& attrs) {
    auto a = ops::decodeAttrs(kind, opset, attrs);
    REQUIRE(!a);
    return a.error().message();
  };
  // LSTM: activation names in any case (as ONNX Runtime takes them), checked sizes and bounds.
  ir::Attributes lstm;
  Attribute names;
  names.name = "activations";
  names.type = ir::AttrType::Strings;
  names.strings = {"Sigmoid", "TANH", "hardsigmoid"};
  lstm.set(names);
  lstm.set(Attribute::makeString("direction", "bidirectional"));
  lstm.set(Attribute::makeFloat("clip", 3.0f));
  CHECK(decoded(OpKind::LSTM, 14, lstm) ==
        " direction=2 clip=3 input_forget=0 linear_before_reset=0 layout=0 activations=[0,1,3]");
  lstm.set(Attribute::makeInt("hidden_size", 0));
  CHECK_THAT(refused(OpKind::LSTM, 14, lstm), Catch::Contains("attribute hidden_size is 0 but expected a value from 1 to"));
  lstm.remove("hidden_size");
  lstm.set(Attribute::makeInt("layout", 2));
  CHECK_THAT(refused(OpKind::LSTM, 14, lstm), Catch::Contains("attribute layout is 2 but expected 0 or 1"));
  lstm.remove("layout");
  names.strings = {"Sigmoid", "Gelu", "Tanh"};
  lstm.set(names);
  CHECK_THAT(refused(OpKind::LSTM, 14, lstm), Catch::Contains("activation function 'Gelu' is not supported"));
  lstm.set(Attribute::makeString("direction", "sideways"));
  CHECK_THAT(refused(OpKind::GRU, 14, lstm),
             Catch::Contains("attribute direction is 'sideways' but expected 'forward', 'reverse' or 'bidirectional'"));
  // GridSample: opset 16 spells linear "bilinear", opset 20 "linear"; either is taken.
  ir::Attributes grid;
  grid.set(Attribute::makeString("mode", "bicubic"));
  grid.set(Attribute::makeString("padding_mode", "reflection"));
  grid.set(Attribute::makeInt("align_corners", 1));
  CHECK(decoded(OpKind::GridSample, 16, grid) == " mode=2 padding_mode=2 align_corners=1");
  CHECK(decoded(OpKind::GridSample, 20, grid) == " mode=2 padding_mode=2 align_corners=1");
  CHECK(decoded(OpKind::GridSample, 20, ir::Attributes()) == " mode=0 padding_mode=0 align_corners=0");
  grid.set(Attribute::makeString("mode", "trilinear"));
  CHECK_THAT(refused(OpKind::GridSample, 20, grid),
             Catch::Contains("attribute mode is 'trilinear' but expected 'linear' ('bilinear'), 'nearest'"));
  // ConstantOfShape: the value's type and bytes; absent = float 0; more than one element refused.
  ir::Attributes cos;
  cos.set(Attribute::makeTensor("value", ir::Tensor::fromVector(ir::ElemType::Int64, {1}, std::vector<int64_t>{-2})));
  CHECK(decoded(OpKind::ConstantOfShape, 9, cos) == " type=int64 bytes_0_7=-2 bytes_8_15=0");
  CHECK(decoded(OpKind::ConstantOfShape, 9, ir::Attributes()) == " type=float32 bytes_0_7=0 bytes_8_15=0");
  cos.set(Attribute::makeTensor("value", ir::Tensor::fromVector(ir::ElemType::Int64, {2}, std::vector<int64_t>{1, 2})));
  CHECK_THAT(refused(OpKind::ConstantOfShape, 9, cos), Catch::Contains("attribute value has 2 elements but expected 1"));
  // TfIdfVectorizer: string pools are not supported; the n-gram range is checked.
  ir::Attributes tfidf;
  tfidf.set(Attribute::makeInt("min_gram_length", 2));
  tfidf.set(Attribute::makeInt("max_gram_length", 1));
  CHECK_THAT(refused(OpKind::TfIdfVectorizer, 9, tfidf), Catch::Contains("are not a valid range"));
  // Windows of Col2Im, MaxUnpool and DeformConv are checked as Conv's; MaxUnpool needs its kernel shape.
  ir::Attributes unpool;
  unpool.set(Attribute::makeInts("strides", {2, 2}));
  CHECK_THAT(refused(OpKind::MaxUnpool, 11, unpool), Catch::Contains("required attribute kernel_shape is missing"));
  unpool.set(Attribute::makeInts("kernel_shape", {2, 2}));
  unpool.set(Attribute::makeInts("pads", {0, -1, 0, 0}));
  CHECK_THAT(refused(OpKind::MaxUnpool, 11, unpool), Catch::Contains("attribute pads has value -1 but expected values from 0"));
  ir::Attributes deform;
  deform.set(Attribute::makeInt("offset_group", 0));
  CHECK_THAT(refused(OpKind::DeformConv, 19, deform), Catch::Contains("attribute offset_group is 0 but expected a value from 1 to"));
  // Small ones: optional axes, flags and enums.
  CHECK(decoded(OpKind::Unique, 11, ir::Attributes()) == " sorted=1");
  ir::Attributes axis;
  axis.set(Attribute::makeInt("axis", -1));
  CHECK(decoded(OpKind::Compress, 11, axis) == " axis=-1");
  ir::Attributes scatter;
  scatter.set(Attribute::makeString("mode", "circular"));
  CHECK(decoded(OpKind::TensorScatter, 24, scatter) == " axis=-2 mode=1");
  ir::Attributes nms;
  nms.set(Attribute::makeInt("center_point_box", 2));  // read as ONNX Runtime reads it: non-zero is true
  CHECK(decoded(OpKind::NonMaxSuppression, 11, nms) == " center_point_box=1");
  CHECK(decoded(OpKind::Dropout, 13, axis).empty());  // nothing an inference run uses
}

TEST_CASE("the shaping families (program version 3) decode their ONNX attributes by opset", "[ops]") {
  ir::Attributes attrs;
  attrs.set(Attribute::makeInts("axes", {0}));
  attrs.set(Attribute::makeInts("starts", {1}));
  attrs.set(Attribute::makeInts("ends", {3}));
  // Attributes an opset takes as inputs instead are not read.
  CHECK(ops::attrsText(*ops::decodeAttrs(OpKind::Slice, 9, attrs)) == " starts=[1] ends=[3] axes=[0]");
  CHECK(ops::attrsText(*ops::decodeAttrs(OpKind::Slice, 13, attrs)).empty());
  CHECK(ops::attrsText(*ops::decodeAttrs(OpKind::Unsqueeze, 11, attrs)) == " axes=[0]");
  CHECK(ops::attrsText(*ops::decodeAttrs(OpKind::Unsqueeze, 13, attrs)).empty());
  // Required attributes and string enums are checked once, at decode.
  auto concat = ops::decodeAttrs(OpKind::Concat, 13, ir::Attributes());
  REQUIRE(!concat);
  CHECK_THAT(concat.error().message(), Catch::Contains("required attribute axis is missing"));
  ir::Attributes resize;
  resize.set(Attribute::makeString("mode", "linear"));
  resize.set(Attribute::makeString("coordinate_transformation_mode", "align_corners"));
  resize.set(Attribute::makeString("keep_aspect_ratio_policy", "not_larger"));
  CHECK(ops::attrsText(*ops::decodeAttrs(OpKind::Resize, 19, resize)) ==
        " mode=1 coordinate_transformation_mode=3 nearest_mode=0 cubic_coeff_a=-0.75 exclude_outside=0"
        " extrapolation_value=0 keep_aspect_ratio_policy=1");
  resize.set(Attribute::makeString("coordinate_transformation_mode", "corners"));
  auto bad = ops::decodeAttrs(OpKind::Resize, 19, resize);
  REQUIRE(!bad);
  CHECK_THAT(bad.error().message(), Catch::Contains("attribute coordinate_transformation_mode is 'corners' but expected "
                                                    "'half_pixel', 'half_pixel_symmetric'"));
  ir::Attributes pad;
  pad.set(Attribute::makeString("mode", "wrap"));
  CHECK(!ops::decodeAttrs(OpKind::Pad, 18, pad));  // wrap came with opset 19
  CHECK(ops::attrsText(*ops::decodeAttrs(OpKind::Pad, 19, pad)) == " mode=3 value=0");
  ir::Attributes cast;
  cast.set(Attribute::makeInt("to", 0));
  CHECK(!ops::decodeAttrs(OpKind::Cast, 13, cast));
}
