// NumPy .npy files: round trips for every supported dtype, numpy's own header spellings, malformed headers refused.
#include "test_helpers.h"

#include "ir/npy.h"

using namespace ctxkit;

namespace {

// A .npy file with the given version and header dict text (padded as numpy does), then `data`.
std::string npyFile(std::string_view dict, std::string_view data = {}, int major = 1) {
  std::string header(dict);
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) out += std::string(2, '\0');
  return out + header + std::string(data);
}

std::string parseError(std::string_view bytes) {
  auto t = ir::parseNpy(test::asBytes(bytes), "a.npy");
  REQUIRE_FALSE(t.isOk());
  return t.error().message();
}

std::string floats(std::vector<float> v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

}  // namespace

TEST_CASE("npy round trips for every supported dtype") {
  test::TempDir dir;
  std::vector<ir::Tensor> tensors = {
      ir::Tensor::fromVector(ir::ElemType::Float, {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6}),
      ir::Tensor::fromVector(ir::ElemType::Double, {2}, std::vector<double>{0.5, -1}),
      ir::Tensor::fromVector(ir::ElemType::Float16, {1}, std::vector<uint16_t>{0x3c00}),
      ir::Tensor::fromVector(ir::ElemType::Int64, {}, std::vector<int64_t>{-42}),
      ir::Tensor::fromVector(ir::ElemType::Int32, {1, 1, 2}, std::vector<int32_t>{7, -7}),
      ir::Tensor::fromVector(ir::ElemType::Int16, {2}, std::vector<int16_t>{300, -300}),
      ir::Tensor::fromVector(ir::ElemType::Int8, {2}, std::vector<int8_t>{-1, 1}),
      ir::Tensor::fromVector(ir::ElemType::Uint8, {3}, std::vector<uint8_t>{0, 128, 255}),
      ir::Tensor::fromVector(ir::ElemType::Uint16, {1}, std::vector<uint16_t>{65535}),
      ir::Tensor::fromVector(ir::ElemType::Uint32, {1}, std::vector<uint32_t>{4000000000u}),
      ir::Tensor::fromVector(ir::ElemType::Uint64, {1}, std::vector<uint64_t>{~uint64_t(0)}),
      ir::Tensor::fromVector(ir::ElemType::Bool, {2}, std::vector<uint8_t>{1, 0}),
      ir::Tensor::fromVector(ir::ElemType::Float, {0, 4}, std::vector<float>{}),
  };
  for (const ir::Tensor& t : tensors) {
    INFO(ir::elemTypeName(t.type()) << " " << ir::shapeToString(t.shape()));
    auto bytes = ir::serializeNpy(t);
    REQUIRE(bytes.isOk());
    CHECK(bytes->substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    size_t headerLength = static_cast<uint8_t>((*bytes)[8]) | static_cast<size_t>(static_cast<uint8_t>((*bytes)[9])) << 8;
    CHECK((10 + headerLength) % 64 == 0);
    CHECK((*bytes)[10 + headerLength - 1] == '\n');
    auto path = dir / "t.npy";
    REQUIRE(ir::saveNpy(t, path).isOk());
    auto back = ir::loadNpy(path);
    REQUIRE(back.isOk());
    CHECK(back->type() == t.type());
    CHECK(back->shape() == t.shape());
    REQUIRE(back->byteSize() == t.byteSize());
    CHECK((t.byteSize() == 0 || std::memcmp(back->data(), t.data(), t.byteSize()) == 0));
  }
}

TEST_CASE("npy headers are written as numpy writes them") {
  auto bytes = ir::serializeNpy(ir::Tensor::fromVector(ir::ElemType::Float, {2, 3}, std::vector<float>(6)));
  REQUIRE(bytes.isOk());
  CHECK(bytes->substr(10, 59) == "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  CHECK(bytes->size() == 128 + 24);
  auto vec = ir::serializeNpy(ir::Tensor::fromVector(ir::ElemType::Bool, {3}, std::vector<uint8_t>(3)));
  REQUIRE(vec.isOk());
  CHECK(test::contains(*vec, "'descr': '|b1'"));
  CHECK(test::contains(*vec, "'shape': (3,)"));
  auto scalar = ir::serializeNpy(ir::Tensor::fromVector(ir::ElemType::Int64, {}, std::vector<int64_t>{1}));
  REQUIRE(scalar.isOk());
  CHECK(test::contains(*scalar, "'shape': ()"));
}

TEST_CASE("npy reads versions 2.0 and 3.0 and numpy's other spellings") {
  auto v2 = ir::parseNpy(test::asBytes(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                                               floats({1, 2}), 2)), "v2");
  REQUIRE(v2.isOk());
  CHECK(v2->shape() == ir::Shape{2});
  auto v3 = ir::parseNpy(test::asBytes(npyFile("{\"shape\": (1L, 2L), \"descr\": \"<f4\", \"fortran_order\": False}",
                                               floats({1, 2}), 3)), "v3");
  REQUIRE(v3.isOk());
  CHECK(v3->shape() == ir::Shape{1, 2});
  // A vector in Fortran order has the same bytes as in C order.
  auto fortranVector = ir::parseNpy(test::asBytes(npyFile("{'descr':'|u1','fortran_order':True,'shape':(3,)}", "abc")), "f");
  REQUIRE(fortranVector.isOk());
  CHECK(fortranVector->type() == ir::ElemType::Uint8);
}

TEST_CASE("malformed npy files are refused with a reason") {
  std::string ok = npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", floats({1, 2}));
  REQUIRE(ir::parseNpy(test::asBytes(ok), "ok").isOk());

  CHECK(parseError("\x93NUMPY") == "loading 'a.npy': file is 6 bytes; expected at least 10 for a NumPy header");
  CHECK(test::contains(parseError("PK\x03\x04 not numpy at all"), "magic"));
  CHECK(test::contains(parseError(ok.substr(0, 40)), "header of 118 bytes exceeds file size 40"));
  std::string v4 = ok;
  v4[6] = 4;
  CHECK(test::contains(parseError(v4), "format version 4.0 is not supported"));
  std::string hugeHeader = npyFile("{}", "", 2);
  hugeHeader[10] = '\x7f';  // header length 0x7f00xx
  CHECK(test::contains(parseError(hugeHeader), "expected at most 65536"));

  CHECK(test::contains(parseError(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", floats({1}))),
                       "data is 4 bytes; expected 8 for a float32 array of shape 2"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                                          floats({1, 2, 3}))),
                       "data is 12 bytes; expected 8"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                                          floats({1, 2, 3, 4}))),
                       "Fortran order; expected C order"));
  CHECK(test::contains(parseError(npyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", floats({1}))),
                       "big-endian"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", floats({1, 2}))),
                       "dtype '<c8' is not supported"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<f4', 'fortran_order': False}")), "header lacks 'shape'"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}")),
                       "key 'descr' twice"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}")),
                       "unknown key 'x'"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}")),
                       "expected a non-negative integer"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<f4', 'fortran_order': Maybe, 'shape': ()}")),
                       "expected True or False"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<f4, 'fortran_order': False, 'shape': ()}")), "header"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': ()} trailing")),
                       "after its closing brace"));
  CHECK(test::contains(parseError(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}")),
                       "expected ',' or ')'"));
  CHECK(test::contains(
      parseError(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}")),
      "overflows"));
  std::string manyDims = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 70; ++i) manyDims += "1,";
  CHECK(test::contains(parseError(npyFile(manyDims + ")}")), "more than 64 dimensions"));
}

TEST_CASE("npy writing refuses types numpy files cannot hold here") {
  auto bf16 = ir::serializeNpy(ir::Tensor::fromVector(ir::ElemType::BFloat16, {1}, std::vector<uint16_t>{0}));
  REQUIRE_FALSE(bf16.isOk());
  CHECK(test::contains(bf16.error().message(), "bfloat16"));
  CHECK_FALSE(ir::serializeNpy(ir::Tensor::strings({1}, {"s"})).isOk());
  auto missing = ir::loadNpy("/nonexistent/ctxkit/a.npy");
  REQUIRE_FALSE(missing.isOk());
  CHECK(test::contains(missing.error().message(), "loading '/nonexistent/ctxkit/a.npy'"));
}
