// Helpers shared by the kernel files: node-scoped errors, type sets and dispatch, shape and axis arithmetic.
#pragma once

#include "kernels/kernels.h"
#include "support/checked.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace ctxkit::kernels::detail {

using ir::ElemType;
using InferResult = Expected<std::vector<OutputDesc>>;
using InDescs = std::span<const ValueDesc>;
using RunIns = std::span<const ir::Tensor* const>;
using RunOuts = std::span<ir::Tensor* const>;

// ---- errors ------------------------------------------------------------------------------------------

// "node 'conv1' (Conv)", or "unnamed node (Conv)".
std::string nodeLabel(const OpContext& ctx);

template <typename... Args>
Error nodeError(const OpContext& ctx, ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Error(code, fmt::format("{}: {}", nodeLabel(ctx), fmt::format(format, std::forward<Args>(args)...)));
}
template <typename... Args> Error invalid(const OpContext& ctx, fmt::format_string<Args...> format, Args&&... args) {
  return nodeError(ctx, ErrorCode::InvalidGraph, format, std::forward<Args>(args)...);
}
template <typename... Args>
Error unsupported(const OpContext& ctx, fmt::format_string<Args...> format, Args&&... args) {
  return nodeError(ctx, ErrorCode::Unsupported, format, std::forward<Args>(args)...);
}

// ---- element type sets -------------------------------------------------------------------------------

using TypeSet = uint64_t;
constexpr TypeSet typeBit(ElemType t) { return TypeSet{1} << static_cast<int>(t); }

inline constexpr TypeSet kHalfTypes = typeBit(ElemType::Float16) | typeBit(ElemType::BFloat16);
inline constexpr TypeSet kFloatTypes = typeBit(ElemType::Float) | typeBit(ElemType::Double) | kHalfTypes;
inline constexpr TypeSet kSignedIntTypes =
    typeBit(ElemType::Int8) | typeBit(ElemType::Int16) | typeBit(ElemType::Int32) | typeBit(ElemType::Int64);
inline constexpr TypeSet kUnsignedIntTypes =
    typeBit(ElemType::Uint8) | typeBit(ElemType::Uint16) | typeBit(ElemType::Uint32) | typeBit(ElemType::Uint64);
inline constexpr TypeSet kIntTypes = kSignedIntTypes | kUnsignedIntTypes;
inline constexpr TypeSet kNumericTypes = kFloatTypes | kIntTypes;
inline constexpr TypeSet kIndexTypes = typeBit(ElemType::Int32) | typeBit(ElemType::Int64);
// Types kernels compute in directly (no float16 conversion).
inline constexpr TypeSet kNativeNumeric = typeBit(ElemType::Float) | typeBit(ElemType::Double) | kIntTypes;
// Every type with a whole number of bytes per element: data movement ops handle them all by size.
inline constexpr TypeSet kFixedSizeTypes = kNumericTypes | typeBit(ElemType::Bool) | typeBit(ElemType::Complex64) |
                                           typeBit(ElemType::Complex128) | typeBit(ElemType::Float8E4M3FN) |
                                           typeBit(ElemType::Float8E4M3FNUZ) | typeBit(ElemType::Float8E5M2) |
                                           typeBit(ElemType::Float8E5M2FNUZ) | typeBit(ElemType::Float8E8M0);

constexpr bool inSet(TypeSet set, ElemType t) {
  auto i = static_cast<int>(t);
  return i >= 0 && i < 64 && (set & typeBit(t)) != 0;
}
std::string typeSetNames(TypeSet set);  // "float32, float64, int32"

