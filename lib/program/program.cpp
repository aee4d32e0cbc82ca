// Binary encoding, validation and text dump of compiled programs.
#include "program/program.h"

#include "ops/typed_attrs.h"
#include "program/typed_codec.h"
#include "support/bytes.h"
#include "support/checked.h"

#include <algorithm>

namespace ctxkit::program {

namespace {

constexpr uint32_t kMaxAttrValues = 1u << 20;

void writeTensor(ByteWriter& w, const ir::Tensor& t) {
  w.u32(static_cast<uint32_t>(t.type()));
  w.u32(static_cast<uint32_t>(t.rank()));
  for (int64_t d : t.shape()) w.i64(d);
  w.bytes(t.bytes());
}

void writeAttr(ByteWriter& w, const ir::Attribute& a) {
  w.str(a.name);
  w.u8(static_cast<uint8_t>(a.type));
  switch (a.type) {
    case ir::AttrType::Float: w.f32(a.f); break;
    case ir::AttrType::Int: w.i64(a.i); break;
    case ir::AttrType::String: w.str(a.s); break;
    case ir::AttrType::Floats:
      w.u32(static_cast<uint32_t>(a.floats.size()));
      for (float f : a.floats) w.f32(f);
      break;
    case ir::AttrType::Ints:
      w.u32(static_cast<uint32_t>(a.ints.size()));
      for (int64_t i : a.ints) w.i64(i);
      break;
    case ir::AttrType::Strings:
      w.u32(static_cast<uint32_t>(a.strings.size()));
      for (const auto& s : a.strings) w.str(s);
      break;
    case ir::AttrType::Tensor: writeTensor(w, a.t); break;
    default: break;  // graphs never reach programs; the compiler keeps such nodes on the fallback path
  }
}

Expected<ir::Tensor> readTensor(ByteReader& r) {
  uint32_t type = r.u32();
  uint32_t rank = r.u32();
  if (!r.ok()) return r.status().error();
  auto elemType = ir::elemTypeFromInt(static_cast<int32_t>(type));
  if (!elemType || ir::elemSize(*elemType) == 0)
    return makeError(ErrorCode::InvalidGraph, "attribute tensor has unsupported element type {}", type);
  if (rank > kMaxRank) return makeError(ErrorCode::InvalidGraph, "attribute tensor rank {} exceeds {}", rank, kMaxRank);
  ir::Shape shape(rank);
  for (auto& d : shape) d = r.i64();
  auto data = r.bytes();
  CTX_RETURN_IF_ERROR(r.status());
  // The shape is checked against the bytes present before it sizes an allocation (rules 2 and 3).
  auto count = checkedElementCount(shape);
  auto needed = count ? ir::storageBytes(*elemType, *count) : std::nullopt;
  if (!needed || *needed != data.size())
    return makeError(ErrorCode::InvalidGraph, "attribute tensor of shape {} needs {} bytes but has {}",
                     ir::shapeToString(shape), needed ? std::to_string(*needed) : "more than 2^64", data.size());
  return ir::Tensor::copyOf(*elemType, std::move(shape), data);
}

Expected<ir::Attribute> readAttr(ByteReader& r) {
  ir::Attribute a;
  a.name = r.str(kMaxStringBytes);
  uint8_t type = r.u8();
  CTX_RETURN_IF_ERROR(r.status());
  switch (type) {
    case static_cast<uint8_t>(ir::AttrType::Float):
      a.type = ir::AttrType::Float;
      a.f = r.f32();
      break;
    case static_cast<uint8_t>(ir::AttrType::Int):
      a.type = ir::AttrType::Int;
      a.i = r.i64();
      break;
    case static_cast<uint8_t>(ir::AttrType::String):
      a.type = ir::AttrType::String;
      a.s = r.str();
      break;
    case static_cast<uint8_t>(ir::AttrType::Floats): {
      a.type = ir::AttrType::Floats;
      uint32_t n = r.count(4, "float count");
      if (n > kMaxAttrValues) return makeError(ErrorCode::InvalidGraph, "attribute '{}' has {} values", a.name, n);
      a.floats.resize(r.ok() ? n : 0);
      for (auto& f : a.floats) f = r.f32();
      break;
    }
    case static_cast<uint8_t>(ir::AttrType::Ints): {
      a.type = ir::AttrType::Ints;
      uint32_t n = r.count(8, "int count");
      if (n > kMaxAttrValues) return makeError(ErrorCode::InvalidGraph, "attribute '{}' has {} values", a.name, n);
      a.ints.resize(r.ok() ? n : 0);
      for (auto& i : a.ints) i = r.i64();
      break;
    }
    case static_cast<uint8_t>(ir::AttrType::Strings): {
      a.type = ir::AttrType::Strings;
      uint32_t n = r.count(4, "string count");
      a.strings.resize(r.ok() ? n : 0);
      for (auto& s : a.strings) s = r.str();
      break;
    }
    case static_cast<uint8_t>(ir::AttrType::Tensor): {
      a.type = ir::AttrType::Tensor;
      CTX_ASSIGN_OR_RETURN(a.t, readTensor(r).addContext(fmt::format("attribute '{}'", a.name)));
      break;
    }
    default: return makeError(ErrorCode::InvalidGraph, "attribute '{}' has unknown type {}", a.name, type);
  }
  CTX_RETURN_IF_ERROR(r.status());
  return a;
}

}  // namespace

Status validate(const Program& p, uint64_t weightCount) {
  const auto tensorCount = static_cast<int64_t>(p.tensors.size());
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const TensorDesc& t = p.tensors[i];
    auto where = [&] { return fmt::format("tensor {} ('{}')", i, t.name); };
    if (!t.layout.plain() && (t.kind != TensorKind::Weight || t.type != ir::ElemType::Float))
      return makeError(ErrorCode::InvalidGraph, "{}: layout {} is only for float32 weights", where(),
                       ops::layoutName(t.layout));
    auto count = t.layout.plain() ? checkedElementCount(t.shape) : ops::layoutElements(t.layout, t.shape);
    auto bytes = count ? ir::storageBytes(t.type, *count) : std::nullopt;
    if (!bytes || *bytes != t.size)
      return makeError(ErrorCode::InvalidGraph, "{}: {} bytes recorded but shape {} of {} in layout {} needs {}",
                       where(), t.size, ir::shapeToString(t.shape), ir::elemTypeName(t.type), ops::layoutName(t.layout),
                       bytes ? std::to_string(*bytes) : "?");
    switch (t.kind) {
      case TensorKind::Input:
        if (t.index >= p.inputs.size() || p.inputs[t.index] != static_cast<int32_t>(i))
          return makeError(ErrorCode::InvalidGraph, "{}: input position {} does not match the input list", where(),
                           t.index);
        break;
      case TensorKind::Output:
        if (t.index >= p.outputs.size() || p.outputs[t.index] != static_cast<int32_t>(i))
          return makeError(ErrorCode::InvalidGraph, "{}: output position {} does not match the output list", where(),
                           t.index);
        break;
      case TensorKind::Arena:
        if (!rangeFits(t.offset, t.size, p.arenaSize))
          return makeError(ErrorCode::InvalidGraph, "{}: arena range {}+{} exceeds the arena size {}", where(),
                           t.offset, t.size, p.arenaSize);
        break;
      case TensorKind::Weight:
        if (t.index >= weightCount)
          return makeError(ErrorCode::InvalidGraph, "{}: weight index {} but the weight table has {} entries", where(),
                           t.index, weightCount);
        break;
      case TensorKind::View: {
        if (t.index >= p.tensors.size() || t.index == i)
          return makeError(ErrorCode::InvalidGraph, "{}: views tensor {} of {}", where(), t.index, p.tensors.size());
        const TensorDesc& base = p.tensors[t.index];
        if (base.kind == TensorKind::View || base.size != t.size || base.type != t.type)
          return makeError(ErrorCode::InvalidGraph, "{}: a view must cover a non-view tensor of the same type and size",
                           where());
        break;
      }
    }
  }
  // `what` spells out the list's owner, for an error only.
  auto checkIndexList = [&](std::span<const int32_t> list, bool allowAbsent, auto what) -> Status {
    for (int32_t index : list) {
      if (index == -1 && allowAbsent) continue;
      if (index < 0 || index >= tensorCount)
        return makeError(ErrorCode::InvalidGraph, "{} refers to tensor {} of {}", what(), index, tensorCount);
    }
    return Status::ok();
  };
  CTX_RETURN_IF_ERROR(checkIndexList(p.inputs, false, [] { return std::string("the input list"); }));
  CTX_RETURN_IF_ERROR(checkIndexList(p.outputs, false, [] { return std::string("the output list"); }));
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (p.tensors[p.inputs[i]].kind != TensorKind::Input)
      return makeError(ErrorCode::InvalidGraph, "input {} refers to a tensor that is not an input", i);
  for (size_t i = 0; i < p.outputs.size(); ++i)
    if (p.tensors[p.outputs[i]].kind != TensorKind::Output)
      return makeError(ErrorCode::InvalidGraph, "output {} refers to a tensor that is not an output", i);
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    auto what = [&] { return fmt::format("op {} ('{}', {})", i, op.name, ir::opKindName(op.kind)); };
    if (op.kind == ir::OpKind::Unknown || op.kind == ir::OpKind::EPContext)
      return makeError(ErrorCode::InvalidGraph, "{}: not an executable op kind", what());
    if (op.typed.index() != ops::defaultAttrsFor(op.kind).index())
      return makeError(ErrorCode::InvalidGraph, "{}: typed attributes of another op family", what());
    if (auto s = ops::checkAttrs(op.typed); !s) return s.takeError().addContext(what());
    CTX_RETURN_IF_ERROR(checkIndexList(op.inputs, true, [&] { return what() + " input"; }));
    CTX_RETURN_IF_ERROR(checkIndexList(op.outputs, false, [&] { return what() + " output"; }));
    for (int32_t out : op.outputs) {
      TensorKind k = p.tensors[out].kind;
      if (k != TensorKind::Arena && k != TensorKind::Output)
        return makeError(ErrorCode::InvalidGraph, "{}: writes tensor {} of kind {}", what(), out, tensorKindName(k));
    }
  }
  return Status::ok();
}

