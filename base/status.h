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
// Each line says when to use the code and what a caller should do; base/error_table.h says what
// each becomes at a boundary (JSON-RPC error, CLI exit code, Python exception).
enum class StatusCode : unsigned char {
  kOk = 0,
  // The caller's input is wrong: a bad file, schema, argument or request. Fix the input; retrying
  // it unchanged fails the same way.
  kInvalidArgument,
  // A named thing (file, environment, task, session, tool, episode) does not exist. Not retryable
  // unless something else is expected to create it.
  kNotFound,
  // What the caller asked to create exists already. Not retryable.
  kAlreadyExists,
  // The caller may not do this to this object (a file it cannot read or write: EACCES, EPERM,
  // EROFS). The user fixes permissions or paths; retrying unchanged does not help.
  kPermissionDenied,
  // The caller did not prove who it is (a missing or wrong bearer token). Retry with credentials.
  kUnauthenticated,
  // The system is not in a state that allows the operation (a task without an oracle, a replay
  // against a changed task, a call on the wrong thread). Fix the state first; not retryable as is.
  kFailedPrecondition,
  // A limit was hit (sessions, memory, disk, file descriptors, output size). Retry later or with
  // a smaller request.
  kResourceExhausted,
  // A time limit was hit. Retryable; the operation may or may not have taken effect.
  kDeadlineExceeded,
  // A peer (worker, server, backend) is gone or not reachable. Retryable, with backoff.
  kUnavailable,
  // A stored file is corrupt or truncated (a bundle, a checkpoint, a trajectory store). Not
  // retryable: the file must be rebuilt or restored.
  kDataLoss,
  // A bug or an unexpected system failure (an errno nothing above names). Not the caller's fault;
  // report it. A server treats it as infrastructure: the episode is retried, never scored zero.
  kInternal,
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
Status PermissionDeniedError(std::string message);
Status UnauthenticatedError(std::string message);
Status FailedPreconditionError(std::string message);
Status ResourceExhaustedError(std::string message);
Status DeadlineExceededError(std::string message);
Status UnavailableError(std::string message);
Status DataLossError(std::string message);
Status InternalError(std::string message);
// The code of an errno a caller can act on: ENOENT NotFound; EACCES,
// EPERM, EROFS PermissionDenied; EEXIST AlreadyExists; EISDIR, ENOTDIR, ENAMETOOLONG, ELOOP
// InvalidArgument; ENOTEMPTY, EBUSY, ETXTBSY FailedPrecondition; ENOSPC, EDQUOT, EMFILE, ENFILE,
// ENOMEM, EFBIG, E2BIG ResourceExhausted; ETIMEDOUT DeadlineExceeded; ECONNREFUSED, ECONNRESET,
// ECONNABORTED, EPIPE, EHOSTUNREACH, ENETUNREACH, ENETDOWN Unavailable; any other Internal.
StatusCode StatusCodeForErrno(int errno_value);
// "<what>: <strerror(errno_value)>" with StatusCodeForErrno's code.
Status ErrnoError(std::string_view what, int errno_value);

// Result<T>: either a T or a non-OK Status. Accessing value() of an error is a programming
// error (asserts in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(value_).ok() && "Result constructed from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(value_);
  }

  T& value() & {
    assert(ok());
    return std::get<T>(value_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(value_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(value_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace envforge

// Propagates a non-OK Status from an expression returning Status.
#define ENVFORGE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::envforge::Status envforge_status_ = (expr);        \
    if (!envforge_status_.ok()) return envforge_status_; \
  } while (0)

#define ENVFORGE_CONCAT_INNER_(a, b) a##b
#define ENVFORGE_CONCAT_(a, b) ENVFORGE_CONCAT_INNER_(a, b)
// ENVFORGE_ASSIGN_OR_RETURN(auto x, MakeX()); propagates the error of a Result.
#define ENVFORGE_ASSIGN_OR_RETURN(lhs, expr) \
  ENVFORGE_ASSIGN_OR_RETURN_IMPL_(ENVFORGE_CONCAT_(envforge_result_, __LINE__), lhs, expr)
#define ENVFORGE_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                    \
  if (!result.ok()) return result.status();                \
  lhs = std::move(result).value()