// Calls `f(T{})` for the C++ type of `t` when `t` is in `Set` (only those instantiations are made).
// Half types are not dispatched here: kernels see them as float (see op_table.cpp).
template <TypeSet Set, typename F> Status visitType(ElemType t, F&& f) {
#define CTX_VISIT_CASE(E, T)                                                                                           \
  case ElemType::E:                                                                                                    \
    if constexpr ((Set & typeBit(ElemType::E)) != 0) return f(T{});                                                    \
    break;
  switch (t) {
    CTX_VISIT_CASE(Float, float)
    CTX_VISIT_CASE(Double, double)
    CTX_VISIT_CASE(Int8, int8_t)
    CTX_VISIT_CASE(Int16, int16_t)
    CTX_VISIT_CASE(Int32, int32_t)
    CTX_VISIT_CASE(Int64, int64_t)
    CTX_VISIT_CASE(Uint8, uint8_t)
    CTX_VISIT_CASE(Uint16, uint16_t)
    CTX_VISIT_CASE(Uint32, uint32_t)
    CTX_VISIT_CASE(Uint64, uint64_t)
    CTX_VISIT_CASE(Bool, bool)
    default: break;
  }
#undef CTX_VISIT_CASE
  return makeError(ErrorCode::Unsupported, "element type {} is not supported here", ir::elemTypeName(t));
}

// ---- input and attribute checks ----------------------------------------------------------------------

// The op's typed attributes. The op table's entry points and prepare() decode them before any kernel runs.
template <typename T> const T& attrsOf(const OpContext& ctx) { return std::get<T>(*ctx.typed); }

// Descriptions of run-time inputs (absent ones marked not present); `withValues` also points at the contents.
std::vector<ValueDesc> describeInputs(RunIns inputs, bool withValues);
// As describeInputs, into `descs`, whose storage is reused (no allocation once it has held shapes of these ranks).
void describeInputsInto(RunIns inputs, bool withValues, std::vector<ValueDesc>& descs);

// `count` input slots in [min, max]; required inputs (index < required) must be present.
Status checkInputs(const OpContext& ctx, InDescs inputs, size_t min, size_t max);
Status checkOutputs(const OpContext& ctx, size_t count, size_t min, size_t max);
Status checkType(const OpContext& ctx, InDescs inputs, size_t index, TypeSet allowed);
Status checkSameType(const OpContext& ctx, InDescs inputs, size_t a, size_t b);
Status checkRank(const OpContext& ctx, InDescs inputs, size_t index, size_t rank);
// The input when its slot exists and is present, else null.
const ValueDesc* optionalInput(InDescs inputs, size_t index);

// Axis in [-rank, rank) mapped to [0, rank).
Expected<int64_t> normalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank, std::string_view what);
// A list of axes, each normalized; duplicates are an error.
Expected<std::vector<int64_t>> normalizeAxes(const OpContext& ctx, std::span<const int64_t> axes, int64_t rank,
                                             std::string_view what);

// The contents of an int32/int64 input of rank 0 or 1 that inference needs; Unsupported when unknown.
Expected<std::vector<int64_t>> knownInts(const OpContext& ctx, InDescs inputs, size_t index, std::string_view name);
std::vector<int64_t> tensorInts(const ir::Tensor& t);  // int32/int64/uint8 tensor read as int64
// DynamicQuantizeLinear's uint8 quantization of float values, as ONNX Runtime computes it (DynamicQuantizeLinear and
// DynamicQuantizeMatMul): the range [min(0, x), max(0, x)] over 255 steps, the zero point round(-min / scale) to
// nearest even. The scale is 0 when every value is 0; each value then quantizes to the zero point, 0.
struct DynamicUint8 {
  float scale = 0, zero = 0;
  uint8_t quantize(float v) const {
    return static_cast<uint8_t>(scale == 0 ? zero : std::clamp(std::nearbyint(v / scale) + zero, 0.0f, 255.0f));
  }
};
DynamicUint8 dynamicUint8(const float* x, size_t n);

// An int32/int64/uint8 tensor read in place as int64, element by element: what a run reads indices through without
// copying them (tensorInts allocates).
class IntView {
public:
  explicit IntView(const ir::Tensor& t)
      : data_(t.data()), type_(t.type()), size_(static_cast<size_t>(t.elementCount())) {}
  size_t size() const { return size_; }
  int64_t operator[](size_t i) const {
    switch (type_) {
      case ir::ElemType::Int64: return reinterpret_cast<const int64_t*>(data_)[i];
      case ir::ElemType::Int32: return reinterpret_cast<const int32_t*>(data_)[i];
      case ir::ElemType::Uint8: return reinterpret_cast<const uint8_t*>(data_)[i];
      default: return 0;
    }
  }

private:
  const std::byte* data_;
  ir::ElemType type_;
  size_t size_;
};

