// Shape-making data ops: ConstantOfShape, Expand, Range and Pad (constant, reflect, edge and wrap modes).
#include "cpu/convert.h"
#include "kernels/ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

constexpr size_t kMinChunk = 16384;

// Copies `value` (one element of `size` bytes) into every element of `out`.
void fillBytes(std::byte* out, size_t count, const std::byte* value, size_t size) {
  for (size_t i = 0; i < count; ++i) std::memcpy(out + i * size, value, size);
}

}  // namespace

// ---- ConstantOfShape ----------------------------------------------------------------------------------

namespace {

// The value's bytes (the decoder keeps up to 16, zero-padded), after checking its type is one a tensor holds.
Expected<std::array<std::byte, 16>> constantOfShapeBytes(const OpContext& ctx) {
  const auto& attrs = attrsOf<ops::ConstantOfShapeAttrs>(ctx);
  if (!inSet(kFixedSizeTypes, attrs.type))
    return unsupported(ctx, "attribute value has unsupported type {}", ir::elemTypeName(attrs.type));
  std::array<std::byte, 16> bytes{};
  std::memcpy(bytes.data(), &attrs.low, 8);
  std::memcpy(bytes.data() + 8, &attrs.high, 8);
  return bytes;
}

}  // namespace

InferResult inferConstantOfShape(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(constantOfShapeBytes(ctx).status());
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> dims, knownInts(ctx, inputs, 0, "input"));
  for (int64_t d : dims)
    if (d < 0) return invalid(ctx, "input 0 (input) holds a negative dimension in {}", shapeStr(dims));
  return single(attrsOf<ops::ConstantOfShapeAttrs>(ctx).type, ir::Shape(dims.begin(), dims.end()));
}

Status runConstantOfShape(const OpContext& ctx, RunIns, RunOuts outputs) {
  CTX_ASSIGN_OR_RETURN(const auto bytes, constantOfShapeBytes(ctx));
  ir::Tensor& y = *outputs[0];
  const size_t size = ir::elemSize(y.type());
  // Always written: an output may sit in arena memory an earlier op or run used.
  if (std::all_of(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size),
                  [](std::byte b) { return b == std::byte{0}; })) {
    std::memset(y.mutableData(), 0, y.byteSize());
    return Status::ok();
  }
  fillBytes(y.mutableData(), static_cast<size_t>(y.elementCount()), bytes.data(), size);
  return Status::ok();
}

// ---- Expand -------------------------------------------------------------------------------------------

InferResult inferExpand(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  CTX_ASSIGN_OR_RETURN(std::vector<int64_t> dims, knownInts(ctx, inputs, 1, "shape"));
  auto shape = broadcastShapes(inputs[0].shape, dims);
  if (!shape)
    return invalid(ctx, "input shape {} does not broadcast with shape {}", shapeStr(inputs[0].shape), shapeStr(dims));
  return single(inputs[0].type, std::move(*shape));
}

Status runExpand(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  return visitElemSize(ctx, ir::elemSize(y.type()), [&](auto tag) -> Status {
    using T = decltype(tag);
    std::array<std::span<const int64_t>, 1> shapes{x.shape()};
    BroadcastWalk walk = BroadcastWalk::make(y.shape(), shapes);
    const T* in = x.dataAs<T>();
    T* out = y.mutableDataAs<T>();
    parallelFor(ctx, static_cast<size_t>(walk.total), kMinChunk, [&](size_t begin, size_t end) {
      walk.visit(static_cast<int64_t>(begin), static_cast<int64_t>(end), [&](const auto& off, int64_t n) {
        for (int64_t i = 0; i < n; ++i) out[off[0] + i] = in[off[1] + i * walk.innerStride[1]];
      });
    });
    return Status::ok();
  });
}

// ---- Range --------------------------------------------------------------------------------------------

namespace {

constexpr TypeSet kRangeTypes = typeBit(ElemType::Float) | typeBit(ElemType::Double) | typeBit(ElemType::Int16) |
                                typeBit(ElemType::Int32) | typeBit(ElemType::Int64) | kHalfTypes;
constexpr const char* kRangeNames[] = {"start", "limit", "delta"};

}  // namespace

