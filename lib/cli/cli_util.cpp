// Shape binding parsers for --dim and --shape.
#include "cli/cli_util.h"

#include <charconv>

namespace ctxkit::cli {

namespace {

bool parseInt(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && out >= 0;
}

}  // namespace

Status parseDimBinding(const std::string& text, ir::ShapeBindings& bindings) {
  auto eq = text.rfind('=');
  int64_t value = 0;
  if (eq == std::string::npos || eq == 0 || !parseInt(std::string_view(text).substr(eq + 1), value))
    return makeError(ErrorCode::InvalidArgument, "--dim '{}': expected SYMBOL=VALUE with a non-negative integer value", text);
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
        return makeError(ErrorCode::InvalidArgument, "--shape '{}': dimension '{}' is not a non-negative integer", text, part);
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

}  // namespace ctxkit::cli
