// Binary encoding, validation and text dump of compiled programs.
#include "program/program.h"

#include "ops/typed_attrs.h"
#include "program/typed_codec.h"
#include "support/bytes.h"
#include "support/checked.h"

#include <algorithm>

namespace ctxkit::program {

Status validate(const Program& p, uint64_t weightCount) {
  // What the encoding cannot hold: a program built in memory gets the reader's refusals, worded for its author.
  auto tooLong = [&](std::string_view kind, std::string_view name) {
    return makeError(ErrorCode::InvalidGraph,
                     "{} '{}...' has a name of {} bytes; a compiled program holds names of at most {} bytes "
                     "(shorten the name)",
                     kind, name.substr(0, 64), name.size(), kMaxStringBytes);
  };
  for (const auto& op : p.ops)
    if (op.name.size() > kMaxStringBytes) return tooLong("node", op.name);
  const auto tensorCount = static_cast<int64_t>(p.tensors.size());
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const TensorDesc& t = p.tensors[i];
    if (t.name.size() > kMaxStringBytes) return tooLong("value", t.name);
    auto where = [&] { return fmt::format("tensor {} ('{}')", i, t.name); };
    if (t.kind > TensorKind::LoadTime) return makeError(ErrorCode::InvalidGraph, "{}: tensor kind is unknown", where());
    if (t.type == ir::ElemType::String || t.type == ir::ElemType::Undefined)
      return makeError(ErrorCode::InvalidGraph, "{}: tensor element type {} is not supported", where(),
                       ir::elemTypeName(t.type));
    if (t.shape.size() > kMaxRank)
      return makeError(ErrorCode::InvalidGraph, "{}: tensor rank {} exceeds {}", where(), t.shape.size(), kMaxRank);
    if (t.layout.kind > cpu::WeightLayoutKind::Float16Widened)
      return makeError(ErrorCode::InvalidGraph, "{}: the weight layout is unknown", where());
    if (!t.layout.plain() &&
        ((t.kind != TensorKind::Weight && t.kind != TensorKind::LoadTime) || t.type != ir::ElemType::Float))
      return makeError(ErrorCode::InvalidGraph, "{}: layout {} is only for float32 weights and load-time tensors",
                       where(), cpu::layoutName(t.layout));
    auto count = t.layout.plain() ? checkedElementCount(t.shape) : cpu::layoutElements(t.layout, t.shape);
    auto bytes = count ? ir::storageBytes(t.type, *count) : std::nullopt;
    if (!bytes || *bytes != t.size)
      return makeError(ErrorCode::InvalidGraph, "{}: {} bytes recorded but shape {} of {} in layout {} needs {}",
                       where(), t.size, ir::shapeToString(t.shape), ir::elemTypeName(t.type), cpu::layoutName(t.layout),
                       bytes ? std::to_string(*bytes) : "?");
    if (t.bounded != 0) {
      if (t.shape.size() < 8 && (t.bounded >> t.shape.size()) != 0)
        return makeError(ErrorCode::InvalidGraph, "{}: bounded-dimension mask {:#x} names a dimension past rank {}",
                         where(), t.bounded, t.shape.size());
      if (t.kind != TensorKind::Arena && t.kind != TensorKind::Output && t.kind != TensorKind::Input)
        return makeError(ErrorCode::InvalidGraph,
                         "{}: tensor kind {} cannot have a bounded shape (only input, arena and output tensors can)",
                         where(), tensorKindName(t.kind));
    }
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
        // Kernels read and write elements in place: an offset that is not a multiple of the element size would make
        // every access misaligned (undefined behaviour). The memory planner aligns every tensor to 64 bytes.
        if (const size_t elem = std::max<size_t>(1, ir::elemSize(t.type)); t.offset % elem != 0)
          return makeError(ErrorCode::InvalidGraph, "{}: arena offset {} is not a multiple of its {}-byte elements",
                           where(), t.offset, elem);
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
        if (base.kind == TensorKind::View || base.size != t.size || base.type != t.type || !base.layout.plain() ||
            isBounded(base))
          return makeError(ErrorCode::InvalidGraph,
                           "{}: a view must cover a non-view tensor of the same type and size, in plain layout, with "
                           "a static shape",
                           where());
        break;
      }
      case TensorKind::LoadTime: break;  // written by its load-time op (checked with the ops below)
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
  // The arena bytes a tensor occupies (a view: its base's), [first, second); empty for any other tensor.
  auto arenaRange = [&](int32_t t) -> std::pair<uint64_t, uint64_t> {
    if (t < 0) return {0, 0};
    const TensorDesc* d = &p.tensors[t];
    if (d->kind == TensorKind::View) d = &p.tensors[d->index];
    if (d->kind != TensorKind::Arena) return {0, 0};
    return {d->offset, d->offset + d->size};  // inside the arena: checked above
  };
  auto overlap = [](std::pair<uint64_t, uint64_t> a, std::pair<uint64_t, uint64_t> b) {
    return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
  };
  std::vector<bool> written(p.tensors.size(), false);  // load-time tensors written by the ops so far
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
    // An op never writes bytes it reads or that another of its outputs holds (the memory plan keeps every tensor live
    // at an op apart): a kernel reading indices or shapes from bytes it is overwriting could go out of bounds.
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      const auto out = arenaRange(op.outputs[o]);
      for (int32_t in : op.inputs)
        if (overlap(out, arenaRange(in)))
          return makeError(ErrorCode::InvalidGraph, "{}: output tensor {} overlaps input tensor {} in the arena",
                           what(), op.outputs[o], in);
      for (size_t q = 0; q < o; ++q)
        if (overlap(out, arenaRange(op.outputs[q])))
          return makeError(ErrorCode::InvalidGraph, "{}: output tensors {} and {} overlap in the arena", what(),
                           op.outputs[q], op.outputs[o]);
    }
    if (op.kernel.recorded()) {
      if (static_cast<uint8_t>(op.kernel.algorithm) >= cpu::kConvAlgorithmCount || op.kernel.blocking != 0)
        return makeError(ErrorCode::InvalidGraph, "{}: unknown kernel choice {}/{}", what(),
                         static_cast<int>(op.kernel.algorithm), op.kernel.blocking);
      if (std::string misfit = kernelChoiceMisfit(p, op, op.kernel.algorithm); !misfit.empty())
        return makeError(ErrorCode::InvalidGraph, "{}: recorded kernel {} cannot run it: {}", what(),
                         cpu::convAlgorithmName(op.kernel.algorithm), misfit);
    }
    // A load-time op writes load-time tensors only, each once, from weights and load-time tensors written before it
    // (it runs once, at load); any other op writes arena or output tensors.
    const bool loadTime = !op.outputs.empty() && p.tensors[op.outputs[0]].kind == TensorKind::LoadTime;
    for (int32_t in : op.inputs) {
      if (!loadTime || in < 0) continue;
      const TensorKind k = p.tensors[in].kind;
      if (k != TensorKind::Weight && !(k == TensorKind::LoadTime && written[in]))
        return makeError(ErrorCode::InvalidGraph,
                         "{}: a load-time op reads tensor {} of kind {}; expected weights and load-time tensors "
                         "written before it",
                         what(), in, tensorKindName(k));
    }
    for (int32_t out : op.outputs) {
      TensorKind k = p.tensors[out].kind;
      if (loadTime ? k != TensorKind::LoadTime : k != TensorKind::Arena && k != TensorKind::Output)
        return makeError(ErrorCode::InvalidGraph, "{}: writes tensor {} of kind {}{}", what(), out, tensorKindName(k),
                         loadTime ? " besides a load-time tensor" : "");
      if (loadTime && written[out])
        return makeError(ErrorCode::InvalidGraph, "{}: load-time tensor {} is written twice", what(), out);
      if (loadTime) written[out] = true;
    }
  }
  for (size_t i = 0; i < p.tensors.size(); ++i)
    if (p.tensors[i].kind == TensorKind::LoadTime && !written[i])
      return makeError(ErrorCode::InvalidGraph, "tensor {} ('{}') is load-time but no op writes it", i,
                       p.tensors[i].name);
  return Status::ok();
}