InferResult inferRange(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 3, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kRangeTypes));
  double v[3];
  for (size_t i = 0; i < 3; ++i) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
    if (dimProduct(inputs[i].shape) != 1 || inputs[i].shape.size() > 1)
      return invalid(ctx, "input {} ({}) has shape {} but expected a scalar", i, kRangeNames[i],
                     shapeStr(inputs[i].shape));
    if (!inputs[i].value)
      return unsupported(ctx, "input {} ({}) must be a known constant to infer the output shape", i, kRangeNames[i]);
    CTX_RETURN_IF_ERROR(cpu::convertElements(inputs[i].type, inputs[i].value->data(), ElemType::Double, &v[i], 1));
  }
  if (v[2] == 0) return invalid(ctx, "input 2 (delta) is zero");
  int64_t count = 0;
  if (inSet(kIntTypes, inputs[0].type)) {
    auto ints = [&](size_t i) { return tensorInts(*inputs[i].value)[0]; };
    int64_t start = inputs[0].type == ElemType::Int16 ? static_cast<int64_t>(v[0]) : ints(0);
    int64_t limit = inputs[0].type == ElemType::Int16 ? static_cast<int64_t>(v[1]) : ints(1);
    int64_t delta = inputs[0].type == ElemType::Int16 ? static_cast<int64_t>(v[2]) : ints(2);
    if (delta == 0) return invalid(ctx, "input 2 (delta) is zero");
    const CheckedInt span = CheckedInt(limit) - start;
    if (!span.ok()) return invalid(ctx, "limit {} minus start {} overflows", limit, start);
    // ceil(span / delta) with integer arithmetic (delta = -1 goes through CheckedInt: INT64_MIN / -1 overflows).
    const CheckedInt quotient = span / delta;
    if (!quotient.ok())
      return invalid(ctx, "start {}, limit {} and delta {} overflow the element count", start, limit, delta);
    const bool rest = (span % delta).value() != 0 && ((span.value() < 0) == (delta < 0));
    count = quotient.value() + (rest ? 1 : 0);
  } else {
    double c = std::ceil((v[1] - v[0]) / v[2]);
    // Beyond 2^62 elements no tensor fits; the bound also keeps the conversion to int64 defined.
    if (!std::isfinite(c) || c > 0x1p62) return invalid(ctx, "start, limit and delta give an element count of {}", c);
    count = static_cast<int64_t>(c);
  }
  return single(inputs[0].type, {std::max<int64_t>(count, 0)});
}

Status runRange(const OpContext&, RunIns inputs, RunOuts outputs) {
  ir::Tensor& y = *outputs[0];
  int64_t n = y.shape()[0];
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    T start = *inputs[0]->dataAs<T>();
    T delta = *inputs[2]->dataAs<T>();
    T* out = y.mutableDataAs<T>();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  };
  switch (y.type()) {
    case ElemType::Float: fill(float{}); break;
    case ElemType::Double: fill(double{}); break;
    case ElemType::Int16: fill(int16_t{}); break;
    case ElemType::Int32: fill(int32_t{}); break;
    default: fill(int64_t{}); break;
  }
  return Status::ok();
}

// ---- Pad ----------------------------------------------------------------------------------------------