std::string_view tensorKindName(TensorKind kind) {
  switch (kind) {
    case TensorKind::Input: return "input";
    case TensorKind::Output: return "output";
    case TensorKind::Arena: return "arena";
    case TensorKind::Weight: return "weight";
    case TensorKind::View: return "view";
  }
  return "unknown";
}

namespace {

void writeTensorDesc(ByteWriter& w, const TensorDesc& t, uint32_t version) {
  w.u8(static_cast<uint8_t>(t.kind));
  w.u32(static_cast<uint32_t>(t.type));
  w.u32(static_cast<uint32_t>(t.shape.size()));
  for (int64_t d : t.shape) w.i64(d);
  w.u32(t.index);
  w.u64(t.offset);
  w.u64(t.size);
  w.str(t.name);
  if (version >= 2) {
    w.u8(static_cast<uint8_t>(t.layout.kind));
    w.u16(t.layout.width);
    w.u16(t.layout.depth);
  }
}

void writeOnnxAttrs(ByteWriter& w, const ir::Attributes& attrs) {
  w.u32(static_cast<uint32_t>(attrs.size()));
  for (const auto& a : attrs.all()) writeAttr(w, a);
}

std::vector<std::byte> encode(const Program& p, uint32_t version) {
  ByteWriter w;
  w.u64(version >= 4   ? kProgramMagic
        : version == 3 ? kProgramMagicV3
        : version == 2 ? kProgramMagicV2
                       : kProgramMagicV1);
  w.u64(p.arenaSize);
  w.u32(static_cast<uint32_t>(p.tensors.size()));
  for (const TensorDesc& t : p.tensors) writeTensorDesc(w, t, version);
  w.u32(static_cast<uint32_t>(p.ops.size()));
  for (const Op& op : p.ops) {
    if (version >= 2) {
      w.u16(ops::stableOpId(op.kind));
    } else {
      w.u32(static_cast<uint32_t>(op.kind));
    }
    w.i64(op.opset);
    w.str(op.name);
    if (version >= 2) {
      // Typed families carry their values only; the rest keep ONNX attributes by name.
      bool typed = ops::isTyped(op.typed) && ops::typedSinceProgramVersion(op.typed) <= version;
      w.u8(typed ? 1 : 0);
      if (typed) writeTypedAttrs(w, op.typed);
      else writeOnnxAttrs(w, op.attrs);
    } else {
      writeOnnxAttrs(w, op.attrs);
    }
    w.u32(static_cast<uint32_t>(op.inputs.size()));
    for (int32_t i : op.inputs) w.i32(i);
    w.u32(static_cast<uint32_t>(op.outputs.size()));
    for (int32_t i : op.outputs) w.i32(i);
  }
  w.u32(static_cast<uint32_t>(p.inputs.size()));
  for (int32_t i : p.inputs) w.i32(i);
  w.u32(static_cast<uint32_t>(p.outputs.size()));
  for (int32_t i : p.outputs) w.i32(i);
  return w.take();
}

// An op's typed attributes; errors name the op (formatted on failure only). Out of line: inlined into deserialize,
// g++ 12 takes the moved-from Status for uninitialized.
[[gnu::noinline]] Status readOpAttrs(ByteReader& r, Op& op, std::pmr::memory_resource* storage,
                                     const std::string& what) {
  Status s = readTypedAttrs(r, op.typed, storage);
  if (!s) return std::move(s).addContext(fmt::format("{}: op '{}'", what, op.name));
  return Status::ok();
}

}  // namespace

