// Program encoding: round trip, and rejection of programs that break a rule, at every truncation.
#include "ops/typed_attrs.h"
#include "program/program.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstring>

using namespace ctxkit;
using program::TensorKind;

namespace {

program::Program sampleProgram() {
  program::Program p;
  p.arenaSize = 128;
  p.tensors = {
      {TensorKind::Input, ir::ElemType::Float, {2, 4}, 0, 0, 32, "x", {}},
      {TensorKind::Weight, ir::ElemType::Float, {4, 4}, 0, 0, 64, "w", {}},
      {TensorKind::Arena, ir::ElemType::Float, {2, 4}, 0, 64, 32, "h", {}},
      {TensorKind::View, ir::ElemType::Float, {8}, 2, 0, 32, "flat", {}},
      {TensorKind::Output, ir::ElemType::Float, {8}, 0, 0, 32, "y", {}},
  };
  ops::MatMulAttrs mmAttrs;
  mmAttrs.epilogue = {ops::Activation::LeakyRelu, 0.25f, 0};
  program::Op matmul{ir::OpKind::MatMul, 17, "mm", {}, {0, 1}, {2}, mmAttrs};
  // An op family without typed attributes keeps its ONNX attributes by name.
  program::Op ident{ir::OpKind::Identity, 17, "ident", {}, {3}, {4}, ops::OnnxAttrs{}};
  ident.attrs.set(ir::Attribute::makeString("note", "ONNX attributes survive"));
  ident.attrs.set(ir::Attribute::makeInts("ints", {1, -2, 3}));
  ident.attrs.set(ir::Attribute::makeFloat("alpha", 0.5f));
  p.ops = {matmul, ident};
  p.inputs = {0};
  p.outputs = {4};
  return p;
}

}  // namespace

TEST_CASE("a program survives serialize and deserialize", "[program]") {
  auto bytes = program::serialize(sampleProgram());
  auto p = program::deserialize(bytes, 1, "test program");
  REQUIRE(p);
  CHECK(p->tensors.size() == 5);
  CHECK(p->ops.size() == 2);
  CHECK(p->version == program::kProgramVersion);
  REQUIRE(std::holds_alternative<ops::MatMulAttrs>(p->ops[0].typed));
  CHECK(std::get<ops::MatMulAttrs>(p->ops[0].typed).epilogue == ops::Epilogue{ops::Activation::LeakyRelu, 0.25f, 0});
  CHECK(p->ops[0].attrs.size() == 0);
  CHECK(p->ops[1].attrs.getString("note") == "ONNX attributes survive");
  CHECK(p->ops[1].attrs.getInts("ints") == std::vector<int64_t>{1, -2, 3});
  CHECK(p->ops[1].attrs.getFloat("alpha", 0) == 0.5f);
  CHECK(program::serialize(*p) == bytes);
  CHECK_THAT(program::dump(*p, "g"), Catch::Contains("MatMul(%0:float32[2x4]in0, %1:float32[4x4]w0) epilogue.activation=LeakyRelu epilogue.alpha=0.25"));
  // A read program keeps its lists in its storage; a copy keeps its own on the heap and outlives the original, and
  // an assigned program takes the storage along.
  REQUIRE(p->storage);
  program::Program copy = *p;
  CHECK(!copy.storage);
  program::Program assigned;
  auto read = program::deserialize(bytes, 1, "test program");
  REQUIRE(read);
  assigned = std::move(*read);
  REQUIRE(assigned.storage);
  p = program::deserialize(program::serialize(program::Program()), 1, "empty program");
  REQUIRE(p);
  CHECK(program::serialize(copy) == bytes);
  CHECK(program::serialize(assigned) == bytes);
}

TEST_CASE("typed attributes are stored as values in schema order, without names", "[program]") {
  auto p = sampleProgram();
  ops::ConvAttrs conv;
  conv.window.kernelShape = ops::IntList{3, 3};
  conv.window.pads = ops::IntList{1, 1, 1, 1};
  conv.window.autoPad = ops::AutoPad::SameLower;
  conv.group = 4;
  conv.epilogue = {ops::Activation::Clip, 0, 6};
  p.ops[0].kind = ir::OpKind::Conv;
  p.ops[0].typed = conv;
  auto bytes = program::serialize(p);
  for (const char* name : {"kernel_shape", "pads", "group", "epilogue", "activation"})
    CHECK(std::search(bytes.begin(), bytes.end(), reinterpret_cast<const std::byte*>(name),
                      reinterpret_cast<const std::byte*>(name) + std::strlen(name)) == bytes.end());
  auto back = program::deserialize(bytes, 1, "conv program");
  REQUIRE(back);
  CHECK(ops::attrsText(back->ops[0].typed) == ops::attrsText(conv));
  CHECK(ops::attrsText(conv) ==
        " window.kernel_shape=[3,3] window.pads=[1,1,1,1] window.auto_pad=2 group=4 epilogue.activation=Clip"
        " epilogue.alpha=0 epilogue.beta=6 epilogue.scale=1 epilogue.shift=0");
}

