// The transport-independent core of `envforge serve`: JSON-RPC 2.0 over the sandbox runtime.
// Every transport (HTTP POST /rpc, WebSocket /ws, MCP over HTTP POST /mcp, stdio) hands the raw
// payload text of one message to HandleAsync and writes back what it answers.
//
// JSON-RPC 2.0 (https://www.jsonrpc.org/specification): a request has "jsonrpc":"2.0",
// "method", optional "params" (object or array; these methods take objects) and "id" (string,
// number or null); without "id" it is a notification (executed, never answered). A batch is a
// non-empty array of requests, answered by an array of the responses to its non-notification
// members (no answer at all when every member is a notification); members run concurrently.
// Errors: -32700 parse error (invalid JSON, or a message nested deeper than kMaxJsonDepth = 128
// levels of arrays and objects, base/json.h; id null), -32600 invalid request (wrong shape, empty
// batch), -32601 method not found, -32602 invalid params (names the field), -32603 internal.
// Application errors (error.data carries {"kind", "retryable"}):
//   -32001 unknown session, -32002 unknown environment or task, -32003 server full (retryable,
//   error.data.retry_after_ms), -32004 session dead (its outcome in data), -32005 unauthorized
//   (transports use it), -32006 shutting down (retryable), -32007 infrastructure error
//   (retryable; never a zero reward), -32008 payload too large (transports use it), -32009
//   failed precondition (the state does not allow the call, e.g. a task without an oracle; not
//   retryable). Which Status becomes which code: base/error_table.h, the one table.
//
// Native dialect methods (params -> result):
//   envs/list {} -> {"envs": [{"id", "name", "kind", "category", "tasks", "version"}]}
//   envs/get {env} -> {"id", "name", ..., "version", "tools": [ToolSpec], "tasks": [{"id", "prompt",
//       "version" (the verifier's, as submit_result's verdict names it), "task_version" (the
//       task's: sandbox::TaskVersion; added for remote rollouts, which record it), ...}]}
//   tasks/list {env} -> {"tasks": [...]} (the same task objects)
//   session/create {env, task, seed?, limits?, tools?} -> {"session", "prompt", "tools", "versions":
//       {"env", "task", "verifier"}, "trajectory"}; tools false leaves "tools" out of the answer
//       (a client that has them from envs/get: about 8 KB less per create, on both ends)
//   tools/list {session} -> {"tools": [ToolSpec]}
//   tools/call {session, name, arguments} -> toolsets::ToolResult JSON (typed outcome; arguments
//       nested deeper than kMaxJsonValueDepth = 100 levels answer invalid_call, a tool result
//       nested deeper answers tool_error)
//   session/submit {session, answer} -> {"passed", "score", "reasons", "verifier_version",
//       "outcome"} (a submit ends the episode's recording as "submitted"; the session stays open
//       until closed or expired)
//   session/reset {session} -> same as session/create (a new session id)
//   session/fork {session} -> {"session", "trajectory"}
//   session/close {session} -> {"closed": true}
//   server/stats {} -> sessions, calls, outcomes, trajectories counts, uptime
// `env` accepts the environment's id (content hash), a unique prefix of it, or its name.
// Sessions are named by opaque strings ("s-" + 24 hex digits), not manager ids.
//
// MCP dialect (Model Context Protocol revisions 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05;
// the client's revision when it is one of these, else the latest):
//   initialize -> {"protocolVersion", "capabilities": {"tools": {}}, "serverInfo", "instructions"}
//   notifications/* without an id: accepted, never answered; with an id: -32601
//   a JSON-RPC response (a client answering a server request; this server sends none): accepted,
//     never answered
//   ping -> {}
//   tools/list {cursor?, _meta?: {"envforge/session": S}} -> {"tools": [{name, description,
//     inputSchema}], "nextCursor"?} (without a session: the tools of every environment, each name
//     prefixed "env__"; mcp_page_size tools per page; a cursor not handed out is -32602)
//   tools/call {name, arguments, _meta?: {"envforge/session": S}} -> {"content": [{"type":
//     "text", "text"}], "structuredContent"?, "isError", "_meta": {"envforge/outcome", ...}}
//     A name that is no listed tool is -32602 (with or without a session, before any session
//     work); a tool's own failures, bad arguments included, are results with isError.
//   The episode is named by params._meta["envforge/session"], else by arguments.session (removed
//   before the tool sees the arguments). Two extra tools exist in the MCP dialect:
//   envforge_create_session {env, task} and envforge_close_session {session}.
//
// Sessions expire after session_ttl without a request (closed, recorded as "expired"). A session
// count at max_sessions answers -32003 at once (never waits). Everything the service does is
// recorded in the TrajectoryStore when one is given (agents/trajectory_store.h).
//
// Thread safety: HandleAsync may be called from any thread, concurrently; `done` runs on an
// arbitrary thread (often the SessionManager's io thread), exactly once, and must not block.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "agents/trajectory_store.h"
#include "base/json.h"
#include "base/status.h"
#include "sandbox/session_manager.h"
#include "server/metrics.h"

