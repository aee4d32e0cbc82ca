// The decoder from ONNX attributes to typed ops: attribute names, defaults and opset differences live here.
#include "ops/op_schema.h"

#include "ops/typed_attrs.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <span>

namespace ctxkit::ops {

using ir::OpKind;

namespace {

template <typename... Args> Error bad(fmt::format_string<Args...> format, Args&&... args) {
  return makeError(ErrorCode::InvalidGraph, format, std::forward<Args>(args)...);
}

// A node's attributes as the decoder reads them: an attribute present with another type than the one read (a string
// `axis`) is recorded, and decodeAttrs refuses the node instead of taking the default as if it were absent.
class AttrReader {
public:
  explicit AttrReader(const ir::Attributes& attrs) : attrs_(attrs) {}
  const ir::Attribute* find(std::string_view name) const { return attrs_.find(name); }
  bool has(std::string_view name) const { return attrs_.has(name); }
  int64_t getInt(std::string_view name, int64_t fallback) const {
    const ir::Attribute* a = typed(name, ir::AttrType::Int);
    return a ? a->i : fallback;
  }
  float getFloat(std::string_view name, float fallback) const {
    const ir::Attribute* a = typed(name, ir::AttrType::Float);
    return a ? a->f : fallback;
  }
  std::string getString(std::string_view name, std::string fallback = {}) const {
    const ir::Attribute* a = typed(name, ir::AttrType::String);
    return a ? a->s : fallback;
  }
  std::vector<int64_t> getInts(std::string_view name, std::vector<int64_t> fallback = {}) const {
    const ir::Attribute* a = typed(name, ir::AttrType::Ints);
    return a ? a->ints : fallback;
  }
  std::vector<float> getFloats(std::string_view name, std::vector<float> fallback = {}) const {
    const ir::Attribute* a = typed(name, ir::AttrType::Floats);
    return a ? a->floats : fallback;
  }
  // The first attribute read with the wrong type, if any.
  Status status() const { return wrongType_ ? Status(*wrongType_) : Status::ok(); }

private:
  const ir::Attribute* typed(std::string_view name, ir::AttrType type) const {
    const ir::Attribute* a = attrs_.find(name);
    if (!a || a->type == type) return a;
    if (!wrongType_)
      wrongType_ =
          bad("attribute {} is of type {} but expected {}", name, ir::attrTypeName(a->type), ir::attrTypeName(type));
    return nullptr;
  }
  const ir::Attributes& attrs_;
  mutable std::optional<Error> wrongType_;
};

Expected<bool> flag(const AttrReader& attrs, std::string_view name) {
  int64_t v = attrs.getInt(name, 0);
  if (v != 0 && v != 1) return bad("attribute {} is {} but expected 0 or 1", name, v);
  return v == 1;
}

std::optional<IntList> optionalInts(const AttrReader& attrs, std::string_view name) {
  if (!attrs.has(name)) return std::nullopt;
  const std::vector<int64_t> values = attrs.getInts(name);
  return IntList(values.begin(), values.end());
}

// An element-type attribute's value: an ONNX TensorProto.DataType number (0, undefined, only when `allowUndefined`).
Expected<ir::ElemType> elemTypeAttr(std::string_view name, int64_t value, bool allowUndefined) {
  auto t = value == static_cast<int32_t>(value) ? ir::elemTypeFromInt(static_cast<int32_t>(value)) : std::nullopt;
  if (!t || (!allowUndefined && *t == ir::ElemType::Undefined))
    return bad("attribute {} is {}, not an element type", name, value);
  return *t;
}

Expected<WindowAttrs> decodeWindow(const AttrReader& attrs) {
  WindowAttrs w;
  w.kernelShape = optionalInts(attrs, "kernel_shape");
  w.strides = optionalInts(attrs, "strides");
  w.dilations = optionalInts(attrs, "dilations");
  w.pads = optionalInts(attrs, "pads");
  std::string autoPad = attrs.getString("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") w.autoPad = AutoPad::NotSet;
  else if (autoPad == "SAME_UPPER") w.autoPad = AutoPad::SameUpper;
  else if (autoPad == "SAME_LOWER") w.autoPad = AutoPad::SameLower;
  else if (autoPad == "VALID") w.autoPad = AutoPad::Valid;
  else return bad("attribute auto_pad is '{}' but expected NOTSET, SAME_UPPER, SAME_LOWER or VALID", autoPad);
  return w;
}

// com.microsoft FusedConv's form: `activation` names the op, `activation_params` its alpha/beta.
Expected<Epilogue> decodeEpilogue(const AttrReader& attrs) {
  Epilogue e;
  const ir::Attribute* attr = attrs.find("activation");
  if (!attr) return e;
  if (attr->type != ir::AttrType::String) return bad("attribute activation must be a string");
  std::vector<float> params = attrs.getFloats("activation_params");
  auto param = [&](size_t i, float fallback) { return i < params.size() ? params[i] : fallback; };
  const std::string& name = attr->s;
  if (name == "Relu") e.activation = Activation::Relu;
  else if (name == "LeakyRelu") e = {Activation::LeakyRelu, param(0, 0.01f), 0};
  else if (name == "Sigmoid") e.activation = Activation::Sigmoid;
  else if (name == "Tanh") e.activation = Activation::Tanh;
  else if (name == "HardSigmoid") e = {Activation::HardSigmoid, param(0, 0.2f), param(1, 0.5f)};
  else if (name == "Clip") e = {Activation::Clip, param(0, -INFINITY), param(1, INFINITY)};
  else if (name == "HardSwish") e.activation = Activation::HardSwish;
  else
    return makeError(
        ErrorCode::Unsupported,
        "fused activation '{}' is not supported (Relu, LeakyRelu, Sigmoid, Tanh, HardSigmoid, Clip, HardSwish)", name);
  return e;
}

Expected<OpAttrs> decodeConv(OpKind, int64_t, const AttrReader& attrs) {
  ConvAttrs a;
  CTX_ASSIGN_OR_RETURN(a.window, decodeWindow(attrs));
  a.group = attrs.getInt("group", 1);
  CTX_ASSIGN_OR_RETURN(a.epilogue, decodeEpilogue(attrs));
  return OpAttrs(a);
}

Expected<OpAttrs> decodePool(OpKind kind, int64_t, const AttrReader& attrs) {
  PoolAttrs a;
  CTX_ASSIGN_OR_RETURN(a.window, decodeWindow(attrs));
  CTX_ASSIGN_OR_RETURN(a.ceilMode, flag(attrs, "ceil_mode"));
  if (kind == OpKind::MaxPool) {
    int64_t order = attrs.getInt("storage_order", 0);
    if (order != 0 && order != 1) return bad("attribute storage_order is {} but expected 0 or 1", order);
    a.columnMajorIndices = order == 1;
  } else {
    int64_t countPad = attrs.getInt("count_include_pad", 0);
    if (countPad != 0 && countPad != 1) return bad("attribute count_include_pad is {} but expected 0 or 1", countPad);
    a.countIncludePad = countPad == 1;
  }
  return OpAttrs(a);
}

Expected<OpAttrs> decodeUnary(OpKind kind, int64_t, const AttrReader& attrs) {
  UnaryAttrs a;
  switch (kind) {
    case OpKind::LeakyRelu: a.alpha = attrs.getFloat("alpha", 0.01f); break;
    case OpKind::QuickGelu: a.alpha = attrs.getFloat("alpha", 1.702f); break;
    case OpKind::HardSigmoid:
      a.alpha = attrs.getFloat("alpha", 0.2f);
      a.beta = attrs.getFloat("beta", 0.5f);
      break;
    case OpKind::Gelu: {
      std::string approx = attrs.getString("approximate", "none");
      if (approx != "none" && approx != "tanh")
        return bad("attribute approximate is '{}' but expected 'none' or 'tanh'", approx);
      a.tanhApprox = approx == "tanh";
      break;
    }
    default: break;
  }
  return OpAttrs(a);
}

Expected<OpAttrs> decodeBatchNorm(OpKind, int64_t opset, const AttrReader& attrs) {
  if (attrs.getInt("training_mode", 0) != 0)
    return makeError(ErrorCode::Unsupported, "training_mode = 1 is not supported (inference only)");
  BatchNormAttrs a;
  a.epsilon = attrs.getFloat("epsilon", 1e-5f);
  a.perActivation = opset < 9 && attrs.getInt("spatial", 1) == 0;
  return OpAttrs(a);
}

Expected<OpAttrs> decodeLayerNorm(OpKind kind, int64_t, const AttrReader& attrs) {
  LayerNormAttrs a;
  a.axis = attrs.getInt("axis", -1);
  // ONNX Runtime's skip normalizations default to 1e-12 (com.microsoft schemas); the others to ONNX's 1e-5.
  const bool skip = kind == OpKind::SkipLayerNormalization || kind == OpKind::SkipSimplifiedLayerNormalization;
  a.epsilon = attrs.getFloat("epsilon", skip ? 1e-12f : 1e-5f);
  if (skip && a.epsilon < 0) return bad("attribute epsilon is {} but must not be negative", a.epsilon);
  int64_t stash = attrs.getInt("stash_type", 1);
  if (stash == static_cast<int64_t>(ir::ElemType::Float)) a.stashType = ir::ElemType::Float;
  else if (stash == static_cast<int64_t>(ir::ElemType::Double)) a.stashType = ir::ElemType::Double;
  else
    return makeError(ErrorCode::Unsupported, "attribute stash_type {} is not supported (float32 or float64 only)",
                     stash);
  return OpAttrs(a);
}

Expected<bool> flagOr(const AttrReader& attrs, std::string_view name, bool fallback) {
  int64_t v = attrs.getInt(name, fallback ? 1 : 0);
  if (v != 0 && v != 1) return bad("attribute {} is {} but expected 0 or 1", name, v);
  return v == 1;
}

// An integer attribute read as a flag the way ONNX Runtime reads it (any non-zero value is true), for the
// families whose kernels always read it so.
bool nonZero(const AttrReader& attrs, std::string_view name, bool fallback) {
  return attrs.getInt(name, fallback ? 1 : 0) != 0;
}

Expected<OpAttrs> decodeReduce(OpKind kind, int64_t opset, const AttrReader& attrs) {
  ReduceAttrs a;
  if (kind == OpKind::MeanVarianceNormalization) {
    a.axes = optionalInts(attrs, "axes").value_or(IntList{0, 2, 3});
    return OpAttrs(a);
  }
  a.axesFromInput = kind == OpKind::ReduceSum ? opset >= 13 : opset >= 18;
  if (!a.axesFromInput) a.axes = optionalInts(attrs, "axes");
  CTX_ASSIGN_OR_RETURN(a.keepdims, flagOr(attrs, "keepdims", true));
  CTX_ASSIGN_OR_RETURN(a.noopWithEmptyAxes, flag(attrs, "noop_with_empty_axes"));
  return OpAttrs(a);
}

Expected<OpAttrs> decodeArgReduce(OpKind, int64_t, const AttrReader& attrs) {
  ArgReduceAttrs a;
  a.axis = attrs.getInt("axis", 0);
  CTX_ASSIGN_OR_RETURN(a.keepdims, flagOr(attrs, "keepdims", true));
  CTX_ASSIGN_OR_RETURN(a.selectLastIndex, flag(attrs, "select_last_index"));
  return OpAttrs(a);
}

Expected<OpAttrs> decodeUnaryMath(OpKind kind, int64_t, const AttrReader& attrs) {
  UnaryMathAttrs a;
  switch (kind) {
    case OpKind::Elu:
    case OpKind::Celu:
    case OpKind::ThresholdedRelu:
    case OpKind::Swish: a.alpha = attrs.getFloat("alpha", 1.0f); break;
    case OpKind::Selu:
      a.alpha = attrs.getFloat("alpha", 1.67326319217681884765625f);
      a.beta = attrs.getFloat("gamma", 1.05070102214813232421875f);
      break;
    case OpKind::Shrink:
      a.alpha = attrs.getFloat("lambd", 0.5f);
      a.beta = attrs.getFloat("bias", 0.0f);
      break;
    case OpKind::IsInf: {
      CTX_ASSIGN_OR_RETURN(a.detectNegative, flagOr(attrs, "detect_negative", true));
      CTX_ASSIGN_OR_RETURN(a.detectPositive, flagOr(attrs, "detect_positive", true));
      break;
    }
    default: break;
  }
  return OpAttrs(a);
}

Expected<ScatterReduction> scatterReduction(const AttrReader& attrs) {
  std::string r = attrs.getString("reduction", "none");
  if (r == "none") return ScatterReduction::None;
  if (r == "add") return ScatterReduction::Add;
  if (r == "mul") return ScatterReduction::Mul;
  if (r == "max") return ScatterReduction::Max;
  if (r == "min") return ScatterReduction::Min;
  return bad("attribute reduction is '{}' but expected none, add, mul, max or min", r);
}

Expected<OpAttrs> decodeLoss(OpKind, int64_t, const AttrReader& attrs) {
  LossAttrs a;
  std::string r = attrs.getString("reduction", "mean");
  if (r == "none") a.reduction = LossReduction::None;
  else if (r == "sum") a.reduction = LossReduction::Sum;
  else if (r == "mean") a.reduction = LossReduction::Mean;
  else return bad("attribute reduction is '{}' but expected none, sum or mean", r);
  a.hasIgnoreIndex = attrs.has("ignore_index");
  a.ignoreIndex = attrs.getInt("ignore_index", 0);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeGatherScatter(OpKind kind, int64_t, const AttrReader& attrs) {
  GatherScatterAttrs a;
  a.axis = attrs.getInt("axis", kind == OpKind::OneHot ? -1 : 0);
  a.batchDims = attrs.getInt("batch_dims", 0);
  if (kind == OpKind::ScatterElements || kind == OpKind::ScatterND) {
    CTX_ASSIGN_OR_RETURN(a.reduction, scatterReduction(attrs));
  }
  return OpAttrs(a);
}

Expected<OpAttrs> decodeDepthSpace(OpKind kind, int64_t, const AttrReader& attrs) {
  DepthSpaceAttrs a;
  a.blocksize = attrs.getInt("blocksize", 0);
  if (kind == OpKind::DepthToSpace) {
    std::string mode = attrs.getString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return bad("attribute mode is '{}' but expected DCR or CRD", mode);
    a.crd = mode == "CRD";
  }
  return OpAttrs(a);
}

Expected<OpAttrs> decodeEyeLike(OpKind, int64_t, const AttrReader& attrs) {
  EyeLikeAttrs a;
  a.k = attrs.getInt("k", 0);
  if (attrs.has("dtype")) {
    CTX_ASSIGN_OR_RETURN(a.dtype, elemTypeAttr("dtype", attrs.getInt("dtype", 0), true));
  }
  return OpAttrs(a);
}
// The value of a string attribute among `names` (an enum's values in order), or an error listing them.
template <class E>
Expected<E> stringEnum(const AttrReader& attrs, std::string_view name, std::string_view fallback,
                       std::span<const std::string_view> names) {
  const std::string value = attrs.getString(name, std::string(fallback));
  const size_t n = names.size();
  for (size_t i = 0; i < n; ++i)
    if (names[i] == value) return static_cast<E>(i);
  std::string expected;
  for (size_t i = 0; i < n; ++i) expected += fmt::format("{}'{}'", i == 0 ? "" : i + 1 == n ? " or " : ", ", names[i]);
  return bad("attribute {} is '{}' but expected {}", name, value, expected);
}

Expected<OpAttrs> decodeCast(OpKind, int64_t, const AttrReader& attrs) {
  CastAttrs a;
  if (const ir::Attribute* to = attrs.find("to"); to && to->type == ir::AttrType::Int) {
    CTX_ASSIGN_OR_RETURN(a.to, elemTypeAttr("to", to->i, false));
  }
  a.saturate = attrs.getInt("saturate", 1) != 0;
  return OpAttrs(a);
}

Expected<OpAttrs> decodePad(OpKind, int64_t opset, const AttrReader& attrs) {
  PadAttrs a;
  constexpr std::array<std::string_view, 4> modes = {"constant", "reflect", "edge", "wrap"};  // wrap: opset 19
  CTX_ASSIGN_OR_RETURN(a.mode,
                       stringEnum<PadMode>(attrs, "mode", "constant", std::span(modes).first(opset >= 19 ? 4 : 3)));
  if (opset < 11) {
    a.pads = optionalInts(attrs, "pads");
    a.value = attrs.getFloat("value", 0.0f);
  }
  return OpAttrs(a);
}

Expected<OpAttrs> decodeConvTranspose(OpKind, int64_t, const AttrReader& attrs) {
  ConvTransposeAttrs a;
  CTX_ASSIGN_OR_RETURN(a.window, decodeWindow(attrs));
  a.group = attrs.getInt("group", 1);
  a.outputPadding = optionalInts(attrs, "output_padding");
  if (a.outputPadding)
    for (int64_t p : *a.outputPadding)
      if (p < 0) return bad("attribute output_padding has negative value {}", p);
  a.outputShape = optionalInts(attrs, "output_shape");
  return OpAttrs(a);
}

Expected<OpAttrs> decodeResize(OpKind kind, int64_t opset, const AttrReader& attrs) {
  ResizeAttrs a;
  constexpr std::array<std::string_view, 3> modes = {"nearest", "linear", "cubic"};
  CTX_ASSIGN_OR_RETURN(a.mode, stringEnum<ResizeMode>(attrs, "mode", "nearest", modes));
  a.cubicA = attrs.getFloat("cubic_coeff_a", -0.75f);
  a.excludeOutside = attrs.getInt("exclude_outside", 0) != 0;
  if (attrs.getInt("antialias", 0) != 0) return makeError(ErrorCode::Unsupported, "antialias is not supported");
  if (kind == OpKind::Resize && opset >= 11) {
    constexpr std::array<std::string_view, 7> coords = {
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    CTX_ASSIGN_OR_RETURN(a.coord,
                         stringEnum<ResizeCoord>(attrs, "coordinate_transformation_mode", "half_pixel", coords));
    constexpr std::array<std::string_view, 4> nearest = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    CTX_ASSIGN_OR_RETURN(a.nearest, stringEnum<NearestMode>(attrs, "nearest_mode", "round_prefer_floor", nearest));
    a.extrapolation = attrs.getFloat("extrapolation_value", 0.0f);
  }
  if (kind == OpKind::Resize && opset >= 18) {
    a.axes = optionalInts(attrs, "axes");
    constexpr std::array<std::string_view, 3> policies = {"stretch", "not_larger", "not_smaller"};
    CTX_ASSIGN_OR_RETURN(a.policy, stringEnum<AspectPolicy>(attrs, "keep_aspect_ratio_policy", "stretch", policies));
  }
  if (kind == OpKind::Upsample && opset < 9)
    if (const ir::Attribute* s = attrs.find("scales"); s && s->type == ir::AttrType::Floats)
      a.scales = FloatList(s->floats.begin(), s->floats.end());
  return OpAttrs(a);
}

Expected<OpAttrs> decodeRecurrent(OpKind kind, int64_t, const AttrReader& attrs) {
  RecurrentAttrs a;
  constexpr std::array<std::string_view, 3> directions = {"forward", "reverse", "bidirectional"};
  CTX_ASSIGN_OR_RETURN(a.direction, stringEnum<RnnDirection>(attrs, "direction", "forward", directions));
  if (attrs.has("hidden_size")) a.hiddenSize = attrs.getInt("hidden_size", 0);
  if (attrs.has("clip")) a.clip = attrs.getFloat("clip", 0);
  a.inputForget = kind == OpKind::LSTM && nonZero(attrs, "input_forget", false);
  a.linearBeforeReset = kind == OpKind::GRU && nonZero(attrs, "linear_before_reset", false);
  a.layout = attrs.getInt("layout", 0);
  if (const ir::Attribute* list = attrs.find("activations"); list && !list->strings.empty()) {
    // ONNX names them in CamelCase; ONNX Runtime also takes other cases.
    constexpr std::array<std::string_view, 11> names = {
        "sigmoid",    "tanh", "relu",     "hardsigmoid", "leakyrelu", "thresholdedrelu",
        "scaledtanh", "elu",  "softsign", "softplus",    "affine"};
    a.activations.emplace();
    for (const std::string& name : list->strings) {
      std::string lower = name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const auto* it = std::find(names.begin(), names.end(), lower);
      if (it == names.end())
        return makeError(ErrorCode::Unsupported, "activation function '{}' is not supported", name);
      a.activations->push_back(static_cast<RnnActivation>(it - names.begin()));
    }
  }
  if (const ir::Attribute* alpha = attrs.find("activation_alpha"))
    a.activationAlpha = FloatList(alpha->floats.begin(), alpha->floats.end());
  if (const ir::Attribute* beta = attrs.find("activation_beta"))
    a.activationBeta = FloatList(beta->floats.begin(), beta->floats.end());
  return OpAttrs(std::move(a));
}

Expected<OpAttrs> decodeGridSample(OpKind kind, int64_t opset, const AttrReader& attrs) {
  GridSampleAttrs a;
  if (kind == OpKind::AffineGrid) {
    a.alignCorners = nonZero(attrs, "align_corners", false);
    return OpAttrs(a);
  }
  // Opset 16 spells linear and cubic "bilinear" and "bicubic"; opset 20 renamed them. Either spelling is taken in
  // either opset, as ctxkit always did (ONNX Runtime takes only its opset's).
  constexpr std::array<std::string_view, 3> modes = {"linear", "nearest", "cubic"};
  constexpr std::array<std::string_view, 3> older = {"bilinear", "nearest", "bicubic"};
  const std::string mode = attrs.getString("mode", opset < 20 ? "bilinear" : "linear");
  size_t i = 0;
  while (i < modes.size() && mode != modes[i] && mode != older[i]) ++i;
  if (i == modes.size())
    return bad("attribute mode is '{}' but expected 'linear' ('bilinear'), 'nearest' or 'cubic' ('bicubic')", mode);
  a.mode = static_cast<GridMode>(i);
  constexpr std::array<std::string_view, 3> paddings = {"zeros", "border", "reflection"};
  CTX_ASSIGN_OR_RETURN(a.padding, stringEnum<GridPadding>(attrs, "padding_mode", "zeros", paddings));
  a.alignCorners = nonZero(attrs, "align_corners", false);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeRoiAlign(OpKind, int64_t opset, const AttrReader& attrs) {
  RoiAlignAttrs a;
  constexpr std::array<std::string_view, 2> modes = {"avg", "max"};
  CTX_ASSIGN_OR_RETURN(a.mode, stringEnum<RoiMode>(attrs, "mode", "avg", modes));
  a.outputHeight = attrs.getInt("output_height", 1);
  a.outputWidth = attrs.getInt("output_width", 1);
  a.samplingRatio = attrs.getInt("sampling_ratio", 0);
  a.spatialScale = attrs.getFloat("spatial_scale", 1.0f);
  // Opset 10 has no such attribute and behaves as "output_half_pixel".
  constexpr std::array<std::string_view, 2> coords = {"output_half_pixel", "half_pixel"};
  CTX_ASSIGN_OR_RETURN(auto coord, stringEnum<uint8_t>(attrs, "coordinate_transformation_mode",
                                                       opset < 16 ? "output_half_pixel" : "half_pixel", coords));
  a.halfPixel = coord == 1;
  return OpAttrs(a);
}

Expected<OpAttrs> decodeTfIdf(OpKind, int64_t, const AttrReader& attrs) {
  TfIdfAttrs a;
  a.minGram = attrs.getInt("min_gram_length", 1);
  a.maxGram = attrs.getInt("max_gram_length", 1);
  a.maxSkip = attrs.getInt("max_skip_count", 0);
  constexpr std::array<std::string_view, 3> modes = {"TF", "IDF", "TFIDF"};
  CTX_ASSIGN_OR_RETURN(a.mode, stringEnum<TfIdfMode>(attrs, "mode", "TF", modes));
  if (attrs.has("pool_strings"))
    return makeError(ErrorCode::Unsupported, "pool_strings (string tokens) is not supported");
  a.pool = optionalInts(attrs, "pool_int64s");
  a.ngramCounts = optionalInts(attrs, "ngram_counts");
  a.ngramIndexes = optionalInts(attrs, "ngram_indexes");
  if (const ir::Attribute* w = attrs.find("weights")) a.weights = FloatList(w->floats.begin(), w->floats.end());
  return OpAttrs(std::move(a));
}

Expected<OpAttrs> decodeConstantOfShape(OpKind, int64_t, const AttrReader& attrs) {
  ConstantOfShapeAttrs a;
  const ir::Attribute* v = attrs.find("value");
  if (!v) return OpAttrs(a);
  if (v->type != ir::AttrType::Tensor)
    return bad("attribute value has type {} but expected a tensor", ir::attrTypeName(v->type));
  if (v->t.elementCount() != 1) return bad("attribute value has {} elements but expected 1", v->t.elementCount());
  const size_t size = v->t.byteSize();
  if (size == 0 || size > 16)
    return makeError(ErrorCode::Unsupported, "attribute value has unsupported type {}", ir::elemTypeName(v->t.type()));
  std::array<std::byte, 16> bytes{};
  std::memcpy(bytes.data(), v->t.data(), size);
  a.type = v->t.type();
  std::memcpy(&a.low, bytes.data(), 8);
  std::memcpy(&a.high, bytes.data() + 8, 8);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeDeformConv(OpKind, int64_t, const AttrReader& attrs) {
  DeformConvAttrs a;
  CTX_ASSIGN_OR_RETURN(a.window, decodeWindow(attrs));
  a.group = attrs.getInt("group", 1);
  a.offsetGroup = attrs.getInt("offset_group", 1);
  return OpAttrs(std::move(a));
}

Expected<OpAttrs> decodeOnnx(OpKind, int64_t, const AttrReader&) { return OpAttrs(OnnxAttrs{}); }

Expected<OpAttrs> decodeBinary(OpKind kind, int64_t opset, const AttrReader&) {
  return OpAttrs(BinaryAttrs{kind == OpKind::Pow && opset < 12});
}

Expected<OpAttrs> decodeGemm(OpKind, int64_t, const AttrReader& attrs) {
  GemmAttrs a;
  CTX_ASSIGN_OR_RETURN(a.transA, flag(attrs, "transA"));
  CTX_ASSIGN_OR_RETURN(a.transB, flag(attrs, "transB"));
  a.alpha = attrs.getFloat("alpha", 1.0f);
  a.beta = attrs.getFloat("beta", 1.0f);
  CTX_ASSIGN_OR_RETURN(a.epilogue, decodeEpilogue(attrs));
  return OpAttrs(a);
}

Expected<OpAttrs> decodeMatMul(OpKind, int64_t, const AttrReader& attrs) {
  MatMulAttrs a;
  CTX_ASSIGN_OR_RETURN(a.epilogue, decodeEpilogue(attrs));
  return OpAttrs(a);
}

Expected<OpAttrs> decodeSoftmax(OpKind, int64_t opset, const AttrReader& attrs) {
  SoftmaxAttrs a;
  a.coerce2d = opset < 13;
  a.axis = attrs.getInt("axis", a.coerce2d ? 1 : -1);
  return OpAttrs(a);
}

// A family whose one field is a 0/1 attribute.
template <class T> Expected<OpAttrs> decodeOneFlag(const AttrReader& attrs, std::string_view name, bool fallback) {
  CTX_ASSIGN_OR_RETURN(bool value, flagOr(attrs, name, fallback));
  return OpAttrs(T{value});
}

Expected<OpAttrs> decodeCastLike(OpKind, int64_t, const AttrReader& attrs) {
  return decodeOneFlag<CastLikeAttrs>(attrs, "saturate", true);
}

Expected<OpAttrs> decodeMod(OpKind, int64_t, const AttrReader& attrs) {
  return decodeOneFlag<ModAttrs>(attrs, "fmod", false);
}

Expected<OpAttrs> decodeTrilu(OpKind, int64_t, const AttrReader& attrs) {
  return decodeOneFlag<TriluAttrs>(attrs, "upper", true);
}

Expected<OpAttrs> decodeCumulative(OpKind, int64_t, const AttrReader& attrs) {
  CumulativeAttrs a;
  CTX_ASSIGN_OR_RETURN(a.exclusive, flag(attrs, "exclusive"));
  CTX_ASSIGN_OR_RETURN(a.reverse, flag(attrs, "reverse"));
  return OpAttrs(a);
}

Expected<OpAttrs> decodeTopK(OpKind, int64_t, const AttrReader& attrs) {
  TopKAttrs a;
  a.axis = attrs.getInt("axis", -1);
  CTX_ASSIGN_OR_RETURN(a.largest, flagOr(attrs, "largest", true));
  CTX_ASSIGN_OR_RETURN(a.sorted, flagOr(attrs, "sorted", true));
  return OpAttrs(a);
}

Expected<OpAttrs> decodeBitShift(OpKind, int64_t, const AttrReader& attrs) {
  std::string dir = attrs.getString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") return bad("attribute direction is '{}' but expected LEFT or RIGHT", dir);
  return OpAttrs(BitShiftAttrs{dir == "LEFT"});
}

Expected<OpAttrs> decodeGroupNorm(OpKind, int64_t, const AttrReader& attrs) {
  GroupNormAttrs a;
  a.epsilon = attrs.getFloat("epsilon", 1e-5f);
  a.numGroups = attrs.getInt("num_groups", 0);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeLpPool(OpKind, int64_t, const AttrReader& attrs) {
  LpPoolAttrs a;
  CTX_ASSIGN_OR_RETURN(a.window, decodeWindow(attrs));
  CTX_ASSIGN_OR_RETURN(a.ceilMode, flag(attrs, "ceil_mode"));
  a.p = attrs.getInt("p", 2);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeLpNorm(OpKind, int64_t, const AttrReader& attrs) {
  return OpAttrs(LpNormAttrs{attrs.getInt("axis", -1), attrs.getInt("p", 2)});
}

Expected<OpAttrs> decodeAttention(OpKind, int64_t, const AttrReader& attrs) {
  AttentionAttrs a;
  CTX_ASSIGN_OR_RETURN(a.isCausal, flag(attrs, "is_causal"));
  a.qNumHeads = attrs.getInt("q_num_heads", 0);
  a.kvNumHeads = attrs.getInt("kv_num_heads", 0);
  a.qkMatmulOutputMode = attrs.getInt("qk_matmul_output_mode", 0);
  if (a.qkMatmulOutputMode < 0 || a.qkMatmulOutputMode > 3)
    return bad("attribute qk_matmul_output_mode is {} but expected 0 to 3", a.qkMatmulOutputMode);
  a.hasScale = attrs.has("scale");
  a.scale = attrs.getFloat("scale", 0.0f);
  a.softcap = attrs.getFloat("softcap", 0.0f);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeEinsum(OpKind, int64_t, const AttrReader& attrs) {
  const ir::Attribute* eq = attrs.find("equation");
  if (!eq || eq->type != ir::AttrType::String) return bad("required attribute equation is missing");
  return OpAttrs(EinsumAttrs{eq->s});
}

Expected<OpAttrs> decodeBitCast(OpKind, int64_t, const AttrReader& attrs) {
  CTX_ASSIGN_OR_RETURN(ir::ElemType to, elemTypeAttr("to", attrs.getInt("to", 0), false));
  return OpAttrs(BitCastAttrs{to});
}

Expected<OpAttrs> decodeRotary(OpKind, int64_t, const AttrReader& attrs) {
  RotaryAttrs a;
  CTX_ASSIGN_OR_RETURN(a.interleaved, flag(attrs, "interleaved"));
  a.numHeads = attrs.getInt("num_heads", 0);
  a.rotaryDim = attrs.getInt("rotary_embedding_dim", 0);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeQuantize(OpKind, int64_t, const AttrReader& attrs) {
  QuantizeAttrs a;
  a.axis = attrs.getInt("axis", 1);
  a.blockSize = attrs.getInt("block_size", 0);
  if (a.blockSize < 0) return bad("attribute block_size is {} but must not be negative", a.blockSize);
  if (int64_t dt = attrs.getInt("output_dtype", 0); dt != 0) {
    CTX_ASSIGN_OR_RETURN(a.outputType, elemTypeAttr("output_dtype", dt, false));
  }
  CTX_ASSIGN_OR_RETURN(a.saturate, flagOr(attrs, "saturate", true));
  return OpAttrs(a);
}

Expected<OpAttrs> decodeLrn(OpKind, int64_t, const AttrReader& attrs) {
  LrnAttrs a;
  a.alpha = attrs.getFloat("alpha", 1e-4f);
  a.beta = attrs.getFloat("beta", 0.75f);
  a.bias = attrs.getFloat("bias", 1.0f);
  a.size = attrs.getInt("size", 0);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeSignal(OpKind, int64_t, const AttrReader& attrs) {
  SignalAttrs a;
  CTX_ASSIGN_OR_RETURN(a.outputType, elemTypeAttr("output_datatype", attrs.getInt("output_datatype", 1), false));
  CTX_ASSIGN_OR_RETURN(a.periodic, flagOr(attrs, "periodic", true));
  return OpAttrs(a);
}

Expected<OpAttrs> decodeReverseSequence(OpKind, int64_t, const AttrReader& attrs) {
  return OpAttrs(ReverseSequenceAttrs{attrs.getInt("batch_axis", 1), attrs.getInt("time_axis", 0)});
}

Expected<OpAttrs> decodeReshape(OpKind, int64_t opset, const AttrReader& attrs) {
  return OpAttrs(ReshapeAttrs{opset >= 14 && attrs.getInt("allowzero", 0) != 0,
                              opset < 5 ? optionalInts(attrs, "shape") : std::nullopt});
}

Expected<OpAttrs> decodeTranspose(OpKind, int64_t, const AttrReader& attrs) {
  return OpAttrs(TransposeAttrs{optionalInts(attrs, "perm")});
}

// Concat (axis required), Gather (axis 0) and Flatten (axis 1).
Expected<OpAttrs> decodeAxis(OpKind kind, int64_t, const AttrReader& attrs) {
  if (kind == OpKind::Concat && !attrs.has("axis")) return bad("required attribute axis is missing");
  return OpAttrs(AxisAttrs{attrs.getInt("axis", kind == OpKind::Flatten ? 1 : 0)});
}

Expected<OpAttrs> decodeAxes(OpKind, int64_t opset, const AttrReader& attrs) {
  return OpAttrs(AxesAttrs{opset < 13 ? optionalInts(attrs, "axes") : std::nullopt});
}

Expected<OpAttrs> decodeSlice(OpKind, int64_t opset, const AttrReader& attrs) {
  if (opset >= 10) return OpAttrs(SliceAttrs{});
  return OpAttrs(SliceAttrs{optionalInts(attrs, "starts"), optionalInts(attrs, "ends"), optionalInts(attrs, "axes")});
}

Expected<OpAttrs> decodeShape(OpKind, int64_t opset, const AttrReader& attrs) {
  ShapeAttrs a;
  if (opset >= 15) {
    a.start = attrs.getInt("start", 0);
    if (attrs.has("end")) a.end = attrs.getInt("end", 0);
  }
  return OpAttrs(a);
}

Expected<OpAttrs> decodeClip(OpKind, int64_t opset, const AttrReader& attrs) {
  ClipAttrs a;
  if (opset < 11) {
    a.min = attrs.getFloat("min", a.min);
    a.max = attrs.getFloat("max", a.max);
  }
  return OpAttrs(a);
}

Expected<OpAttrs> decodeSplit(OpKind, int64_t opset, const AttrReader& attrs) {
  SplitAttrs a;
  a.axis = attrs.getInt("axis", 0);
  if (opset < 13) a.split = optionalInts(attrs, "split");
  if (opset >= 18 && attrs.has("num_outputs")) a.numOutputs = attrs.getInt("num_outputs", 0);
  return OpAttrs(a);
}

// Col2Im and MaxUnpool (kernel_shape required).
Expected<OpAttrs> decodeFold(OpKind kind, int64_t, const AttrReader& attrs) {
  FoldAttrs a;
  CTX_ASSIGN_OR_RETURN(a.window, decodeWindow(attrs));
  if (kind == OpKind::MaxUnpool && !a.window.kernelShape) return bad("required attribute kernel_shape is missing");
  return OpAttrs(std::move(a));
}

std::optional<int64_t> optionalInt(const AttrReader& attrs, std::string_view name) {
  return attrs.has(name) ? std::optional<int64_t>(attrs.getInt(name, 0)) : std::nullopt;
}

Expected<OpAttrs> decodeUnique(OpKind, int64_t, const AttrReader& attrs) {
  UniqueAttrs a;
  a.axis = optionalInt(attrs, "axis");
  a.sorted = nonZero(attrs, "sorted", true);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeOptionalAxis(OpKind, int64_t, const AttrReader& attrs) {
  return OpAttrs(OptionalAxisAttrs{optionalInt(attrs, "axis")});
}

Expected<OpAttrs> decodeCenterCropPad(OpKind, int64_t, const AttrReader& attrs) {
  return OpAttrs(CenterCropPadAttrs{optionalInts(attrs, "axes")});
}

Expected<OpAttrs> decodeTensorScatter(OpKind, int64_t, const AttrReader& attrs) {
  TensorScatterAttrs a;
  a.axis = attrs.getInt("axis", -2);
  constexpr std::array<std::string_view, 2> modes = {"linear", "circular"};
  CTX_ASSIGN_OR_RETURN(a.mode, stringEnum<CacheMode>(attrs, "mode", "linear", modes));
  return OpAttrs(a);
}

Expected<OpAttrs> decodeNms(OpKind, int64_t, const AttrReader& attrs) {
  return OpAttrs(NmsAttrs{nonZero(attrs, "center_point_box", false)});
}

Expected<OpAttrs> decodeBinarizer(OpKind, int64_t, const AttrReader& attrs) {
  return OpAttrs(BinarizerAttrs{attrs.getFloat("threshold", 0.0f)});
}

Expected<OpAttrs> decodeMatMulNBits(OpKind, int64_t, const AttrReader& attrs) {
  MatMulNBitsAttrs a;
  for (const char* required : {"K", "N", "block_size"})
    if (!attrs.has(required)) return bad("required attribute {} is missing", required);
  a.k = attrs.getInt("K", 0);
  a.n = attrs.getInt("N", 0);
  a.bits = attrs.getInt("bits", 4);
  a.blockSize = attrs.getInt("block_size", 0);
  a.accuracyLevel = attrs.getInt("accuracy_level", 0);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeGroupQueryAttention(OpKind, int64_t, const AttrReader& attrs) {
  GroupQueryAttentionAttrs a;
  for (const char* required : {"num_heads", "kv_num_heads"})
    if (!attrs.has(required)) return bad("required attribute {} is missing", required);
  a.numHeads = attrs.getInt("num_heads", 0);
  a.kvNumHeads = attrs.getInt("kv_num_heads", 0);
  a.scale = attrs.getFloat("scale", 0.0f);
  a.softcap = attrs.getFloat("softcap", 0.0f);
  CTX_ASSIGN_OR_RETURN(a.doRotary, flag(attrs, "do_rotary"));
  CTX_ASSIGN_OR_RETURN(a.rotaryInterleaved, flag(attrs, "rotary_interleaved"));
  CTX_ASSIGN_OR_RETURN(a.smoothSoftmax, flag(attrs, "smooth_softmax"));
  a.localWindowSize = attrs.getInt("local_window_size", -1);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeMsAttention(OpKind, int64_t, const AttrReader& attrs) {
  MsAttentionAttrs a;
  if (!attrs.has("num_heads")) return bad("required attribute num_heads is missing");
  a.numHeads = attrs.getInt("num_heads", 0);
  a.scale = attrs.getFloat("scale", 0.0f);
  a.maskFilterValue = attrs.getFloat("mask_filter_value", -10000.0f);
  CTX_ASSIGN_OR_RETURN(a.unidirectional, flag(attrs, "unidirectional"));
  CTX_ASSIGN_OR_RETURN(a.doRotary, flag(attrs, "do_rotary"));
  CTX_ASSIGN_OR_RETURN(a.pastPresentShareBuffer, flag(attrs, "past_present_share_buffer"));
  a.qkvHiddenSizes = optionalInts(attrs, "qkv_hidden_sizes");
  return OpAttrs(a);
}

Expected<OpAttrs> decodeEmbedLayerNorm(OpKind, int64_t, const AttrReader& attrs) {
  EmbedLayerNormAttrs a;
  a.epsilon = attrs.getFloat("epsilon", 1e-12f);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeCausalConv(OpKind, int64_t, const AttrReader& attrs) {
  CausalConvAttrs a;
  const std::string activation = attrs.getString("activation", "none");
  if (activation == "silu" || activation == "swish") a.activation = Activation::Swish;
  else if (activation != "none")
    return bad("attribute activation is '{}' but expected none, silu or swish", activation);
  return OpAttrs(a);
}

Expected<OpAttrs> decodeDropout(OpKind, int64_t, const AttrReader&) { return OpAttrs(DropoutAttrs{}); }

// The decoder of the kind's family (ops.def's family column: decode##Family above). Value rules (positive sizes,
// ranges, windows) are checkAttrs's, applied by decodeAttrs.
Expected<OpAttrs> decodeTyped(OpKind kind, int64_t opset, const AttrReader& attrs) {
  switch (kind) {
#define CTX_OP(kind, name, domain, family, kernel, flags, ...)                                                         \
  case OpKind::kind:                                                                                                   \
    return decode##family(OpKind::kind, opset, attrs);
#include "ir/ops.def"
#undef CTX_OP
    case OpKind::Unknown: break;
  }
  return OpAttrs(OnnxAttrs{});
}

}  // namespace

Expected<OpAttrs> decodeAttrs(OpKind kind, int64_t opset, const ir::Attributes& attrs) {
  const AttrReader reader(attrs);
  auto typed = decodeTyped(kind, opset, reader);
  CTX_RETURN_IF_ERROR(reader.status());
  if (typed) CTX_RETURN_IF_ERROR(checkAttrs(*typed));  // the value rules a program read from a file gets too
  return typed;
}

std::string_view activationName(Activation a) {
  switch (a) {
    case Activation::None: return "None";
    case Activation::Relu: return "Relu";
    case Activation::LeakyRelu: return "LeakyRelu";
    case Activation::Sigmoid: return "Sigmoid";
    case Activation::Tanh: return "Tanh";
    case Activation::HardSigmoid: return "HardSigmoid";
    case Activation::Clip: return "Clip";
    case Activation::HardSwish: return "HardSwish";
    case Activation::Swish: return "Swish";
    case Activation::Gelu: return "Gelu";
  }
  return "?";
}

}  // namespace ctxkit::ops
