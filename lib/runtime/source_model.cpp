// A protobuf wire-format walk over ModelProto -> GraphProto -> TensorProto, reading only what a weight needs.
#include "runtime/source_model.h"

#include "support/checked.h"
#include "support/file_io.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace ctxkit::runtime {

namespace fs = std::filesystem;

namespace {

// ONNX field numbers (onnx.proto): ModelProto.graph, GraphProto.initializer, TensorProto's fields.
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphNode = 1;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kNodeOutput = 2;
constexpr uint32_t kNodeOpType = 4;
constexpr uint32_t kNodeAttribute = 5;
constexpr uint32_t kNodeDomain = 7;
constexpr uint32_t kAttributeName = 1;
constexpr uint32_t kAttributeTensor = 5;
constexpr uint32_t kAttributeGraph = 6;
constexpr uint32_t kAttributeGraphs = 11;
// If/Loop/Scan bodies nest; a model nesting deeper than this is refused rather than read on the stack.
constexpr int kMaxGraphDepth = 64;
enum TensorField : uint32_t {
  kDims = 1,
  kDataType = 2,
  kSegment = 3,
  kFloatData = 4,
  kInt32Data = 5,
  kStringData = 6,
  kInt64Data = 7,
  kName = 8,
  kRawData = 9,
  kDoubleData = 10,
  kUint64Data = 11,
  kExternalData = 13,
  kDataLocation = 14,
};

// One field of a message: its number, wire type and value (a varint, or the bytes of a length-delimited or fixed
// field).
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t varint = 0;
  std::span<const std::byte> bytes;
};

class Reader {
public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  bool done() const { return pos_ >= bytes_.size(); }

  std::optional<uint64_t> varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && pos_ < bytes_.size(); shift += 7) {
      auto b = static_cast<uint8_t>(bytes_[pos_++]);
      value |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80u) == 0) return value;
    }
    return std::nullopt;
  }

  std::optional<Field> next() {
    auto key = varint();
    if (!key || (*key >> 3) == 0 || (*key >> 3) > UINT32_MAX) return std::nullopt;
    Field f;
    f.number = static_cast<uint32_t>(*key >> 3);
    f.wire = static_cast<uint32_t>(*key & 7);
    switch (f.wire) {
      case 0: {
        auto v = varint();
        if (!v) return std::nullopt;
        f.varint = *v;
        return f;
      }
      case 1: return take(f, 8);
      case 2: {
        auto length = varint();
        if (!length) return std::nullopt;
        return take(f, *length);
      }
      case 5: return take(f, 4);
      default: return std::nullopt;  // groups (3, 4) are not used by ONNX
    }
  }

private:
  std::optional<Field> take(Field f, uint64_t length) {
    if (length > bytes_.size() - pos_) return std::nullopt;
    f.bytes = bytes_.subspan(pos_, static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return f;
  }
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
};

// Bytes used in place when aligned for their element type (raw_data inside a protobuf message often is not: kernels
// read whole elements), else copied into an aligned tensor of their own.
Expected<ir::Tensor> inPlace(ir::ElemType type, const ir::Shape& shape, const std::byte* data, size_t size,
                             std::shared_ptr<const void> owner) {
  const size_t align = std::max<size_t>(1, ir::elemSize(type));
  if (reinterpret_cast<uintptr_t>(data) % align == 0)
    return ir::Tensor::view(type, shape, data, size, std::move(owner));
  return ir::Tensor::copyOf(type, shape, std::span(data, size));
}

std::string_view text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A repeated numeric field: packed (wire 2) or one element per field.
struct Repeated {
  std::vector<uint64_t> varints;  // int32_data, int64_data, uint64_data
  std::vector<std::byte> fixed;   // float_data, double_data, little-endian
};

bool appendRepeated(const Field& f, bool fixed, Repeated& out) {
  if (fixed) {
    if (f.wire == 2 || f.wire == 1 || f.wire == 5) {
      out.fixed.insert(out.fixed.end(), f.bytes.begin(), f.bytes.end());
      return true;
    }
    return false;
  }
  if (f.wire == 0) {
    out.varints.push_back(f.varint);
    return true;
  }
  if (f.wire != 2) return false;
  Reader r(f.bytes);
  while (!r.done()) {
    auto v = r.varint();
    if (!v) return false;
    out.varints.push_back(*v);
  }
  return true;
}

