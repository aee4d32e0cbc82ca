// The op family of each op kind, value checks and text for typed attributes.
#include "ops/typed_attrs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ctxkit::ops {

using ir::OpKind;

// The family column of ops.def.
OpAttrs defaultAttrsFor(OpKind kind) {
  switch (kind) {
#define CTX_OP(kind, name, domain, family, kernel, flags, ...)                                                         \
  case OpKind::kind:                                                                                                   \
    return family##Attrs{};
#include "ir/ops.def"
#undef CTX_OP
    case OpKind::Unknown: break;
  }
  return OnnxAttrs{};
}

namespace {

template <class T> struct IsVector : std::false_type {};
template <class T, class A> struct IsVector<std::vector<T, A>> : std::true_type {};
template <class T> struct IsOptional : std::false_type {};
template <class T> struct IsOptional<std::optional<T>> : std::true_type {};
template <class T> constexpr bool kIsEnumList = false;
template <class E, class A> constexpr bool kIsEnumList<std::vector<E, A>> = std::is_enum_v<E>;

// Checks one field (recursively for nested structs); `path` names it in errors.
template <class T> Status checkField(const FieldPath& path, const T& value) {
  if constexpr (HasFields<T>) {
    Status status = Status::ok();
    value.fields([&](std::string_view name, const auto& member) {
      if (status) status = checkField(FieldPath{name, &path}, member);
    });
    return status;
  } else if constexpr (std::is_enum_v<T>) {
    if (!isKnown(value))
      return makeError(ErrorCode::InvalidGraph, "attribute {} has unknown value {}", path.text(),
                       static_cast<int64_t>(value));
    return Status::ok();
  } else if constexpr (IsOptional<T>::value) {
    return value ? checkField(path, *value) : Status::ok();
  } else if constexpr (IsVector<T>::value) {
    for (const auto& item : value) CTX_RETURN_IF_ERROR(checkField(path, item));
    return Status::ok();
  } else {
    return Status::ok();
  }
}

Status checkList(std::string_view name, const std::optional<IntList>& list, int64_t minimum) {
  if (list)
    for (int64_t x : *list)
      if (x < minimum || x > kMaxWindowValue)
        return makeError(ErrorCode::InvalidGraph, "attribute {} has value {} but expected values from {} to {}", name,
                         x, minimum, kMaxWindowValue);
  return Status::ok();
}

// A size-like value (group, block size, window size) in [minimum, kMaxWindowValue].
Status checkSize(std::string_view name, int64_t value, int64_t minimum) {
  if (value < minimum || value > kMaxWindowValue)
    return makeError(ErrorCode::InvalidGraph, "attribute {} is {} but expected a value from {} to {}", name, value,
                     minimum, kMaxWindowValue);
  return Status::ok();
}

Status checkWindow(const WindowAttrs& w) {
  CTX_RETURN_IF_ERROR(checkList("strides", w.strides, 1));
  CTX_RETURN_IF_ERROR(checkList("dilations", w.dilations, 1));
  CTX_RETURN_IF_ERROR(checkList("kernel_shape", w.kernelShape, 1));
  return checkList("pads", w.pads, 0);
}

template <class T> void appendText(std::string& out, std::string_view path, const T& value) {
  if constexpr (HasFields<T>) {
    value.fields(
        [&](std::string_view name, const auto& member) { appendText(out, fmt::format("{}.{}", path, name), member); });
  } else if constexpr (IsOptional<T>::value) {
    if (value) appendText(out, path, *value);
  } else if constexpr (kIsEnumList<T>) {
    std::vector<int64_t> values;
    for (auto v : value) values.push_back(static_cast<int64_t>(v));
    out += fmt::format(" {}=[{}]", path, fmt::join(values, ","));
  } else if constexpr (IsVector<T>::value) {
    out += fmt::format(" {}=[{}]", path, fmt::join(value, ","));
  } else if constexpr (std::is_same_v<T, Activation>) {
    out += fmt::format(" {}={}", path, activationName(value));
  } else if constexpr (std::is_same_v<T, ir::ElemType>) {
    out += fmt::format(" {}={}", path, ir::elemTypeName(value));
  } else if constexpr (std::is_enum_v<T>) {
    out += fmt::format(" {}={}", path, static_cast<int64_t>(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    out += fmt::format(" {}={}", path, value ? 1 : 0);
  } else if constexpr (std::is_same_v<T, std::string>) {
    out += fmt::format(" {}=\"{}\"", path, value);
  } else {
    out += fmt::format(" {}={}", path, value);
  }
}

template <class T> std::string typeName() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_enum_v<T>) return "enum";
  else if constexpr (std::is_integral_v<T>) return "i64";
  else if constexpr (std::is_same_v<T, float>) return "f32";
  else if constexpr (std::is_same_v<T, std::string>) return "str";
  else if constexpr (IsVector<T>::value) return "list<" + typeName<typename T::value_type>() + ">";
  else if constexpr (IsOptional<T>::value) return "opt<" + typeName<typename T::value_type>() + ">";
  else static_assert(sizeof(T) == 0, "a typed attribute field of a type the program encoding does not know");
}

template <class T> void appendSchema(std::string& out, std::string_view path, const T& value) {
  if constexpr (HasFields<T>) {
    value.fields([&](std::string_view name, const auto& member) {
      appendSchema(out, path.empty() ? std::string(name) : fmt::format("{}.{}", path, name), member);
    });
  } else {
    out += fmt::format(" {}:{}", path, typeName<T>());
  }
}

constexpr std::string_view kFamilyNames[] = {"OnnxAttrs",          "BinaryAttrs",
                                             "UnaryAttrs",         "ConvAttrs",
                                             "PoolAttrs",          "GemmAttrs",
                                             "MatMulAttrs",        "BatchNormAttrs",
                                             "LayerNormAttrs",     "SoftmaxAttrs",
                                             "ReduceAttrs",        "ArgReduceAttrs",
                                             "CastLikeAttrs",      "ModAttrs",
                                             "UnaryMathAttrs",     "TriluAttrs",
                                             "LossAttrs",          "GatherScatterAttrs",
                                             "CumulativeAttrs",    "TopKAttrs",
                                             "BitShiftAttrs",      "DepthSpaceAttrs",
                                             "EyeLikeAttrs",       "GroupNormAttrs",
                                             "LpNormAttrs",        "AttentionAttrs",
                                             "EinsumAttrs",        "BitCastAttrs",
                                             "RotaryAttrs",        "QuantizeAttrs",
                                             "LrnAttrs",           "ReverseSequenceAttrs",
                                             "SignalAttrs",        "LpPoolAttrs",
                                             "ReshapeAttrs",       "TransposeAttrs",
                                             "AxisAttrs",          "AxesAttrs",
                                             "SliceAttrs",         "CastAttrs",
                                             "ShapeAttrs",         "ClipAttrs",
                                             "SplitAttrs",         "PadAttrs",
                                             "ConvTransposeAttrs", "ResizeAttrs",
                                             "RecurrentAttrs",     "GridSampleAttrs",
                                             "DeformConvAttrs",    "FoldAttrs",
                                             "UniqueAttrs",        "OptionalAxisAttrs",
                                             "CenterCropPadAttrs", "TensorScatterAttrs",
                                             "NmsAttrs",           "BinarizerAttrs",
                                             "TfIdfAttrs",         "ConstantOfShapeAttrs",
                                             "DropoutAttrs",       "RoiAlignAttrs",
                                             "MatMulNBitsAttrs",   "GroupQueryAttentionAttrs",
                                             "MsAttentionAttrs",   "EmbedLayerNormAttrs",
                                             "CausalConvAttrs"};
static_assert(std::size(kFamilyNames) == std::variant_size_v<OpAttrs>, "a name per OpAttrs alternative");

}  // namespace

