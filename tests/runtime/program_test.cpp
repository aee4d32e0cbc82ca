// Program encoding: round trip, and rejection of programs that break a rule, at every truncation.
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
      {TensorKind::Input, ir::ElemType::Float, {2, 4}, 0, 0, 32, "x"},
      {TensorKind::Weight, ir::ElemType::Float, {4, 4}, 0, 0, 64, "w"},
      {TensorKind::Arena, ir::ElemType::Float, {2, 4}, 0, 64, 32, "h"},
      {TensorKind::View, ir::ElemType::Float, {8}, 2, 0, 32, "flat"},
      {TensorKind::Output, ir::ElemType::Float, {8}, 0, 0, 32, "y"},
  };
  program::Op matmul{ir::OpKind::MatMul, 17, "mm", {}, {0, 1}, {2}};
  program::Op relu{ir::OpKind::Relu, 17, "relu", {}, {3}, {4}};
  relu.attrs.set(ir::Attribute::makeString("note", "typed attributes survive"));
  relu.attrs.set(ir::Attribute::makeInts("ints", {1, -2, 3}));
  relu.attrs.set(ir::Attribute::makeFloat("alpha", 0.5f));
  p.ops = {matmul, relu};
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
  CHECK(p->ops[1].attrs.getString("note") == "typed attributes survive");
  CHECK(p->ops[1].attrs.getInts("ints") == std::vector<int64_t>{1, -2, 3});
  CHECK(p->ops[1].attrs.getFloat("alpha", 0) == 0.5f);
  CHECK(program::serialize(*p) == bytes);
  CHECK_THAT(program::dump(*p, "g"), Catch::Contains("MatMul"));
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
