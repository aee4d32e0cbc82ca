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
  program::Op matmul{ir::OpKind::MatMul, 17, "mm", {0, 1}, {2}, mmAttrs};
  // An op kind without typed attributes carries none.
  program::Op ident{ir::OpKind::Identity, 17, "ident", {3}, {4}, ops::OnnxAttrs{}};
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
  REQUIRE(std::holds_alternative<ops::MatMulAttrs>(p->ops[0].typed));
  CHECK(std::get<ops::MatMulAttrs>(p->ops[0].typed).epilogue == ops::Epilogue{ops::Activation::LeakyRelu, 0.25f, 0});
  CHECK(std::holds_alternative<ops::OnnxAttrs>(p->ops[1].typed));
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

TEST_CASE("a program built in memory is refused where the same program read from a file would be", "[program]") {
  // Each case breaks a rule the reader enforces while parsing; validate() says so for a program never encoded.
  auto expectBoth = [](const program::Program& p, const char* text) {
    auto s = program::validate(p, 1);
    REQUIRE(!s);
    CHECK_THAT(s.error().message(), Catch::Contains(text));
    CHECK(!program::deserialize(program::serialize(p), 1, "bad program"));
  };
  auto p = sampleProgram();
  p.ops[0].name = program::Name(program::kMaxStringBytes + 1, 'n');
  expectBoth(p, "a compiled program holds names of at most");
  p = sampleProgram();
  p.tensors[2].name = program::Name(program::kMaxStringBytes + 1, 'v');
  expectBoth(p, "a compiled program holds names of at most");
  p = sampleProgram();
  p.tensors[0].shape = program::Dims(program::kMaxRank + 1, 1);
  expectBoth(p, "rank 9 exceeds 8");
  p = sampleProgram();
  p.tensors[2].type = ir::ElemType::String;
  expectBoth(p, "is not supported");
  CHECK(program::validate(sampleProgram(), 1));
}

TEST_CASE("an op's attributes have one spelling: typed values for a typed family, none for the others",
          "[program]") {
  // Found by fuzz_program: Round (a typed family) with an empty attribute list decoded, then re-encoded with typed
  // values, so one program had two spellings.
  auto p = sampleProgram();
  p.ops[1].kind = ir::OpKind::Round;
  p.ops[1].typed = ops::OnnxAttrs{};  // what a hand-made file would say: form 0
  auto r = program::deserialize(program::serialize(p), 1, "two spellings");
  REQUIRE(!r);
  CHECK_THAT(r.error().message(),
             Catch::Contains("op 'ident' (Round) has no typed attributes but its kind's are typed"));
  // A kind without typed attributes lists none: form 0 is followed by a zero count.
  auto bytes = program::serialize(sampleProgram());
  const std::string_view name = "ident";
  auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end(),
                        [](std::byte b, char c) { return b == static_cast<std::byte>(c); });
  REQUIRE(at != bytes.end());
  const auto count = static_cast<size_t>(at - bytes.begin()) + name.size() + 1;  // after the name and the form
  REQUIRE(bytes[count - 1] == std::byte{0});
  bytes[count] = std::byte{1};
  auto listed = program::deserialize(bytes, 1, "listed");
  REQUIRE(!listed);
  CHECK_THAT(listed.error().message(), Catch::Contains("op 'ident' (Identity) lists 1 attributes; expected 0"));
}

TEST_CASE("programs of the development encodings 1 to 3 are refused by name", "[program]") {
  for (char digit : {'1', '2', '3'}) {
    auto bytes = program::serialize(sampleProgram());
    bytes[7] = static_cast<std::byte>(digit);  // "XCTPROG4" -> "XCTPROG<digit>"
    auto r = program::deserialize(bytes, 1, "old program");
    REQUIRE(!r);
    CHECK(r.error().code() == ErrorCode::Unsupported);
    CHECK(r.error().message() ==
          fmt::format("old program: compiled by ctxkit 0.1.0-dev program encoding {}: recompile", digit));
  }
  auto bytes = program::serialize(sampleProgram());
  bytes[7] = static_cast<std::byte>('6');
  auto r = program::deserialize(bytes, 1, "unknown");
  REQUIRE(!r);
  CHECK_THAT(r.error().message(), Catch::Contains("not a ctxkit program (bad magic)"));
}