std::string FieldPath::text() const { return parent ? fmt::format("{}.{}", parent->text(), name) : std::string(name); }

std::string_view familyName(const OpAttrs& attrs) { return kFamilyNames[attrs.index()]; }

std::string fieldsSchemaText(const OpAttrs& attrs) {
  std::string out;
  std::visit([&](const auto& a) { appendSchema(out, "", a); }, attrs);
  return out;
}

Status checkAttrs(const OpAttrs& attrs) {
  return std::visit(
      [](const auto& a) -> Status {
        using T = std::decay_t<decltype(a)>;
        Status status = Status::ok();
        a.fields([&](std::string_view name, const auto& member) {
          if (status) status = checkField(FieldPath{name}, member);
        });
        CTX_RETURN_IF_ERROR(status);
        if constexpr (std::is_same_v<T, DeformConvAttrs>) {
          CTX_RETURN_IF_ERROR(checkSize("group", a.group, 1));
          CTX_RETURN_IF_ERROR(checkSize("offset_group", a.offsetGroup, 1));
          return checkWindow(a.window);
        } else if constexpr (std::is_same_v<T, FoldAttrs>) {
          return checkWindow(a.window);
        } else if constexpr (std::is_same_v<T, RecurrentAttrs>) {
          if (a.hiddenSize) CTX_RETURN_IF_ERROR(checkSize("hidden_size", *a.hiddenSize, 1));
          if (a.clip && !(*a.clip > 0))
            return makeError(ErrorCode::InvalidGraph, "attribute clip is {} but expected a positive bound", *a.clip);
          if (a.layout != 0 && a.layout != 1)
            return makeError(ErrorCode::InvalidGraph, "attribute layout is {} but expected 0 or 1", a.layout);
          return Status::ok();
        } else if constexpr (std::is_same_v<T, TfIdfAttrs>) {
          if (a.minGram < 1 || a.maxGram < a.minGram || a.maxSkip < 0)
            return makeError(ErrorCode::InvalidGraph,
                             "min_gram_length {}, max_gram_length {} and max_skip_count {} are not a valid range",
                             a.minGram, a.maxGram, a.maxSkip);
          return Status::ok();
        } else if constexpr (std::is_same_v<T, ConvAttrs> || std::is_same_v<T, ConvTransposeAttrs>) {
          CTX_RETURN_IF_ERROR(checkSize("group", a.group, 1));
          if constexpr (std::is_same_v<T, ConvTransposeAttrs>)
            CTX_RETURN_IF_ERROR(checkList("output_padding", a.outputPadding, 0));
          return checkWindow(a.window);
        } else if constexpr (std::is_same_v<T, PoolAttrs> || std::is_same_v<T, LpPoolAttrs>) {
          if (!a.window.kernelShape)
            return makeError(ErrorCode::InvalidGraph, "required attribute kernel_shape is missing");
          if constexpr (std::is_same_v<T, LpPoolAttrs>)
            if (a.p < 1) return makeError(ErrorCode::InvalidGraph, "attribute p is {} but expected at least 1", a.p);
          return checkWindow(a.window);
        } else if constexpr (std::is_same_v<T, RoiAlignAttrs>) {
          CTX_RETURN_IF_ERROR(checkSize("output_height", a.outputHeight, 1));
          CTX_RETURN_IF_ERROR(checkSize("output_width", a.outputWidth, 1));
          CTX_RETURN_IF_ERROR(checkSize("sampling_ratio", a.samplingRatio, 0));
          if (!std::isfinite(a.spatialScale))
            return makeError(ErrorCode::InvalidGraph, "attribute spatial_scale is {} but expected a finite number",
                             a.spatialScale);
          return Status::ok();
        } else if constexpr (std::is_same_v<T, MatMulNBitsAttrs>) {
          CTX_RETURN_IF_ERROR(checkSize("K", a.k, 1));
          CTX_RETURN_IF_ERROR(checkSize("N", a.n, 1));
          if (a.bits != 2 && a.bits != 4 && a.bits != 8)
            return makeError(ErrorCode::InvalidGraph, "attribute bits is {} but expected 2, 4 or 8", a.bits);
          if (a.blockSize < 16 || (a.blockSize & (a.blockSize - 1)) != 0)
            return makeError(ErrorCode::InvalidGraph,
                             "attribute block_size is {} but expected a power of two of at least 16", a.blockSize);
          return Status::ok();
        } else if constexpr (std::is_same_v<T, GroupQueryAttentionAttrs>) {
          CTX_RETURN_IF_ERROR(checkSize("num_heads", a.numHeads, 1));
          CTX_RETURN_IF_ERROR(checkSize("kv_num_heads", a.kvNumHeads, 1));
          if (a.numHeads % a.kvNumHeads != 0)
            return makeError(ErrorCode::InvalidGraph,
                             "attribute num_heads is {} but expected a multiple of kv_num_heads {}", a.numHeads,
                             a.kvNumHeads);
          if (!std::isfinite(a.scale) || a.scale < 0 || !std::isfinite(a.softcap) || a.softcap < 0)
            return makeError(ErrorCode::InvalidGraph,
                             "attributes scale {} and softcap {}: expected finite, non-negative", a.scale, a.softcap);
          if (a.localWindowSize < -1)
            return makeError(ErrorCode::InvalidGraph, "attribute local_window_size is {} but expected -1 or more",
                             a.localWindowSize);
          return Status::ok();
        } else if constexpr (std::is_same_v<T, MsAttentionAttrs>) {
          CTX_RETURN_IF_ERROR(checkSize("num_heads", a.numHeads, 1));
          if (!std::isfinite(a.scale) || a.scale < 0 || std::isnan(a.maskFilterValue))
            return makeError(ErrorCode::InvalidGraph,
                             "attributes scale {} and mask_filter_value {}: expected a finite, non-negative scale "
                             "and a number",
                             a.scale, a.maskFilterValue);
          if (a.qkvHiddenSizes)
            for (int64_t v : *a.qkvHiddenSizes) CTX_RETURN_IF_ERROR(checkSize("qkv_hidden_sizes", v, 1));
          return Status::ok();
        } else if constexpr (std::is_same_v<T, EmbedLayerNormAttrs>) {
          if (!std::isfinite(a.epsilon) || a.epsilon < 0)
            return makeError(ErrorCode::InvalidGraph, "attribute epsilon is {} but expected finite, non-negative",
                             a.epsilon);
          return Status::ok();
        } else if constexpr (std::is_same_v<T, DepthSpaceAttrs>) {
          return checkSize("blocksize", a.blocksize, 1);
        } else if constexpr (std::is_same_v<T, LrnAttrs>) {
          return checkSize("size", a.size, 1);
        } else if constexpr (std::is_same_v<T, QuantizeAttrs>) {
          return checkSize("block_size", a.blockSize, 0);
        } else if constexpr (std::is_same_v<T, AttentionAttrs>) {
          if (a.qkMatmulOutputMode < 0 || a.qkMatmulOutputMode > 3)
            return makeError(ErrorCode::InvalidGraph, "attribute qk_matmul_output_mode is {} but expected 0 to 3",
                             a.qkMatmulOutputMode);
          CTX_RETURN_IF_ERROR(checkSize("q_num_heads", a.qNumHeads, 0));
          return checkSize("kv_num_heads", a.kvNumHeads, 0);
        } else {
          return Status::ok();
        }
      },
      attrs);
}