TEST_CASE("typed attributes read from a file obey the decoder's rules", "[program]") {
  auto expectError = [](program::Program p, const char* text) {
    auto r = program::deserialize(program::serialize(p), 1, "bad program");
    REQUIRE(!r);
    CHECK_THAT(r.error().message(), Catch::Contains(text));
  };
  auto p = sampleProgram();
  ops::ConvAttrs conv;
  conv.group = 0;
  p.ops[0].kind = ir::OpKind::Conv;
  p.ops[0].typed = conv;
  expectError(p, "attribute group is 0");
  conv.group = 1;
  conv.window.strides = ops::IntList{1, 0};
  p.ops[0].typed = conv;
  expectError(p, "attribute strides has value 0");
  p = sampleProgram();
  ops::MatMulAttrs mm;
  mm.epilogue.activation = static_cast<ops::Activation>(42);
  p.ops[0].typed = mm;
  expectError(p, "attribute epilogue.activation has unknown value 42");
  // Another family's values under MatMul's id are read as MatMul's fields, and rejected; an in-memory program is
  // checked by family directly.
  p = sampleProgram();
  p.ops[0].typed = ops::SoftmaxAttrs{};
  CHECK(!program::deserialize(program::serialize(p), 1, "bad program"));
  auto s = program::validate(p, 1);
  REQUIRE(!s);
  CHECK_THAT(s.error().message(), Catch::Contains("typed attributes of another op family"));
}

TEST_CASE("a version-2 program spells a typed family's attributes one way only", "[program]") {
  // Found by fuzz_program: Round (a typed family) with an empty ONNX attribute list decoded, then re-encoded with
  // typed values, so one program had two spellings.
  auto p = sampleProgram();
  p.ops[1].kind = ir::OpKind::Round;
  p.ops[1].typed = ops::OnnxAttrs{};  // what a hand-made file would say: form 0
  p.ops[1].attrs = ir::Attributes();
  auto r = program::deserialize(program::serialize(p), 1, "two spellings");
  REQUIRE(!r);
  CHECK_THAT(r.error().message(), Catch::Contains("op 'ident' (Round) has ONNX attributes but its kind's are typed"));
}

namespace {
// A program's bytes under another version's magic.
std::vector<std::byte> relabel(std::vector<std::byte> bytes, uint64_t magic) {
  std::memcpy(bytes.data(), &magic, sizeof magic);
  return bytes;
}
}  // namespace

TEST_CASE("version-2 programs still load: families typed since version 3 are decoded from ONNX attributes", "[program]") {
  auto p = sampleProgram();
  // Transpose is typed since version 3; the compiler of version 2 wrote its perm by name.
  p.ops[1].kind = ir::OpKind::Transpose;
  p.ops[1].attrs = ir::Attributes();
  p.ops[1].attrs.set(ir::Attribute::makeInts("perm", {0}));
  p.ops[1].typed = ops::TransposeAttrs{ops::IntList{0}};
  auto v2 = program::serializeVersion(p, 2);
  REQUIRE(v2);
  uint64_t magic = 0;
  std::memcpy(&magic, v2->data(), sizeof magic);
  CHECK(magic == program::kProgramMagicV2);
  auto back = program::deserialize(*v2, 1, "v2 program");
  REQUIRE(back);
  CHECK(back->version == 2);
  REQUIRE(std::holds_alternative<ops::TransposeAttrs>(back->ops[1].typed));
  CHECK(ops::attrsText(back->ops[1].typed) == " perm=[0]");
  CHECK(back->ops[1].attrs.getInts("perm") == std::vector<int64_t>{0});
  CHECK(program::serializeVersion(*back, 2).value() == *v2);  // an older program re-encodes in its own version
  // In version 3 the same op carries its values only.
  auto v3 = program::deserialize(program::serializeVersion(*back, 3).value(), 1, "v3 program");
  REQUIRE(v3);
  CHECK(v3->version == 3);
  CHECK(v3->ops[1].attrs.size() == 0);
  CHECK(ops::attrsText(v3->ops[1].typed) == " perm=[0]");
  // One spelling per version: typed values in a version-2 program, ONNX attributes in a version-3 one, are refused.
  auto typedInV2 = program::deserialize(relabel(program::serialize(p), program::kProgramMagicV2), 1, "p");
  REQUIRE(!typedInV2);
  CHECK_THAT(typedInV2.error().message(),
             Catch::Contains("op 'ident' (Transpose) has typed attributes but its kind has none in program version 2"));
  auto namedInV3 = program::deserialize(relabel(*v2, program::kProgramMagicV3), 1, "p");
  REQUIRE(!namedInV3);
  CHECK_THAT(namedInV3.error().message(), Catch::Contains("has ONNX attributes but its kind's are typed"));
  // A version-2 encoding cannot drop ONNX attributes it needs.
  p.ops[1].attrs = ir::Attributes();
  CHECK(!program::serializeVersion(p, 2));
}