class ModelReader {
public:
  ModelReader(std::shared_ptr<const void> owner, fs::path baseDir, std::string displayName)
      : owner_(std::move(owner)), baseDir_(std::move(baseDir)), displayName_(std::move(displayName)) {}

  Expected<std::shared_ptr<const SourceInitializers>> read(std::span<const std::byte> model) {
    auto out = std::make_shared<SourceInitializers>();
    out->displayName = displayName_;
    out->model = SourceFilePin{"", model.size(), hash128(model)};
    Definitions top, constants, nested;
    Reader r(model);
    while (!r.done()) {
      auto f = r.next();
      if (!f) return bad("the file is not an ONNX model (protobuf ModelProto)");
      if (f->number != kModelGraph || f->wire != 2) continue;
      CTX_RETURN_IF_ERROR(readGraph(f->bytes, 0, top, constants, nested));
    }
    auto take = [&](Definition& d, const std::string& name) {
      if (d.external) out->external.insert(name);
      out->byName.emplace(name, std::move(d.tensor));
    };
    for (auto& [name, d] : top) take(d.back(), name);
    for (auto& [name, d] : constants)  // initializers win
      if (!out->byName.count(name)) take(d.back(), name);
    // A body's weight is found by its name only when nothing else in the model has that name (ONNX lets a body
    // reuse a name another body defines).
    for (auto& [name, d] : nested)
      if (d.size() == 1 && !out->byName.count(name)) take(d.front(), name);
    for (const auto& [location, pin] : pins_) out->externalFiles.push_back(pin);
    return std::shared_ptr<const SourceInitializers>(std::move(out));
  }

private:
  template <typename... Args> Error bad(fmt::format_string<Args...> format, Args&&... args) const {
    return Error(ErrorCode::InvalidGraph,
                 fmt::format("source model {}: {}", displayName_, fmt::format(format, std::forward<Args>(args)...)));
  }

  struct Definition {
    ir::Tensor tensor;
    bool external = false;
  };
  using Definitions = std::map<std::string, std::vector<Definition>>;  // every definition of each name

  // A graph's initializers and Constant values: the top-level graph's (depth 0) into `inits` and `constants`, a
  // body's into `nested`; then the bodies of its nodes' graph attributes, into `nested`.
  Status readGraph(std::span<const std::byte> bytes, int depth, Definitions& inits, Definitions& constants,
                   Definitions& nested) {
    if (depth > kMaxGraphDepth) return bad("its graphs nest deeper than {} levels", kMaxGraphDepth);
    Reader g(bytes);
    while (!g.done()) {
      auto gf = g.next();
      if (!gf) return bad("{} is damaged", depth == 0 ? "its graph" : "the body of a node");
      if (gf->wire != 2) continue;
      if (gf->number == kGraphInitializer) CTX_RETURN_IF_ERROR(readTensor(gf->bytes, depth == 0 ? inits : nested));
      if (gf->number == kGraphNode) {
        CTX_RETURN_IF_ERROR(readConstantNode(gf->bytes, depth == 0 ? constants : nested));
        CTX_RETURN_IF_ERROR(forEachBody(gf->bytes, [&](std::span<const std::byte> body) {
          return readGraph(body, depth + 1, nested, nested, nested);
        }));
      }
    }
    return Status::ok();
  }

  // Calls `visit` on each graph a node's attributes hold (If's branches, Loop's and Scan's bodies).
  template <typename Visit> Status forEachBody(std::span<const std::byte> node, const Visit& visit) {
    Reader r(node);
    while (!r.done()) {
      auto f = r.next();
      if (!f) return bad("a node is damaged");
      if (f->number != kNodeAttribute || f->wire != 2) continue;
      Reader a(f->bytes);
      while (!a.done()) {
        auto af = a.next();
        if (!af) return bad("an attribute of a node is damaged");
        if ((af->number == kAttributeGraph || af->number == kAttributeGraphs) && af->wire == 2)
          CTX_RETURN_IF_ERROR(visit(af->bytes));
      }
    }
    return Status::ok();
  }

