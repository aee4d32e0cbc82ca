// TensorProto files: every typed field, every element type by number, and forged tensors refused with reasons.
#include "proto_bytes.h"
#include "test_helpers.h"

#include "onnx_io/onnx_io.h"

using namespace ctxkit;
using test::ProtoBytes;
namespace field = test::field;

namespace {

ProtoBytes tensorHeader(std::vector<int64_t> dims, int dataType) {
  ProtoBytes t;
  t.packedVarints(field::kTensorDims, dims).varint(field::kTensorDataType, static_cast<uint64_t>(dataType));
  t.bytes(field::kTensorName, "t");
  return t;
}

ir::Tensor parsed(const ProtoBytes& t) {
  auto r = onnx_io::parseTensor(test::asBytes(t.str()), "t.pb");
  INFO((r.isOk() ? std::string() : r.error().message()));
  REQUIRE(r.isOk());
  return std::move(r).value();
}

std::string refused(const ProtoBytes& t) {
  auto r = onnx_io::parseTensor(test::asBytes(t.str()), "t.pb");
  REQUIRE_FALSE(r.isOk());
  return r.error().message();
}

template <typename T>
std::vector<T> values(const ir::Tensor& t) {
  return std::vector<T>(t.dataAs<T>(), t.dataAs<T>() + t.byteSize() / sizeof(T));
}

}  // namespace

TEST_CASE("tensors survive serializeTensor and parseTensor") {
  std::vector<ir::Tensor> tensors = {
      ir::Tensor::fromVector(ir::ElemType::Float, {2, 2}, std::vector<float>{1, 2, 3, 4}),
      ir::Tensor::fromVector(ir::ElemType::Int64, {}, std::vector<int64_t>{-9}),
      ir::Tensor::fromVector(ir::ElemType::Uint8, {0}, std::vector<uint8_t>{}),
      ir::Tensor::fromVector(ir::ElemType::BFloat16, {1}, std::vector<uint16_t>{0x3f80}),
      ir::Tensor::fromVector(ir::ElemType::Float8E8M0, {2}, std::vector<uint8_t>{127, 128}),  // no name in onnx 1.12
      ir::Tensor::fromVector(ir::ElemType::Int2, {5}, std::vector<uint8_t>{0xe4, 0x01}),
      ir::Tensor::strings({3}, {"x", "", "zz"}),
  };
  for (const ir::Tensor& t : tensors) {
    INFO(ir::elemTypeName(t.type()));
    auto bytes = onnx_io::serializeTensor(t, "named");
    REQUIRE(bytes.isOk());
    std::string name;
    auto back = onnx_io::parseTensor(test::asBytes(*bytes), "mem", &name);
    REQUIRE(back.isOk());
    CHECK(name == "named");
    CHECK(back->type() == t.type());
    CHECK(back->shape() == t.shape());
    CHECK(back->stringValues() == t.stringValues());
    REQUIRE(back->byteSize() == t.byteSize());
    CHECK((t.byteSize() == 0 || std::memcmp(back->data(), t.data(), t.byteSize()) == 0));
  }
}

TEST_CASE("typed fields decode per ONNX's rules") {
  SECTION("float_data") {
    ProtoBytes t = tensorHeader({3}, 1);
    t.packedFixed(field::kTensorFloatData, std::vector<float>{1.5f, -2, 0});
    CHECK(values<float>(parsed(t)) == std::vector<float>{1.5f, -2, 0});
  }
  SECTION("complex64 uses two float_data entries per element") {
    ProtoBytes t = tensorHeader({1}, 14);
    t.packedFixed(field::kTensorFloatData, std::vector<float>{1, 2});
    CHECK(parsed(t).byteSize() == 8);
  }
  SECTION("int32_data carries narrow types in its low bytes") {
    ProtoBytes i8 = tensorHeader({3}, 3);
    i8.packedVarints(field::kTensorInt32Data, {-1, 5, -128});
    CHECK(values<int8_t>(parsed(i8)) == std::vector<int8_t>{-1, 5, -128});
    ProtoBytes f16 = tensorHeader({2}, 10);
    f16.packedVarints(field::kTensorInt32Data, {0x3c00, 0xc000});
    CHECK(values<uint16_t>(parsed(f16)) == std::vector<uint16_t>{0x3c00, 0xc000});
    ProtoBytes b = tensorHeader({2}, 9);
    b.packedVarints(field::kTensorInt32Data, {1, 0});
    CHECK(values<uint8_t>(parsed(b)) == std::vector<uint8_t>{1, 0});
    ProtoBytes i32 = tensorHeader({2}, 6);
    i32.packedVarints(field::kTensorInt32Data, {-7, 1 << 30});
    CHECK(values<int32_t>(parsed(i32)) == std::vector<int32_t>{-7, 1 << 30});
  }
  SECTION("int32_data holds one packed byte of 4-bit values per entry") {
    ProtoBytes t = tensorHeader({3}, 22);
    t.packedVarints(field::kTensorInt32Data, {0x21, 0x03});
    CHECK(values<uint8_t>(parsed(t)) == std::vector<uint8_t>{0x21, 0x03});
  }
  SECTION("int64, double, uint64 and string fields") {
    ProtoBytes i64 = tensorHeader({2}, 7);
    i64.packedVarints(field::kTensorInt64Data, {-3, 1LL << 50});
    CHECK(values<int64_t>(parsed(i64)) == std::vector<int64_t>{-3, 1LL << 50});
    ProtoBytes f64 = tensorHeader({1}, 11);
    f64.packedFixed(field::kTensorDoubleData, std::vector<double>{0.125});
    CHECK(values<double>(parsed(f64)) == std::vector<double>{0.125});
    ProtoBytes u32 = tensorHeader({2}, 12);
    u32.packedVarints(field::kTensorUint64Data, {4000000000LL, 1});
    CHECK(values<uint32_t>(parsed(u32)) == std::vector<uint32_t>{4000000000u, 1});
    ProtoBytes u64 = tensorHeader({1}, 13);
    u64.packedVarints(field::kTensorUint64Data, {-1});
    CHECK(values<uint64_t>(parsed(u64)) == std::vector<uint64_t>{~uint64_t(0)});
    ProtoBytes s = tensorHeader({2}, 8);
    s.bytes(field::kTensorStringData, "ab").bytes(field::kTensorStringData, "");
    CHECK(parsed(s).stringValues() == std::vector<std::string>{"ab", ""});
  }
}

