#include "base/error_table.h"

#include <array>

namespace envforge {
namespace {

// One row per StatusCode, in enum order (checked below). Why these codes:
// - Internal, DeadlineExceeded, Unavailable, DataLoss and PermissionDenied inside a server are
//   the infrastructure's fault, never the policy's: -32007 tells a trainer to retry the episode
//   rather than score it zero.
// - PermissionDenied inside a server is about the server's own files (the operator's problem);
//   a client that is not allowed in is Unauthenticated (-32005).
// - FailedPrecondition (a task without an oracle, a replay against a changed task) has its own
//   code: retrying unchanged cannot help, and it is not malformed input either.
// - On the CLI, a missing or corrupt file, a denied permission and a wrong state are things the
//   user acts on (exit 2); a limit, a timeout or a dead peer is infrastructure (exit 3).
constexpr std::array<ErrorTableRow, 12> kTable = {{
    {StatusCode::kOk, kRpcInternalError, false},
    {StatusCode::kInvalidArgument, kRpcInvalidParams, true},
    {StatusCode::kNotFound, kRpcUnknownEnv, true},
    {StatusCode::kAlreadyExists, kRpcInvalidParams, true},
    {StatusCode::kPermissionDenied, kRpcInfraError, true},
    {StatusCode::kUnauthenticated, kRpcUnauthorized, true},
    {StatusCode::kFailedPrecondition, kRpcFailedPrecondition, true},
    {StatusCode::kResourceExhausted, kRpcServerFull, false},
    {StatusCode::kDeadlineExceeded, kRpcInfraError, false},
    {StatusCode::kUnavailable, kRpcInfraError, false},
    {StatusCode::kDataLoss, kRpcInfraError, true},
    {StatusCode::kInternal, kRpcInfraError, false},
}};

constexpr bool RowsInEnumOrder() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<size_t>(kTable[i].status) != i) return false;
  }
  return kTable.size() == static_cast<size_t>(StatusCode::kInternal) + 1;
}
static_assert(RowsInEnumOrder(), "kTable needs one row per StatusCode, in enum order");

}  // namespace

const ErrorTableRow& ErrorTableFor(StatusCode code) {
  size_t index = static_cast<size_t>(code);
  if (code == StatusCode::kOk || index >= kTable.size()) index = static_cast<size_t>(StatusCode::kInternal);
  return kTable[index];
}

int ExitCodeFor(StatusCode code) {
  if (code == StatusCode::kOk) return kExitOk;
  return IsCallerError(code) ? kExitUsage : kExitInfra;
}

std::string_view RpcErrorKind(int rpc_code) {
  switch (rpc_code) {
    case kRpcParseError: return "parse_error";
    case kRpcInvalidRequest: return "invalid_request";
    case kRpcMethodNotFound: return "method_not_found";
    case kRpcInvalidParams: return "invalid_params";
    case kRpcInternalError: return "internal";
    case kRpcUnknownSession: return "unknown_session";
    case kRpcUnknownEnv: return "unknown_env";
    case kRpcServerFull: return "server_full";
    case kRpcSessionDead: return "session_dead";
    case kRpcUnauthorized: return "unauthorized";
    case kRpcShuttingDown: return "shutting_down";
    case kRpcInfraError: return "infra_error";
    case kRpcPayloadTooLarge: return "payload_too_large";
    case kRpcFailedPrecondition: return "failed_precondition";
    default: return "error";
  }
}

bool IsRetryableRpcError(int rpc_code) {
  return rpc_code == kRpcServerFull || rpc_code == kRpcShuttingDown || rpc_code == kRpcInfraError;
}

StatusCode StatusCodeForRpcError(int rpc_code) {
  switch (rpc_code) {
    case kRpcParseError:
    case kRpcInvalidRequest:
    case kRpcInvalidParams: return StatusCode::kInvalidArgument;
    case kRpcMethodNotFound:
    case kRpcUnknownSession:
    case kRpcUnknownEnv: return StatusCode::kNotFound;
    case kRpcServerFull:
    case kRpcPayloadTooLarge: return StatusCode::kResourceExhausted;
    case kRpcUnauthorized: return StatusCode::kUnauthenticated;
    case kRpcSessionDead:
    case kRpcFailedPrecondition: return StatusCode::kFailedPrecondition;
    case kRpcShuttingDown:
    case kRpcInfraError: return StatusCode::kUnavailable;
    default: return StatusCode::kInternal;
  }
}

}  // namespace envforge