TEST_CASE("version-3 programs still load: families typed since version 4 are decoded from ONNX attributes", "[program]") {
  auto p = sampleProgram();
  // LSTM is typed since version 4 (its activations an enum list); version 3 wrote its attributes by name.
  ir::Attributes lstm;
  ir::Attribute activations;
  activations.name = "activations";
  activations.type = ir::AttrType::Strings;
  activations.strings = {"Sigmoid", "tanh", "Affine"};
  lstm.set(activations);
  lstm.set(ir::Attribute::makeFloats("activation_alpha", {0.5f}));
  lstm.set(ir::Attribute::makeInt("hidden_size", 4));
  lstm.set(ir::Attribute::makeString("direction", "reverse"));
  p.ops[1].kind = ir::OpKind::LSTM;
  p.ops[1].opset = 14;
  p.ops[1].attrs = lstm;
  p.ops[1].typed = ops::decodeAttrs(ir::OpKind::LSTM, 14, lstm).value();
  const std::string text = " direction=1 hidden_size=4 input_forget=0 linear_before_reset=0 layout=0"
                           " activations=[0,1,10] activation_alpha=[0.5]";
  CHECK(ops::attrsText(p.ops[1].typed) == text);
  auto v3 = program::serializeVersion(p, 3);
  REQUIRE(v3);
  uint64_t magic = 0;
  std::memcpy(&magic, v3->data(), sizeof magic);
  CHECK(magic == program::kProgramMagicV3);
  auto back = program::deserialize(*v3, 1, "v3 program");
  REQUIRE(back);
  CHECK(back->version == 3);
  REQUIRE(std::holds_alternative<ops::RecurrentAttrs>(back->ops[1].typed));
  CHECK(ops::attrsText(back->ops[1].typed) == text);
  CHECK(program::serializeVersion(*back, 3).value() == *v3);
  // In version 4 the same op carries its values only, and reads back the same.
  auto v4 = program::deserialize(program::serialize(*back), 1, "v4 program");
  REQUIRE(v4);
  CHECK(v4->version == 4);
  CHECK(v4->ops[1].attrs.size() == 0);
  CHECK(ops::attrsText(v4->ops[1].typed) == text);
  auto typedInV3 = program::deserialize(relabel(program::serialize(p), program::kProgramMagicV3), 1, "p");
  REQUIRE(!typedInV3);
  CHECK_THAT(typedInV3.error().message(),
             Catch::Contains("op 'ident' (LSTM) has typed attributes but its kind has none in program version 3"));
  auto namedInV4 = program::deserialize(relabel(*v3, program::kProgramMagic), 1, "p");
  REQUIRE(!namedInV4);
  CHECK_THAT(namedInV4.error().message(), Catch::Contains("has ONNX attributes but its kind's are typed"));
  // An activation outside the enumeration is refused naming the field, in memory and in a file.
  auto& typed = std::get<ops::RecurrentAttrs>(p.ops[1].typed);
  typed.activations->at(2) = static_cast<ops::RnnActivation>(42);
  auto s = program::validate(p, 1);
  REQUIRE(!s);
  CHECK_THAT(s.error().message(), Catch::Contains("attribute activations has unknown value 42"));
  auto read = program::deserialize(program::serialize(p), 1, "p");
  REQUIRE(!read);
  CHECK_THAT(read.error().message(), Catch::Contains("attribute activations has unknown value 42"));
}

