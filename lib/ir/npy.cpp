// NumPy .npy reader (format 1.0-3.0) and writer (format 1.0): a bounded header parser, checked data sizes.
#include "ir/npy.h"

#include "support/checked.h"
#include "support/file_io.h"

#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <optional>
#include <string_view>

namespace ctxkit::ir {

static_assert(std::endian::native == std::endian::little, ".npy data is read and written as little-endian");

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kMaxHeaderBytes = 65536;  // numpy itself refuses headers above 10000 bytes by default
constexpr size_t kMaxRank = 64;
constexpr size_t kHeaderAlignment = 64;

struct Dtype {
  std::string_view descr;
  ElemType type;
};

// Writers use the first spelling listed for a type; 1-byte types are also accepted with '<' or '|'.
constexpr std::array<Dtype, 15> kDtypes = {{
    {"<f4", ElemType::Float},
    {"<f8", ElemType::Double},
    {"<f2", ElemType::Float16},
    {"<i8", ElemType::Int64},
    {"<i4", ElemType::Int32},
    {"<i2", ElemType::Int16},
    {"|i1", ElemType::Int8},
    {"<i1", ElemType::Int8},
    {"|u1", ElemType::Uint8},
    {"<u1", ElemType::Uint8},
    {"<u2", ElemType::Uint16},
    {"<u4", ElemType::Uint32},
    {"<u8", ElemType::Uint64},
    {"|b1", ElemType::Bool},
    {"<b1", ElemType::Bool},
}};

struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortranOrder;
  std::optional<Shape> shape;
};

// Parses the Python dict literal numpy writes, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  Expected<Header> parse() {
    Header h;
    CTX_RETURN_IF_ERROR(expect('{'));
    while (true) {
      skipSpace();
      if (peek() == '}') break;
      CTX_ASSIGN_OR_RETURN(std::string key, parseString());
      CTX_RETURN_IF_ERROR(expect(':'));
      if (key == "descr") {
        if (h.descr) return duplicate(key);
        CTX_ASSIGN_OR_RETURN(h.descr, parseString());
      } else if (key == "fortran_order") {
        if (h.fortranOrder) return duplicate(key);
        CTX_ASSIGN_OR_RETURN(h.fortranOrder, parseBool());
      } else if (key == "shape") {
        if (h.shape) return duplicate(key);
        CTX_ASSIGN_OR_RETURN(h.shape, parseShape());
      } else {
        return makeError(ErrorCode::InvalidGraph, "header has unknown key '{}'; expected descr, fortran_order, shape",
                         key);
      }
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}')
        return makeError(ErrorCode::InvalidGraph, "header has {} at byte {}; expected ',' or '}}'", found(), pos_);
    }
    ++pos_;
    for (; pos_ < text_.size(); ++pos_)
      if (!isSpace(text_[pos_]))
        return makeError(ErrorCode::InvalidGraph, "header has '{}' after its closing brace at byte {}", text_[pos_],
                         pos_);
    if (!h.descr || !h.fortranOrder || !h.shape)
      return makeError(ErrorCode::InvalidGraph, "header lacks '{}'",
                       !h.descr          ? "descr"
                       : !h.fortranOrder ? "fortran_order"
                                         : "shape");
    return h;
  }

private:
  static bool isSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skipSpace() {
    while (pos_ < text_.size() && isSpace(text_[pos_])) ++pos_;
  }

  Status expect(char c) {
    skipSpace();
    if (peek() != c)
      return makeError(ErrorCode::InvalidGraph, "header has {} at byte {}; expected '{}'", found(), pos_, c);
    ++pos_;
    return Status::ok();
  }

  std::string found() const { return pos_ < text_.size() ? fmt::format("'{}'", text_[pos_]) : "its end"; }

  static Error duplicate(const std::string& key) {
    return makeError(ErrorCode::InvalidGraph, "header has key '{}' twice", key);
  }

  Expected<std::string> parseString() {
    skipSpace();
    char quote = peek();
    if (quote != '\'' && quote != '"')
      return makeError(ErrorCode::InvalidGraph, "header has {} at byte {}; expected a quoted string", found(), pos_);
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos)
      return makeError(ErrorCode::InvalidGraph, "header string at byte {} is not terminated", pos_);
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    if (s.find('\\') != std::string::npos)
      return makeError(ErrorCode::InvalidGraph, "header string at byte {} has an escape; none are expected", pos_);
    pos_ = end + 1;
    return s;
  }

  Expected<bool> parseBool() {
    skipSpace();
    for (auto [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}})
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    return makeError(ErrorCode::InvalidGraph, "header has {} at byte {}; expected True or False", found(), pos_);
  }

  Expected<Shape> parseShape() {
    CTX_RETURN_IF_ERROR(expect('('));
    Shape shape;
    while (true) {
      skipSpace();
      if (peek() == ')') break;
      if (shape.size() == kMaxRank)
        return makeError(ErrorCode::InvalidGraph, "shape has more than {} dimensions", kMaxRank);
      int64_t d = 0;
      auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), d);
      if (ec != std::errc() || d < 0)
        return makeError(ErrorCode::InvalidGraph, "shape has {} at byte {}; expected a non-negative integer", found(),
                         pos_);
      pos_ = static_cast<size_t>(end - text_.data());
      if (peek() == 'L') ++pos_;  // Python 2 long literals
      shape.push_back(d);
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')')
        return makeError(ErrorCode::InvalidGraph, "shape has {} at byte {}; expected ',' or ')'", found(), pos_);
    }
    ++pos_;
    return shape;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

