// A tiny protobuf wire-format encoder for tests that must build messages our writer refuses to produce.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::test {

// Field numbers from onnx.proto, for the messages the tests forge.
namespace field {
constexpr int kModelIrVersion = 1, kModelGraph = 7, kModelOpset = 8;
constexpr int kOpsetDomain = 1, kOpsetVersion = 2;
constexpr int kGraphNode = 1, kGraphName = 2, kGraphInitializer = 5;
constexpr int kNodeOpType = 4, kNodeAttribute = 5;
constexpr int kAttrName = 1, kAttrG = 6, kAttrType = 20;
constexpr int kTensorDims = 1, kTensorDataType = 2, kTensorFloatData = 4, kTensorInt32Data = 5,
              kTensorStringData = 6, kTensorInt64Data = 7, kTensorName = 8, kTensorRawData = 9,
              kTensorDoubleData = 10, kTensorUint64Data = 11, kTensorExternalData = 13, kTensorDataLocation = 14;
constexpr int kEntryKey = 1, kEntryValue = 2;
}  // namespace field

class ProtoBytes {
public:
  ProtoBytes& varint(int number, uint64_t v) {
    tag(number, 0);
    putVarint(v);
    return *this;
  }
  ProtoBytes& bytes(int number, std::string_view v) {
    tag(number, 2);
    putVarint(v.size());
    out_.append(v);
    return *this;
  }
  ProtoBytes& message(int number, const ProtoBytes& m) { return bytes(number, m.str()); }
  ProtoBytes& packedVarints(int number, const std::vector<int64_t>& values) {
    ProtoBytes body;
    for (int64_t v : values) body.putVarint(static_cast<uint64_t>(v));
    return bytes(number, body.str());
  }
  template <typename T>
  ProtoBytes& packedFixed(int number, const std::vector<T>& values) {
    std::string body(values.size() * sizeof(T), '\0');
    if (!values.empty()) std::memcpy(body.data(), values.data(), body.size());
    return bytes(number, body);
  }
  const std::string& str() const { return out_; }

private:
  void tag(int number, int wireType) { putVarint(static_cast<uint64_t>(number) << 3 | static_cast<uint64_t>(wireType)); }
  void putVarint(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  std::string out_;
};

}  // namespace ctxkit::test