  // ONNX Runtime takes a Constant node's `value` tensor for an initializer named after its output (exporters such as
  // paddle2onnx write weights that way); other Constant forms (value_float...) are scalars a context stores itself.
  Status readConstantNode(std::span<const std::byte> bytes, Definitions& out) {
    std::string_view opType, domain;
    std::vector<std::string_view> outputs;
    std::optional<std::span<const std::byte>> value;
    Reader r(bytes);
    while (!r.done()) {
      auto f = r.next();
      if (!f) return bad("a node is damaged");
      if (f->wire != 2) continue;
      if (f->number == kNodeOpType) opType = text(f->bytes);
      if (f->number == kNodeDomain) domain = text(f->bytes);
      if (f->number == kNodeOutput) outputs.push_back(text(f->bytes));
      if (f->number == kNodeAttribute) {
        Reader a(f->bytes);
        std::string_view name;
        std::optional<std::span<const std::byte>> tensor;
        while (!a.done()) {
          auto af = a.next();
          if (!af) return bad("an attribute of a node is damaged");
          if (af->number == kAttributeName && af->wire == 2) name = text(af->bytes);
          if (af->number == kAttributeTensor && af->wire == 2) tensor = af->bytes;
        }
        if (name == "value" && tensor) value = tensor;
      }
    }
    if (opType != "Constant" || !(domain.empty() || domain == "ai.onnx") || outputs.size() != 1 || !value)
      return Status::ok();
    return readTensor(*value, out, std::string(outputs[0]));
  }

  Status readTensor(std::span<const std::byte> bytes, Definitions& out, std::optional<std::string> as = {}) {
    std::string name;
    ir::Shape shape;
    int64_t dataType = 0;
    std::optional<std::span<const std::byte>> raw;
    Repeated values;
    uint32_t valueField = 0;
    bool external = false;
    std::map<std::string, std::string, std::less<>> location;
    Reader r(bytes);
    while (!r.done()) {
      auto f = r.next();
      if (!f) return bad("initializer '{}' is damaged", name);
      switch (f->number) {
        case kName: name = text(f->bytes); break;
        case kDataType: dataType = static_cast<int64_t>(f->varint); break;
        case kDims: {
          Repeated dims;
          if (!appendRepeated(*f, false, dims)) return bad("initializer '{}' has damaged dims", name);
          for (uint64_t d : dims.varints) shape.push_back(static_cast<int64_t>(d));
          break;
        }
        case kRawData: raw = f->bytes; break;
        case kFloatData:
        case kDoubleData:
        case kInt32Data:
        case kInt64Data:
        case kUint64Data: {
          const bool fixed = f->number == kFloatData || f->number == kDoubleData;
          if (!appendRepeated(*f, fixed, values)) return bad("initializer '{}' has damaged values", name);
          valueField = f->number;
          break;
        }
        case kDataLocation: external = f->varint == 1; break;
        case kExternalData: {
          Reader e(f->bytes);
          std::string key, value;
          while (!e.done()) {
            auto ef = e.next();
            if (!ef) return bad("initializer '{}' has a damaged external_data entry", name);
            if (ef->number == 1) key = text(ef->bytes);
            if (ef->number == 2) value = text(ef->bytes);
          }
          location[key] = value;
          break;
        }
        case kSegment: return bad("initializer '{}' is segmented, which ctxkit does not read", name);
        case kStringData: return Status::ok();  // strings are never weights of a context
        default: break;
      }
    }
    if (as) name = std::move(*as);
    auto type = dataType > 0 && dataType <= ir::kMaxElemType ? ir::elemTypeFromInt(static_cast<int32_t>(dataType))
                                                             : std::nullopt;
    if (name.empty() || !type || *type == ir::ElemType::String || !ir::storageBytes(*type, 1)) return Status::ok();
    for (int64_t d : shape)
      if (d < 0) return bad("initializer '{}' has a negative dimension", name);
    auto count = checkedElementCount(shape);
    auto size = count ? ir::storageBytes(*type, *count) : std::nullopt;
    if (!size) return bad("initializer '{}' of shape {} is too large", name, ir::shapeToString(shape));

    Expected<ir::Tensor> tensor = makeError(ErrorCode::Internal, "no data");
    if (external) {
      CTX_ASSIGN_OR_RETURN(tensor, externalTensor(name, *type, shape, *size, location));
    } else if (raw) {
      if (raw->size() != *size)
        return bad("initializer '{}' has {} bytes of raw_data; {} {} needs {}", name, raw->size(),
                   ir::elemTypeName(*type), ir::shapeToString(shape), *size);
      tensor = inPlace(*type, shape, raw->data(), raw->size(), owner_);
    } else {
      CTX_ASSIGN_OR_RETURN(tensor, typedTensor(name, *type, shape, *size, valueField, values));
    }
    if (!tensor)
      return tensor.takeError().addContext(fmt::format("source model {}: initializer '{}'", displayName_, name));
    out[name].push_back(Definition{std::move(tensor).value(), external});
    return Status::ok();
  }