std::string kernelChoiceMisfit(const Program& p, const Op& op, cpu::ConvAlgorithm algorithm) {
  if (op.kind != ir::OpKind::Conv) return fmt::format("a kernel choice is for Conv, not {}", ir::opKindName(op.kind));
  auto tensor = [&](size_t k) -> const TensorDesc* {
    return k < op.inputs.size() && op.inputs[k] >= 0 && static_cast<size_t>(op.inputs[k]) < p.tensors.size()
               ? &p.tensors[op.inputs[k]]
               : nullptr;
  };
  const TensorDesc* x = tensor(0);
  const TensorDesc* w = tensor(1);
  if (!x || !w || x->type != ir::ElemType::Float || w->type != ir::ElemType::Float)
    return "its input and weight are not float32";
  if (x->shape.size() < 3 || x->shape.size() > 5 || w->shape.size() != x->shape.size())
    return fmt::format("input {} and weight {} are not a Conv's", ir::shapeToString(x->shape),
                       ir::shapeToString(w->shape));
  const int64_t group = std::get<ops::ConvAttrs>(op.typed).group;
  switch (algorithm) {
    case cpu::ConvAlgorithm::Heuristic:
    case cpu::ConvAlgorithm::Direct:
    case cpu::ConvAlgorithm::Gemm: return {};
    case cpu::ConvAlgorithm::Panels:
      if (group != 1) return fmt::format("panels need group 1, not {}", group);
      if (w->kind != TensorKind::Weight && w->kind != TensorKind::LoadTime) return "panels need a constant weight";
      return {};
    case cpu::ConvAlgorithm::DepthwiseSmallMap:
      if (w->shape[1] != 1 || w->shape[0] != group || x->shape[1] != group)
        return fmt::format("input {} and weight {} with group {} are not depthwise (one input and one output channel "
                           "per group)",
                           ir::shapeToString(x->shape), ir::shapeToString(w->shape), group);
      if (x->shape.size() > 4) return "depthwise-small-map computes 1-D and 2-D Convs only";
      return {};
    case cpu::ConvAlgorithm::GroupedBlocks:
      if (x->shape.size() > 4) return "grouped-blocks computes 1-D and 2-D Convs only";
      return {};
    case cpu::ConvAlgorithm::Winograd: {
      const ops::WindowAttrs& window = std::get<ops::ConvAttrs>(op.typed).window;
      auto ones = [](const std::optional<ops::IntList>& list) {
        return !list || std::all_of(list->begin(), list->end(), [](int64_t v) { return v == 1; });
      };
      if (group != 1 || x->shape.size() != 4 || w->shape[2] != 3 || w->shape[3] != 3 || !ones(window.strides) ||
          !ones(window.dilations))
        return "winograd computes 2-D 3x3 Convs of stride 1 without dilation and group 1 only";
      if (w->kind != TensorKind::Weight && w->kind != TensorKind::LoadTime) return "winograd needs a constant weight";
      return {};
    }
  }
  return "unknown algorithm";
}

