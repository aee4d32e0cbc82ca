// Loop and Scan on the session's frame path: their iterations, and their state (scalars, carried values, slices and
// stacked outputs) in kept buffers.
#include "runtime/iteration.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

namespace ctxkit::runtime {

namespace {

// The bytes of one element, or 0 for types packing several elements in a byte (and strings): those are not sliced
// or stacked by bytes.
size_t wholeElementBytes(ir::ElemType type) {
  const size_t size = ir::elemSize(type);
  const auto two = ir::storageBytes(type, 2);
  return size > 0 && two && *two == 2 * size ? size : 0;
}

// `t` may be written again in place: it owns its buffer alone.
bool reusable(const ir::Tensor& t, ir::ElemType type) {
  return t.isWritable() && t.owner() && t.owner().use_count() == 1 && t.type() == type;
}

// The element count of (part of) a tensor's shape, checked.
Expected<uint64_t> product(std::span<const int64_t> dims) {
  if (const auto n = ir::elementCount(dims)) return *n;
  return makeError(ErrorCode::InvalidGraph, "shape {} has no representable element count", ir::shapeToString(dims));
}

// The name of the body's input `k` (what a node input that is missing would have been given to).
std::string_view bodyInput(const IterationPlan& plan, size_t k) {
  return k < plan.graph->inputs.size() ? std::string_view(plan.graph->inputs[k].name) : std::string_view();
}

// Runs the body once and points it.produced at its outputs.
Status runIterationBody(BodyFrame& f, const IterationPlan& plan, IterationState& it) {
  CTX_RETURN_IF_ERROR(f.runBody());
  it.produced.clear();
  for (size_t k = 0; k < f.outputs.size(); ++k) {
    if (!f.values[f.outputs[k]])
      return makeError(ErrorCode::InvalidGraph, "the body never produces its output {} ('{}')", k,
                       k < plan.graph->outputs.size() ? plan.graph->outputs[k].name : std::string());
    it.produced.push_back(f.values[f.outputs[k]]);
  }
  return Status::ok();
}

// Hands the loop-carried values the body produced (it.produced[first, first + count)) on to the next iteration as
// it.carried, it.current pointing at them. A value in a tensor of the body's own slots is taken by swapping buffers
// (the slot gets the previous iteration's buffer back, to write its next value into); any other (a body input passed
// through, an outer value, a Constant's, a kept output, one given twice) is copied into a kept buffer.
Status handOn(BodyFrame& f, IterationState& it, size_t first, size_t count) {
  it.next.resize(count);
  it.carried.resize(count);
  it.peak.resize(count, 0);
  it.swappedSlot.resize(count, kNoSlot);
  const ir::Tensor* const owned = f.owned.data();
  for (size_t k = 0; k < count; ++k) {
    const ir::Tensor* p = it.produced[first + k];
    it.peak[k] = std::max<uint64_t>(it.peak[k], p->byteSize());
    size_t same = k;
    for (size_t j = 0; j < k; ++j)
      if (it.produced[first + j] == p) same = j;
    if (same != k) {
      CTX_RETURN_IF_ERROR(copyInto(it.next[k], it.next[same]));  // its buffer went to it.next[same]
      continue;
    }
    const bool inOwned = std::less_equal<>()(owned, p) && std::less<>()(p, owned + f.owned.size());
    const size_t slot = inOwned ? static_cast<size_t>(p - owned) : kNoSlot;
    if (slot != kNoSlot && slot >= f.slotBegin && slot < f.slotEnd && !(*f.madeOnce)[slot]) {
      std::swap(f.owned[slot], it.next[k]);
      it.swappedSlot[k] = slot;
    } else {
      CTX_RETURN_IF_ERROR(copyInto(it.next[k], *p));
    }
  }
  std::swap(it.carried, it.next);
  it.current.assign(count, nullptr);
  for (size_t k = 0; k < count; ++k) it.current[k] = &it.carried[k];
  return Status::ok();
}

// After the last iteration: the spare buffers loop-carried values rotate through (it.next, and the body slot each
// was swapped out of) get room for the most bytes that value took. Which buffer an iteration's value lands in
// depends on how many iterations ran before, so a value that grows would otherwise find a buffer too small now and
// then in every run; this way a later run of the same sizes allocates nothing.
Status keepRoom(BodyFrame& f, IterationState& it) {
  for (size_t k = 0; k < it.peak.size(); ++k) {
    ir::Tensor* spares[] = {&it.next[k], it.swappedSlot[k] != kNoSlot ? &f.owned[it.swappedSlot[k]] : nullptr};
    for (ir::Tensor* t : spares) {
      if (!t || t->capacity() >= it.peak[k] || t->type() == ir::ElemType::String) continue;
      if (!t->empty() && !(t->owner() && t->owner().use_count() == 1)) continue;  // shared: not a spare
      const ir::ElemType type = t->empty() ? ir::ElemType::Uint8 : t->type();
      const ir::Shape shape = t->empty() ? ir::Shape{0} : t->shape();
      CTX_ASSIGN_OR_RETURN(*t, ir::Tensor::allocate(type, shape, it.peak[k]));
    }
  }
  return Status::ok();
}

// Points the node's output slots `outs` at its final loop-carried values and its stacked scan outputs.
Status publish(BodyFrame& f, const IterationPlan& plan, IterationState& it, size_t scans,
               std::span<const size_t> outs) {
  for (size_t o = 0; o < outs.size(); ++o) {
    if (outs[o] == kNoSlot) continue;
    if (o < plan.carried) {
      f.values[outs[o]] = it.current[o];
      continue;
    }
    const size_t k = o - plan.carried;
    if (k >= scans) return makeError(ErrorCode::InvalidGraph, "output {} has no body output", o);
    const size_t bodyOutput = plan.graph->outputs.size() - scans + k;
    CTX_ASSIGN_OR_RETURN(f.values[outs[o]], it.stacked[k].finish(plan.graph->outputs[bodyOutput].type));
  }
  return Status::ok();
}

}  // namespace

bool isTrue(const ir::Tensor& t) {
  if (t.elementCount() != 1 || t.type() == ir::ElemType::String) return false;
  for (std::byte b : t.bytes())
    if (b != std::byte{0}) return true;
  return false;
}

Status runLoop(BodyFrame& f, const IterationPlan& plan, IterationState& it, std::span<const size_t> outs) {
  const size_t scans = f.outputs.size() - 1 - plan.carried;
  std::optional<int64_t> maxTrips;
  if (it.ins[0]) {
    if (it.ins[0]->type() != ir::ElemType::Int64 || it.ins[0]->elementCount() != 1)
      return makeError(ErrorCode::InvalidGraph, "Loop's M must be one int64");
    maxTrips = it.ins[0]->dataAs<int64_t>()[0];
  }
  bool cond = it.ins[1] ? isTrue(*it.ins[1]) : true;
  it.current.assign(it.ins.begin() + 2, it.ins.end());
  for (size_t k = 0; k < plan.carried; ++k)
    if (!it.current[k])
      return makeError(ErrorCode::InvalidGraph, "Loop-carried input {} (body input '{}') is missing", k,
                       bodyInput(plan, 2 + k));
  it.stacked.resize(scans);
  for (auto& stacked : it.stacked) stacked.reset(0, 0);
  for (int64_t trip = 0; (!maxTrips || trip < *maxTrips) && cond; ++trip) {
    CTX_RETURN_IF_ERROR(setScalar(it.trip, ir::ElemType::Int64, trip));
    CTX_RETURN_IF_ERROR(setScalar(it.cond, ir::ElemType::Bool, 1));
    f.values[f.inputs[0]] = &it.trip;
    f.values[f.inputs[1]] = &it.cond;
    for (size_t k = 0; k < plan.carried; ++k) f.values[f.inputs[2 + k]] = it.current[k];
    if (Status st = runIterationBody(f, plan, it); !st) return st.addContext(fmt::format("iteration {}", trip));
    cond = isTrue(*it.produced[0]);
    for (size_t k = 0; k < scans; ++k)
      if (Status st = it.stacked[k].place(*it.produced[1 + plan.carried + k], trip); !st)
        return st.addContext(fmt::format("iteration {}: scan output {}", trip, k));
    CTX_RETURN_IF_ERROR(handOn(f, it, 1, plan.carried));
  }
  CTX_RETURN_IF_ERROR(keepRoom(f, it));
  return publish(f, plan, it, scans, outs);
}

Status runScan(BodyFrame& f, const IterationPlan& plan, IterationState& it, std::span<const size_t> outs) {
  const size_t scans = f.outputs.size() - plan.carried;
  // A scan input's axis, non-negative.
  auto axisOf = [&](size_t k, const ir::Tensor& x) {
    return plan.inAxes[k] < 0 ? plan.inAxes[k] + static_cast<int64_t>(x.rank()) : plan.inAxes[k];
  };
  int64_t length = -1;
  for (size_t k = 0; k < plan.scanInputs; ++k) {
    const ir::Tensor* x = it.ins[plan.carried + k];
    if (!x)
      return makeError(ErrorCode::InvalidGraph, "Scan input {} (body input '{}') is missing", plan.carried + k,
                       bodyInput(plan, plan.carried + k));
    const int64_t axis = axisOf(k, *x);
    if (axis < 0 || axis >= static_cast<int64_t>(x->rank()))
      return makeError(ErrorCode::InvalidGraph, "Scan input axis {} is out of range for rank {}", plan.inAxes[k],
                       x->rank());
    const int64_t len = x->shape()[static_cast<size_t>(axis)];
    if (length >= 0 && len != length)
      return makeError(ErrorCode::InvalidGraph, "Scan inputs have different sequence lengths {} and {}", length, len);
    length = len;
  }
  if (length == 0 && scans > 0)
    return makeError(ErrorCode::Unsupported, "Scan over an empty sequence is not supported");
  it.current.assign(it.ins.begin(), it.ins.begin() + static_cast<std::ptrdiff_t>(plan.carried));
  for (size_t k = 0; k < plan.carried; ++k)
    if (!it.current[k])
      return makeError(ErrorCode::InvalidGraph, "Scan state input {} (body input '{}') is missing", k,
                       bodyInput(plan, k));
  it.slices.resize(plan.scanInputs);
  it.stacked.resize(scans);
  for (size_t k = 0; k < scans; ++k) it.stacked[k].reset(plan.outAxes[k], length);
  for (int64_t t = 0; t < length; ++t) {
    for (size_t k = 0; k < plan.carried; ++k) f.values[f.inputs[k]] = it.current[k];
    for (size_t k = 0; k < plan.scanInputs; ++k) {
      const ir::Tensor& x = *it.ins[plan.carried + k];
      CTX_RETURN_IF_ERROR(
          sliceInto(it.slices[k], x, static_cast<size_t>(axisOf(k, x)), plan.inDirs[k] == 1 ? length - 1 - t : t));
      f.values[f.inputs[plan.carried + k]] = &it.slices[k];
    }
    if (Status st = runIterationBody(f, plan, it); !st) return st.addContext(fmt::format("iteration {}", t));
    for (size_t k = 0; k < scans; ++k)
      if (Status st = it.stacked[k].place(*it.produced[plan.carried + k], plan.outDirs[k] == 1 ? length - 1 - t : t);
          !st)
        return st.addContext(fmt::format("iteration {}: scan output {}", t, k));
    CTX_RETURN_IF_ERROR(handOn(f, it, 0, plan.carried));
  }
  CTX_RETURN_IF_ERROR(keepRoom(f, it));
  return publish(f, plan, it, scans, outs);
}

Status fitOrGrow(ir::Tensor& t, ir::ElemType type, std::span<const int64_t> shape) {
  if (t.refit(type, shape)) return Status::ok();
  const auto count = ir::elementCount(shape);
  const auto bytes = count ? ir::storageBytes(type, *count) : std::nullopt;
  const uint64_t had = t.owner() ? t.capacity() : 0;
  uint64_t room = 0;
  if (bytes && *bytes > had && had > 0) room = std::min<uint64_t>(uint64_t{2} * had, ir::memoryLimit());
  ir::Shape dims(shape.begin(), shape.end());
  if (room > 0) {
    if (auto grown = ir::Tensor::allocate(type, dims, room)) {
      t = std::move(grown).value();
      return Status::ok();
    }
  }
  // (Without room to spare: the memory the doubling asked for may not be there, what the value needs may be.)
  CTX_ASSIGN_OR_RETURN(t, ir::Tensor::allocate(type, std::move(dims)));
  return Status::ok();
}

Status setScalar(ir::Tensor& t, ir::ElemType type, int64_t value) {
  CTX_RETURN_IF_ERROR(fitOrGrow(t, type, {}));
  if (type == ir::ElemType::Int64) *t.mutableDataAs<int64_t>() = value;
  else *t.mutableDataAs<uint8_t>() = value != 0 ? 1 : 0;
  return Status::ok();
}

Status copyInto(ir::Tensor& dst, const ir::Tensor& src) {
  if (&dst == &src) return Status::ok();
  if (src.empty() || src.type() == ir::ElemType::String) {
    dst = src.type() == ir::ElemType::String ? ir::Tensor::strings(src.shape(), src.stringValues()) : src;
    return Status::ok();
  }
  CTX_RETURN_IF_ERROR(fitOrGrow(dst, src.type(), src.shape()));
  if (src.byteSize() > 0) std::memcpy(dst.mutableData(), src.data(), src.byteSize());
  return Status::ok();
}

Status sliceInto(ir::Tensor& dst, const ir::Tensor& src, size_t axis, int64_t index) {
  const ir::Shape& shape = src.shape();
  const auto dims = std::span<const int64_t>(shape);
  CTX_ASSIGN_OR_RETURN(const uint64_t outer, product(dims.first(axis)));
  CTX_ASSIGN_OR_RETURN(const uint64_t inner, product(dims.subspan(axis + 1)));
  const auto length = static_cast<uint64_t>(shape[axis]);
  const auto at = static_cast<uint64_t>(index);
  if (src.type() == ir::ElemType::String) {
    ir::Shape sliced = shape;
    sliced.erase(sliced.begin() + static_cast<std::ptrdiff_t>(axis));
    std::vector<std::string> values;
    for (uint64_t o = 0; o < outer; ++o)
      for (uint64_t i = 0; i < inner; ++i) values.push_back(src.stringValues()[(o * length + at) * inner + i]);
    dst = ir::Tensor::strings(std::move(sliced), std::move(values));
    return Status::ok();
  }
  const size_t bytes = wholeElementBytes(src.type());
  if (bytes == 0)
    return makeError(ErrorCode::Unsupported, "slicing {} values along an axis is not supported",
                     ir::elemTypeName(src.type()));
  bool fits = reusable(dst, src.type()) && dst.rank() + 1 == src.rank();
  for (size_t d = 0; fits && d < dst.rank(); ++d) fits = dst.shape()[d] == shape[d < axis ? d : d + 1];
  if (!fits) {
    ir::Shape sliced = shape;
    sliced.erase(sliced.begin() + static_cast<std::ptrdiff_t>(axis));
    CTX_RETURN_IF_ERROR(fitOrGrow(dst, src.type(), sliced));
  }
  const uint64_t run = inner * bytes;
  for (uint64_t o = 0; o < outer && run > 0; ++o)
    std::memcpy(dst.mutableData() + o * run, src.data() + (o * length + at) * run, run);
  return Status::ok();
}

void StackedOutput::reset(int64_t axis, int64_t length) {
  axis_ = axis;
  length_ = length;
  count_ = 0;
  type_ = ir::ElemType::Undefined;
  value_.unbind();  // its reference to the buffer: the buffer is reused when nothing else holds it
  strings_.clear();
}

Status StackedOutput::reserve(uint64_t bytes, uint64_t kept) {
  if (bytes == 0 || (buffer_.owner() && buffer_.owner().use_count() == 1 && buffer_.byteSize() >= bytes))
    return Status::ok();
  // An output of unknown length (a Loop's) doubles, so that the iterations of a run copy its bytes about once.
  const uint64_t doubled = std::min<uint64_t>(uint64_t{2} * buffer_.byteSize(), ir::memoryLimit());
  const uint64_t size = length_ > 0 ? bytes : std::max(bytes, doubled);
  CTX_ASSIGN_OR_RETURN(auto grown, ir::Tensor::allocate(ir::ElemType::Uint8, {static_cast<int64_t>(size)}));
  if (kept > 0) std::memcpy(grown.mutableData(), buffer_.data(), kept);
  buffer_ = std::move(grown);
  return Status::ok();
}

Status StackedOutput::place(const ir::Tensor& slice, int64_t position) {
  if (count_ == 0) {
    const auto rank = static_cast<int64_t>(slice.rank()) + 1;
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    if (axis < 0 || axis >= rank)
      return makeError(ErrorCode::InvalidGraph, "axis {} is out of range for rank {}", axis_, rank);
    if (length_ == 0 && axis != 0)
      return makeError(ErrorCode::Internal, "an output of unknown length stacks along axis 0 only");
    axis_ = axis;
    type_ = slice.type();
    slice_.assign(slice.shape().begin(), slice.shape().end());
    if (type_ != ir::ElemType::String) {
      if (wholeElementBytes(type_) == 0)
        return makeError(ErrorCode::Unsupported, "stacking {} values is not supported", ir::elemTypeName(type_));
      sliceBytes_ = slice.byteSize();
      if (length_ > 0) {
        if (sliceBytes_ > 0 && static_cast<uint64_t>(length_) > ir::memoryLimit() / sliceBytes_)
          return makeError(ErrorCode::InvalidGraph, "{} slices of {} bytes exceed the memory limit", length_,
                           sliceBytes_);
        CTX_RETURN_IF_ERROR(reserve(static_cast<uint64_t>(length_) * sliceBytes_, 0));
      }
    }
  } else if (slice.type() != type_ || slice.shape() != slice_) {
    return makeError(ErrorCode::InvalidGraph, "a {} value of shape {}, but the first iteration gave {} of shape {}",
                     ir::elemTypeName(slice.type()), ir::shapeToString(slice.shape()), ir::elemTypeName(type_),
                     ir::shapeToString(slice_));
  }
  const int64_t length = length_ > 0 ? length_ : count_ + 1;
  if (position < 0 || position >= length)
    return makeError(ErrorCode::Internal, "position {} is outside {} slices", position, length);
  const auto dims = std::span<const int64_t>(slice_);
  CTX_ASSIGN_OR_RETURN(const uint64_t outer, product(dims.first(static_cast<size_t>(axis_))));
  const auto len = static_cast<uint64_t>(length), at = static_cast<uint64_t>(position);
  if (type_ == ir::ElemType::String) {
    CTX_ASSIGN_OR_RETURN(const uint64_t inner, product(dims.subspan(static_cast<size_t>(axis_))));
    strings_.resize(static_cast<size_t>(len * outer * inner));
    for (uint64_t o = 0; o < outer; ++o)
      for (uint64_t i = 0; i < inner; ++i) strings_[(o * len + at) * inner + i] = slice.stringValues()[o * inner + i];
    ++count_;
    return Status::ok();
  }
  if (length_ == 0) {
    if (static_cast<uint64_t>(count_ + 1) > ir::memoryLimit() / std::max<uint64_t>(sliceBytes_, 1))
      return makeError(ErrorCode::InvalidGraph, "{} slices of {} bytes exceed the memory limit", count_ + 1,
                       sliceBytes_);
    CTX_RETURN_IF_ERROR(
        reserve(static_cast<uint64_t>(count_ + 1) * sliceBytes_, static_cast<uint64_t>(count_) * sliceBytes_));
  }
  const uint64_t run = outer > 0 ? sliceBytes_ / outer : 0;
  for (uint64_t o = 0; o < outer && run > 0; ++o)
    std::memcpy(buffer_.mutableData() + (o * len + at) * run, slice.data() + o * run, run);
  ++count_;
  return Status::ok();
}

Expected<const ir::Tensor*> StackedOutput::finish(ir::ElemType emptyType) {
  if (count_ == 0) {
    const ir::ElemType type = emptyType == ir::ElemType::Undefined ? ir::ElemType::Float : emptyType;
    const int64_t empty[] = {0};
    if (type == ir::ElemType::String) value_ = ir::Tensor::strings({0}, {});
    else CTX_RETURN_IF_ERROR(value_.rebindAsPrefix(buffer_, type, empty));
    return &value_;
  }
  const int64_t count = length_ > 0 ? length_ : count_;
  shape_.assign(slice_.begin(), slice_.end());
  shape_.insert(shape_.begin() + axis_, count);
  if (type_ == ir::ElemType::String) value_ = ir::Tensor::strings(shape_, strings_);
  else CTX_RETURN_IF_ERROR(value_.rebindAsPrefix(buffer_, type_, shape_));
  return &value_;
}

}  // namespace ctxkit::runtime
