// The service's session table: the environments it serves, the episodes open on them and
// everything that happens to an episode whichever dialect asked (server/rpc_service.h). It owns
// the SessionManager, the TrajectoryStore and the SessionRegistry, and is the one place that
// creates, resets, forks, closes, expires and records sessions; the dialects only parse
// parameters and shape answers.
//
// Answers: the operations that reply do so through a Reply (server/internal/rpc_dialect.h), with
// the native dialect's result shapes ("session/create" etc.) or the service's application errors:
// -32001 unknown session, -32002 unknown environment or task, -32003 full (TryReserve failed),
// -32006 draining or sealed, a manager failure mapped by ErrorFromStatus.
//
// Recording: every tool call is one step of its episode; a successful submit_result, a crash, a
// timeout that killed the session, or an infra_error that killed it (or came from the verifier)
// ends the episode. Close, reset, expiry and shutdown end it with their own outcome. An episode
// ends once. The answer of a tool call that ends its episode (a verdict above all) and of a close
// is sent only once the store has committed the episode's end and every step before it: a server
// killed (even SIGKILL) after answering has the episode on disk. Other calls answer at once and
// their steps are committed within the store's flush interval.
//
// Lifetime: Open starts the TTL sweeper. Shutdown (idempotent; also run by the destructor) stops
// it, closes every session (recorded as "shutdown") and flushes the store. The destructor then
// destroys the manager before the store: the manager's pending callbacks still use both.
//
// Thread safety: every method may be called from any thread; callbacks run on the manager's io
// thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agents/trajectory_store.h"
#include "base/json.h"
#include "base/status.h"
#include "sandbox/session_manager.h"
#include "server/internal/rpc_dialect.h"
#include "server/internal/rpc_metrics.h"
#include "server/internal/session_registry.h"
#include "server/rpc_service.h"

namespace envforge::server::internal {

RpcError ShuttingDownError();
RpcError UnknownSessionError(const std::string& handle);

// Holds a registry entry in use (so the TTL sweeper leaves it alone) until the last copy goes.
class Lease {
 public:
  Lease(SessionRegistry& registry, std::shared_ptr<SessionEntry> entry)
      : registry_(registry), entry_(std::move(entry)) {}
  ~Lease() { registry_.Release(entry_); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  const std::shared_ptr<SessionEntry>& entry() const { return entry_; }

 private:
  SessionRegistry& registry_;
  std::shared_ptr<SessionEntry> entry_;
};

// An environment's tools as the native dialect shows them: [{name, description, inputSchema}].
Json ToolSpecs(const sandbox::EnvBundle& bundle);

// What session/create needs, whichever dialect asked.
struct CreateRequest {
  std::string env;   // id, unique id prefix or name
  std::string task;  // empty: no task (a session on the environment alone)
  std::optional<int64_t> seed;
  Json limits;  // null: the manager's defaults
  // false: the answer leaves out "tools" (a client that read them from envs/get once saves
  // about 8 KB per create, on both ends).
  bool with_tools = true;
  // The answer is written as text (RequestContext::answer_written_as_text): its tool list is then
  // the environment's preserialized one, spliced in without a copy of the tree.
  bool answer_written_as_text = false;
};

class SessionTable {
 public:
  // Validates the options (max_sessions >= 1, a positive TTL), creates the manager, opens every
  // *.envdb of envs_dir (an unreadable one is an error naming it), opens the store when a path is
  // given, registers the envforge_sessions_live and envforge_trajectories_queue_depth gauges and
  // starts the TTL sweeper. `metrics` must outlive the table.
  static Result<std::unique_ptr<SessionTable>> Open(const RpcServiceOptions& options, RpcMetrics& metrics);
  ~SessionTable();
  SessionTable(const SessionTable&) = delete;
  SessionTable& operator=(const SessionTable&) = delete;

  // Environments, sorted by name then id.
  const std::vector<std::string>& env_ids() const { return env_ids_; }
  const sandbox::EnvBundle* Environment(const std::string& id) const;
  // `key` as an id, else as a unique name, else as a unique id prefix. InvalidArgument when
  // empty; NotFound naming the known environments, or the candidates when ambiguous.
  Result<const sandbox::EnvBundle*> ResolveEnv(const std::string& key) const;
  // ToolSpecs of an environment this table opened, built once when it was opened (every create
  // answers with them: about 8 KB of JSON for a dozen tools). `preserialized`: the same as a
  // PreserializedJson node (base/preserialized_json.h), for answers written as text; copying it is one memcpy
  // where the tree's copy and dump cost a create about 30 us.
  const Json& ToolSpecsOf(const sandbox::EnvBundle& bundle, bool preserialized = false) const;

  // session/create: replies {"session", "env", "task", "prompt", "tools" (unless
  // request.with_tools is false), "versions", "trajectory"} and "server" on a server with an id; -32006 once
  // StopCreating ran. Bad limits are -32602 naming params.limits; an unknown env or task -32002.
  void Create(CreateRequest request, const std::string& client, Reply reply);
  // session/reset: the old handle goes, a new session of the same task replies as Create does.
  // `answer_written_as_text` as CreateRequest's.
  void Reset(const std::string& handle, const std::string& client, bool answer_written_as_text, Reply reply);
  // session/fork: replies {"session", "parent", "fork_step", "trajectory"}; a dead parent is
  // -32004.
  void Fork(const std::string& handle, const std::string& client, Reply reply);
  // session/close: replies {"closed": true, "session"}.
  void Close(const std::string& handle, Reply reply);

