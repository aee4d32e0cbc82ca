// Loop and Scan iteration state on the frame path: scalars, copies, slices and stacked outputs in kept buffers.
#include "runtime/iteration.h"

#include <algorithm>
#include <cstring>

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

uint64_t product(std::span<const int64_t> dims) {
  uint64_t n = 1;
  for (const int64_t d : dims) n *= static_cast<uint64_t>(d);
  return n;
}

}  // namespace

Status setScalar(ir::Tensor& t, ir::ElemType type, int64_t value) {
  if (!(reusable(t, type) && t.rank() == 0)) {
    CTX_ASSIGN_OR_RETURN(t, ir::Tensor::allocate(type, {}));
  }
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
  if (!(reusable(dst, src.type()) && dst.shape() == src.shape())) {
    CTX_ASSIGN_OR_RETURN(dst, ir::Tensor::allocate(src.type(), src.shape()));
  }
  if (src.byteSize() > 0) std::memcpy(dst.mutableData(), src.data(), src.byteSize());
  return Status::ok();
}

Status sliceInto(ir::Tensor& dst, const ir::Tensor& src, size_t axis, int64_t index) {
  const ir::Shape& shape = src.shape();
  const auto dims = std::span<const int64_t>(shape);
  const uint64_t outer = product(dims.first(axis));
  const uint64_t inner = product(dims.subspan(axis + 1));
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
    CTX_ASSIGN_OR_RETURN(dst, ir::Tensor::allocate(src.type(), std::move(sliced)));
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
  const uint64_t outer = product(dims.first(static_cast<size_t>(axis_)));
  const auto len = static_cast<uint64_t>(length), at = static_cast<uint64_t>(position);
  if (type_ == ir::ElemType::String) {
    const uint64_t inner = product(dims.subspan(static_cast<size_t>(axis_)));
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