  Expected<ir::Tensor> externalTensor(const std::string& name, ir::ElemType type, const ir::Shape& shape, uint64_t size,
                                      const std::map<std::string, std::string, std::less<>>& location) {
    auto it = location.find("location");
    if (it == location.end()) return bad("initializer '{}' is external but names no location", name);
    auto number = [&](std::string_view key) -> std::optional<uint64_t> {
      auto v = location.find(key);
      if (v == location.end()) return uint64_t{0};
      uint64_t n = 0;
      for (char c : v->second) {
        if (c < '0' || c > '9' || n > (UINT64_MAX - 9) / 10) return std::nullopt;
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
      return n;
    };
    auto offset = number("offset"), length = number("length");
    if (!offset || !length) return bad("initializer '{}' has a bad external offset or length", name);
    if (location.count("length") && *length != size)
      return bad("initializer '{}' records {} external bytes; {} {} needs {}", name, *length, ir::elemTypeName(type),
                 ir::shapeToString(shape), size);
    CTX_ASSIGN_OR_RETURN(fs::path file,
                         resolveInside(baseDir_, it->second).addContext(fmt::format("initializer '{}'", name)));
    auto& mapped = files_[file.string()];
    if (!mapped) {
      CTX_ASSIGN_OR_RETURN(mapped, MappedFile::open(file));
    }
    if (!pins_.count(it->second))
      pins_[it->second] = SourceFilePin{it->second, mapped->size(), hash128(mapped->bytes())};
    if (!rangeFits(*offset, size, mapped->size()))
      return bad("initializer '{}' lies past the end of '{}' (offset {}, {} bytes, file {} bytes)", name, file.string(),
                 *offset, size, mapped->size());
    return inPlace(type, shape, mapped->data() + *offset, static_cast<size_t>(size), mapped);
  }

  Expected<ir::Tensor> typedTensor(const std::string& name, ir::ElemType type, const ir::Shape& shape, uint64_t size,
                                   uint32_t field, const Repeated& values) {
    const size_t elem = ir::elemSize(type);
    if (field == kFloatData || field == kDoubleData) {
      const bool matches = (field == kFloatData && type == ir::ElemType::Float) ||
                           (field == kDoubleData && type == ir::ElemType::Double);
      if (!matches || values.fixed.size() != size)
        return bad("initializer '{}' ({} {}) has {} bytes of {}", name, ir::elemTypeName(type),
                   ir::shapeToString(shape), values.fixed.size(), field == kFloatData ? "float_data" : "double_data");
      return ir::Tensor::copyOf(type, shape, values.fixed);
    }
    // int32_data holds every integer type up to 32 bits (and float16/bfloat16 bit patterns); int64_data and
    // uint64_data their own: each element is the value's low `elem` bytes, little-endian.
    if (values.varints.size() * elem != size || elem > 8)
      return bad("initializer '{}' ({} {}) has {} values; expected {}", name, ir::elemTypeName(type),
                 ir::shapeToString(shape), values.varints.size(), elem ? size / elem : 0);
    std::vector<std::byte> bytes(static_cast<size_t>(size));
    for (size_t i = 0; i < values.varints.size(); ++i) std::memcpy(bytes.data() + i * elem, &values.varints[i], elem);
    return ir::Tensor::copyOf(type, shape, bytes);
  }

  std::shared_ptr<const void> owner_;
  fs::path baseDir_;
  std::string displayName_;
  std::map<std::string, std::shared_ptr<const MappedFile>> files_;
  std::map<std::string, SourceFilePin> pins_;  // by location as the model records it
};

}  // namespace

Expected<std::shared_ptr<const SourceInitializers>> readSourceInitializers(const fs::path& path) {
  CTX_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  return readSourceInitializers(std::move(file));
}

Expected<std::shared_ptr<const SourceInitializers>> readSourceInitializers(std::shared_ptr<const MappedFile> file) {
  const fs::path& path = file->path();
  fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  const std::span<const std::byte> bytes = file->bytes();
  return ModelReader(std::move(file), dir, fmt::format("'{}'", path.string())).read(bytes);
}

Expected<std::shared_ptr<const SourceInitializers>> readSourceInitializers(std::span<const std::byte> bytes,
                                                                           std::shared_ptr<const void> owner,
                                                                           const fs::path& baseDir,
                                                                           std::string displayName) {
  return ModelReader(std::move(owner), baseDir, std::move(displayName)).read(bytes);
}

}  // namespace ctxkit::runtime