std::vector<std::byte> serialize(const Program& p) { return encode(p, kProgramVersion); }

Expected<std::vector<std::byte>> serializeVersion(const Program& p, uint32_t version) {
  if (version < 1 || version > kProgramVersion)
    return makeError(ErrorCode::Unsupported, "program version {} does not exist", version);
  if (version == 1)
    for (const TensorDesc& t : p.tensors)
      if (!t.layout.plain())
        return makeError(ErrorCode::Unsupported, "tensor '{}' has layout {}, which version 1 cannot hold", t.name,
                         ops::layoutName(t.layout));
  // Families the version spells as ONNX attributes: those must still say what the typed attributes say.
  for (const Op& op : p.ops) {
    if (!ops::isTyped(op.typed) || (version >= 2 && ops::typedSinceProgramVersion(op.typed) <= version)) continue;
    auto decoded = ops::decodeAttrs(op.kind, op.opset, op.attrs);
    if (!decoded || ops::attrsText(*decoded) != ops::attrsText(op.typed))
      return makeError(ErrorCode::Unsupported, "op '{}' has typed attributes its ONNX attributes do not give", op.name);
  }
  return encode(p, version);
}

Expected<Program> deserialize(std::span<const std::byte> bytes, uint64_t weightCount, const std::string& what) {
  ByteReader r(bytes, what);
  auto fail = [&](Error e) { return e.addContext(what); };
  uint64_t magic = r.u64();
  constexpr uint64_t magics[] = {kProgramMagicV1, kProgramMagicV2, kProgramMagicV3, kProgramMagic};
  const auto* known = std::find(std::begin(magics), std::end(magics), magic);
  if (known == std::end(magics))
    return makeError(ErrorCode::InvalidGraph, "{}: not a ctxkit program (bad magic)", what);
  Program p;
  p.version = static_cast<uint32_t>(known - std::begin(magics)) + 1;
  static_assert(std::size(magics) == kProgramVersion);
  p.arenaSize = r.u64();
  uint32_t tensorCount = r.count(1 + 4 + 4 + 4 + 8 + 8 + 4 + (p.version >= 2 ? 5 : 0), "tensor count");
  // Every list and name lives in one storage block: the encoding of each is at least as long as its value, so the
  // program's size is enough (the block grows, in a few steps, only for a crafted program).
  auto storage = std::make_shared<std::pmr::monotonic_buffer_resource>(std::max<size_t>(bytes.size(), 256));
  const std::pmr::polymorphic_allocator<std::byte> alloc(storage.get());
  p.storage = storage;
  p.tensors.reserve(r.ok() ? tensorCount : 0);
  for (uint32_t i = 0; i < tensorCount && r.ok(); ++i) {
    TensorDesc& t = p.tensors.emplace_back(TensorDesc{.shape = Dims(alloc), .name = Name(alloc), .layout = {}});
    uint8_t kind = r.u8();
    uint32_t type = r.u32();
    uint32_t rank = r.u32();
    if (!r.ok()) break;
    if (kind > static_cast<uint8_t>(TensorKind::View))
      return fail(makeError(ErrorCode::InvalidGraph, "tensor kind {} is unknown", kind));
    auto elemType = ir::elemTypeFromInt(static_cast<int32_t>(type));
    if (!elemType || *elemType == ir::ElemType::String || *elemType == ir::ElemType::Undefined)
      return fail(makeError(ErrorCode::InvalidGraph, "tensor element type {} is not supported", type));
    if (rank > kMaxRank) return fail(makeError(ErrorCode::InvalidGraph, "tensor rank {} exceeds {}", rank, kMaxRank));
    t.kind = static_cast<TensorKind>(kind);
    t.type = *elemType;
    t.shape.resize(rank);
    for (auto& d : t.shape) d = r.i64();
    t.index = r.u32();
    t.offset = r.u64();
    t.size = r.u64();
    t.name = r.strView(kMaxStringBytes);
    if (p.version >= 2) {
      uint8_t layout = r.u8();
      if (r.ok() && layout > static_cast<uint8_t>(ops::WeightLayoutKind::GemmPanelsTransposed))
        return fail(makeError(ErrorCode::InvalidGraph, "tensor '{}' has unknown layout {}", t.name, layout));
      t.layout.kind = static_cast<ops::WeightLayoutKind>(layout);
      t.layout.width = r.u16();
      t.layout.depth = r.u16();
    }
  }
  const bool v2 = p.version >= 2;
  uint32_t opCount = r.count((v2 ? 2 + 1 : 4 + 4) + 8 + 4 + 4 + 4, "op count");
  p.ops.reserve(r.ok() ? opCount : 0);
  for (uint32_t i = 0; i < opCount && r.ok(); ++i) {
    Op& op = p.ops.emplace_back(
        Op{.name = Name(alloc), .attrs = {}, .inputs = Indices(alloc), .outputs = Indices(alloc), .typed = {}});
    uint32_t kind = v2 ? r.u16() : r.u32();
    auto opKind = ir::opKindFromInt(kind);
    if (r.ok() && !opKind) return fail(makeError(ErrorCode::InvalidGraph, "op kind {} is unknown", kind));
    op.kind = opKind.value_or(ir::OpKind::Unknown);
    op.opset = r.i64();
    op.name = r.strView(kMaxStringBytes);
    uint8_t form = v2 ? r.u8() : 0;
    if (!r.ok()) break;
    if (form > 1)
      return fail(makeError(ErrorCode::InvalidGraph, "op '{}' has unknown attribute form {}", op.name, form));
    op.typed = ops::defaultAttrsFor(op.kind);
    // Whether this version spells the op's family as typed attributes (always, from the version that typed it).
    const bool typedHere = ops::isTyped(op.typed) && v2 && ops::typedSinceProgramVersion(op.typed) <= p.version;
    if (form == 1) {
      if (!typedHere)
        return fail(makeError(ErrorCode::InvalidGraph,
                              "op '{}' ({}) has typed attributes but its kind has none in program version {}", op.name,
                              ir::opKindName(op.kind), p.version));
      if (Status s = readOpAttrs(r, op, storage.get(), what); !s) return s;
    } else {
      // One spelling per program: from the version that typed a family, its attributes are always typed.
      if (typedHere)
        return fail(makeError(ErrorCode::InvalidGraph, "op '{}' ({}) has ONNX attributes but its kind's are typed",
                              op.name, ir::opKindName(op.kind)));
      uint32_t attrCount = r.count(4 + 1, "attribute count");
      for (uint32_t a = 0; a < attrCount && r.ok(); ++a) {
        CTX_ASSIGN_OR_RETURN(auto attr, readAttr(r).addContext(fmt::format("{}: op '{}'", what, op.name)));
        if (op.attrs.has(attr.name))
          return fail(makeError(ErrorCode::InvalidGraph, "op '{}' has attribute '{}' twice", op.name, attr.name));
        op.attrs.set(std::move(attr));
      }
      // ONNX attributes of a family typed in a later version are decoded here, once.
      if (r.ok() && ops::isTyped(op.typed)) {
        auto typed = ops::decodeAttrs(op.kind, op.opset, op.attrs);
        if (!typed) return fail(typed.takeError().addContext(fmt::format("op '{}'", op.name)));
        op.typed = std::move(typed.value());
      }
    }
    uint32_t inputCount = r.count(4, "op input count");
    op.inputs.resize(r.ok() ? inputCount : 0);
    for (auto& i : op.inputs) i = r.i32();
    uint32_t outputCount = r.count(4, "op output count");
    op.outputs.resize(r.ok() ? outputCount : 0);
    for (auto& i : op.outputs) i = r.i32();
    if (!r.ok()) break;
  }
  uint32_t inputCount = r.count(4, "input count");
  p.inputs.resize(r.ok() ? inputCount : 0);
  for (auto& i : p.inputs) i = r.i32();
  uint32_t outputCount = r.count(4, "output count");
  p.outputs.resize(r.ok() ? outputCount : 0);
  for (auto& i : p.outputs) i = r.i32();
  CTX_RETURN_IF_ERROR(r.status());
  if (r.remaining() != 0)
    return fail(makeError(ErrorCode::InvalidGraph, "{} trailing bytes after the program", r.remaining()));
  if (auto s = validate(p, weightCount); !s) return fail(s.takeError());
  return p;
}

