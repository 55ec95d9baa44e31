// Where an episode's sessions live: the rollout loop's one seam to an environment runtime.
//
// The loop (agents/episode.h) needs, per environment, its identity (name and content hash, the
// environment's version), the tool specs it renders for the model, and each task's id, prompt,
// task version and verifier version; per episode, one fresh session of the task, its tool calls
// and its close. A SessionHost answers exactly that:
//
//   LocalSessionHost   a sandbox::SessionManager in this process (sessions are forks of its
//                      zygotes; what the loop did before this seam existed);
//   server::RemoteSessionHost (server/remote_session_host.h)
//                      a running `envforge serve` over JSON-RPC: the model runs in the caller's
//                      process (a trainer), the sessions (tools, verifier) on the server.
//
// Errors. Describing an environment and creating a session return a Status (NotFound names an
// unknown environment, Unavailable an unreachable runtime). A tool call never fails as a call: a
// session that cannot be reached, or a runtime that failed, answers a ToolResult with outcome
// infra_error (the episode ends unscored), a dead session one with outcome crashed.
//
// Lifecycle of a HostedSession:
//
//   CreateSession --> open --CallTool (any number)--> open --Close / destructor--> closed
//
//   1. A session belongs to one episode: one thread calls it at a time.
//   2. Close is idempotent; the destructor closes a session not closed yet (best effort).
//   3. Every session is closed (or destroyed) before its host is destroyed.
//
// Thread safety: a SessionHost's methods may be called from many threads at once (the rollout
// runner plays many episodes concurrently); a HostedSession is thread-compatible.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/env_bundle.h"
#include "sandbox/sandbox_limits.h"
#include "sandbox/session_manager.h"
#include "toolsets/tool_protocol.h"

namespace envforge::agents {

// One task as the loop uses it.
struct HostedTask {
  std::string id;
  std::string prompt;            // the user message that opens an episode
  std::string version;           // the task's version: sandbox::TaskVersion(env hash, task)
  std::string verifier_version;  // the bundle's _tasks.version, which submit_result's verdict names
  Json answer_schema;            // the schema of its answer (null when the host does not say)
};

// One environment as the loop uses it.
struct HostedEnv {
  std::string id;  // the content hash: the environment's version
  std::string name;
  Json tools = Json::array();     // tool specs as rendered for the model: toolsets::ToJson(ToolSpec), in bundle order
  std::vector<HostedTask> tasks;  // in the bundle's order (sorted by id)

  // nullptr when the environment has no task `id`.
  const HostedTask* FindTask(const std::string& id) const;
};

// The description of an opened bundle (what LocalSessionHost answers).
HostedEnv DescribeBundle(const sandbox::EnvBundle& bundle);

struct HostedSessionOptions {
  std::optional<sandbox::SandboxLimits> limits;  // per-session limits; nullopt: the host's defaults
};

// One live session of an environment's task (see the lifecycle above).
class HostedSession {
 public:
  virtual ~HostedSession() = default;
  // The call's typed result; never throws. Transport or runtime failures are infra_error results,
  // a session that died answers crashed (session_alive false).
  virtual toolsets::ToolResult CallTool(toolsets::ToolCall call) = 0;
  // Ends the session. OK also when the runtime had already forgotten it; otherwise the error of
  // the close (the session is abandoned either way). Idempotent.
  virtual Status Close() = 0;
};

class SessionHost {
 public:
  virtual ~SessionHost() = default;
  // The environment named by `env` (what that means is the host's: LocalSessionHost takes an
  // opened environment's id, RemoteSessionHost whatever the server's envs/get accepts).
  // Errors: NotFound for an unknown environment (naming it); Unavailable or DeadlineExceeded when
  // the runtime cannot be reached; FailedPrecondition when it cannot describe what the loop needs.
  virtual Result<HostedEnv> DescribeEnvironment(const std::string& env) = 0;
  // A fresh session of `task` (which must belong to `env`, as DescribeEnvironment returned it).
  // Errors: those of the runtime (ResourceExhausted when it is full, Unavailable, NotFound when
  // the environment or task is gone, FailedPrecondition when its version changed).
  virtual Result<std::unique_ptr<HostedSession>> CreateSession(const HostedEnv& env, const HostedTask& task,
                                                               const HostedSessionOptions& options) = 0;
};

// Sessions of a SessionManager in this process. The manager must outlive the host and its
// sessions. Thread-safe (the manager's sync wrappers; never call it from the manager's io thread).
class LocalSessionHost final : public SessionHost {
 public:
  explicit LocalSessionHost(sandbox::SessionManager& manager) : manager_(manager) {}

  // `env` is the id (content hash) of an environment opened in the manager; NotFound otherwise.
  Result<HostedEnv> DescribeEnvironment(const std::string& env) override;
  Result<std::unique_ptr<HostedSession>> CreateSession(const HostedEnv& env, const HostedTask& task,
                                                       const HostedSessionOptions& options) override;

 private:
  sandbox::SessionManager& manager_;
};

}  // namespace envforge::agents