  // The session marked in use until the lease goes; nullptr for an unknown handle.
  std::shared_ptr<Lease> Acquire(const std::string& handle);
  // Runs one tool call, counts and records it, then hands the result and its step number to
  // `then` (on the manager's io thread). The lease is held until then.
  void CallTool(std::shared_ptr<Lease> lease, toolsets::ToolCall call,
                std::function<void(toolsets::ToolResult result, int64_t step)> then);

  // From BeginDrain on, Create, Reset and Fork answer -32006; the dialects check draining() for
  // tool calls.
  void BeginDrain() { draining_ = true; }
  bool draining() const { return draining_.load(); }
  // From StopCreating on, Create answers -32006 (rpc_service.h, StopCreatingSessions); the
  // sessions already open go on.
  void StopCreating() { creating_stopped_ = true; }
  bool creating() const { return !creating_stopped_.load() && !draining_.load(); }
  Status Shutdown(std::chrono::milliseconds grace);

  // {"server_id": ID or null, "creating": bool, "sessions": {live, starting (creates accepted and
  // not yet answered), max, created, closed, expired, ttl_ms}, "manager": {...}, "calls",
  // "outcomes": {name: count}, "trajectories": {enabled, path?, queue_depth?, ...}}.
  Json StatsJson() const;
  size_t size() const { return registry_.size(); }
  sandbox::SessionManager& manager() { return *manager_; }
  agents::TrajectoryStore* trajectories() { return store_.get(); }

 private:
  SessionTable(const RpcServiceOptions& options, RpcMetrics& metrics);
  Status OpenEnvironments();
  // Reserves a registry slot: nullopt, or the error to answer (-32003 full, -32006 sealed).
  std::optional<RpcError> Reserve();
  std::shared_ptr<SessionEntry> Register(uint64_t manager_id, const sandbox::EnvBundle& bundle,
                                         const sandbox::TaskRecord* task, std::optional<int64_t> seed,
                                         const std::string& client, const std::string& parent_episode,
                                         int64_t fork_step);
  // The reply of a create or reset whose manager call finished with `id`; `tools` (a ToolSpecsOf
  // value, or null for none) goes into it.
  void FinishCreate(Result<sandbox::SessionManager::SessionId> id, const sandbox::EnvBundle& bundle,
                    const sandbox::TaskRecord* task, std::optional<int64_t> seed, const std::string& client,
                    const Json* tools, const Reply& reply);
  void FinishFork(Result<sandbox::SessionManager::SessionId> id, const Lease& parent, const std::string& client,
                  const Reply& reply);
  // Records the call as the episode's next step (and its end, when the call ends it).
  struct RecordedCall {
    int64_t step = 0;
    bool ended_episode = false;  // this call ended a recorded episode
  };
  RecordedCall RecordToolResult(SessionEntry& entry, const std::string& tool, const Json& arguments,
                                const toolsets::ToolResult& result, int64_t started_at_us, int64_t duration_us);
  // Runs `then` once the store has committed everything recorded so far (at once without a
  // store), so a reply that ends an episode is never ahead of its record.
  void AfterCommit(std::function<void()> then);
  void EndEpisode(SessionEntry& entry, agents::EpisodeOutcome outcome);
  void SessionGone(SessionEntry& entry, agents::EpisodeOutcome outcome, std::string_view reason);
  void CloseAllAndWait(std::chrono::milliseconds grace);

  void SweepLoop();
  void StopSweeper();

  static constexpr size_t kOutcomeCount = 6;

  const RpcServiceOptions options_;
  RpcMetrics& metrics_;
  std::unique_ptr<sandbox::SessionManager> manager_;
  std::unique_ptr<agents::TrajectoryStore> store_;
  std::vector<std::string> env_ids_;  // sorted by name, then id
  struct ToolList {
    Json tree;
    Json text;  // the same, PreserializedJson
  };
  std::map<std::string, ToolList> tool_specs_;  // by environment id; fixed once the table is open
  SessionRegistry registry_;

  std::atomic<bool> draining_{false};
  std::atomic<bool> creating_stopped_{false};
  std::mutex shutdown_mutex_;
  bool shut_down_ = false;  // guarded by shutdown_mutex_

  std::mutex sweep_mutex_;
  std::condition_variable sweep_cv_;
  bool stop_sweeping_ = false;  // guarded by sweep_mutex_
  std::thread sweeper_;

  std::atomic<uint64_t> sessions_created_{0};
  std::atomic<uint64_t> sessions_closed_{0};
  std::atomic<uint64_t> sessions_expired_{0};
  std::atomic<uint64_t> tool_calls_{0};
  std::array<std::atomic<uint64_t>, kOutcomeCount> outcomes_{};
};

}  // namespace envforge::server::internal
