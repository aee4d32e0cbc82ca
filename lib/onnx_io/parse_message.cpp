// Parsing a protobuf message from bytes, and saying why bytes that protobuf refuses do not parse.
#include "onnx_io/proto_convert.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>

#include <climits>
#include <cstdint>

namespace ctxkit::onnx_io::detail {

namespace {

namespace pb = google::protobuf;

// Each nested graph costs about three message levels (graph, node, attribute); leave room so that our own depth
// check, with its clearer message, is the one that fires for subgraphs nested a little too deep.
constexpr int kMaxMessageDepth = kMaxGraphDepth * 4 + 32;

// A walk of the wire format in protobuf's order that stops at the first fault protobuf would stop at: the data
// ending inside a field, a field that cannot be, or a message nested deeper than kMaxMessageDepth. The schema
// (`descriptor`) only tells which length-delimited fields are messages to walk into; unknown fields are skipped,
// as protobuf skips them.
class WireWalk {
public:
  explicit WireWalk(std::span<const std::byte> bytes)
      : begin_(reinterpret_cast<const uint8_t*>(bytes.data())), end_(begin_ + bytes.size()) {}

  // The fault, or "" when the walk finds none.
  std::string fault(const pb::Descriptor& descriptor) {
    const uint8_t* p = begin_;
    walk(p, end_, &descriptor, 0, 0);
    return fault_;
  }
  // Whether the fault is nesting deeper than kMaxMessageDepth.
  bool nested() const { return nested_; }

private:
  size_t offset(const uint8_t* p) const { return static_cast<size_t>(p - begin_); }

  bool readVarint(const uint8_t*& p, const uint8_t* end, uint64_t& value, std::string_view what) {
    const uint8_t* start = p;
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p == end) return fail(fmt::format("the data ends inside {} at byte {}", what, offset(start)));
      const uint8_t b = *p++;
      value |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return fail(fmt::format("{} at byte {} is longer than 10 bytes", what, offset(start)));
  }

  bool fail(std::string reason) {
    fault_ = std::move(reason);
    return false;
  }

  static std::string fieldName(const pb::Descriptor* d, uint64_t number) {
    const pb::FieldDescriptor* f = d ? d->FindFieldByNumber(static_cast<int>(number)) : nullptr;
    if (f) return std::string(f->full_name());
    return d ? fmt::format("field {} of {}", number, d->full_name()) : fmt::format("field {}", number);
  }

  // Walks fields in [p, end) of a message of type `d` (null: unknown) at nesting `depth`; `group` is the field
  // number of the group being walked, 0 for a length-delimited message. Returns false at a fault.
  bool walk(const uint8_t*& p, const uint8_t* end, const pb::Descriptor* d, int depth, uint64_t group) {
    while (p < end) {
      const uint8_t* at = p;
      uint64_t tag = 0;
      if (!readVarint(p, end, tag, "a field tag")) return false;
      const uint64_t number = tag >> 3;
      const unsigned wire = static_cast<unsigned>(tag & 7);
      if (number == 0 || number > 0x1fffffff)
        return fail(fmt::format("field number {} at byte {} is not a valid field number", number, offset(at)));
      uint64_t value = 0;
      switch (wire) {
        case 0:
          if (!readVarint(p, end, value, fmt::format("the value of {}", fieldName(d, number)))) return false;
          break;
        case 1:
        case 5: {
          const size_t size = wire == 1 ? 8 : 4;
          if (static_cast<size_t>(end - p) < size)
            return fail(fmt::format("the data ends inside the {}-byte value of {} at byte {}", size,
                                    fieldName(d, number), offset(at)));
          p += size;
          break;
        }
        case 2: {
          if (!readVarint(p, end, value, fmt::format("the length of {}", fieldName(d, number)))) return false;
          if (value > static_cast<uint64_t>(end - p))
            return fail(fmt::format("{} at byte {} is {} bytes long but only {} remain", fieldName(d, number),
                                    offset(at), value, end - p));
          const pb::FieldDescriptor* f = d ? d->FindFieldByNumber(static_cast<int>(number)) : nullptr;
          const uint8_t* fieldEnd = p + value;
          if (f && f->type() == pb::FieldDescriptor::TYPE_MESSAGE) {
            if (depth + 1 > kMaxMessageDepth) return nestedTooDeep(at);
            const uint8_t* inner = p;
            if (!walk(inner, fieldEnd, f->message_type(), depth + 1, 0)) return false;
          }
          p = fieldEnd;
          break;
        }
        case 3:
          if (depth + 1 > kMaxMessageDepth) return nestedTooDeep(at);
          if (!walk(p, end, nullptr, depth + 1, number)) return false;
          break;
        case 4:
          if (group != number)
            return fail(fmt::format("an end-group tag for field {} at byte {} closes no group", number, offset(at)));
          return true;
        default:
          return fail(fmt::format("field {} at byte {} has wire type {}, which protobuf does not have", number,
                                  offset(at), wire));
      }
    }
    if (group != 0) return fail(fmt::format("the data ends inside group field {}", group));
    return true;
  }

  bool nestedTooDeep(const uint8_t* at) {
    nested_ = true;
    return fail(fmt::format("messages are nested more than {} levels deep (at byte {})", kMaxMessageDepth, offset(at)));
  }

  const uint8_t* begin_;
  const uint8_t* end_;
  std::string fault_;
  bool nested_ = false;
};

}  // namespace

Status parseMessage(pb::Message& message, std::span<const std::byte> bytes, std::string_view what) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return makeError(ErrorCode::Unsupported, "{} is {} bytes; protobuf cannot parse more than {} (2 GiB)", what,
                     bytes.size(), INT_MAX);
  try {
    pb::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
    in.SetTotalBytesLimit(INT_MAX);
    in.SetRecursionLimit(kMaxMessageDepth);
    if (message.ParseFromCodedStream(&in) && in.ConsumedEntireMessage()) return Status::ok();
  } catch (...) {
  }
  WireWalk walk(bytes);
  const std::string fault = walk.fault(*message.GetDescriptor());
  if (walk.nested())
    return makeError(ErrorCode::InvalidGraph,
                     "{}: {}; a model may nest subgraphs (If, Loop, Scan bodies) at most {} levels deep", what, fault,
                     kMaxGraphDepth);
  if (fault.empty()) return makeError(ErrorCode::InvalidGraph, "malformed or truncated {}", what);
  return makeError(ErrorCode::InvalidGraph, "malformed or truncated {}: {}", what, fault);
}

}  // namespace ctxkit::onnx_io::detail