TEST_CASE("recurrent attributes survive the encoding, an unknown activation is refused", "[program]") {
  auto p = sampleProgram();
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
  p.ops[1].typed = ops::decodeAttrs(ir::OpKind::LSTM, 14, lstm).value();
  const std::string text = " direction=1 hidden_size=4 input_forget=0 linear_before_reset=0 layout=0"
                           " activations=[0,1,10] activation_alpha=[0.5]";
  CHECK(ops::attrsText(p.ops[1].typed) == text);
  auto back = program::deserialize(program::serialize(p), 1, "lstm program");
  REQUIRE(back);
  REQUIRE(std::holds_alternative<ops::RecurrentAttrs>(back->ops[1].typed));
  CHECK(ops::attrsText(back->ops[1].typed) == text);
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

TEST_CASE("packed weights record their layout and stored size", "[program]") {
  auto p = sampleProgram();
  // A [4, 4] weight in 16-wide panels of depth 256: 4 rows x 16 columns = 64 floats = 256 bytes.
  p.tensors[1].layout = {cpu::WeightLayoutKind::GemmPanels, 16, 256};
  p.tensors[1].size = 256;
  auto back = program::deserialize(program::serialize(p), 1, "packed");
  REQUIRE(back);
  CHECK(back->tensors[1].layout == p.tensors[1].layout);
  CHECK_THAT(program::dump(*back, "g"), Catch::Contains("w0:gemm-panels(16x256)"));
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

TEST_CASE("float16-widened weights: a float32 tensor of its own shape, stored as float16", "[program]") {
  auto p = sampleProgram();
  p.tensors[1].layout = {cpu::WeightLayoutKind::Float16Widened, 0, 0};  // 64 bytes: the float32 size
  auto back = program::deserialize(program::serialize(p), 1, "widened");
  REQUIRE(back);
  CHECK(back->tensors[1].layout == p.tensors[1].layout);
  CHECK_THAT(program::dump(*back, "g"), Catch::Contains("w0:float16-widened"));
  auto expectError = [](program::Program q, const char* text) {
    auto r = program::deserialize(program::serialize(q), 1, "bad program");
    REQUIRE(!r);
    CHECK_THAT(r.error().message(), Catch::Contains(text));
  };
  auto q = p;
  q.tensors[1].size = 32;  // the float16 size
  expectError(q, "in layout float16-widened needs 64");
  q = p;
  q.tensors[1].layout.width = 8;
  expectError(q, "needs ?");
  q = p;
  q.tensors[2].layout = p.tensors[1].layout;  // an arena tensor
  expectError(q, "is only for float32 weights");
  q = p;
  q.tensors[1].type = ir::ElemType::Float16;
  q.tensors[1].size = 32;
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
  p.tensors[2].offset = 66;  // float32 elements two bytes off their alignment (a fuzzed offset byte)
  expectError(p, 1, "arena offset 66 is not a multiple of its 4-byte elements");
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
  // An op writing bytes it reads (through a view too) or two outputs sharing bytes: the plan never does it.
  p = sampleProgram();
  p.tensors.push_back({TensorKind::Arena, ir::ElemType::Float, {2, 4}, 0, 80, 32, "h2", {}});
  p.ops.push_back({ir::OpKind::Relu, 17, "relu", {2}, {5}, ops::defaultAttrsFor(ir::OpKind::Relu)});
  expectError(p, 1, "op 2 ('relu', Relu): output tensor 5 overlaps input tensor 2 in the arena");
  p.ops.back().inputs = {3};  // the view of tensor 2
  expectError(p, 1, "output tensor 5 overlaps input tensor 3 in the arena");
  p.tensors.back().offset = 0;  // apart from h: runs
  REQUIRE(program::deserialize(program::serialize(p), 1, "apart"));
  p.tensors.push_back({TensorKind::Arena, ir::ElemType::Float, {2, 4}, 0, 16, 32, "h3", {}});
  p.ops.push_back({ir::OpKind::Split, 17, "split", {2}, {5, 6}, ops::defaultAttrsFor(ir::OpKind::Split)});
  expectError(p, 1, "op 3 ('split', Split): output tensors 5 and 6 overlap in the arena");
}

TEST_CASE("load-time tensors: written once by an op of weights and earlier load-time tensors", "[program]") {
  // w (int8 weight) -> DequantizeLinear -> wf (load-time, gemm panels) -> MatMul B; and a Transpose at load of it.
  auto loadTimeProgram = [] {
    program::Program p;
    p.arenaSize = 0;
    const cpu::WeightLayout panels{cpu::WeightLayoutKind::GemmPanels, 8, 256};
    p.tensors = {
        {TensorKind::Input, ir::ElemType::Float, {2, 4}, 0, 0, 32, "x", {}},
        {TensorKind::Weight, ir::ElemType::Int8, {4, 8}, 0, 0, 32, "w", {}},
        {TensorKind::Weight, ir::ElemType::Float, {}, 1, 0, 4, "ws", {}},
        {TensorKind::LoadTime, ir::ElemType::Float, {4, 8}, 0, 0, 4 * 8 * 4, "wf", panels},
        {TensorKind::Output, ir::ElemType::Float, {2, 8}, 0, 0, 64, "y", {}},
    };
    p.ops = {{ir::OpKind::DequantizeLinear, 21, "dq", {1, 2, -1}, {3}, ops::defaultAttrsFor(ir::OpKind::DequantizeLinear)},
             {ir::OpKind::MatMul, 21, "mm", {0, 3}, {4}, ops::defaultAttrsFor(ir::OpKind::MatMul)}};
    p.inputs = {0};
    p.outputs = {4};
    return p;
  };
  auto p = loadTimeProgram();
  REQUIRE(program::validate(p, 2));
  CHECK(program::hasLoadTimeTensors(p));
  CHECK(program::isLoadTimeOp(p, p.ops[0]));
  CHECK(!program::isLoadTimeOp(p, p.ops[1]));
  auto bytes = program::serialize(p);
  auto back = program::deserialize(bytes, 2, "load-time program");
  REQUIRE(back);
  CHECK(program::serialize(*back) == bytes);
  CHECK_THAT(program::dump(*back, "g"), Catch::Contains("%3:float32[4x8]load:gemm-panels"));

  auto expectError = [](const program::Program& bad, const char* text) {
    auto r = program::deserialize(program::serialize(bad), 2, "bad program");
    REQUIRE(!r);
    CHECK_THAT(r.error().message(), Catch::Contains(text));
  };
  p = loadTimeProgram();
  p.ops[0].inputs[0] = 0;  // reads the run's input
  expectError(p, "a load-time op reads tensor 0 of kind input");
  p = loadTimeProgram();
  std::swap(p.ops[0], p.ops[1]);  // the MatMul still reads it, but a load-time op reading it must come after
  p.ops[0] = {ir::OpKind::Identity, 21, "copy", {3}, {3}, ops::OnnxAttrs{}};
  expectError(p, "written before it");
  p = loadTimeProgram();
  p.ops.erase(p.ops.begin());
  expectError(p, "is load-time but no op writes it");
  p = loadTimeProgram();
  p.ops[1].outputs = {4, 3};  // a run op writing a load-time tensor
  expectError(p, "writes tensor 3 of kind load-time");
  p = loadTimeProgram();
  p.ops.push_back(p.ops[0]);
  expectError(p, "is written twice");
  p = loadTimeProgram();
  p.tensors[3].type = ir::ElemType::Int32;
  expectError(p, "only for float32 weights and load-time tensors");
}

namespace {

// x [1, 4, 5, 5] -> Conv (group `group`, weight [4, 4 / group, 3, 3]) -> y, the Conv recording `algorithm`.
program::Program convProgram(int64_t group, cpu::ConvAlgorithm algorithm) {
  program::Program p;
  p.arenaSize = 0;
  const int64_t cg = 4 / group;
  p.tensors = {
      {TensorKind::Input, ir::ElemType::Float, {1, 4, 5, 5}, 0, 0, 400, "x", {}},
      {TensorKind::Weight, ir::ElemType::Float, {4, cg, 3, 3}, 0, 0, static_cast<uint64_t>(4 * cg * 9 * 4), "w", {}},
      {TensorKind::Output, ir::ElemType::Float, {1, 4, 3, 3}, 0, 0, 144, "y", {}},
  };
  ops::ConvAttrs attrs;
  attrs.group = group;
  program::Op conv{ir::OpKind::Conv, 17, "conv", {0, 1}, {2}, attrs};
  conv.kernel = cpu::KernelChoice{algorithm, 0};
  p.ops = {conv};
  p.inputs = {0};
  p.outputs = {2};
  return p;
}

}  // namespace

TEST_CASE("kernel choices: an optional section, round-tripped, and refused where the algorithm cannot run the op",
          "[program]") {
  // No choice: the bytes end with the output list, as before the section existed.
  const auto plain = program::serialize(convProgram(1, cpu::ConvAlgorithm::Heuristic));
  for (auto a : {cpu::ConvAlgorithm::Direct, cpu::ConvAlgorithm::Gemm, cpu::ConvAlgorithm::Panels,
                 cpu::ConvAlgorithm::GroupedBlocks}) {
    const auto bytes = program::serialize(convProgram(1, a));
    CHECK(bytes.size() == plain.size() + 8 + 4 + 9);
    CHECK(std::equal(plain.begin(), plain.end(), bytes.begin()));
    auto back = program::deserialize(bytes, 1, "chosen");
    REQUIRE(back);
    CHECK(back->ops[0].kernel.algorithm == a);
    CHECK(program::serialize(*back) == bytes);
    CHECK_THAT(program::dump(*back, "g"), Catch::Contains(fmt::format("kernel={}", cpu::convAlgorithmName(a))));
  }
  auto depthwise = program::deserialize(program::serialize(convProgram(4, cpu::ConvAlgorithm::DepthwiseSmallMap)), 1,
                                        "depthwise");
  CHECK(depthwise);
  auto refused = [](const program::Program& p, const char* text) {
    auto r = program::deserialize(program::serialize(p), 1, "hostile.bin");
    REQUIRE(!r);
    CHECK_THAT(r.error().message(), Catch::Contains(text));
    CHECK(!program::validate(p, 1));
  };
  // A hostile file picking the depthwise kernel for a dense Conv, or panels for a grouped one.
  refused(convProgram(1, cpu::ConvAlgorithm::DepthwiseSmallMap), "recorded kernel depthwise-small-map cannot run it");
  refused(convProgram(2, cpu::ConvAlgorithm::DepthwiseSmallMap), "are not depthwise");
  refused(convProgram(2, cpu::ConvAlgorithm::Panels), "panels need group 1");
  auto threeD = convProgram(1, cpu::ConvAlgorithm::GroupedBlocks);
  threeD.tensors[0].shape = {1, 4, 1, 5, 5};
  threeD.tensors[1].shape = {4, 4, 1, 3, 3};
  threeD.tensors[2].shape = {1, 4, 1, 3, 3};
  refused(threeD, "grouped-blocks computes 1-D and 2-D Convs only");
  auto onMatMul = sampleProgram();
  onMatMul.ops[0].kernel.algorithm = cpu::ConvAlgorithm::Direct;
  refused(onMatMul, "a kernel choice is for Conv, not MatMul");
  // Damaged sections: an unknown algorithm, a blocking no kernel reads, an op out of range, stray bytes.
  const auto bytes = program::serialize(convProgram(1, cpu::ConvAlgorithm::Direct));
  auto patched = [&](size_t fromEnd, uint8_t value) {
    auto b = bytes;
    b[b.size() - fromEnd] = static_cast<std::byte>(value);
    return program::deserialize(b, 1, "hostile.bin");
  };
  auto r = patched(5, 9);  // the algorithm byte
  REQUIRE(!r);
  CHECK_THAT(r.error().message(), Catch::Contains("unknown algorithm 9"));
  r = patched(4, 1);  // the blocking
  REQUIRE(!r);
  CHECK_THAT(r.error().message(), Catch::Contains("blocking"));
  r = patched(9, 3);  // the op index
  REQUIRE(!r);
  CHECK_THAT(r.error().message(), Catch::Contains("names op 3"));
  auto stray = plain;
  stray.push_back(std::byte{1});
  r = program::deserialize(stray, 1, "hostile.bin");
  REQUIRE(!r);
  for (size_t n = plain.size() + 1; n < bytes.size(); ++n)
    CHECK(!program::deserialize(std::span(bytes).first(n), 1, "truncated.bin"));
}

namespace {

// x [6] -> NonZero -> idx [1, <=6] (arena, bounded) -> Squeeze -> rows [<=6] (output, bounded).
program::Program boundedProgram() {
  program::Program p;
  p.arenaSize = 48;
  p.tensors = {
      {TensorKind::Input, ir::ElemType::Float, {6}, 0, 0, 24, "x", {}},
      {TensorKind::Arena, ir::ElemType::Int64, {1, 6}, 0, 0, 48, "idx", {}, 0b10},
      {TensorKind::Weight, ir::ElemType::Int64, {1}, 0, 0, 8, "axes", {}},
      {TensorKind::Output, ir::ElemType::Int64, {6}, 0, 0, 48, "rows", {}, 0b1},
  };
  p.ops = {{ir::OpKind::NonZero, 17, "nz", {0}, {1}, ops::OnnxAttrs{}},
           {ir::OpKind::Squeeze, 17, "sq", {1, 2}, {3}, ops::AxesAttrs{}}};
  p.inputs = {0};
  p.outputs = {3};
  return p;
}

}  // namespace

TEST_CASE("bounded tensors: encoding 5 records the mask, other programs keep encoding 4", "[program]") {
  auto bytes = program::serialize(boundedProgram());
  uint64_t magic = 0;
  std::memcpy(&magic, bytes.data(), sizeof magic);
  CHECK(magic == program::kProgramMagicBounded);
  auto p = program::deserialize(bytes, 1, "bounded program");
  REQUIRE(p);
  CHECK(p->tensors[1].bounded == 0b10);
  CHECK(p->tensors[3].bounded == 0b1);
  CHECK(program::hasBoundedTensors(*p));
  CHECK(program::serialize(*p) == bytes);
  CHECK_THAT(program::dump(*p, "g"), Catch::Contains("%1:int64[1x<=6]arena@0"));
  CHECK_THAT(program::dump(*p, "g"), Catch::Contains("%3:int64[<=6]out0"));
  // Without a bounded tensor the bytes are encoding 4's, as before.
  auto plain = program::serialize(sampleProgram());
  std::memcpy(&magic, plain.data(), sizeof magic);
  CHECK(magic == program::kProgramMagic);
  CHECK(!program::hasBoundedTensors(sampleProgram()));
  for (size_t n = 0; n < bytes.size(); ++n) CHECK(!program::deserialize(std::span(bytes.data(), n), 1, "cut"));
}

TEST_CASE("a bounded program input round-trips, and a crafted input mask naming a dimension past its rank is refused",
          "[program]") {
  auto p = boundedProgram();
  p.tensors[0].bounded = 1;  // x [<=6]: an input of at most 6 elements
  auto bytes = program::serialize(p);
  auto read = program::deserialize(bytes, 1, "bounded input");
  REQUIRE(read);
  CHECK(read->tensors[0].bounded == 1);
  CHECK_THAT(program::dump(*read, "g"), Catch::Contains("%0:float32[<=6]in0"));
  CHECK(program::fitsShape(read->tensors[0], std::vector<int64_t>{0}));
  CHECK(program::fitsShape(read->tensors[0], std::vector<int64_t>{6}));
  CHECK(!program::fitsShape(read->tensors[0], std::vector<int64_t>{7}));
  CHECK(!program::fitsShape(read->tensors[0], std::vector<int64_t>{-1}));
  CHECK(!program::fitsShape(read->tensors[0], std::vector<int64_t>{1, 6}));
  // The input's mask byte (after magic, arena size, tensor count, kind, type, rank and its one dim), changed in the
  // file's bytes: every mask naming a dimension at or past rank 1 is refused, naming the tensor.
  const size_t at = 8 + 8 + 4 + 1 + 4 + 4 + 8;
  REQUIRE(bytes[at] == std::byte{1});
  for (uint8_t mask : {uint8_t{0b10}, uint8_t{0b11}, uint8_t{0x80}, uint8_t{0xff}}) {
    auto changed = bytes;
    changed[at] = std::byte{mask};
    auto r = program::deserialize(changed, 1, "crafted.bin");
    REQUIRE(!r);
    CHECK(r.error().code() == ErrorCode::InvalidGraph);
    CHECK_THAT(r.error().message(), Catch::Contains("crafted.bin"));
    CHECK_THAT(r.error().message(), Catch::Contains("tensor 0 ('x')"));
    CHECK_THAT(r.error().message(), Catch::Contains("names a dimension past rank 1"));
  }
}

TEST_CASE("bounded tensors that break a rule are rejected with the reason", "[program]") {
  auto expectError = [](const program::Program& p, const char* text) {
    auto r = program::deserialize(program::serialize(p), 1, "bad program");
    REQUIRE(!r);
    CHECK_THAT(r.error().message(), Catch::Contains(text));
    auto v = program::validate(p, 1);
    REQUIRE(!v);
    CHECK_THAT(v.error().message(), Catch::Contains(text));
  };
  auto p = boundedProgram();
  p.tensors[1].bounded = 0b100;  // rank 2
  expectError(p, "names a dimension past rank 2");
  p = boundedProgram();
  p.tensors[2].bounded = 1;  // a weight
  expectError(p, "tensor kind weight cannot have a bounded shape");
  p = boundedProgram();
  p.tensors[0].bounded = 0b10;  // an input of rank 1
  expectError(p, "tensor 0 ('x')");
  expectError(p, "names a dimension past rank 1");
  p = boundedProgram();
  p.tensors.push_back({TensorKind::View, ir::ElemType::Int64, {6}, 1, 0, 48, "flat", {}});
  expectError(p, "with a static shape");
  // Encoding 5 with no bounded tensor: a second spelling of an encoding-4 program, refused. The mask byte of each
  // tensor follows its dims; clear them all.
  auto bytes = program::serialize(boundedProgram());
  size_t at = 8 + 8 + 4;
  for (const auto& t : boundedProgram().tensors) {
    at += 1 + 4 + 4 + 8 * t.shape.size();
    bytes[at] = std::byte{0};
    at += 1 + 4 + 8 + 8 + 4 + t.name.size() + 1 + 2 + 2;
  }
  auto r = program::deserialize(bytes, 1, "five");
  REQUIRE(!r);
  CHECK_THAT(r.error().message(), Catch::Contains("program encoding 5 but no tensor has a bounded dimension"));
}
