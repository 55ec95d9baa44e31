// Where the Python module's JSON-RPC calls go: an in-process RpcService (Runtime) or a remote
// server through server/rpc_client.h (Client). No Python here: endpoints are called with the GIL
// released.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/error_table.h"
#include "base/json.h"
#include "base/status.h"

namespace envforge::python {

struct RpcFailure {
  int code = kRpcInternalError;
  std::string message;
  Json data;
};

struct RpcOutcome {
  Json result;
  std::optional<RpcFailure> failure;
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // One JSON-RPC request; thread-safe.
  virtual RpcOutcome Call(const std::string& method, Json params) = 0;
  // Releases the endpoint's resources (sessions, connections); later calls fail. Idempotent.
  virtual void Close() = 0;
};

struct RuntimeOptions {
  std::string envs_dir;
  std::string trajectories_path;
  size_t max_sessions = 1024;
  std::chrono::milliseconds session_ttl{600'000};
  Json limits;  // null: defaults
};

Result<std::shared_ptr<Endpoint>> MakeRuntimeEndpoint(const RuntimeOptions& options);
Result<std::shared_ptr<Endpoint>> MakeClientEndpoint(const std::string& url, const std::string& token,
                                                     std::chrono::milliseconds timeout);
// A Status from setting up an endpoint, as the JSON-RPC error the server would have answered
// (base/error_table.h), data {"kind", "retryable", "status"}.
RpcFailure FailureFromStatus(const Status& status);

}  // namespace envforge::python