std::string dump(const Program& p, std::string_view name) {
  std::string out = fmt::format("program {}: {} ops, {} tensors, arena {} bytes\n", name, p.ops.size(),
                                p.tensors.size(), p.arenaSize);
  auto tensorText = [&](int32_t i) -> std::string {
    if (i < 0) return "-";
    const TensorDesc& t = p.tensors[i];
    std::string loc;
    switch (t.kind) {
      case TensorKind::Input: loc = fmt::format("in{}", t.index); break;
      case TensorKind::Output: loc = fmt::format("out{}", t.index); break;
      case TensorKind::Arena: loc = fmt::format("arena@{}", t.offset); break;
      case TensorKind::Weight:
        loc =
            t.layout.plain() ? fmt::format("w{}", t.index) : fmt::format("w{}:{}", t.index, ops::layoutName(t.layout));
        break;
      case TensorKind::View: loc = fmt::format("view(%{})", t.index); break;
    }
    return fmt::format("%{}:{}[{}]{}", i, ir::elemTypeName(t.type), ir::shapeToString(t.shape), loc);
  };
  for (size_t i = 0; i < p.inputs.size(); ++i)
    out += fmt::format("  input {}: {} '{}'\n", i, tensorText(p.inputs[i]), p.tensors[p.inputs[i]].name);
  for (const Op& op : p.ops) {
    std::string ins, outs, attrs;
    for (int32_t i : op.inputs) ins += (ins.empty() ? "" : ", ") + tensorText(i);
    for (int32_t i : op.outputs) outs += (outs.empty() ? "" : ", ") + tensorText(i);
    attrs = ops::attrsText(op.typed);
    for (const auto& a : ops::isTyped(op.typed) ? std::vector<ir::Attribute>{} : op.attrs.all()) {
      std::string v;
      switch (a.type) {
        case ir::AttrType::Int: v = std::to_string(a.i); break;
        case ir::AttrType::Float: v = fmt::format("{}", a.f); break;
        case ir::AttrType::String: v = "\"" + a.s + "\""; break;
        case ir::AttrType::Ints: v = fmt::format("[{}]", fmt::join(a.ints, ",")); break;
        case ir::AttrType::Floats: v = fmt::format("[{}]", fmt::join(a.floats, ",")); break;
        default: v = std::string(ir::attrTypeName(a.type)); break;
      }
      attrs += fmt::format(" {}={}", a.name, v);
    }
    out += fmt::format("  {} = {}({}){}\n", outs, ir::opKindName(op.kind), ins, attrs);
  }
  for (size_t i = 0; i < p.outputs.size(); ++i)
    out += fmt::format("  output {}: {} '{}'\n", i, tensorText(p.outputs[i]), p.tensors[p.outputs[i]].name);
  return out;
}

}  // namespace ctxkit::program