namespace envforge::server {

enum class Dialect { kNative, kMcp };

struct RequestContext {
  Dialect dialect = Dialect::kNative;
  std::string peer;       // "127.0.0.1:53412", "stdio"
  std::string transport;  // "http", "ws", "stdio" (metrics label)
  // The answer goes out as DumpJson's text and its tree is never read, so a handler may put
  // PreserializedJson members in it (base/preserialized_json.h). HandleAsync sets it; a caller of
  // HandleJsonAsync that reads the answer's tree (the in-process Python Runtime) leaves it false.
  bool answer_written_as_text = false;
};

struct RpcServiceOptions {
  std::string envs_dir;  // every *.envdb in it (not recursive) is opened at Create
  sandbox::ManagerOptions manager;
  size_t max_sessions = 1024;
  std::chrono::milliseconds session_ttl{10 * 60 * 1000};
  std::string trajectories_path;  // empty: no recording
  size_t mcp_page_size = 100;     // tools per MCP tools/list page (0: one page)
  // Names this server in a fleet behind a load balancer: handles become "s-ID-<hex>" and
  // session/create and session/fork answer "server": ID, so the balancer routes a session's
  // requests to its owner by the handle alone. 1-32 of [A-Za-z0-9_] (no '-': the handle's
  // prefix "s-ID-" must never be the prefix of another server's). Empty: "s-<hex>", no "server".
  std::string server_id;
};

// OK, or InvalidArgument saying what a server id may hold.
Status ValidateServerId(const std::string& server_id);

class RpcService {
 public:
  // Opens every environment (an unreadable one is an error naming the file), creates the
  // SessionManager and the TrajectoryStore, starts the TTL sweeper.
  static Result<std::unique_ptr<RpcService>> Create(RpcServiceOptions options);
  ~RpcService();  // as Shutdown, synchronously

  // One JSON-RPC payload (single or batch). done(nullopt) when nothing is to be sent back.
  void HandleAsync(std::string payload, const RequestContext& context,
                   std::function<void(std::optional<std::string>)> done);
  // The same for an already-parsed value (the in-process Python Runtime uses it).
  void HandleJsonAsync(Json message, const RequestContext& context, std::function<void(std::optional<Json>)> done);

  // Stops accepting session/create, session/fork and tools/call (-32006); calls already in flight
  // finish. Then Shutdown waits for them (up to `grace`), closes every session (recorded as
  // "shutdown") and flushes the trajectory store.
  void BeginDrain();
  // A gentler drain for a fleet: from now on session/create answers -32006 ("create it on another
  // server") while the sessions already open go on (tool calls, submit, close, fork, reset), so a
  // client holding a connection to this server moves its next episode elsewhere. server/stats
  // then says "creating": false, and GET /health answers 503 {"status": "not_creating"}, so that a
  // balancer's health check stops sending this server new sessions (its sessions' own requests are
  // still routed to it: server/README.md "A fleet behind HAProxy"). Idempotent; BeginDrain and
  // Shutdown still follow.
  void StopCreatingSessions();
  // False after StopCreatingSessions or BeginDrain. Any thread.
  bool creating() const;
  Status Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(10'000));

  Metrics& metrics();
  sandbox::SessionManager& manager();
  agents::TrajectoryStore* trajectories();  // nullptr when not recording
  size_t in_flight() const;
  // A JSON-RPC error response for transports (unauthorized, too large, parse errors).
  static std::string ErrorResponse(const Json& id, int code, std::string_view message, Json data = nullptr);

 private:
  class Impl;
  explicit RpcService(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace envforge::server
