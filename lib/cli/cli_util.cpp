// Shape binding parsers for --dim and --shape.
#include "cli/cli_util.h"

#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <limits>

namespace ctxkit::cli {

namespace {

bool parseInt(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && out >= 0;
}

// Stores `values` into `t` as T, refusing any value T does not hold exactly.
template <typename T> Status fillAs(ir::Tensor& t, const std::vector<double>& values, const std::string& what) {
  T* data = t.mutableDataAs<T>();
  const uint64_t n = t.elementCount();
  for (uint64_t i = 0; i < n; ++i) {
    const double v = values.size() == 1 ? values[0] : values[i];
    if constexpr (std::is_integral_v<T>) {
      const bool fits = v == std::trunc(v) && v >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
                        v <= static_cast<double>(std::numeric_limits<T>::max());
      if (!fits)
        return makeError(ErrorCode::InvalidArgument, "{} is {}, which does not hold the value {}", what,
                         ir::elemTypeName(t.type()), v);
    }
    data[i] = static_cast<T>(v);
  }
  return Status::ok();
}

}  // namespace

Expected<ValueAssignment> parseValueAssignment(const std::string& text) {
  const auto eq = text.find('=');
  ValueAssignment a;
  bool ok = eq != std::string::npos && eq != 0;
  if (ok) {
    a.name = text.substr(0, eq);
    std::string_view list = std::string_view(text).substr(eq + 1);
    size_t start = 0;
    while (ok && start <= list.size()) {
      const size_t comma = list.find(',', start);
      std::string_view item =
          list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      double v = 0;
      auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
      ok = !item.empty() && ec == std::errc() && ptr == item.data() + item.size();
      a.values.push_back(v);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  if (!ok) return makeError(ErrorCode::InvalidArgument, "--set '{}': expected NAME=NUMBER[,NUMBER...]", text);
  return a;
}

Expected<ir::Tensor> valueTensor(ir::ElemType type, const ir::Shape& shape, const std::vector<double>& values,
                                 const std::string& what) {
  CTX_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::allocate(type, shape));
  if (values.size() != 1 && values.size() != t.elementCount())
    return makeError(ErrorCode::InvalidArgument, "{} has shape {} ({} elements), but {} values are given", what,
                     ir::shapeToString(shape), t.elementCount(), values.size());
  switch (type) {
    case ir::ElemType::Float: CTX_RETURN_IF_ERROR(fillAs<float>(t, values, what)); break;
    case ir::ElemType::Double: CTX_RETURN_IF_ERROR(fillAs<double>(t, values, what)); break;
    case ir::ElemType::Int64: CTX_RETURN_IF_ERROR(fillAs<int64_t>(t, values, what)); break;
    case ir::ElemType::Int32: CTX_RETURN_IF_ERROR(fillAs<int32_t>(t, values, what)); break;
    case ir::ElemType::Int16: CTX_RETURN_IF_ERROR(fillAs<int16_t>(t, values, what)); break;
    case ir::ElemType::Int8: CTX_RETURN_IF_ERROR(fillAs<int8_t>(t, values, what)); break;
    case ir::ElemType::Uint64: CTX_RETURN_IF_ERROR(fillAs<uint64_t>(t, values, what)); break;
    case ir::ElemType::Uint32: CTX_RETURN_IF_ERROR(fillAs<uint32_t>(t, values, what)); break;
    case ir::ElemType::Uint16: CTX_RETURN_IF_ERROR(fillAs<uint16_t>(t, values, what)); break;
    case ir::ElemType::Uint8: CTX_RETURN_IF_ERROR(fillAs<uint8_t>(t, values, what)); break;
    case ir::ElemType::Bool:
      for (double v : values)
        if (v != 0 && v != 1)
          return makeError(ErrorCode::InvalidArgument, "{} is bool, which takes 0 or 1, not {}", what, v);
      CTX_RETURN_IF_ERROR(fillAs<uint8_t>(t, values, what));
      break;
    default:
      return makeError(ErrorCode::InvalidArgument, "{} is {}, which --set does not fill", what, ir::elemTypeName(type));
  }
  return t;
}

Status parseDimBinding(const std::string& text, ir::ShapeBindings& bindings) {
  auto eq = text.rfind('=');
  int64_t value = 0;
  if (eq == std::string::npos || eq == 0 || !parseInt(std::string_view(text).substr(eq + 1), value))
    return makeError(ErrorCode::InvalidArgument, "--dim '{}': expected SYMBOL=VALUE with a non-negative integer value",
                     text);
  bindings.dims[text.substr(0, eq)] = value;
  return Status::ok();
}

Status parseShapeBinding(const std::string& text, ir::ShapeBindings& bindings) {
  auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0)
    return makeError(ErrorCode::InvalidArgument, "--shape '{}': expected INPUT=AxBxC", text);
  ir::Shape shape;
  std::string_view dims = std::string_view(text).substr(eq + 1);
  if (dims != "scalar" && !dims.empty()) {
    size_t start = 0;
    while (start <= dims.size()) {
      size_t x = dims.find('x', start);
      std::string_view part = dims.substr(start, x == std::string_view::npos ? std::string_view::npos : x - start);
      int64_t v = 0;
      if (!parseInt(part, v))
        return makeError(ErrorCode::InvalidArgument, "--shape '{}': dimension '{}' is not a non-negative integer", text,
                         part);
      shape.push_back(v);
      if (x == std::string_view::npos) break;
      start = x + 1;
    }
  }
  bindings.shapes[text.substr(0, eq)] = shape;
  return Status::ok();
}

std::vector<std::string> splitModelList(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    size_t start = 0;
    while (start <= a.size()) {
      size_t comma = a.find(',', start);
      std::string part = a.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!part.empty()) out.push_back(part);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

int exitCodeFor(const Error& error) { return error.code() == ErrorCode::InvalidArgument ? kExitUsage : kExitFailure; }

Expected<uint64_t> parseByteCount(const std::string& text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string_view suffix(end, static_cast<size_t>(text.data() + text.size() - end));
  int shift = suffix.empty()  ? 0
              : suffix == "K" ? 10
              : suffix == "M" ? 20
              : suffix == "G" ? 30
              : suffix == "T" ? 40
                              : -1;
  if (ec != std::errc() || end == text.data() || shift < 0 || value == 0)
    return makeError(ErrorCode::InvalidArgument, "'{}' is not a byte count (a positive number with K, M, G or T)",
                     text);
  if (shift > 0 && value > (std::numeric_limits<uint64_t>::max() >> shift))
    return makeError(ErrorCode::InvalidArgument, "byte count '{}' is too large", text);
  return value << shift;
}

}  // namespace ctxkit::cli