namespace {

using ops::PadMode;

std::string_view padModeName(PadMode mode) {
  constexpr std::string_view names[] = {"constant", "reflect", "edge", "wrap"};
  return names[static_cast<size_t>(mode)];
}

struct PadParams {
  PadMode mode = PadMode::Constant;
  std::vector<int64_t> begin, end;  // per axis of the data
};

Expected<PadParams> padParams(const OpContext& ctx, InDescs inputs) {
  PadParams p;
  const auto& attrs = attrsOf<ops::PadAttrs>(ctx);
  p.mode = attrs.mode;
  auto rank = static_cast<int64_t>(inputs[0].shape.size());
  std::vector<int64_t> pads;
  std::vector<int64_t> axes;
  if (ctx.opset < 11) {
    if (attrs.pads) pads.assign(attrs.pads->begin(), attrs.pads->end());
  } else {
    CTX_ASSIGN_OR_RETURN(pads, knownInts(ctx, inputs, 1, "pads"));
    if (optionalInput(inputs, 3)) {
      CTX_ASSIGN_OR_RETURN(std::vector<int64_t> raw, knownInts(ctx, inputs, 3, "axes"));
      CTX_ASSIGN_OR_RETURN(axes, normalizeAxes(ctx, std::move(raw), rank, "axes"));
    }
  }
  if (axes.empty() && !(ctx.opset >= 11 && optionalInput(inputs, 3)))
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  if (pads.size() != 2 * axes.size())
    return invalid(ctx, "pads has {} values but expected {} (2 per padded axis)", pads.size(), 2 * axes.size());
  p.begin.assign(static_cast<size_t>(rank), 0);
  p.end.assign(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto a = static_cast<size_t>(axes[i]);
    p.begin[a] = pads[i];
    p.end[a] = pads[i + axes.size()];
  }
  for (size_t a = 0; a < p.begin.size(); ++a) {
    int64_t n = inputs[0].shape[a];
    if (!(CheckedInt(n) + p.begin[a] + p.end[a]).ok())
      return invalid(ctx, "pads {} and {} overflow axis {} of extent {}", p.begin[a], p.end[a], a, n);
    if (n + p.begin[a] + p.end[a] < 0)
      return invalid(ctx, "pads {} and {} remove more than the {} elements of axis {}", p.begin[a], p.end[a], n, a);
    if (p.mode != PadMode::Constant && n == 0 && (p.begin[a] > 0 || p.end[a] > 0))
      return invalid(ctx, "cannot pad empty axis {} in mode '{}'", a, padModeName(p.mode));
  }
  return p;
}

// Source index along an axis of size n for output position o, or -1 for the constant.
int64_t padSource(PadMode mode, int64_t o, int64_t begin, int64_t n) {
  int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Edge: return i < 0 ? 0 : n - 1;
    case PadMode::Wrap: return ((i % n) + n) % n;
    case PadMode::Reflect:
      if (n == 1) return 0;
      while (i < 0 || i >= n) {
        if (i < 0) i = -i;
        if (i >= n) i = 2 * (n - 1) - i;
      }
      return i;
  }
  return -1;
}

}  // namespace

InferResult inferPad(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, ctx.opset < 11 ? 1 : 2, ctx.opset < 11 ? 1 : (ctx.opset < 18 ? 3 : 4)));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFixedSizeTypes));
  if (const ValueDesc* cv = optionalInput(inputs, 2)) {
    CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 2));
    if (dimProduct(cv->shape) != 1 || cv->shape.size() > 1)
      return invalid(ctx, "input 2 (constant_value) has shape {} but expected a scalar", shapeStr(cv->shape));
  }
  CTX_ASSIGN_OR_RETURN(PadParams p, padParams(ctx, inputs));
  ir::Shape shape = inputs[0].shape;
  for (size_t a = 0; a < shape.size(); ++a) shape[a] += p.begin[a] + p.end[a];
  return single(inputs[0].type, std::move(shape));
}

namespace {

// What a Pad run needs besides its data: the parameters and, per axis, the source index of every output position
// (-1: the constant) and the input's stride. Worked out at prepare when the pads are constants.
struct PadPlan {
  PadParams params;
  std::vector<std::vector<int64_t>> src;
  std::vector<int64_t> inStride;
};

Expected<PadPlan> makePadPlan(const OpContext& ctx, InDescs inputs) {
  PadPlan plan;
  CTX_ASSIGN_OR_RETURN(plan.params, padParams(ctx, inputs));
  const ir::Shape& in = inputs[0].shape;
  const size_t rank = in.size();
  plan.src.resize(rank);
  plan.inStride.assign(rank, 1);
  for (size_t a = rank; a-- > 0;) {
    if (a + 1 < rank) plan.inStride[a] = plan.inStride[a + 1] * in[a + 1];
    const int64_t extent = in[a] + plan.params.begin[a] + plan.params.end[a];
    plan.src[a].resize(static_cast<size_t>(extent));
    for (int64_t o = 0; o < extent; ++o)
      plan.src[a][static_cast<size_t>(o)] = padSource(plan.params.mode, o, plan.params.begin[a], in[a]);
  }
  return plan;
}

}  // namespace

