// Error values that carry context: Status for actions, Expected<T> for results. No exceptions cross libraries.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ctxkit {

// Kinds follow ONNX Runtime's status codes where they overlap, so messages map onto what users know.
enum class ErrorCode {
  InvalidArgument,  // usage error: bad option or argument
  InvalidGraph,     // a model or context file breaks a rule
  NotFound,         // a file, tensor or node that should exist does not
  Unsupported,      // valid input that ctxkit cannot handle (op, type, format major)
  IoError,          // the operating system refused a read or write
  Mismatch,         // outputs differ from expected values
  Internal,         // a ctxkit invariant failed
};

const char* errorCodeName(ErrorCode code);

class Error {
public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prepends where the error happened: "loading a.onnx: " + message.
  Error& addContext(std::string_view where) {
    message_ = fmt::format("{}: {}", where, message_);
    return *this;
  }

private:
  ErrorCode code_;
  std::string message_;
};

template <typename... Args> Error makeError(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Error(code, fmt::format(format, std::forward<Args>(args)...));
}

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit so `return makeError(...)` works

  static Status ok() { return Status(); }
  bool isOk() const { return !error_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Error& error() const { return *error_; }
  Error& error() { return *error_; }
  Error takeError() { return std::move(*error_); }

  Status& addContext(std::string_view where) & {
    if (error_) error_->addContext(where);
    return *this;
  }
  Status&& addContext(std::string_view where) && {
    if (error_) error_->addContext(where);
    return std::move(*this);
  }

private:
  std::optional<Error> error_;
};

template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Expected(Error error) : value_(std::move(error)) {}      // NOLINT
  Expected(Status status) : value_(status.takeError()) {}  // only for failed statuses

  bool isOk() const { return std::holds_alternative<T>(value_); }
  explicit operator bool() const { return isOk(); }

  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<Error>(value_); }
  Error takeError() { return std::get<Error>(std::move(value_)); }
  Status status() const { return isOk() ? Status() : Status(error()); }

  Expected& addContext(std::string_view where) & {
    if (!isOk()) std::get<Error>(value_).addContext(where);
    return *this;
  }
  Expected&& addContext(std::string_view where) && {
    if (!isOk()) std::get<Error>(value_).addContext(where);
    return std::move(*this);
  }

private:
  std::variant<T, Error> value_;
};

}  // namespace ctxkit

#define CTX_CONCAT_INNER(a, b) a##b
#define CTX_CONCAT(a, b) CTX_CONCAT_INNER(a, b)

// Returns the failed Status from the enclosing function.
#define CTX_RETURN_IF_ERROR(expr)                                                                                      \
  do {                                                                                                                 \
    ::ctxkit::Status ctx_status_ = (expr);                                                                             \
    if (!ctx_status_.isOk()) return ctx_status_.takeError();                                                           \
  } while (false)

// `CTX_ASSIGN_OR_RETURN(auto x, makeX());` binds the value or returns the error.
#define CTX_ASSIGN_OR_RETURN(lhs, expr) CTX_ASSIGN_OR_RETURN_IMPL(CTX_CONCAT(ctx_expected_, __LINE__), lhs, expr)
#define CTX_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                                                      \
  auto tmp = (expr);                                                                                                   \
  if (!tmp.isOk()) return tmp.takeError();                                                                             \
  lhs = std::move(tmp).value()
