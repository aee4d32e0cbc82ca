// Generic services over typed attributes, driven by each struct's field list (CTXKIT_FIELDS): the op family of an
// op kind, value checks (for attributes read from a file as much as for decoded ones) and readable text.
#pragma once

#include "ops/op_schema.h"

#include <string>
#include <string_view>
#include <type_traits>

namespace ctxkit::ops {

template <class T>
concept HasFields = requires(T& t) {
  t.fields([](std::string_view, auto&) {});
};

// A field's dotted name ("window.kernel_shape") as a chain of names on the stack, spelled out only for a message:
// reading and checking fields allocates nothing.
struct FieldPath {
  std::string_view name;
  const FieldPath* parent = nullptr;
  std::string text() const;
};

// Values an enum field may take; a program read from a file is checked against these.
inline bool isKnown(Activation a) { return static_cast<uint8_t>(a) <= static_cast<uint8_t>(Activation::Gelu); }
inline bool isKnown(AutoPad a) { return static_cast<uint8_t>(a) <= static_cast<uint8_t>(AutoPad::Valid); }
inline bool isKnown(LossReduction r) { return static_cast<uint8_t>(r) <= static_cast<uint8_t>(LossReduction::Mean); }
inline bool isKnown(ScatterReduction r) {
  return static_cast<uint8_t>(r) <= static_cast<uint8_t>(ScatterReduction::Min);
}
inline bool isKnown(PadMode m) { return static_cast<uint8_t>(m) <= static_cast<uint8_t>(PadMode::Wrap); }
inline bool isKnown(ResizeMode m) { return static_cast<uint8_t>(m) <= static_cast<uint8_t>(ResizeMode::Cubic); }
inline bool isKnown(ResizeCoord c) {
  return static_cast<uint8_t>(c) <= static_cast<uint8_t>(ResizeCoord::TfCropAndResize);
}
inline bool isKnown(NearestMode m) { return static_cast<uint8_t>(m) <= static_cast<uint8_t>(NearestMode::Ceil); }
inline bool isKnown(AspectPolicy p) {
  return static_cast<uint8_t>(p) <= static_cast<uint8_t>(AspectPolicy::NotSmaller);
}
inline bool isKnown(RnnActivation a) { return static_cast<uint8_t>(a) <= static_cast<uint8_t>(RnnActivation::Affine); }
inline bool isKnown(RnnDirection d) {
  return static_cast<uint8_t>(d) <= static_cast<uint8_t>(RnnDirection::Bidirectional);
}
inline bool isKnown(GridMode m) { return static_cast<uint8_t>(m) <= static_cast<uint8_t>(GridMode::Cubic); }
inline bool isKnown(GridPadding p) { return static_cast<uint8_t>(p) <= static_cast<uint8_t>(GridPadding::Reflection); }
inline bool isKnown(CacheMode m) { return static_cast<uint8_t>(m) <= static_cast<uint8_t>(CacheMode::Circular); }
inline bool isKnown(RoiMode m) { return static_cast<uint8_t>(m) <= static_cast<uint8_t>(RoiMode::Max); }
inline bool isKnown(TfIdfMode m) { return static_cast<uint8_t>(m) <= static_cast<uint8_t>(TfIdfMode::TfIdf); }
inline bool isKnown(ir::ElemType t) { return ir::elemTypeFromInt(static_cast<int32_t>(t)).has_value(); }

// The attribute struct (default values) that decodeAttrs produces for `kind`: OnnxAttrs for families whose kernels
// still read ONNX attributes. tests/ops checks it against decodeAttrs for every op kind.
OpAttrs defaultAttrsFor(ir::OpKind kind);

inline bool isTyped(const OpAttrs& attrs) { return !std::holds_alternative<OnnxAttrs>(attrs); }

// The largest kernel extent, stride, dilation, pad, group, block size or window size an attribute may hold. No real
// model comes near it; a larger value means nothing an op can do (no tensor has such a dimension), and keeping sizes
// this small keeps the shape arithmetic on them far from overflow.
inline constexpr int64_t kMaxWindowValue = (int64_t{1} << 31) - 1;

// Value rules the decoder enforces (strides and dilations of at least 1, pads not negative, group of at least 1,
// sizes up to kMaxWindowValue, known enum values), for typed attributes that did not come from the decoder too.
// decodeAttrs applies them to everything it decodes. Errors name the field.
Status checkAttrs(const OpAttrs& attrs);

// The struct's name ("ConvAttrs", ...), for errors and documentation.
std::string_view familyName(const OpAttrs& attrs);

// The struct's encoded fields in order, " name:type" each (nested structs as name.field; types bool, i64, f32,
// enum, str, list<T>, opt<T>), as docs/format/program.md lists them; tests/ops holds the two together.
std::string fieldsSchemaText(const OpAttrs& attrs);

// A field of typed attributes looked up by name: its own ("auto_pad") or its dotted path ("window.auto_pad").
// `values` holds an integer, flag or enum field's value (an enum's as its number), every element of a list of
// them; `integral` is false for other fields (floats, strings) and for an unset optional field (nothing to check).
struct FieldInts {
  bool found = false;
  bool integral = false;
  bool isEnum = false;
  std::string path;
  std::vector<int64_t> values;
};
FieldInts fieldInts(const OpAttrs& attrs, std::string_view name);

// " name=value" per field, nested structs as name.field, unset optional lists left out; for dumps.
std::string attrsText(const OpAttrs& attrs);

}  // namespace ctxkit::ops