std::string shapeText(const TensorDesc& t) {
  if (!isBounded(t)) return ir::shapeToString(t.shape);
  std::string dims;
  for (size_t d = 0; d < t.shape.size(); ++d)
    dims += fmt::format("{}{}{}", d == 0 ? "" : "x", (t.bounded >> d) & 1 ? "<=" : "", t.shape[d]);
  return dims;
}

bool fitsShape(const TensorDesc& t, std::span<const int64_t> shape) {
  if (shape.size() != t.shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if ((t.bounded >> d) & 1 ? shape[d] < 0 || shape[d] > t.shape[d] : shape[d] != t.shape[d]) return false;
  return true;
}

bool hasBoundedTensors(const Program& program) {
  return std::any_of(program.tensors.begin(), program.tensors.end(), isBounded);
}

bool hasLoadTimeTensors(const Program& program) {
  return std::any_of(program.tensors.begin(), program.tensors.end(),
                     [](const TensorDesc& t) { return t.kind == TensorKind::LoadTime; });
}

bool isLoadTimeOp(const Program& program, const Op& op) {
  return !op.outputs.empty() && op.outputs[0] >= 0 && static_cast<size_t>(op.outputs[0]) < program.tensors.size() &&
         program.tensors[op.outputs[0]].kind == TensorKind::LoadTime;
}

std::string_view tensorKindName(TensorKind kind) {
  switch (kind) {
    case TensorKind::Input: return "input";
    case TensorKind::Output: return "output";
    case TensorKind::Arena: return "arena";
    case TensorKind::Weight: return "weight";
    case TensorKind::View: return "view";
    case TensorKind::LoadTime: return "load-time";
  }
  return "unknown";
}

namespace {

void writeTensorDesc(ByteWriter& w, const TensorDesc& t, bool boundedEncoding) {
  w.u8(static_cast<uint8_t>(t.kind));
  w.u32(static_cast<uint32_t>(t.type));
  w.u32(static_cast<uint32_t>(t.shape.size()));
  for (int64_t d : t.shape) w.i64(d);
  if (boundedEncoding) w.u8(t.bounded);
  w.u32(t.index);
  w.u64(t.offset);
  w.u64(t.size);
  w.str(t.name);
  w.u8(static_cast<uint8_t>(t.layout.kind));
  w.u16(t.layout.width);
  w.u16(t.layout.depth);
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

// Opens the optional kernel-choice section after the output list: "XCTKERN1" read as little-endian bytes.
constexpr uint64_t kKernelChoiceMagic = 0x314e52454b544358ull;

std::vector<std::byte> serialize(const Program& p) {
  ByteWriter w;
  // Encoding 5 only when it is needed: a program without a bounded tensor keeps encoding 4's bytes.
  const bool boundedEncoding = hasBoundedTensors(p);
  w.u64(boundedEncoding ? kProgramMagicBounded : kProgramMagic);
  w.u64(p.arenaSize);
  w.u32(static_cast<uint32_t>(p.tensors.size()));
  for (const TensorDesc& t : p.tensors) writeTensorDesc(w, t, boundedEncoding);
  w.u32(static_cast<uint32_t>(p.ops.size()));
  for (const Op& op : p.ops) {
    w.u16(ops::stableOpId(op.kind));
    w.i64(op.opset);
    w.str(op.name);
    // Typed families carry their values; the other kinds carry nothing (form 0, an empty list).
    const bool typed = ops::isTyped(op.typed);
    w.u8(typed ? 1 : 0);
    if (typed) writeTypedAttrs(w, op.typed);
    else w.u32(0);
    w.u32(static_cast<uint32_t>(op.inputs.size()));
    for (int32_t i : op.inputs) w.i32(i);
    w.u32(static_cast<uint32_t>(op.outputs.size()));
    for (int32_t i : op.outputs) w.i32(i);
  }
  w.u32(static_cast<uint32_t>(p.inputs.size()));
  for (int32_t i : p.inputs) w.i32(i);
  w.u32(static_cast<uint32_t>(p.outputs.size()));
  for (int32_t i : p.outputs) w.i32(i);
  // The kernel-choice section only when some op records one: a program without keeps the bytes it always had.
  const auto chosen = static_cast<uint32_t>(
      std::count_if(p.ops.begin(), p.ops.end(), [](const Op& op) { return op.kernel.recorded(); }));
  if (chosen != 0) {
    w.u64(kKernelChoiceMagic);
    w.u32(chosen);
    for (size_t i = 0; i < p.ops.size(); ++i) {
      if (!p.ops[i].kernel.recorded()) continue;
      w.u32(static_cast<uint32_t>(i));
      w.u8(static_cast<uint8_t>(p.ops[i].kernel.algorithm));
      w.u32(p.ops[i].kernel.blocking);
    }
  }
  return w.take();
}

Expected<Program> deserialize(std::span<const std::byte> bytes, uint64_t weightCount, const std::string& what) {
  ByteReader r(bytes, what);
  auto fail = [&](Error e) { return e.addContext(what); };
  uint64_t magic = r.u64();
  const bool boundedEncoding = r.ok() && magic == kProgramMagicBounded;
  if (!r.ok() || (magic != kProgramMagic && !boundedEncoding)) {
    // "XCTPROG1" to "XCTPROG3": a development encoding, named so that the user knows to recompile.
    constexpr uint64_t kMagicStem = kProgramMagic & 0x00ffffffffffffffull;
    const uint64_t digit = magic >> 56;
    if (r.ok() && (magic & 0x00ffffffffffffffull) == kMagicStem && digit >= '1' && digit < '4')
      return makeError(ErrorCode::Unsupported, "{}: compiled by ctxkit 0.1.0-dev program encoding {}: recompile", what,
                       static_cast<char>(digit));
    return makeError(ErrorCode::InvalidGraph, "{}: not a ctxkit program (bad magic)", what);
  }
  Program p;
  p.arenaSize = r.u64();
  uint32_t tensorCount = r.count(1 + 4 + 4 + 4 + 8 + 8 + 4 + 5, "tensor count");
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
    if (kind > static_cast<uint8_t>(TensorKind::LoadTime))
      return fail(makeError(ErrorCode::InvalidGraph, "tensor kind {} is unknown", kind));
    auto elemType = ir::elemTypeFromInt(static_cast<int32_t>(type));
    if (!elemType || *elemType == ir::ElemType::String || *elemType == ir::ElemType::Undefined)
      return fail(makeError(ErrorCode::InvalidGraph, "tensor element type {} is not supported", type));
    if (rank > kMaxRank) return fail(makeError(ErrorCode::InvalidGraph, "tensor rank {} exceeds {}", rank, kMaxRank));
    t.kind = static_cast<TensorKind>(kind);
    t.type = *elemType;
    t.shape.resize(rank);
    for (auto& d : t.shape) d = r.i64();
    if (boundedEncoding) t.bounded = r.u8();
    t.index = r.u32();
    t.offset = r.u64();
    t.size = r.u64();
    t.name = r.strView(kMaxStringBytes);
    uint8_t layout = r.u8();
    if (r.ok() && layout > static_cast<uint8_t>(cpu::WeightLayoutKind::Float16Widened))
      return fail(makeError(ErrorCode::InvalidGraph, "tensor '{}' has unknown layout {}", t.name, layout));
    t.layout.kind = static_cast<cpu::WeightLayoutKind>(layout);
    t.layout.width = r.u16();
    t.layout.depth = r.u16();
  }
  uint32_t opCount = r.count(2 + 1 + 8 + 4 + 4 + 4, "op count");
  p.ops.reserve(r.ok() ? opCount : 0);
  for (uint32_t i = 0; i < opCount && r.ok(); ++i) {
    Op& op =
        p.ops.emplace_back(Op{.name = Name(alloc), .inputs = Indices(alloc), .outputs = Indices(alloc), .typed = {}});
    uint32_t kind = r.u16();
    auto opKind = ir::opKindFromInt(kind);
    if (r.ok() && !opKind) return fail(makeError(ErrorCode::InvalidGraph, "op kind {} is unknown", kind));
    op.kind = opKind.value_or(ir::OpKind::Unknown);
    op.opset = r.i64();
    op.name = r.strView(kMaxStringBytes);
    uint8_t form = r.u8();
    if (!r.ok()) break;
    if (form > 1)
      return fail(makeError(ErrorCode::InvalidGraph, "op '{}' has unknown attribute form {}", op.name, form));
    op.typed = ops::defaultAttrsFor(op.kind);
    // One spelling per kind: typed attributes (form 1) for a typed family, an empty list (form 0) for the others.
    const bool typed = ops::isTyped(op.typed);
    if (form == 1) {
      if (!typed)
        return fail(makeError(ErrorCode::InvalidGraph, "op '{}' ({}) has typed attributes but its kind has none",
                              op.name, ir::opKindName(op.kind)));
      if (Status s = readOpAttrs(r, op, storage.get(), what); !s) return s;
    } else {
      if (typed)
        return fail(makeError(ErrorCode::InvalidGraph, "op '{}' ({}) has no typed attributes but its kind's are typed",
                              op.name, ir::opKindName(op.kind)));
      uint32_t attrCount = r.u32();
      if (r.ok() && attrCount != 0)
        return fail(makeError(ErrorCode::InvalidGraph, "op '{}' ({}) lists {} attributes; expected 0 for its kind",
                              op.name, ir::opKindName(op.kind), attrCount));
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
  // The optional kernel-choice section: op indices ascending, each a known algorithm (validate() checks it fits).
  if (r.remaining() != 0 && r.ok()) {
    if (r.u64() != kKernelChoiceMagic || !r.ok())
      return fail(makeError(ErrorCode::InvalidGraph, "bytes after the program are not a kernel-choice section"));
    const uint32_t chosen = r.count(4 + 1 + 4, "kernel choice count");
    int64_t last = -1;
    for (uint32_t c = 0; c < chosen && r.ok(); ++c) {
      const uint32_t index = r.u32();
      const uint8_t algorithm = r.u8();
      const uint32_t blocking = r.u32();
      if (!r.ok()) break;
      if (index >= p.ops.size() || static_cast<int64_t>(index) <= last)
        return fail(makeError(ErrorCode::InvalidGraph, "kernel choice {} names op {} (of {}, ascending expected)", c,
                              index, p.ops.size()));
      if (algorithm == 0 || algorithm >= cpu::kConvAlgorithmCount)
        return fail(makeError(ErrorCode::InvalidGraph, "kernel choice for op {} ('{}') has unknown algorithm {}", index,
                              p.ops[index].name, algorithm));
      if (blocking != 0)
        return fail(makeError(ErrorCode::InvalidGraph, "kernel choice for op {} ('{}') has blocking {}; expected 0",
                              index, p.ops[index].name, blocking));
      p.ops[index].kernel = cpu::KernelChoice{static_cast<cpu::ConvAlgorithm>(algorithm), blocking};
      last = index;
    }
    if (chosen == 0 && r.ok()) return fail(makeError(ErrorCode::InvalidGraph, "an empty kernel-choice section"));
    CTX_RETURN_IF_ERROR(r.status());
  }
  if (r.remaining() != 0)
    return fail(makeError(ErrorCode::InvalidGraph, "{} trailing bytes after the program", r.remaining()));
  // One spelling per program: encoding 5 is for programs holding a bounded tensor.
  if (boundedEncoding && !hasBoundedTensors(p))
    return fail(makeError(ErrorCode::InvalidGraph, "program encoding 5 but no tensor has a bounded dimension"));
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
            t.layout.plain() ? fmt::format("w{}", t.index) : fmt::format("w{}:{}", t.index, cpu::layoutName(t.layout));
        break;
      case TensorKind::View: loc = fmt::format("view(%{})", t.index); break;
      case TensorKind::LoadTime:
        loc = t.layout.plain() ? std::string("load") : fmt::format("load:{}", cpu::layoutName(t.layout));
        break;
    }
    return fmt::format("%{}:{}[{}]{}", i, ir::elemTypeName(t.type), shapeText(t), loc);
  };
  for (size_t i = 0; i < p.inputs.size(); ++i)
    out += fmt::format("  input {}: {} '{}'\n", i, tensorText(p.inputs[i]), p.tensors[p.inputs[i]].name);
  for (const Op& op : p.ops) {
    std::string ins, outs, attrs;
    for (int32_t i : op.inputs) ins += (ins.empty() ? "" : ", ") + tensorText(i);
    for (int32_t i : op.outputs) outs += (outs.empty() ? "" : ", ") + tensorText(i);
    attrs = ops::attrsText(op.typed);
    if (op.kernel.recorded()) attrs += fmt::format(" kernel={}", cpu::convAlgorithmName(op.kernel.algorithm));
    out += fmt::format("  {} = {}({}){}\n", outs, ir::opKindName(op.kind), ins, attrs);
  }
  for (size_t i = 0; i < p.outputs.size(); ++i)
    out += fmt::format("  output {}: {} '{}'\n", i, tensorText(p.outputs[i]), p.tensors[p.outputs[i]].name);
  return out;
}

}  // namespace ctxkit::program
