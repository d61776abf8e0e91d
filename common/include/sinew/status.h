// Status and Result<T>: the one way Sinew code reports expected failures.
//
// A Status is a code plus a human-readable message that says what went wrong and,
// where possible, what to do next. Result<T> holds either a T or a non-OK Status.
// Both are [[nodiscard]]: ignoring one is a bug. Exceptions are used only at process
// and request boundaries, never for expected failures.
//
// Thread-safety: Status and Result are values; distinct objects may be used from
// different threads freely, a single object needs external synchronisation.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sinew {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,     // the caller sent something malformed; retrying the same call fails again
  kNotFound,            // the named thing does not exist
  kAlreadyExists,       // it exists already
  kFailedPrecondition,  // the system is not in the state the call needs (wrong sequence number, ...)
  kAborted,             // lost a race (fenced out by a newer lease epoch, ...)
  kOutOfRange,          // a position past the end
  kResourceExhausted,   // a limit was reached (size, quota, memory)
  kUnavailable,         // a dependency is down; retrying later may succeed
  kDeadlineExceeded,    // it took too long
  kCorruption,          // stored data failed validation; never skipped silently
  kIOError,             // the operating system refused an I/O operation
  kPermissionDenied,    // the caller may not do this
  kUnauthenticated,     // the caller did not say who it is
  kCancelled,           // the caller gave up
  kUnimplemented,       // not supported (yet)
  kInternal,            // a bug
};

// Returns a stable lower-case name of `code`, e.g. "failed_precondition".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status Unauthenticated(std::string m) {
    return {StatusCode::kUnauthenticated, std::move(m)};
  }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "code_name: message", or "ok".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or a non-OK Status. Accessing value() of an error Result is a
// programmer error (asserted in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result constructed from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace sinew

#define SINEW_CONCAT_INNER_(a, b) a##b
#define SINEW_CONCAT_(a, b) SINEW_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define SINEW_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::sinew::Status sinew_status_ = (expr);          \
    if (!sinew_status_.ok()) return sinew_status_;   \
  } while (0)

// `SINEW_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result or returns its error.
#define SINEW_ASSIGN_OR_RETURN(lhs, expr) \
  SINEW_ASSIGN_OR_RETURN_IMPL_(SINEW_CONCAT_(sinew_result_, __LINE__), lhs, expr)
#define SINEW_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

// The same two for C++20 coroutines (co_return); `expr` may co_await.
#define SINEW_CO_RETURN_IF_ERROR(expr)                \
  do {                                                \
    ::sinew::Status sinew_status_ = (expr);           \
    if (!sinew_status_.ok()) co_return sinew_status_; \
  } while (0)
#define SINEW_CO_ASSIGN_OR_RETURN(lhs, expr) \
  SINEW_CO_ASSIGN_OR_RETURN_IMPL_(SINEW_CONCAT_(sinew_result_, __LINE__), lhs, expr)
#define SINEW_CO_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) co_return tmp.status();                \
  lhs = std::move(tmp).value()