Expected<std::shared_ptr<const void>> planPadOnce(const OpContext& ctx, InDescs inputs) {
  CTX_ASSIGN_OR_RETURN(PadPlan plan, makePadPlan(ctx, inputs));
  return std::shared_ptr<const void>(std::make_shared<const PadPlan>(std::move(plan)));
}

Status runPad(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  ir::Tensor& y = *outputs[0];
  PadPlan planned;
  if (!ctx.plan) {
    std::vector<ValueDesc> descs = describeInputs(inputs, true);
    CTX_ASSIGN_OR_RETURN(planned, makePadPlan(ctx, descs));
  }
  const PadPlan& plan = ctx.plan ? *static_cast<const PadPlan*>(ctx.plan) : planned;
  size_t size = ir::elemSize(x.type());
  std::array<std::byte, 16> constant{};
  if (ctx.opset < 11) {
    float v = attrsOf<ops::PadAttrs>(ctx).value;
    CTX_RETURN_IF_ERROR(cpu::convertElements(ElemType::Float, &v, x.type(), constant.data(), 1));
  } else if (inputs.size() > 2 && inputs[2]) {
    std::memcpy(constant.data(), inputs[2]->data(), size);
  }
  if (y.elementCount() == 0) return Status::ok();
  size_t rank = x.rank();
  if (rank == 0) {
    std::memcpy(y.mutableData(), x.data(), size);
    return Status::ok();
  }
  const std::vector<std::vector<int64_t>>& src = plan.src;
  const std::vector<int64_t>& inStride = plan.inStride;
  int64_t inner = y.shape()[rank - 1];
  int64_t rows = static_cast<int64_t>(y.elementCount()) / inner;
  const std::byte* in = x.data();
  std::byte* out = y.mutableData();
  const std::vector<int64_t>& last = src[rank - 1];
  // The longest stretch of the last axis read from consecutive input elements: copied in one piece per row; only the
  // padded ends go element by element.
  size_t run0 = 0, run1 = 0;
  for (size_t i = 0; i < last.size();) {
    size_t j = i + 1;
    if (last[i] >= 0)
      while (j < last.size() && last[j] == last[j - 1] + 1) ++j;
    if (last[i] >= 0 && j - i > run1 - run0) {
      run0 = i;
      run1 = j;
    }
    i = j;
  }
  parallelFor(
      ctx, static_cast<size_t>(rows), std::max<size_t>(1, kMinChunk / static_cast<size_t>(inner)),
      [&](size_t begin, size_t end) {
        for (size_t r = begin; r < end; ++r) {
          std::byte* o = out + r * static_cast<size_t>(inner) * size;
          int64_t offset = 0;
          size_t rem = r;
          bool isConstant = false;
          for (size_t a = rank - 1; a-- > 0;) {
            auto dim = static_cast<size_t>(y.shape()[a]);
            int64_t s = src[a][rem % dim];
            rem /= dim;
            if (s < 0) isConstant = true;
            offset += s * inStride[a];
          }
          if (isConstant) {
            fillBytes(o, static_cast<size_t>(inner), constant.data(), size);
            continue;
          }
          auto one = [&](size_t i) {
            const std::byte* v = last[i] < 0 ? constant.data() : in + static_cast<size_t>(offset + last[i]) * size;
            std::memcpy(o + i * size, v, size);
          };
          for (size_t i = 0; i < run0; ++i) one(i);
          if (run1 > run0)
            std::memcpy(o + run0 * size, in + static_cast<size_t>(offset + last[run0]) * size, (run1 - run0) * size);
          for (size_t i = run1; i < static_cast<size_t>(inner); ++i) one(i);
        }
      });
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