Expected<ElemType> typeFromDescr(const std::string& descr) {
  for (const Dtype& d : kDtypes)
    if (d.descr == descr) return d.type;
  if (!descr.empty() && descr[0] == '>')
    return makeError(ErrorCode::Unsupported, "dtype '{}' is big-endian; expected little-endian ('<')", descr);
  return makeError(ErrorCode::Unsupported,
                   "dtype '{}' is not supported; expected one of <f4 <f8 <f2 <i8 <i4 <i2 |i1 |u1 <u2 <u4 <u8 |b1",
                   descr);
}

uint32_t readLittle(std::span<const std::byte> bytes, size_t offset, size_t width) {
  uint32_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= static_cast<uint32_t>(bytes[offset + i]) << (8 * i);
  return v;
}

Expected<Tensor> parseNpyImpl(std::span<const std::byte> bytes) {
  if (bytes.size() < 10)
    return makeError(ErrorCode::InvalidGraph, "file is {} bytes; expected at least 10 for a NumPy header",
                     bytes.size());
  if (std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0)
    return makeError(ErrorCode::InvalidGraph, "not a NumPy file: the magic string \\x93NUMPY is missing");
  auto major = static_cast<unsigned>(bytes[6]);
  auto minor = static_cast<unsigned>(bytes[7]);
  size_t prefix = 0, headerLength = 0;
  if (major == 1 && minor == 0) {
    prefix = 10;
    headerLength = readLittle(bytes, 8, 2);
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (bytes.size() < 12)
      return makeError(ErrorCode::InvalidGraph, "file is {} bytes; expected at least 12 for a version {}.0 header",
                       bytes.size(), major);
    prefix = 12;
    headerLength = readLittle(bytes, 8, 4);
  } else {
    return makeError(ErrorCode::Unsupported, "format version {}.{} is not supported; expected 1.0, 2.0 or 3.0", major,
                     minor);
  }
  if (headerLength > kMaxHeaderBytes)
    return makeError(ErrorCode::InvalidGraph, "header is {} bytes; expected at most {}", headerLength, kMaxHeaderBytes);
  if (!rangeFits(prefix, headerLength, bytes.size()))
    return makeError(ErrorCode::InvalidGraph, "header of {} bytes exceeds file size {}", headerLength, bytes.size());

  std::string_view text(reinterpret_cast<const char*>(bytes.data()) + prefix, headerLength);
  auto header = HeaderParser(text).parse();
  if (!header) return header.takeError();
  CTX_ASSIGN_OR_RETURN(ElemType type, typeFromDescr(*header->descr));
  Shape& shape = *header->shape;
  // Below rank 2 the two orders lay out the same bytes.
  if (*header->fortranOrder && shape.size() > 1)
    return makeError(ErrorCode::Unsupported, "array of shape {} is in Fortran order; expected C order",
                     shapeToString(shape));
  auto count = elementCount(shape);
  auto needed = count ? storageBytes(type, *count) : std::nullopt;
  if (!needed) return makeError(ErrorCode::InvalidGraph, "element count of shape {} overflows", shapeToString(shape));
  auto data = bytes.subspan(prefix + headerLength);
  if (data.size() != *needed)
    return makeError(ErrorCode::InvalidGraph, "data is {} bytes; expected {} for a {} array of shape {}", data.size(),
                     *needed, elemTypeName(type), shapeToString(shape));
  return Tensor::copyOf(type, std::move(shape), data);
}

}  // namespace

Expected<Tensor> parseNpy(std::span<const std::byte> bytes, std::string_view displayName) {
  auto t = parseNpyImpl(bytes);
  if (!t) t.addContext(fmt::format("loading '{}'", displayName));
  return t;
}

Expected<Tensor> loadNpy(const std::filesystem::path& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.takeError().addContext(fmt::format("loading '{}'", path.string()));
  return parseNpy((*mapped)->bytes(), path.string());
}

Expected<std::string> serializeNpy(const Tensor& tensor) {
  std::string_view descr;
  for (const Dtype& d : kDtypes)
    if (d.type == tensor.type()) {
      descr = d.descr;
      break;
    }
  if (descr.empty())
    return makeError(ErrorCode::Unsupported, "cannot write a {} tensor as .npy", elemTypeName(tensor.type()));
  std::string shape = "(";
  for (size_t i = 0; i < tensor.rank(); ++i) shape += (i ? ", " : "") + std::to_string(tensor.shape()[i]);
  shape += tensor.rank() == 1 ? ",)" : ")";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  // Magic (6) + version (2) + length (2) + dict + padding spaces + '\n', a multiple of 64 bytes in all.
  size_t total = alignUp(10 + dict.size() + 1, kHeaderAlignment);
  size_t headerLength = total - 10;
  if (headerLength > 0xffff)
    return makeError(ErrorCode::Unsupported, "header of {} bytes does not fit format 1.0", headerLength);
  std::string out;
  out.reserve(total + tensor.byteSize());
  out += kMagic;
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(headerLength & 0xff);
  out += static_cast<char>(headerLength >> 8);
  out += dict;
  out.append(total - out.size() - 1, ' ');
  out += '\n';
  if (tensor.byteSize() > 0) out.append(reinterpret_cast<const char*>(tensor.data()), tensor.byteSize());
  return out;
}

Status saveNpy(const Tensor& tensor, const std::filesystem::path& path) {
  auto bytes = serializeNpy(tensor);
  if (!bytes) return bytes.takeError().addContext(fmt::format("saving '{}'", path.string()));
  return writeFileAtomically(path, *bytes);
}

}  // namespace ctxkit::ir