TEST_CASE("forged tensors are refused with found and expected") {
  CHECK(refused(tensorHeader({2}, 1)) ==
        "loading 't.pb': tensor 't': float32 tensor of shape 2 has no data; expected 2 values in float_data or raw_data");
  ProtoBytes shortField = tensorHeader({2, 2}, 1);
  shortField.packedFixed(field::kTensorFloatData, std::vector<float>{1, 2, 3});
  CHECK(test::contains(refused(shortField), "float_data has 3 values; expected 4 for a float32 tensor of shape 2x2"));
  ProtoBytes wrongField = tensorHeader({1}, 1);
  wrongField.packedVarints(field::kTensorInt64Data, {1});
  CHECK(test::contains(refused(wrongField), "carries values in int64_data; expected float_data"));
  ProtoBytes both = tensorHeader({1}, 1);
  both.packedFixed(field::kTensorFloatData, std::vector<float>{1}).bytes(field::kTensorRawData, std::string(4, '\0'));
  CHECK(test::contains(refused(both), "both raw_data and float_data"));
  ProtoBytes negative = tensorHeader({2, -3}, 1);
  CHECK(test::contains(refused(negative), "dimension 1 is -3; expected >= 0"));
  ProtoBytes huge = tensorHeader({1LL << 40, 1LL << 40}, 1);
  huge.bytes(field::kTensorRawData, "abcd");
  CHECK(test::contains(refused(huge), "overflows"));
  CHECK(test::contains(refused(tensorHeader({1}, 99)), "element type 99 is not a known ONNX type"));
  CHECK(test::contains(refused(tensorHeader({1}, 0)), "element type is undefined"));
  ProtoBytes stringRaw = tensorHeader({1}, 8);
  stringRaw.bytes(field::kTensorRawData, "x");
  CHECK(test::contains(refused(stringRaw), "string tensor has raw_data; expected string_data"));
  std::string garbage = "\x0a\xff\xff";
  auto r = onnx_io::parseTensor(test::asBytes(garbage), "g.pb");
  REQUIRE_FALSE(r.isOk());
  CHECK(r.error().message() ==
        "loading 'g.pb': malformed or truncated ONNX TensorProto: the data ends inside the length of "
        "onnx.TensorProto.dims at byte 1");
}

TEST_CASE("external data in a tensor needs a folder to resolve against") {
  ProtoBytes location;
  location.bytes(field::kEntryKey, "location").bytes(field::kEntryValue, "t.bin");
  ProtoBytes t = tensorHeader({2}, 1);
  t.message(field::kTensorExternalData, location).varint(field::kTensorDataLocation, 1);
  CHECK(test::contains(refused(t), "external data 't.bin' cannot be resolved"));

  test::TempDir dir;
  test::writeFile(dir / "t.pb", t.str());
  std::vector<float> v = {3, 4};
  test::writeFile(dir / "t.bin", std::string(reinterpret_cast<const char*>(v.data()), 8));
  auto loaded = onnx_io::loadTensorFile(dir / "t.pb");
  REQUIRE(loaded.isOk());
  CHECK(values<float>(*loaded) == v);
}
