// RemoteSessionHost: the rollout loop's sessions (agents/session_host.h) on a running `envforge
// serve`, over JSON-RPC (server/rpc_client.h). The model runs in the caller's process (a trainer,
// `envforge rollout --url`, `envforge.rollout(url=...)`); the sessions -- tools and verifier --
// run on the server.
//
//   auto host = RemoteSessionHost::Connect("http://127.0.0.1:8080", {.client = {.token = "s"}});
//   agents::RolloutRunner runner(**host, backend, options);
//   auto rollouts = runner.Run("trip_planning", {"cheapest_rated_hotel"});
//
// The methods it uses (server/rpc_service.h): ping (Connect), envs/get (DescribeEnvironment:
// the environment's id = content hash, name, tool specs, and per task id, prompt, "version" = the
// verifier's and "task_version"), session/create {env: the content hash, task, limits?}, tools/call,
// session/close. Sessions are created by content hash, and the versions session/create answers
// must equal the description's, so an episode recorded here names exactly the environment, task
// and verifier versions the server ran: a server whose environment changed between the two
// answers FailedPrecondition (the episode ends infra_error). A server too old to report
// "task_version" is refused by DescribeEnvironment (FailedPrecondition) rather than guessed at.
//
// Failures of a tool call are results, never exceptions (the loop ends the episode on them):
//   no answer (connection refused or lost, timeout)  infra_error, naming the URL
//   -32004 session dead                              crashed (session_alive false)
//   -32001 unknown session (the server closed it: its session TTL, a restart), -32006 shutting
//   down, any other error                            infra_error with the server's message
// A tool call is never retried: it may have run (server/rpc_client.h).
//
// Connections. RpcClient is thread-compatible, so the host keeps a pool of clients: a session
// takes one for its lifetime (so every request of a session goes over one connection, which a
// WebSocket fleet behind HAProxy needs) and gives it back when closed; DescribeEnvironment
// borrows one for its call. At most max_idle_connections idle clients are kept; a concurrent
// rollout of C episodes holds about C connections at once. The server's session TTL must exceed
// the longest model turn: a session idle for longer is closed by the server and the episode ends
// infra_error (its next tool call answers -32001).
//
// Thread safety: thread-safe (the pool is locked); each session is thread-compatible (one episode).
// Sessions keep the pool alive, so they may outlive the host.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "agents/session_host.h"
#include "base/status.h"
#include "server/rpc_client.h"

namespace envforge::server {
namespace internal {
class RpcClientPool;  // idle clients to one server, shared by a host and its sessions (the .cc)
}  // namespace internal

struct RemoteSessionHostOptions {
  // token: the server's bearer token (--token), sent with every request; timeout: per call
  // (connect, write and read together), so a tool call that runs longer than this ends its
  // episode infra_error: keep it above the sessions' wall-time limit.
  RpcClientOptions client{.timeout = std::chrono::seconds(120)};
  size_t max_idle_connections = 256;  // idle clients kept for later sessions
};

class RemoteSessionHost final : public agents::SessionHost {
 public:
  // Connects to `url` (http://HOST:PORT[/rpc] or ws://HOST:PORT[/ws]; server/rpc_client.h) and
  // pings it. Errors name the URL: InvalidArgument (bad URL), Unavailable (cannot connect),
  // DeadlineExceeded (no answer in time), DataLoss (an answer that is not JSON-RPC),
  // Unauthenticated (the token was refused: -32005, 401).
  static Result<std::unique_ptr<RemoteSessionHost>> Connect(const std::string& url,
                                                            RemoteSessionHostOptions options = {});
  ~RemoteSessionHost() override;

  // envs/get {env}: `env` is the environment's name, id or a unique prefix of its id. Errors:
  // NotFound (the server's -32002, its message naming the environment and the known ones),
  // Unavailable / DeadlineExceeded (no answer), FailedPrecondition (an answer without what the
  // loop needs, e.g. a server without tasks[].task_version), others as the server answered them.
  Result<agents::HostedEnv> DescribeEnvironment(const std::string& env) override;
  // session/create {env: env.id, task: task.id, limits?: sandbox::ToJson(*options.limits)}.
  // Errors: the server's (ResourceExhausted when full, NotFound when the version is gone,
  // Unavailable when draining or unreachable), FailedPrecondition when the answered versions differ
  // from the description's (the session is closed again).
  Result<std::unique_ptr<agents::HostedSession>> CreateSession(const agents::HostedEnv& env,
                                                               const agents::HostedTask& task,
                                                               const agents::HostedSessionOptions& options) override;

  const std::string& url() const;

 private:
  explicit RemoteSessionHost(std::shared_ptr<internal::RpcClientPool> pool);
  std::shared_ptr<internal::RpcClientPool> pool_;
};

}  // namespace envforge::server