std::string attrsText(const OpAttrs& attrs) {
  std::string out;
  std::visit(
      [&](const auto& a) {
        a.fields([&](std::string_view name, const auto& member) { appendText(out, name, member); });
      },
      attrs);
  return out;
}

namespace {

// Looks for field `want` (its own name or its dotted path) under `path` and records its value in `out`.
template <class T> void findField(const T& value, std::string_view want, const std::string& path, FieldInts& out) {
  if constexpr (HasFields<T>) {
    value.fields([&](std::string_view name, const auto& member) {
      if (out.found) return;
      const std::string at = path.empty() ? std::string(name) : fmt::format("{}.{}", path, name);
      using M = std::remove_cvref_t<decltype(member)>;
      if constexpr (HasFields<M>) findField(member, want, at, out);
      else if (name == want || at == want) {
        out.found = true;
        out.path = at;
        findField(member, want, at, out);
      }
    });
  } else if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T>) {
    out.integral = true;
    out.values.push_back(static_cast<int64_t>(value));
  } else if constexpr (std::is_enum_v<T>) {
    out.integral = true;
    out.isEnum = true;
    out.values.push_back(static_cast<int64_t>(value));
  } else if constexpr (IsOptional<T>::value) {
    if (value) findField(*value, want, path, out);
  } else if constexpr (IsVector<T>::value) {
    if constexpr (std::is_integral_v<typename T::value_type> || std::is_enum_v<typename T::value_type>) {
      out.integral = true;
      out.isEnum = std::is_enum_v<typename T::value_type>;
      for (const auto& item : value) out.values.push_back(static_cast<int64_t>(item));
    }
  }
}

}  // namespace

FieldInts fieldInts(const OpAttrs& attrs, std::string_view name) {
  FieldInts out;
  std::visit([&](const auto& a) { findField(a, name, std::string(), out); }, attrs);
  return out;
}

}  // namespace ctxkit::ops
