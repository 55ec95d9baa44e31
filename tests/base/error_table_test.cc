// base/error_table.h: the one map from a Status to the JSON-RPC error, the CLI exit code and
// back; base/status.h ErrnoError's codes, checked against real system calls.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <set>
#include <string>

#include "base/error_table.h"
#include "base/status.h"

namespace envforge {
namespace {

constexpr StatusCode kEveryError[] = {
    StatusCode::kInvalidArgument,   StatusCode::kNotFound,         StatusCode::kAlreadyExists,
    StatusCode::kPermissionDenied,  StatusCode::kUnauthenticated,  StatusCode::kFailedPrecondition,
    StatusCode::kResourceExhausted, StatusCode::kDeadlineExceeded, StatusCode::kUnavailable,
    StatusCode::kDataLoss,          StatusCode::kInternal,
};

TEST_CASE("every status code has a row, a name and a JSON-RPC kind") {
  std::set<std::string> names;
  for (StatusCode code : kEveryError) {
    CAPTURE(StatusCodeName(code));
    CHECK(ErrorTableFor(code).status == code);
    CHECK(StatusCodeName(code) != "Unknown");
    names.insert(std::string(StatusCodeName(code)));
    CHECK(RpcErrorKind(RpcErrorCodeFor(code)) != "error");
    CHECK(ExitCodeFor(code) == (IsCallerError(code) ? kExitUsage : kExitInfra));
  }
  CHECK(names.size() == std::size(kEveryError));
  CHECK(ExitCodeFor(StatusCode::kOk) == kExitOk);
}

TEST_CASE("the decisions the table encodes") {
  // The caller's fault: fix and do not retry; the CLI exits 2, Python raises ValueError.
  for (StatusCode code :
       {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kAlreadyExists, StatusCode::kPermissionDenied,
        StatusCode::kUnauthenticated, StatusCode::kFailedPrecondition, StatusCode::kDataLoss}) {
    CAPTURE(StatusCodeName(code));
    CHECK(ExitCodeFor(code) == kExitUsage);
  }
  // The system's fault: exit 3; on the wire a retryable error, never a zero reward.
  for (StatusCode code : {StatusCode::kResourceExhausted, StatusCode::kDeadlineExceeded, StatusCode::kUnavailable,
                          StatusCode::kInternal}) {
    CAPTURE(StatusCodeName(code));
    CHECK(ExitCodeFor(code) == kExitInfra);
    CHECK(IsRetryableRpcError(RpcErrorCodeFor(code)));
  }
  CHECK(RpcErrorCodeFor(StatusCode::kInternal) == kRpcInfraError);
  CHECK(RpcErrorCodeFor(StatusCode::kResourceExhausted) == kRpcServerFull);
  CHECK(RpcErrorCodeFor(StatusCode::kInvalidArgument) == kRpcInvalidParams);
  CHECK(RpcErrorCodeFor(StatusCode::kNotFound) == kRpcUnknownEnv);
  CHECK(RpcErrorCodeFor(StatusCode::kUnauthenticated) == kRpcUnauthorized);
  CHECK(RpcErrorCodeFor(StatusCode::kFailedPrecondition) == kRpcFailedPrecondition);
  CHECK_FALSE(IsRetryableRpcError(kRpcFailedPrecondition));
  CHECK_FALSE(IsRetryableRpcError(kRpcInternalError));
  CHECK(RpcErrorKind(kRpcFailedPrecondition) == "failed_precondition");
  CHECK(RpcErrorKind(-1) == "error");
}

TEST_CASE("a client reads back the status a server sent wherever the code is one-to-one") {
  for (StatusCode code : {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kUnauthenticated,
                          StatusCode::kFailedPrecondition, StatusCode::kResourceExhausted}) {
    CAPTURE(StatusCodeName(code));
    CHECK(StatusCodeForRpcError(RpcErrorCodeFor(code)) == code);
  }
  // The infrastructure codes meet in -32007, read back as retryable Unavailable.
  CHECK(StatusCodeForRpcError(RpcErrorCodeFor(StatusCode::kInternal)) == StatusCode::kUnavailable);
  CHECK(StatusCodeForRpcError(kRpcParseError) == StatusCode::kInvalidArgument);
  CHECK(StatusCodeForRpcError(kRpcUnknownSession) == StatusCode::kNotFound);
  CHECK(StatusCodeForRpcError(kRpcSessionDead) == StatusCode::kFailedPrecondition);
  CHECK(StatusCodeForRpcError(kRpcPayloadTooLarge) == StatusCode::kResourceExhausted);
  CHECK(StatusCodeForRpcError(kRpcShuttingDown) == StatusCode::kUnavailable);
  CHECK(StatusCodeForRpcError(kRpcInternalError) == StatusCode::kInternal);
  CHECK(StatusCodeForRpcError(-32099) == StatusCode::kInternal);
}

// The errno of a real failing call, as ErrnoError reports it.
Status FailedOpen(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd >= 0) {
    ::close(fd);
    return Status();
  }
  return ErrnoError("open " + path, errno);
}

TEST_CASE("ErrnoError gives a user's own file errors codes the user can act on") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("envforge-errno-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  {
    Status missing = FailedOpen((dir / "missing.txt").string(), O_RDONLY);
    CHECK(missing.code() == StatusCode::kNotFound);
    CHECK(missing.message().find("missing.txt") != std::string::npos);
    CHECK(missing.message().find("No such file") != std::string::npos);
    CHECK(ExitCodeFor(missing.code()) == kExitUsage);
  }
  CHECK(FailedOpen((dir / "sub").string(), O_WRONLY).code() == StatusCode::kInvalidArgument);  // EISDIR
  {
    std::FILE* file = std::fopen((dir / "plain").c_str(), "w");
    REQUIRE(file != nullptr);
    std::fclose(file);
  }
  CHECK(FailedOpen((dir / "plain" / "below").string(), O_RDONLY).code() == StatusCode::kInvalidArgument);  // ENOTDIR
  CHECK(FailedOpen((dir / "plain").string(), O_WRONLY | O_CREAT | O_EXCL).code() == StatusCode::kAlreadyExists);
  if (::geteuid() != 0) {  // root reads anything: EACCES cannot happen
    fs::permissions(dir / "plain", fs::perms::none);
    Status denied = FailedOpen((dir / "plain").string(), O_RDONLY);
    CHECK(denied.code() == StatusCode::kPermissionDenied);
    CHECK(ExitCodeFor(denied.code()) == kExitUsage);
    fs::permissions(dir / "plain", fs::perms::owner_all);
  }
  fs::remove_all(dir);

  int sockets[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) == 0);
  ::close(sockets[1]);
  errno = 0;
  ssize_t sent = ::send(sockets[0], "x", 1, MSG_NOSIGNAL);
  int send_errno = errno;
  ::close(sockets[0]);
  REQUIRE(sent < 0);
  CHECK(ErrnoError("send", send_errno).code() == StatusCode::kUnavailable);  // EPIPE: the peer is gone

  CHECK(StatusCodeForErrno(ENOSPC) == StatusCode::kResourceExhausted);
  CHECK(StatusCodeForErrno(EMFILE) == StatusCode::kResourceExhausted);
  CHECK(StatusCodeForErrno(ETIMEDOUT) == StatusCode::kDeadlineExceeded);
  CHECK(StatusCodeForErrno(ECONNREFUSED) == StatusCode::kUnavailable);
  CHECK(StatusCodeForErrno(ENOTEMPTY) == StatusCode::kFailedPrecondition);
  CHECK(StatusCodeForErrno(EIO) == StatusCode::kInternal);
  CHECK(StatusCodeForErrno(EINVAL) == StatusCode::kInternal);
}

}  // namespace
}  // namespace envforge
