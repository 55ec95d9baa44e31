// The one table of what a Status becomes at envforge's outer boundaries: the JSON-RPC error code
// a server answers with, whether a client may retry that error unchanged, the CLI's exit code, and
// whether the caller (not the system) is at fault. Every boundary reads it: the RPC service and
// the in-process Python endpoint (server/internal/rpc_protocol.h ErrorFromStatus, python/
// rpc_endpoint.h FailureFromStatus), the RPC client's reverse map (server/rpc_client.h), the CLI
// (apps/envforge/commands.h ExitCodeFor) and the Python module's exceptions (ValueError for a
// caller error, RuntimeError otherwise). A boundary never writes a raw code of its own.
//
// Thread safety: constant data; every function is pure.
#pragma once

#include <string_view>

#include "base/status.h"

namespace envforge {

// The JSON-RPC error codes of envforge's protocol. When the server sends each, and what rides in
// error.data, is documented in server/rpc_service.h.
enum RpcErrorCode : int {
  kRpcParseError = -32700,
  kRpcInvalidRequest = -32600,
  kRpcMethodNotFound = -32601,
  kRpcInvalidParams = -32602,
  kRpcInternalError = -32603,  // a bug in the server (an exception, a lost reply); not retryable
  kRpcUnknownSession = -32001,
  kRpcUnknownEnv = -32002,
  kRpcServerFull = -32003,
  kRpcSessionDead = -32004,
  kRpcUnauthorized = -32005,
  kRpcShuttingDown = -32006,
  kRpcInfraError = -32007,
  kRpcPayloadTooLarge = -32008,
  kRpcFailedPrecondition = -32009,
};

// The CLI's exit codes (apps/envforge/commands.h documents them per command).
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;  // the command ran and its check failed
inline constexpr int kExitUsage = 2;        // the caller's fault: bad usage, bad input
inline constexpr int kExitInfra = 3;        // the system's fault: infrastructure

struct ErrorTableRow {
  StatusCode status;
  RpcErrorCode rpc_code;  // what a server answers a call that failed with this status
  bool caller_error;      // the caller can fix it (CLI exit 2, Python ValueError); else exit 3
};

// The row of `code`; kOk has none and gets kInternal's.
const ErrorTableRow& ErrorTableFor(StatusCode code);

inline RpcErrorCode RpcErrorCodeFor(StatusCode code) { return ErrorTableFor(code).rpc_code; }
inline bool IsCallerError(StatusCode code) { return ErrorTableFor(code).caller_error; }
// kExitOk for kOk, kExitUsage for a caller error, kExitInfra otherwise.
int ExitCodeFor(StatusCode code);

// "parse_error", "unknown_session", "failed_precondition", ... ("error" for a code not above).
std::string_view RpcErrorKind(int rpc_code);
// Whether the same request may succeed later unchanged: -32003, -32006, -32007.
bool IsRetryableRpcError(int rpc_code);
// The StatusCode a client gives a JSON-RPC error it received: the inverse of the table where it is
// one-to-one; -32700, -32600, -32602 InvalidArgument; -32601, -32001, -32002 NotFound; -32003,
// -32008 ResourceExhausted; -32005 Unauthenticated; -32004, -32009 FailedPrecondition; -32006,
// -32007 Unavailable; anything else Internal.
StatusCode StatusCodeForRpcError(int rpc_code);

}  // namespace envforge