// ---- shapes ------------------------------------------------------------------------------------------

// The product of dims[begin, end); INT64_MAX when it overflows.
int64_t dimProduct(std::span<const int64_t> dims, size_t begin, size_t end);
inline int64_t dimProduct(std::span<const int64_t> dims) { return dimProduct(dims, 0, dims.size()); }
// Multidirectional (numpy) broadcast of two shapes, nullopt when they do not broadcast.
std::optional<ir::Shape> broadcastShapes(std::span<const int64_t> a, std::span<const int64_t> b);
// Whether `from` broadcasts to `to` without changing `to`.
bool broadcastsTo(std::span<const int64_t> from, std::span<const int64_t> to);
std::string shapeStr(std::span<const int64_t> shape);
// Checks that the element count of `shape` is representable.
Status checkShapeSize(const OpContext& ctx, std::span<const int64_t> shape);
// checkShapeSize, and the output's bytes within ir::memoryLimit().
Status checkOutputSize(const OpContext& ctx, const OutputDesc& out);

// A vector that keeps up to N elements inline, so that per-run shape arithmetic (strides, indices, collapsed
// dims) allocates nothing for the ranks models use; a longer one spills to the heap. Only what kernels need.
template <typename T, size_t N> class SmallVec {
public:
  SmallVec() = default;
  explicit SmallVec(size_t n, const T& v = T{}) { assign(n, v); }
  void assign(size_t n, const T& v) {
    size_ = 0;
    heap_.clear();
    for (size_t i = 0; i < n; ++i) push_back(v);
  }
  void push_back(const T& v) {
    if (size_ < N) {
      inline_[size_++] = v;
      return;
    }
    if (size_ == N) heap_.assign(inline_.begin(), inline_.end());
    heap_.push_back(v);
    ++size_;
  }
  void pop_back() {
    if (size_ == N + 1) std::copy(heap_.begin(), heap_.begin() + N, inline_.begin());  // back to inline storage
    if (size_ > N) heap_.pop_back();
    --size_;
  }
  T* data() { return size_ <= N ? inline_.data() : heap_.data(); }
  const T* data() const { return size_ <= N ? inline_.data() : heap_.data(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  operator std::span<const T>() const { return {data(), size_}; }

private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;  // all elements once there are more than N
  size_t size_ = 0;
};
inline constexpr size_t kInlineRank = 8;
using Dims = SmallVec<int64_t, kInlineRank>;

// A window attribute (strides, dilations, pads, ...) of `count` values, `fallback` each when absent; an error naming
// the attribute when it has another count. `Out` is Dims (no allocation) or std::vector<int64_t>.
template <class Out>
Expected<Out> listOrDefault(const OpContext& ctx, const std::optional<ops::IntList>& list, std::string_view name,
                            size_t count, int64_t fallback) {
  if (!list) return Out(count, fallback);
  if (list->size() != count)
    return invalid(ctx, "attribute {} has {} values but expected {}", name, list->size(), count);
  Out values;
  for (int64_t v : *list) values.push_back(v);
  return values;
}

// Element strides of `shape` (row-major), with 0 where an input of shape `in` (right-aligned) broadcasts.
Dims broadcastStrides(std::span<const int64_t> in, std::span<const int64_t> out);

// Walks an output of `outShape` in contiguous runs for up to kMaxOperands broadcast inputs: for each run,
// `f(offsets, n)` where offsets[i] is the element offset of operand i (operand 0 is the output) and every
// operand advances by innerStride[i] (0 or 1) per element.
struct BroadcastWalk {
  static constexpr size_t kMaxOperands = 4;
  size_t operands = 0;
  Dims outer;                                                        // collapsed outer dims
  SmallVec<std::array<int64_t, kMaxOperands>, kInlineRank> strides;  // per outer dim, per operand
  int64_t inner = 1;
  std::array<int64_t, kMaxOperands> innerStride{};
  int64_t total = 0;

  static BroadcastWalk make(std::span<const int64_t> outShape, std::span<const std::span<const int64_t>> ins);
  // Visits output elements [begin, end).
  template <typename F> void visit(int64_t begin, int64_t end, F&& f) const;
};

template <typename F> void BroadcastWalk::visit(int64_t begin, int64_t end, F&& f) const {
  if (begin >= end) return;
  size_t rank = outer.size();
  int64_t row = begin / inner;
  int64_t col = begin % inner;
  Dims idx(rank, 0);
  std::array<int64_t, kMaxOperands> base{};
  int64_t r = row;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = r % outer[d];
    r /= outer[d];
    for (size_t o = 0; o < operands; ++o) base[o] += idx[d] * strides[d][o];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = std::min(inner - col, end - pos);
    std::array<int64_t, kMaxOperands> off{};
    for (size_t o = 0; o < operands; ++o) off[o] = base[o] + col * innerStride[o];
    f(off, n);
    pos += n;
    col = 0;
    for (size_t d = rank; d-- > 0;) {
      ++idx[d];
      for (size_t o = 0; o < operands; ++o) base[o] += strides[d][o];
      if (idx[d] < outer[d]) break;
      for (size_t o = 0; o < operands; ++o) base[o] -= idx[d] * strides[d][o];
      idx[d] = 0;
    }
  }
}

// ---- execution helpers -------------------------------------------------------------------------------

// Runs body over [0, count) on ctx.pool when set, in chunks of at least minChunk. The pool gets a std::function
// holding a reference to `body`, which never allocates; one holding a lambda's captures would, on every call.
template <typename F> void parallelFor(const OpContext& ctx, size_t count, size_t minChunk, F&& body) {
  if (count == 0) return;
  if (ctx.pool == nullptr || ctx.pool->threads() <= 1 || count <= minChunk) {
    body(size_t{0}, count);
    return;
  }
  ctx.pool->parallelFor(count, minChunk, std::function<void(size_t, size_t)>(std::ref(body)));
}

// A loop whose whole work is below this many units (about one multiply-add, or one element moved, each) runs on
// the calling thread: handing it to the pool costs more than the second thread saves.
inline constexpr size_t kMinParallelWork = size_t{1} << 16;

// parallelFor for `count` items of about `workPerItem` units each: serial when the loop is small, and otherwise in
// chunks of at least half of kMinParallelWork units and at least `minItems` items (for loops whose chunks each pay
// a set-up cost, such as copying the input once).
template <typename F>
void parallelForWork(const OpContext& ctx, size_t count, size_t workPerItem, F&& body, size_t minItems = 1) {
  workPerItem = std::max<size_t>(workPerItem, 1);
  const bool small = static_cast<double>(count) * static_cast<double>(workPerItem) < kMinParallelWork;
  const size_t minChunk = small ? count : std::max({size_t{1}, minItems, kMinParallelWork / 2 / workPerItem});
  parallelFor(ctx, count, minChunk, std::forward<F>(body));
}

// Calls `f(T{})` with an unsigned integer type (or ElemBytes16) as wide as one element of `size` bytes, for
// kernels that only move elements.
struct ElemBytes16 {
  uint64_t lo, hi;
};
template <typename F> Status visitElemSize(const OpContext& ctx, size_t size, F&& f) {
  switch (size) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    case 16: return f(ElemBytes16{});
    default: return unsupported(ctx, "elements of {} bytes are not supported", size);
  }
}

// The single-output shape result most shape rules return.
inline InferResult single(ElemType type, ir::Shape shape) {
  return std::vector<OutputDesc>{OutputDesc{type, std::move(shape)}};
}

}  // namespace ctxkit::kernels::detail