TEST_CASE("version-1 programs (ONNX attributes by name) still load, their attributes decoded once", "[program]") {
  auto p = sampleProgram();
  p.ops[0].attrs.set(ir::Attribute::makeString("activation", "LeakyRelu"));
  p.ops[0].attrs.set(ir::Attribute::makeFloats("activation_params", {0.25f}));
  auto v1 = program::serializeVersion(p, 1);
  REQUIRE(v1);
  auto back = program::deserialize(*v1, 1, "v1 program");
  REQUIRE(back);
  CHECK(back->version == 1);
  CHECK(ops::attrsText(back->ops[0].typed) == ops::attrsText(p.ops[0].typed));
  // Re-encoded, it is a current program with the same meaning.
  auto current = program::deserialize(program::serialize(*back), 1, "current program");
  REQUIRE(current);
  CHECK(current->version == program::kProgramVersion);
  CHECK(program::dump(*current, "g") == program::dump(*back, "g"));
  // A version-1 encoding cannot drop typed attributes its ONNX attributes do not give.
  p.ops[0].attrs = ir::Attributes();
  CHECK(!program::serializeVersion(p, 1));
}

TEST_CASE("packed weights record their layout and stored size", "[program]") {
  auto p = sampleProgram();
  // A [4, 4] weight in 16-wide panels of depth 256: 4 rows x 16 columns = 64 floats = 256 bytes.
  p.tensors[1].layout = {ops::WeightLayoutKind::GemmPanels, 16, 256};
  p.tensors[1].size = 256;
  auto back = program::deserialize(program::serialize(p), 1, "packed");
  REQUIRE(back);
  CHECK(back->tensors[1].layout == p.tensors[1].layout);
  CHECK_THAT(program::dump(*back, "g"), Catch::Contains("w0:gemm-panels(16x256)"));
  CHECK(!program::serializeVersion(p, 1));
  auto expectError = [](program::Program q, const char* text) {
    auto r = program::deserialize(program::serialize(q), 1, "bad program");
    REQUIRE(!r);
    CHECK_THAT(r.error().message(), Catch::Contains(text));
  };
  auto q = p;
  q.tensors[1].size = 64;  // the plain size
  expectError(q, "in layout gemm-panels(16x256) needs 256");
  q = p;
  q.tensors[1].layout.width = 0;
  expectError(q, "needs ?");
  q = p;
  q.tensors[2].layout = p.tensors[1].layout;
  expectError(q, "is only for float32 weights");
}

TEST_CASE("every truncation of a program is rejected without crashing", "[program]") {
  auto bytes = program::serialize(sampleProgram());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto p = program::deserialize(std::span(bytes.data(), n), 1, "cut");
    CHECK(!p);
  }
}

TEST_CASE("programs that break a rule are rejected with the reason", "[program]") {
  auto expectError = [](program::Program p, uint64_t weights, const char* text) {
    auto r = program::deserialize(program::serialize(p), weights, "bad program");
    REQUIRE(!r);
    CHECK_THAT(r.error().message(), Catch::Contains(text));
  };
  expectError(sampleProgram(), 0, "weight index 0");
  auto p = sampleProgram();
  p.tensors[2].offset = 100;
  expectError(p, 1, "exceeds the arena size");
  p = sampleProgram();
  p.tensors[2].size = 31;
  expectError(p, 1, "bytes recorded");
  p = sampleProgram();
  p.tensors[3].index = 3;
  expectError(p, 1, "views tensor");
  p = sampleProgram();
  p.ops[0].inputs[1] = 9;
  expectError(p, 1, "refers to tensor 9");
  p = sampleProgram();
  p.ops[0].outputs[0] = 1;
  expectError(p, 1, "writes tensor 1 of kind weight");
  p = sampleProgram();
  p.outputs = {2};
  expectError(p, 1, "does not match the output list");
}

// Found by fuzz_program: the shape of a tensor attribute sized an allocation before it was compared with the
// bytes present, so a shape of 2^60 elements with 8 bytes of data ended in std::bad_alloc and terminate.
TEST_CASE("a tensor attribute whose shape promises more bytes than it carries is rejected", "[program]") {
  auto p = sampleProgram();
  p.ops[1].attrs.set(ir::Attribute::makeTensor("t", ir::Tensor::fromVector(ir::ElemType::Float, {2}, std::vector<float>{1, 2})));
  auto bytes = program::serialize(p);
  REQUIRE(program::deserialize(bytes, 1, "good program"));
  // The attribute is written as: name (u32 length, "t"), attribute type (u8), element type (u32), rank (u32), dims.
  const std::array<std::byte, 5> name{std::byte{1}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{'t'}};
  auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  REQUIRE(at != bytes.end());
  const size_t dim = static_cast<size_t>(at - bytes.begin()) + name.size() + 1 + 4 + 4;
  const int64_t huge = int64_t{1} << 60;
  std::memcpy(bytes.data() + dim, &huge, sizeof huge);
  auto r = program::deserialize(bytes, 1, "bad program");
  REQUIRE(!r);
  CHECK_THAT(r.error().message(), Catch::Contains("needs 4611686018427387904 bytes but has 8"));
}
