// Status and Result<T>: how errors cross module boundaries in envforge.
//
// Contract: a function that can fail for reasons outside the programmer's control (bad input,
// I/O, a dead process) returns Status or Result<T>; exceptions stay inside a module and never
// cross a module, C++/Python or RPC boundary. An OK Status carries no allocation.
//
// Thread safety: Status and Result are values; distinct objects may be used from distinct
// threads without synchronisation.
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace envforge {

// The few error categories callers branch on. Prefer the message for humans, the code for logic.
enum class StatusCode : unsigned char {
  kOk = 0,
  kInvalidArgument,   // the caller's input is wrong (bad file, bad schema, bad arguments)
  kNotFound,          // a named thing (file, task, session, tool) does not exist
  kAlreadyExists,
  kFailedPrecondition,  // the system is not in a state that allows the operation
  kResourceExhausted,   // a limit was hit (sessions, memory, output size)
  kDeadlineExceeded,    // a time limit was hit
  kUnavailable,         // a peer (worker, server) is gone or not reachable; retryable
  kDataLoss,            // a stored file is corrupt or truncated
  kInternal,            // a bug or an unexpected system failure
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // Empty for OK.
  const std::string& message() const;
  // "NotFound: no task 'x'"; "OK" for OK.
  std::string ToString() const;

  // Returns a copy whose message is "context: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status FailedPreconditionError(std::string message);
Status ResourceExhaustedError(std::string message);
Status DeadlineExceededError(std::string message);
Status UnavailableError(std::string message);
Status DataLossError(std::string message);
Status InternalError(std::string message);
// InternalError carrying strerror(errno_value) after `what`.
Status ErrnoError(std::string_view what, int errno_value);

// Result<T>: either a T or a non-OK Status. Accessing value() of an error is a programming
// error (asserts in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(value_).ok() && "Result constructed from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(value_);
  }

  T& value() & { assert(ok()); return std::get<T>(value_); }
  const T& value() const& { assert(ok()); return std::get<T>(value_); }
  T&& value() && { assert(ok()); return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace envforge

// Propagates a non-OK Status from an expression returning Status.
#define ENVFORGE_RETURN_IF_ERROR(expr)                    \
  do {                                                    \
    ::envforge::Status envforge_status_ = (expr);         \
    if (!envforge_status_.ok()) return envforge_status_;  \
  } while (0)

#define ENVFORGE_CONCAT_INNER_(a, b) a##b
#define ENVFORGE_CONCAT_(a, b) ENVFORGE_CONCAT_INNER_(a, b)
// ENVFORGE_ASSIGN_OR_RETURN(auto x, MakeX()); propagates the error of a Result.
#define ENVFORGE_ASSIGN_OR_RETURN(lhs, expr) \
  ENVFORGE_ASSIGN_OR_RETURN_IMPL_(ENVFORGE_CONCAT_(envforge_result_, __LINE__), lhs, expr)
#define ENVFORGE_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                     \
  if (!result.ok()) return result.status();                 \
  lhs = std::move(result).value()
