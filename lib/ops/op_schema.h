// Typed ops: stable numeric op ids and typed attributes per op family, decoded once from ONNX attributes.
// Every attribute struct lists its fields in order through `fields(f)` (f("name", member) per field): compiled
// programs encode typed attributes from that list (values only, in that order), and dumps print it. Adding,
// removing or reordering a field changes the program encoding: bump the program format for it.
#pragma once

#include "ir/attribute.h"
#include "ir/elem_type.h"
#include "ir/op_kind.h"
#include "support/status.h"

#include <cstdint>
#include <limits>
#include <memory_resource>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

// Declares `fields(f)` (and its const overload) from a list of f("name", member) calls.
#define CTXKIT_FIELDS(...)                                                                                             \
  template <class F> void fields(F&& f) { __VA_ARGS__; }                                                               \
  template <class F> void fields(F&& f) const { __VA_ARGS__; }

namespace ctxkit::ops {

// The numeric id of an op kind in compiled programs. Ids never change once released: ops.def only grows at
// its end (above EPContext), and tests/ops pins every (id, name) pair.
inline uint16_t stableOpId(ir::OpKind kind) { return static_cast<uint16_t>(kind); }

// An activation folded into the op that produces its input (Conv, Gemm, MatMul), applied to each result.
enum class Activation : uint8_t {
  None = 0,
  Relu = 1,
  LeakyRelu = 2,
  Sigmoid = 3,
  Tanh = 4,
  HardSigmoid = 5,
  Clip = 6,
  HardSwish = 7,
  Swish = 8,  // x sigmoid(x) (SiLU): the Sigmoid and Mul of PyTorch exports, matched by fuse-epilogue
  Gelu = 9,   // 0.5 x (1 + erf(x / sqrt 2)): ONNX Gelu without approximation (match-activations makes it)
};

// y = activation(x) * scale + shift, per element of the op's result (the scale and shift of a following scalar
// Mul/Add that the compiler folded in).
struct Epilogue {
  Activation activation = Activation::None;
  float alpha = 0;  // LeakyRelu slope, HardSigmoid alpha, Clip minimum
  float beta = 0;   // HardSigmoid beta, Clip maximum
  float scale = 1;
  float shift = 0;
  bool operator==(const Epilogue&) const = default;
  CTXKIT_FIELDS(f("activation", activation); f("alpha", alpha); f("beta", beta); f("scale", scale); f("shift", shift);)
};

// A list of integers in typed attributes. Allocator-aware, so that a program read from a context binary keeps its
// ops' lists in its one storage block (program::Program::storage); decoded from ONNX attributes, on the heap.
using IntList = std::pmr::vector<int64_t>;

enum class AutoPad : uint8_t { NotSet = 0, SameUpper = 1, SameLower = 2, Valid = 3 };

// Sliding-window attributes of Conv and the pooling ops. Absent lists take their defaults once the spatial
// rank is known (1s for strides and dilations, 0s for pads, the weight's shape for Conv's kernel).
struct WindowAttrs {
  std::optional<IntList> kernelShape, strides, dilations, pads;
  AutoPad autoPad = AutoPad::NotSet;
  CTXKIT_FIELDS(f("kernel_shape", kernelShape); f("strides", strides); f("dilations", dilations); f("pads", pads);
                f("auto_pad", autoPad);)
};

struct ConvAttrs {
  WindowAttrs window;
  int64_t group = 1;
  Epilogue epilogue;
  CTXKIT_FIELDS(f("window", window); f("group", group); f("epilogue", epilogue);)
};

struct PoolAttrs {
  WindowAttrs window;  // kernelShape is required
  bool ceilMode = false;
  bool countIncludePad = false;     // AveragePool
  bool columnMajorIndices = false;  // MaxPool storage_order = 1
  CTXKIT_FIELDS(f("window", window); f("ceil_mode", ceilMode); f("count_include_pad", countIncludePad);
                f("column_major_indices", columnMajorIndices);)
};

struct GemmAttrs {
  float alpha = 1, beta = 1;
  bool transA = false, transB = false;
  Epilogue epilogue;
  CTXKIT_FIELDS(f("alpha", alpha); f("beta", beta); f("trans_a", transA); f("trans_b", transB);
                f("epilogue", epilogue);)
};

struct MatMulAttrs {
  Epilogue epilogue;
  CTXKIT_FIELDS(f("epilogue", epilogue);)
};

struct BatchNormAttrs {
  float epsilon = 1e-5f;
  bool perActivation = false;  // before opset 9, spatial = 0 normalizes per activation instead of per channel
  CTXKIT_FIELDS(f("epsilon", epsilon); f("per_activation", perActivation);)
};

struct LayerNormAttrs {
  int64_t axis = -1;
  float epsilon = 1e-5f;
  ir::ElemType stashType = ir::ElemType::Float;
  CTXKIT_FIELDS(f("axis", axis); f("epsilon", epsilon); f("stash_type", stashType);)
};

struct SoftmaxAttrs {
  int64_t axis = -1;
  bool coerce2d = false;  // before opset 13 the input is seen as 2-D, split at `axis`
  CTXKIT_FIELDS(f("axis", axis); f("coerce_2d", coerce2d);)
};

// One-input elementwise ops (Relu ... Gelu).
struct UnaryAttrs {
  float alpha = 0, beta = 0;  // LeakyRelu alpha; HardSigmoid alpha and beta
  bool tanhApprox = false;    // Gelu approximate = "tanh"
  CTXKIT_FIELDS(f("alpha", alpha); f("beta", beta); f("tanh_approx", tanhApprox);)
};

// Two-input elementwise ops (Add, Sub, Mul, Div, Pow).
struct BinaryAttrs {
  bool sameTypeOperands = false;  // Pow before opset 12: exponent of the base's type
  CTXKIT_FIELDS(f("same_type_operands", sameTypeOperands);)
};

// Reduce* ops: axes from the attribute (before opset 18; ReduceSum before 13) or from input 1 (after).
struct ReduceAttrs {
  std::optional<IntList> axes;  // the attribute form; absent = all axes
  bool keepdims = true;
  bool noopWithEmptyAxes = false;  // with no axes: the input unchanged instead of a full reduction
  bool axesFromInput = false;      // the opset takes axes as input 1
  template <class F> void fields(F&& f) {
    f("axes", axes);
    f("keepdims", keepdims);
    f("noop_with_empty_axes", noopWithEmptyAxes);
    f("axes_from_input", axesFromInput);
  }
  template <class F> void fields(F&& f) const {
    f("axes", axes);
    f("keepdims", keepdims);
    f("noop_with_empty_axes", noopWithEmptyAxes);
    f("axes_from_input", axesFromInput);
  }
};

// ArgMax and ArgMin.
struct ArgReduceAttrs {
  int64_t axis = 0;
  bool keepdims = true;
  bool selectLastIndex = false;
  template <class F> void fields(F&& f) {
    f("axis", axis);
    f("keepdims", keepdims);
    f("select_last_index", selectLastIndex);
  }
  template <class F> void fields(F&& f) const {
    f("axis", axis);
    f("keepdims", keepdims);
    f("select_last_index", selectLastIndex);
  }
};

// CastLike (and its saturation of float8 results).
struct CastLikeAttrs {
  bool saturate = true;
  template <class F> void fields(F&& f) { f("saturate", saturate); }
  template <class F> void fields(F&& f) const { f("saturate", saturate); }
};

// Mod: fmod = 1 takes the sign of the dividend (C fmod), 0 the sign of the divisor (integers only).
struct ModAttrs {
  bool fmod = false;
  template <class F> void fields(F&& f) { f("fmod", fmod); }
  template <class F> void fields(F&& f) const { f("fmod", fmod); }
};

// One-input math ops beyond UnaryAttrs' (Elu ... Swish, IsInf): alpha and beta per op as the decoder sets them
// (Selu alpha and gamma, Shrink lambd and bias, ...).
struct UnaryMathAttrs {
  float alpha = 0, beta = 0;
  bool detectNegative = true, detectPositive = true;  // IsInf
  template <class F> void fields(F&& f) {
    f("alpha", alpha);
    f("beta", beta);
    f("detect_negative", detectNegative);
    f("detect_positive", detectPositive);
  }
  template <class F> void fields(F&& f) const {
    f("alpha", alpha);
    f("beta", beta);
    f("detect_negative", detectNegative);
    f("detect_positive", detectPositive);
  }
};

// Trilu: keeps the upper (or lower) triangle of the last two dims, shifted by input 1's k.
struct TriluAttrs {
  bool upper = true;
  template <class F> void fields(F&& f) { f("upper", upper); }
  template <class F> void fields(F&& f) const { f("upper", upper); }
};

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
enum class LossReduction : uint8_t { None = 0, Sum = 1, Mean = 2 };
struct LossAttrs {
  LossReduction reduction = LossReduction::Mean;
  bool hasIgnoreIndex = false;
  int64_t ignoreIndex = 0;  // targets equal to it add nothing (with hasIgnoreIndex)
  template <class F> void fields(F&& f) {
    f("reduction", reduction);
    f("has_ignore_index", hasIgnoreIndex);
    f("ignore_index", ignoreIndex);
  }
  template <class F> void fields(F&& f) const {
    f("reduction", reduction);
    f("has_ignore_index", hasIgnoreIndex);
    f("ignore_index", ignoreIndex);
  }
};

// GatherElements, ScatterElements, GatherND, ScatterND and OneHot.
enum class ScatterReduction : uint8_t { None = 0, Add = 1, Mul = 2, Max = 3, Min = 4 };
struct GatherScatterAttrs {
  int64_t axis = 0;       // GatherElements, ScatterElements, OneHot
  int64_t batchDims = 0;  // GatherND
  ScatterReduction reduction = ScatterReduction::None;
  template <class F> void fields(F&& f) {
    f("axis", axis);
    f("batch_dims", batchDims);
    f("reduction", reduction);
  }
  template <class F> void fields(F&& f) const {
    f("axis", axis);
    f("batch_dims", batchDims);
    f("reduction", reduction);
  }
};

// CumSum and CumProd.
struct CumulativeAttrs {
  bool exclusive = false, reverse = false;
  template <class F> void fields(F&& f) {
    f("exclusive", exclusive);
    f("reverse", reverse);
  }
  template <class F> void fields(F&& f) const {
    f("exclusive", exclusive);
    f("reverse", reverse);
  }
};

struct TopKAttrs {
  int64_t axis = -1;
  bool largest = true, sorted = true;
  template <class F> void fields(F&& f) {
    f("axis", axis);
    f("largest", largest);
    f("sorted", sorted);
  }
  template <class F> void fields(F&& f) const {
    f("axis", axis);
    f("largest", largest);
    f("sorted", sorted);
  }
};

struct BitShiftAttrs {
  bool left = true;  // direction = "LEFT"
  template <class F> void fields(F&& f) { f("left", left); }
  template <class F> void fields(F&& f) const { f("left", left); }
};

// DepthToSpace (mode DCR or CRD) and SpaceToDepth.
struct DepthSpaceAttrs {
  int64_t blocksize = 1;
  bool crd = false;
  template <class F> void fields(F&& f) {
    f("blocksize", blocksize);
    f("crd", crd);
  }
  template <class F> void fields(F&& f) const {
    f("blocksize", blocksize);
    f("crd", crd);
  }
};

struct EyeLikeAttrs {
  int64_t k = 0;
  ir::ElemType dtype = ir::ElemType::Undefined;  // Undefined: the input's type
  template <class F> void fields(F&& f) {
    f("k", k);
    f("dtype", dtype);
  }
  template <class F> void fields(F&& f) const {
    f("k", k);
    f("dtype", dtype);
  }
};

// InstanceNormalization and GroupNormalization.
struct GroupNormAttrs {
  float epsilon = 1e-5f;
  int64_t numGroups = 0;  // GroupNormalization
  template <class F> void fields(F&& f) {
    f("epsilon", epsilon);
    f("num_groups", numGroups);
  }
  template <class F> void fields(F&& f) const {
    f("epsilon", epsilon);
    f("num_groups", numGroups);
  }
};

struct LpNormAttrs {
  int64_t axis = -1;
  int64_t p = 2;
  template <class F> void fields(F&& f) {
    f("axis", axis);
    f("p", p);
  }
  template <class F> void fields(F&& f) const {
    f("axis", axis);
    f("p", p);
  }
};

// Attention (opset 23/24).
struct AttentionAttrs {
  bool isCausal = false;
  int64_t qNumHeads = 0, kvNumHeads = 0;  // required for 3-D inputs
  int64_t qkMatmulOutputMode = 0;         // what output 3 holds: 0 scaled QK (softcapped), 2 with the mask, 3 softmax
  bool hasScale = false;
  float scale = 0;    // default 1 / sqrt(head_size)
  float softcap = 0;  // 0: none
  template <class F> void fields(F&& f) {
    f("is_causal", isCausal);
    f("q_num_heads", qNumHeads);
    f("kv_num_heads", kvNumHeads);
    f("qk_matmul_output_mode", qkMatmulOutputMode);
    f("has_scale", hasScale);
    f("scale", scale);
    f("softcap", softcap);
  }
  template <class F> void fields(F&& f) const {
    f("is_causal", isCausal);
    f("q_num_heads", qNumHeads);
    f("kv_num_heads", kvNumHeads);
    f("qk_matmul_output_mode", qkMatmulOutputMode);
    f("has_scale", hasScale);
    f("scale", scale);
    f("softcap", softcap);
  }
};

struct EinsumAttrs {
  std::string equation;
  template <class F> void fields(F&& f) { f("equation", equation); }
  template <class F> void fields(F&& f) const { f("equation", equation); }
};

struct BitCastAttrs {
  ir::ElemType to = ir::ElemType::Undefined;
  template <class F> void fields(F&& f) { f("to", to); }
  template <class F> void fields(F&& f) const { f("to", to); }
};

// RotaryEmbedding.
struct RotaryAttrs {
  bool interleaved = false;
  int64_t numHeads = 0;   // required for 3-D inputs
  int64_t rotaryDim = 0;  // 0: the whole head
  template <class F> void fields(F&& f) {
    f("interleaved", interleaved);
    f("num_heads", numHeads);
    f("rotary_embedding_dim", rotaryDim);
  }
  template <class F> void fields(F&& f) const {
    f("interleaved", interleaved);
    f("num_heads", numHeads);
    f("rotary_embedding_dim", rotaryDim);
  }
};

// QuantizeLinear and DequantizeLinear.
struct QuantizeAttrs {
  int64_t axis = 1;
  int64_t blockSize = 0;                              // 0: per tensor or per axis
  ir::ElemType outputType = ir::ElemType::Undefined;  // output_dtype (Q) or the float type (DQ); Undefined: default
  bool saturate = true;                               // float8 outputs
  template <class F> void fields(F&& f) {
    f("axis", axis);
    f("block_size", blockSize);
    f("output_dtype", outputType);
    f("saturate", saturate);
  }
  template <class F> void fields(F&& f) const {
    f("axis", axis);
    f("block_size", blockSize);
    f("output_dtype", outputType);
    f("saturate", saturate);
  }
};

// LRN.
struct LrnAttrs {
  float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;
  int64_t size = 0;
  template <class F> void fields(F&& f) {
    f("alpha", alpha);
    f("beta", beta);
    f("bias", bias);
    f("size", size);
  }
  template <class F> void fields(F&& f) const {
    f("alpha", alpha);
    f("beta", beta);
    f("bias", bias);
    f("size", size);
  }
};

struct ReverseSequenceAttrs {
  int64_t batchAxis = 1, timeAxis = 0;
  template <class F> void fields(F&& f) {
    f("batch_axis", batchAxis);
    f("time_axis", timeAxis);
  }
  template <class F> void fields(F&& f) const {
    f("batch_axis", batchAxis);
    f("time_axis", timeAxis);
  }
};

// HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix.
struct SignalAttrs {
  ir::ElemType outputType = ir::ElemType::Float;  // output_datatype
  bool periodic = true;                           // the windows: periodic (1) or symmetric (0)
  CTXKIT_FIELDS(f("output_datatype", outputType); f("periodic", periodic);)
};

// LpPool: the pooling window and the norm's exponent.
struct LpPoolAttrs {
  WindowAttrs window;  // kernelShape is required
  bool ceilMode = false;
  int64_t p = 2;
  CTXKIT_FIELDS(f("window", window); f("ceil_mode", ceilMode); f("p", p);)
};

// ---- Shaping families ----

// A list of floats in typed attributes (allocator-aware like IntList).
using FloatList = std::pmr::vector<float>;

// Reshape: allowzero (from opset 14) and, before opset 5, the target shape as an attribute.
struct ReshapeAttrs {
  bool allowZero = false;
  std::optional<IntList> shape;
  CTXKIT_FIELDS(f("allowzero", allowZero); f("shape", shape);)
};

// Transpose: absent perm reverses the dimensions.
struct TransposeAttrs {
  std::optional<IntList> perm;
  CTXKIT_FIELDS(f("perm", perm);)
};

// One axis: Concat (required), Gather (default 0), Flatten (default 1).
struct AxisAttrs {
  int64_t axis = 0;
  CTXKIT_FIELDS(f("axis", axis);)
};

// Squeeze and Unsqueeze before opset 13 take their axes as an attribute (absent: Squeeze drops every 1).
struct AxesAttrs {
  std::optional<IntList> axes;
  CTXKIT_FIELDS(f("axes", axes);)
};

// Slice before opset 10 takes starts, ends and axes as attributes.
struct SliceAttrs {
  std::optional<IntList> starts, ends, axes;
  CTXKIT_FIELDS(f("starts", starts); f("ends", ends); f("axes", axes);)
};

// Cast: the target type (Undefined when the attribute is missing, which the shape rule reports).
struct CastAttrs {
  ir::ElemType to = ir::ElemType::Undefined;
  bool saturate = true;  // float8 results
  CTXKIT_FIELDS(f("to", to); f("saturate", saturate);)
};

// Shape (opset 15): the dims [start, end) of the input's shape; absent end = the rank.
struct ShapeAttrs {
  int64_t start = 0;
  std::optional<int64_t> end;
  CTXKIT_FIELDS(f("start", start); f("end", end);)
};

// Clip before opset 11: the bounds as attributes.
struct ClipAttrs {
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();
  CTXKIT_FIELDS(f("min", min); f("max", max);)
};

// Split: the axis, the piece lengths as an attribute (before opset 13) and num_outputs (opset 18).
struct SplitAttrs {
  int64_t axis = 0;
  std::optional<IntList> split;
  std::optional<int64_t> numOutputs;
  CTXKIT_FIELDS(f("axis", axis); f("split", split); f("num_outputs", numOutputs);)
};

enum class PadMode : uint8_t { Constant = 0, Reflect = 1, Edge = 2, Wrap = 3 };

// Pad: the mode; before opset 11 the pads and the constant value as attributes too.
struct PadAttrs {
  PadMode mode = PadMode::Constant;
  std::optional<IntList> pads;
  float value = 0;
  CTXKIT_FIELDS(f("mode", mode); f("pads", pads); f("value", value);)
};

struct ConvTransposeAttrs {
  WindowAttrs window;  // kernelShape, when present, must match the weight
  int64_t group = 1;
  std::optional<IntList> outputPadding, outputShape;
  CTXKIT_FIELDS(f("window", window); f("group", group); f("output_padding", outputPadding);
                f("output_shape", outputShape);)
};

enum class ResizeMode : uint8_t { Nearest = 0, Linear = 1, Cubic = 2 };
enum class ResizeCoord : uint8_t {
  HalfPixel = 0,
  HalfPixelSymmetric = 1,
  PytorchHalfPixel = 2,
  AlignCorners = 3,
  Asymmetric = 4,
  TfHalfPixelForNn = 5,
  TfCropAndResize = 6,
};
enum class NearestMode : uint8_t { RoundPreferFloor = 0, RoundPreferCeil = 1, Floor = 2, Ceil = 3 };
enum class AspectPolicy : uint8_t { Stretch = 0, NotLarger = 1, NotSmaller = 2 };

// Resize and Upsample. Opsets before 11 have no coordinate or nearest mode (the kernel applies theirs); axes and
// the aspect policy come with opset 18; Upsample before opset 9 takes its scales as an attribute.
struct ResizeAttrs {
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoord coord = ResizeCoord::HalfPixel;
  NearestMode nearest = NearestMode::RoundPreferFloor;
  float cubicA = -0.75f;
  bool excludeOutside = false;
  float extrapolation = 0;
  std::optional<IntList> axes;
  AspectPolicy policy = AspectPolicy::Stretch;
  std::optional<FloatList> scales;
  CTXKIT_FIELDS(f("mode", mode); f("coordinate_transformation_mode", coord); f("nearest_mode", nearest);
                f("cubic_coeff_a", cubicA); f("exclude_outside", excludeOutside);
                f("extrapolation_value", extrapolation); f("axes", axes); f("keep_aspect_ratio_policy", policy);
                f("scales", scales);)
};

// ---- Recurrent, sampling, folding and the remaining families ----

// One function of an LSTM, GRU or RNN `activations` list (ONNX names, read case-insensitively).
enum class RnnActivation : uint8_t {
  Sigmoid = 0,
  Tanh = 1,
  Relu = 2,
  HardSigmoid = 3,
  LeakyRelu = 4,
  ThresholdedRelu = 5,
  ScaledTanh = 6,
  Elu = 7,
  Softsign = 8,
  Softplus = 9,
  Affine = 10,
};
enum class RnnDirection : uint8_t { Forward = 0, Reverse = 1, Bidirectional = 2 };
using RnnActivationList = std::pmr::vector<RnnActivation>;

// LSTM, GRU and RNN. The kernel checks the activation count against the op and direction, and hands out alphas and
// betas in order to the functions that take them.
struct RecurrentAttrs {
  RnnDirection direction = RnnDirection::Forward;
  std::optional<int64_t> hiddenSize;             // absent: R's last dimension
  std::optional<float> clip;                     // absent: no clipping; else positive
  bool inputForget = false;                      // LSTM
  bool linearBeforeReset = false;                // GRU
  int64_t layout = 0;                            // opset 14: 0 = [seq, batch, ...], 1 = [batch, seq, ...]
  std::optional<RnnActivationList> activations;  // absent: the op's defaults
  std::optional<FloatList> activationAlpha, activationBeta;
  CTXKIT_FIELDS(f("direction", direction); f("hidden_size", hiddenSize); f("clip", clip);
                f("input_forget", inputForget); f("linear_before_reset", linearBeforeReset); f("layout", layout);
                f("activations", activations); f("activation_alpha", activationAlpha);
                f("activation_beta", activationBeta);)
};

// GridSample's interpolation (opset 16 spells linear and cubic "bilinear" and "bicubic") and padding.
enum class GridMode : uint8_t { Linear = 0, Nearest = 1, Cubic = 2 };
enum class GridPadding : uint8_t { Zeros = 0, Border = 1, Reflection = 2 };

// GridSample, and AffineGrid (align_corners only).
struct GridSampleAttrs {
  GridMode mode = GridMode::Linear;
  GridPadding padding = GridPadding::Zeros;
  bool alignCorners = false;
  CTXKIT_FIELDS(f("mode", mode); f("padding_mode", padding); f("align_corners", alignCorners);)
};

// DeformConv: 2-D windows (kernelShape, when present, must match the weight).
struct DeformConvAttrs {
  WindowAttrs window;
  int64_t group = 1;
  int64_t offsetGroup = 1;
  CTXKIT_FIELDS(f("window", window); f("group", group); f("offset_group", offsetGroup);)
};

// Col2Im (strides, dilations, pads) and MaxUnpool (kernel_shape, required; strides, pads): windows scattered back
// into an image.
struct FoldAttrs {
  WindowAttrs window;
  CTXKIT_FIELDS(f("window", window);)
};

// Unique: absent axis flattens the input.
struct UniqueAttrs {
  std::optional<int64_t> axis;
  bool sorted = true;
  CTXKIT_FIELDS(f("axis", axis); f("sorted", sorted);)
};

// Compress: absent axis flattens the input.
struct OptionalAxisAttrs {
  std::optional<int64_t> axis;
  CTXKIT_FIELDS(f("axis", axis);)
};

// CenterCropPad: absent axes = every axis.
struct CenterCropPadAttrs {
  std::optional<IntList> axes;
  CTXKIT_FIELDS(f("axes", axes);)
};

enum class CacheMode : uint8_t { Linear = 0, Circular = 1 };

// TensorScatter (opset 24): the sequence axis and how writes past its end wrap.
struct TensorScatterAttrs {
  int64_t axis = -2;
  CacheMode mode = CacheMode::Linear;
  CTXKIT_FIELDS(f("axis", axis); f("mode", mode);)
};

// NonMaxSuppression: boxes as [x_center, y_center, width, height] (1) or corners (0).
struct NmsAttrs {
  bool centerPointBox = false;
  CTXKIT_FIELDS(f("center_point_box", centerPointBox);)
};

// RoiAlign: average or max of bilinear samples per output bin. halfPixel: coordinate_transformation_mode
// "half_pixel" (opset 16's default: roi corners shifted by -0.5 pixel); false: "output_half_pixel" (opset 10's
// behaviour: no shift, rois at least one pixel wide).
enum class RoiMode : uint8_t { Avg = 0, Max = 1 };
struct RoiAlignAttrs {
  RoiMode mode = RoiMode::Avg;
  int64_t outputHeight = 1, outputWidth = 1;
  int64_t samplingRatio = 0;  // 0: ceil(roi size / output size) samples per bin and axis
  float spatialScale = 1;
  bool halfPixel = true;
  CTXKIT_FIELDS(f("mode", mode); f("output_height", outputHeight); f("output_width", outputWidth);
                f("sampling_ratio", samplingRatio); f("spatial_scale", spatialScale);
                f("coordinate_transformation_mode", halfPixel);)
};

// ai.onnx.ml Binarizer.
struct BinarizerAttrs {
  float threshold = 0;
  CTXKIT_FIELDS(f("threshold", threshold);)
};

enum class TfIdfMode : uint8_t { Tf = 0, Idf = 1, TfIdf = 2 };

// TfIdfVectorizer over integer tokens (pool_strings is refused at decode).
struct TfIdfAttrs {
  int64_t minGram = 1, maxGram = 1, maxSkip = 0;
  TfIdfMode mode = TfIdfMode::Tf;
  std::optional<IntList> pool, ngramCounts, ngramIndexes;
  std::optional<FloatList> weights;  // absent: every weight 1
  CTXKIT_FIELDS(f("min_gram_length", minGram); f("max_gram_length", maxGram); f("max_skip_count", maxSkip);
                f("mode", mode); f("pool_int64s", pool); f("ngram_counts", ngramCounts);
                f("ngram_indexes", ngramIndexes); f("weights", weights);)
};

// ConstantOfShape: the one-element value tensor as its type and bytes (little-endian, zero-padded to 16: the widest
// element, complex128, fits); absent value = float 0.
struct ConstantOfShapeAttrs {
  ir::ElemType type = ir::ElemType::Float;
  int64_t low = 0, high = 0;  // bytes 0-7 and 8-15
  CTXKIT_FIELDS(f("type", type); f("bytes_0_7", low); f("bytes_8_15", high);)
};

// Dropout: seed, and ratio / is_test before opset 12, do not change an inference run; nothing is kept.
struct DropoutAttrs {
  template <class F> void fields(F&&) {}
  template <class F> void fields(F&&) const {}
};

// Op kinds with no attributes an inference run uses, and ops that never appear in a program (If, Loop, Scan,
// EPContext; Constant, folded by the compiler): a program keeps whatever ONNX attributes they carry.
struct OnnxAttrs {
  template <class F> void fields(F&&) const {}
};

// MatMulNBits (com.microsoft): Y = A x dequantize(B)^T, B's N rows quantized along K in blocks of block_size codes of
// `bits` bits (low bits first), each block with a scale and a zero point.
struct MatMulNBitsAttrs {
  int64_t k = 0, n = 0;
  int64_t bits = 4;
  int64_t blockSize = 0;
  int64_t accuracyLevel = 0;  // ONNX Runtime's compute precision hint; ctxkit computes in float32 at every level
  CTXKIT_FIELDS(f("K", k); f("N", n); f("bits", bits); f("block_size", blockSize); f("accuracy_level", accuracyLevel);)
};

// GroupQueryAttention (com.microsoft): causal attention of num_heads query heads over kv_num_heads key/value heads
// with a BNSH key/value cache, optional rotary embedding of Q and K and a local window (ONNX Runtime's CPU EP).
struct GroupQueryAttentionAttrs {
  int64_t numHeads = 0, kvNumHeads = 0;
  float scale = 0;    // 0: 1 / sqrt(head_size)
  float softcap = 0;  // 0: none
  bool doRotary = false, rotaryInterleaved = false, smoothSoftmax = false;
  int64_t localWindowSize = -1;  // -1: no window
  CTXKIT_FIELDS(f("num_heads", numHeads); f("kv_num_heads", kvNumHeads); f("scale", scale); f("softcap", softcap);
                f("do_rotary", doRotary); f("rotary_interleaved", rotaryInterleaved);
                f("smooth_softmax", smoothSoftmax); f("local_window_size", localWindowSize);)
};

// com.microsoft Attention and MultiHeadAttention (ONNX Runtime's BERT-style attention): heads, score scale, the value
// a masked key's score gets, causal masking; Attention's Q/K/V hidden sizes and the forms ctxkit refuses (rotary, a
// shared past/present buffer).
struct MsAttentionAttrs {
  int64_t numHeads = 0;
  float scale = 0;                    // 0: 1 / sqrt(head_size)
  float maskFilterValue = -10000.0f;  // added to a masked key's score
  bool unidirectional = false;
  std::optional<IntList> qkvHiddenSizes;
  bool doRotary = false, pastPresentShareBuffer = false;
  CTXKIT_FIELDS(f("num_heads", numHeads); f("scale", scale); f("mask_filter_value", maskFilterValue);
                f("unidirectional", unidirectional); f("qkv_hidden_sizes", qkvHiddenSizes); f("do_rotary", doRotary);
                f("past_present_share_buffer", pastPresentShareBuffer);)
};

// CausalConvWithState: the fused activation ("none": None, "silu" and "swish": Swish).
struct CausalConvAttrs {
  Activation activation = Activation::None;
  CTXKIT_FIELDS(f("activation", activation);)
};

// com.microsoft EmbedLayerNormalization: the layer normalization's epsilon.
struct EmbedLayerNormAttrs {
  float epsilon = 1e-12f;
  CTXKIT_FIELDS(f("epsilon", epsilon);)
};

using OpAttrs =
    std::variant<OnnxAttrs, BinaryAttrs, UnaryAttrs, ConvAttrs, PoolAttrs, GemmAttrs, MatMulAttrs, BatchNormAttrs,
                 LayerNormAttrs, SoftmaxAttrs, ReduceAttrs, ArgReduceAttrs, CastLikeAttrs, ModAttrs, UnaryMathAttrs,
                 TriluAttrs, LossAttrs, GatherScatterAttrs, CumulativeAttrs, TopKAttrs, BitShiftAttrs, DepthSpaceAttrs,
                 EyeLikeAttrs, GroupNormAttrs, LpNormAttrs, AttentionAttrs, EinsumAttrs, BitCastAttrs, RotaryAttrs,
                 QuantizeAttrs, LrnAttrs, ReverseSequenceAttrs, SignalAttrs, LpPoolAttrs, ReshapeAttrs, TransposeAttrs,
                 AxisAttrs, AxesAttrs, SliceAttrs, CastAttrs, ShapeAttrs, ClipAttrs, SplitAttrs, PadAttrs,
                 ConvTransposeAttrs, ResizeAttrs, RecurrentAttrs, GridSampleAttrs, DeformConvAttrs, FoldAttrs,
                 UniqueAttrs, OptionalAxisAttrs, CenterCropPadAttrs, TensorScatterAttrs, NmsAttrs, BinarizerAttrs,
                 TfIdfAttrs, ConstantOfShapeAttrs, DropoutAttrs, RoiAlignAttrs, MatMulNBitsAttrs,
                 GroupQueryAttentionAttrs, MsAttentionAttrs, EmbedLayerNormAttrs, CausalConvAttrs>;

// Decodes and checks an op's ONNX attributes for the model's opset. Errors say which attribute, what was found
// and what was expected; callers add the node.
Expected<OpAttrs> decodeAttrs(ir::OpKind kind, int64_t opset, const ir::Attributes& attrs);

// The ONNX spelling of a fused activation ("Relu", ...), for dumps and the com.microsoft attribute form.
std::string_view activationName(Activation a);

}  // namespace ctxkit::ops
