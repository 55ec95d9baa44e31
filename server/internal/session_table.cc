// The service's session table (contract in server/internal/session_table.h).
#include "server/internal/session_table.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <utility>

#include "base/log.h"
#include "base/preserialized_json.h"
#include "sandbox/sandbox_limits.h"

namespace envforge::server::internal {

using sandbox::EnvBundle;
using sandbox::TaskRecord;
using toolsets::Outcome;
using toolsets::ToolResult;

namespace {

using Clock = std::chrono::steady_clock;
using SessionId = sandbox::SessionManager::SessionId;

int64_t UnixMicrosNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The "server" member of a new session's answer, on a server with an id (rpc_service.h).
void AddServerId(const std::string& server_id, Json& answer) {
  if (!server_id.empty()) answer["server"] = server_id;
}

// `tools`: null leaves the member out (the client asked for no tool list).
Json CreatedJson(const SessionEntry& entry, const EnvBundle& bundle, const TaskRecord* task, const Json* tools) {
  Json task_version = task ? Json(sandbox::TaskVersion(bundle.manifest.content_hash, *task)) : Json(nullptr);
  Json created{
      {"session", entry.handle},
      {"env", {{"id", bundle.manifest.content_hash}, {"name", bundle.manifest.name}}},
      {"task", task ? Json(task->id) : Json(nullptr)},
      {"prompt", task ? Json(task->prompt) : Json(nullptr)},
      {"versions",
       {{"env", bundle.manifest.content_hash},
        {"task", std::move(task_version)},
        {"verifier", task ? Json(task->version) : Json(nullptr)}}},
      {"trajectory", entry.episode_id.empty() ? Json(nullptr) : Json(entry.episode_id)},
  };
  if (tools != nullptr) created["tools"] = *tools;
  return created;
}

Json ManagerStatsJson(const sandbox::ManagerStats& stats) {
  return Json{{"live_sessions", stats.live_sessions},
              {"sessions_open", stats.sessions_open},
              {"sessions_created", stats.sessions_created},
              {"sessions_forked", stats.sessions_forked},
              {"sessions_died", stats.sessions_died},
              {"calls", stats.calls},
              {"zygote_starts", stats.zygote_starts},
              {"zygotes_running", stats.zygotes_running},
              {"warm_ready", stats.warm_ready},
              {"warm_taken", stats.warm_taken},
              {"warm_missed", stats.warm_missed},
              {"judgements_in_kept_process", stats.judgements_in_kept_process},
              {"idle_judges", stats.idle_judges},
              {"idle_judges_closed", stats.idle_judges_closed},
              {"sessions_recycled", stats.sessions_recycled},
              {"recycles_refused", stats.recycles_refused},
              {"recycled_taken", stats.recycled_taken},
              {"recycled_idle", stats.recycled_idle},
              {"recycled_idle_closed", stats.recycled_idle_closed},
              {"calls_gated", stats.calls_gated},
              {"calls_waiting", stats.calls_waiting}};
}

// The outcome that ends an episode after this tool result, if any (the header's "Recording").
std::optional<agents::EpisodeOutcome> EndingOutcome(bool is_submit, const ToolResult& result) {
  if (is_submit && result.ok()) return agents::EpisodeOutcome::kSubmitted;
  if (result.outcome == Outcome::kCrashed || (result.outcome == Outcome::kTimeout && !result.session_alive)) {
    return agents::EpisodeOutcome::kCrashed;
  }
  // The runtime (or the task's verifier) failed: the episode must never be scored as reward 0.
  if (result.outcome == Outcome::kInfraError && (!result.session_alive || is_submit)) {
    return agents::EpisodeOutcome::kInfraError;
  }
  return std::nullopt;
}

}  // namespace

Json ToolSpecs(const EnvBundle& bundle) {
  Json tools = Json::array();
  for (const auto& tool : bundle.tools) tools.push_back(toolsets::ToJson(tool.spec));
  return tools;
}

RpcError ShuttingDownError() {
  return MakeError(kRpcShuttingDown, "the server is shutting down; retry on another server");
}

// Answers session/create on a server that stopped creating (SessionTable::StopCreating).
RpcError NotCreatingError() {
  return MakeError(kRpcShuttingDown, "this server is draining: it takes no new sessions; create it on another server");
}

RpcError UnknownSessionError(const std::string& handle) {
  return MakeError(kRpcUnknownSession, "unknown session '" + handle + "' (closed, expired or never created)");
}

// ---------------------------------------------------------------------------------------------
// Setup and teardown.

SessionTable::SessionTable(const RpcServiceOptions& options, RpcMetrics& metrics)
    : options_(options), metrics_(metrics), registry_(options.max_sessions, options.server_id) {}

Result<std::unique_ptr<SessionTable>> SessionTable::Open(const RpcServiceOptions& options, RpcMetrics& metrics) {
  if (options.max_sessions == 0) return InvalidArgumentError("max_sessions must be at least 1");
  if (options.session_ttl.count() <= 0) return InvalidArgumentError("session_ttl must be positive");
  ENVFORGE_RETURN_IF_ERROR(ValidateServerId(options.server_id));
  std::unique_ptr<SessionTable> table(new SessionTable(options, metrics));
  ENVFORGE_ASSIGN_OR_RETURN(table->manager_, sandbox::SessionManager::Create(options.manager));
  ENVFORGE_RETURN_IF_ERROR(table->OpenEnvironments());
  if (!options.trajectories_path.empty()) {
    // Under load a batch per 100 ms amortises each commit over more steps (one transaction
    // writes every page it touched); Flush and shutdown still wake the writer at once.
    agents::TrajectoryStoreOptions store_options;
    store_options.batch_max_records = 4096;
    store_options.flush_interval = std::chrono::milliseconds(100);
    ENVFORGE_ASSIGN_OR_RETURN(table->store_, agents::TrajectoryStore::Open(options.trajectories_path, store_options));
  }
  SessionTable* self = table.get();
  metrics.metrics().RegisterGaugeCallback("envforge_sessions_live",
                                          "Sessions registered with the service (alive or dead, not closed).",
                                          [self] { return static_cast<double>(self->registry_.size()); });
  metrics.metrics().RegisterGaugeCallback(
      "envforge_trajectories_queue_depth", "Trajectory records waiting to be written (0 when not recording).",
      [self] { return self->store_ ? static_cast<double>(self->store_->Stats().queue_depth) : 0.0; });
  table->sweeper_ = std::thread([self] { self->SweepLoop(); });
  return table;
}

Status SessionTable::OpenEnvironments() {
  if (options_.envs_dir.empty()) return Status::Ok();
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(options_.envs_dir, ec)) {
    return NotFoundError("environments directory '" + options_.envs_dir + "' does not exist");
  }
  std::vector<std::string> paths;
  for (const auto& file : fs::directory_iterator(options_.envs_dir, ec)) {
    if (file.path().extension() == ".envdb" && file.is_regular_file(ec)) paths.push_back(file.path().string());
  }
  if (ec) return InternalError("cannot list '" + options_.envs_dir + "': " + ec.message());
  std::sort(paths.begin(), paths.end());
  for (const auto& path : paths) {
    auto id = manager_->OpenEnvironment(path);
    if (!id.ok()) return id.status().WithContext("opening environment " + path);
    if (std::find(env_ids_.begin(), env_ids_.end(), *id) == env_ids_.end()) env_ids_.push_back(*id);
    Json tools = ToolSpecs(*manager_->FindEnvironment(*id));
    Json text = PreserializedJson(tools);
    tool_specs_[*id] = ToolList{std::move(tools), std::move(text)};
  }
  std::sort(env_ids_.begin(), env_ids_.end(), [this](const std::string& a, const std::string& b) {
    const auto& name_a = manager_->FindEnvironment(a)->manifest.name;
    const auto& name_b = manager_->FindEnvironment(b)->manifest.name;
    return name_a != name_b ? name_a < name_b : a < b;
  });
  return Status::Ok();
}

SessionTable::~SessionTable() {
  if (manager_) (void)Shutdown(std::chrono::milliseconds(10'000));
  StopSweeper();
  // The manager first: its pending callbacks run during its destruction and still use the
  // registry, the metrics and the store.
  manager_.reset();
  store_.reset();
}

void SessionTable::SweepLoop() {
  // Small against the TTL so that a session outlives it by at most ~10 %, bounded so that a
  // long TTL still sweeps every second and a tiny one does not spin.
  auto interval = std::clamp(options_.session_ttl / 10, std::chrono::milliseconds(5), std::chrono::milliseconds(1000));
  std::unique_lock lock(sweep_mutex_);
  while (!stop_sweeping_) {
    sweep_cv_.wait_for(lock, interval);
    if (stop_sweeping_) break;
    lock.unlock();
    try {
      for (const auto& entry : registry_.TakeExpired(Clock::now(), options_.session_ttl)) {
        sessions_expired_++;
        SessionGone(*entry, agents::EpisodeOutcome::kExpired, "expired");
        manager_->CloseSessionAsync(entry->manager_id, [](Status) {});
      }
    } catch (const std::exception& e) {
      ENVFORGE_LOG(kError) << "session sweeper: " << e.what();
    }
    lock.lock();
  }
}

void SessionTable::StopSweeper() {
  {
    std::lock_guard lock(sweep_mutex_);
    stop_sweeping_ = true;
  }
  sweep_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

Status SessionTable::Shutdown(std::chrono::milliseconds grace) {
  std::lock_guard shutdown_lock(shutdown_mutex_);
  if (shut_down_ || !manager_) return Status::Ok();
  BeginDrain();
  StopSweeper();
  CloseAllAndWait(grace);
  shut_down_ = true;
  return store_ ? store_->Flush() : Status::Ok();
}

void SessionTable::CloseAllAndWait(std::chrono::milliseconds grace) {
  // Closing kills busy sessions, so the requests still waiting on them answer now.
  struct Latch {
    std::mutex mutex;
    std::condition_variable cv;
    size_t remaining = 0;
  };
  auto latch = std::make_shared<Latch>();
  auto entries = registry_.SealAndTakeAll();
  latch->remaining = entries.size();
  for (const auto& entry : entries) {
    SessionGone(*entry, agents::EpisodeOutcome::kShutdown, "shutdown");
    manager_->CloseSessionAsync(entry->manager_id, [latch](Status) {
      std::lock_guard lock(latch->mutex);
      if (--latch->remaining == 0) latch->cv.notify_all();
    });
  }
  std::unique_lock lock(latch->mutex);
  auto wait = std::max(grace, std::chrono::milliseconds(5'000));
  if (!latch->cv.wait_for(lock, wait, [&] { return latch->remaining == 0; })) {
    ENVFORGE_LOG(kWarn) << "shutdown: " << latch->remaining << " sessions did not confirm their close";
  }
}

// ---------------------------------------------------------------------------------------------
// Environments.

const EnvBundle* SessionTable::Environment(const std::string& id) const { return manager_->FindEnvironment(id); }

const Json& SessionTable::ToolSpecsOf(const EnvBundle& bundle, bool preserialized) const {
  const ToolList& list = tool_specs_.at(bundle.manifest.content_hash);
  return preserialized ? list.text : list.tree;
}

Result<const EnvBundle*> SessionTable::ResolveEnv(const std::string& key) const {
  if (key.empty()) return InvalidArgumentError("params.env must not be empty");
  if (const EnvBundle* exact = manager_->FindEnvironment(key)) return exact;
  std::vector<const EnvBundle*> by_name;
  std::vector<const EnvBundle*> by_prefix;
  for (const auto& id : env_ids_) {
    const EnvBundle* bundle = manager_->FindEnvironment(id);
    if (bundle->manifest.name == key) by_name.push_back(bundle);
    if (id.rfind(key, 0) == 0) by_prefix.push_back(bundle);
  }
  const auto& matches = by_name.empty() ? by_prefix : by_name;
  if (matches.size() == 1) return matches.front();
  if (matches.empty()) {
    std::string known;
    for (const auto& id : env_ids_) {
      known += (known.empty() ? "" : ", ") + manager_->FindEnvironment(id)->manifest.name;
    }
    return NotFoundError("unknown environment '" + key + "' (known: " + (known.empty() ? "none" : known) + ")");
  }
  std::string candidates;
  for (const auto* bundle : matches) candidates += (candidates.empty() ? "" : ", ") + bundle->manifest.content_hash;
  return NotFoundError("environment '" + key + "' is ambiguous; use one of the ids " + candidates);
}

// ---------------------------------------------------------------------------------------------
// Session life cycle.

std::optional<RpcError> SessionTable::Reserve() {
  switch (registry_.TryReserve()) {
    case SessionRegistry::Reserve::kOk: return std::nullopt;
    case SessionRegistry::Reserve::kSealed: return ShuttingDownError();
    case SessionRegistry::Reserve::kFull: break;
  }
  return MakeError(kRpcServerFull, "server full: max_sessions (" + std::to_string(options_.max_sessions) +
                                       ") sessions are open; close one or retry later");
}

void SessionTable::Create(CreateRequest request, const std::string& client, Reply reply) {
  if (draining_) return reply(ShuttingDownError());
  if (creating_stopped_) return reply(NotCreatingError());
  auto resolved = ResolveEnv(request.env);
  if (!resolved.ok()) {
    return reply(resolved.status().code() == StatusCode::kInvalidArgument
                     ? InvalidParams("env", resolved.status().message())
                     : MakeError(kRpcUnknownEnv, resolved.status().message(), Json{{"field", "params.env"}}));
  }
  const EnvBundle* bundle = *resolved;
  const TaskRecord* task = nullptr;
  if (!request.task.empty()) {
    task = bundle->FindTask(request.task);
    if (task == nullptr) {
      std::string known;
      for (const auto& candidate : bundle->tasks) known += (known.empty() ? "" : ", ") + candidate.id;
      return reply(MakeError(kRpcUnknownEnv,
                             "unknown task '" + request.task + "' in environment '" + bundle->manifest.name +
                                 "' (tasks: " + (known.empty() ? "none" : known) + ")",
                             Json{{"field", "params.task"}}));
    }
  }
  sandbox::SessionOptions session_options;
  session_options.task_id = request.task;
  if (!request.limits.is_null()) {
    auto limits = sandbox::SandboxLimitsFromJson(request.limits, manager_->options().limits);
    Status valid = limits.ok() ? sandbox::ValidateLimits(*limits) : limits.status();
    if (!valid.ok()) return reply(InvalidParams("limits", "params.limits: " + valid.message()));
    session_options.limits = *limits;
  }
  if (auto full = Reserve()) return reply(std::move(*full));
  const Json* tools = request.with_tools ? &ToolSpecsOf(*bundle, request.answer_written_as_text) : nullptr;
  auto on_created = [this, reply, bundle, task, seed = request.seed, client, tools](Result<SessionId> id) {
    FinishCreate(std::move(id), *bundle, task, seed, client, tools, reply);
  };
  manager_->CreateSessionAsync(bundle->manifest.content_hash, std::move(session_options),
                               Guard(reply, std::move(on_created)));
}

void SessionTable::FinishCreate(Result<SessionId> id, const EnvBundle& bundle, const TaskRecord* task,
                                std::optional<int64_t> seed, const std::string& client, const Json* tools,
                                const Reply& reply) {
  if (!id.ok()) {
    registry_.CancelReservation();
    return reply(ErrorFromStatus(id.status()));
  }
  auto entry = Register(*id, bundle, task, seed, client, "", 0);
  if (!entry) return reply(ShuttingDownError());
  Json created = CreatedJson(*entry, bundle, task, tools);
  AddServerId(options_.server_id, created);
  reply(std::move(created));
}

std::shared_ptr<SessionEntry> SessionTable::Register(uint64_t manager_id, const EnvBundle& bundle,
                                                     const TaskRecord* task, std::optional<int64_t> seed,
                                                     const std::string& client, const std::string& parent_episode,
                                                     int64_t fork_step) {
  auto entry = std::make_shared<SessionEntry>();
  entry->manager_id = manager_id;
  entry->env_id = bundle.manifest.content_hash;
  entry->task_id = task ? task->id : "";
  entry->seed = seed;
  entry->client = client;
  entry->steps = fork_step;
  if (store_) {
    agents::EpisodeStart start;
    start.env_id = bundle.manifest.content_hash;
    start.env_name = bundle.manifest.name;
    start.task_id = entry->task_id;
    if (task) {
      start.task_version = sandbox::TaskVersion(bundle.manifest.content_hash, *task);
      start.verifier_version = task->version;
    }
    start.seed = seed;
    start.parent_id = parent_episode;
    start.fork_step = fork_step;
    start.client = client;
    entry->episode_id = store_->BeginEpisode(std::move(start));
  }
  if (!registry_.Commit(entry)) {
    // Shutdown took every session while this one was starting: it must not outlive the service.
    EndEpisode(*entry, agents::EpisodeOutcome::kShutdown);
    manager_->CloseSessionAsync(manager_id, [](Status) {});
    return nullptr;
  }
  sessions_created_++;
  metrics_.metrics().Increment("envforge_sessions_created_total", {}, 1, "Sessions created (create, reset and fork).");
  return entry;
}

void SessionTable::Reset(const std::string& handle, const std::string& client, bool answer_written_as_text,
                         Reply reply) {
  if (draining_) return reply(ShuttingDownError());
  auto old = registry_.Remove(handle, /*keep_reservation=*/true);
  if (!old) return reply(UnknownSessionError(handle));
  SessionGone(*old, agents::EpisodeOutcome::kReset, "reset");
  const EnvBundle* bundle = manager_->FindEnvironment(old->env_id);
  const TaskRecord* task = old->task_id.empty() ? nullptr : bundle->FindTask(old->task_id);
  const Json* tools = &ToolSpecsOf(*bundle, answer_written_as_text);
  auto on_reset = [this, reply, bundle, task, seed = old->seed, client, tools](Result<SessionId> id) {
    FinishCreate(std::move(id), *bundle, task, seed, client, tools, reply);
  };
  manager_->ResetSessionAsync(old->manager_id, Guard(reply, std::move(on_reset)));
}

void SessionTable::Fork(const std::string& handle, const std::string& client, Reply reply) {
  if (draining_) return reply(ShuttingDownError());
  auto lease = Acquire(handle);
  if (!lease) return reply(UnknownSessionError(handle));
  if (auto full = Reserve()) return reply(std::move(*full));
  uint64_t parent_id = lease->entry()->manager_id;
  auto on_forked = [this, reply, lease, client](Result<SessionId> id) {
    FinishFork(std::move(id), *lease, client, reply);
  };
  manager_->ForkSessionAsync(parent_id, Guard(reply, std::move(on_forked)));
}

void SessionTable::FinishFork(Result<SessionId> id, const Lease& parent, const std::string& client,
                              const Reply& reply) {
  const auto& parent_entry = parent.entry();
  if (!id.ok()) {
    registry_.CancelReservation();
    auto info = manager_->GetSessionInfo(parent_entry->manager_id);
    if (id.status().code() == StatusCode::kUnavailable && info.ok() && !info->alive) {
      return reply(MakeError(kRpcSessionDead, "cannot fork: " + id.status().message(), Json{{"outcome", "crashed"}}));
    }
    return reply(ErrorFromStatus(id.status()));
  }
  const EnvBundle* bundle = manager_->FindEnvironment(parent_entry->env_id);
  const TaskRecord* task = parent_entry->task_id.empty() ? nullptr : bundle->FindTask(parent_entry->task_id);
  int64_t fork_step = 0;
  {
    std::lock_guard lock(parent_entry->mutex);
    fork_step = parent_entry->steps;
  }
  auto entry = Register(*id, *bundle, task, parent_entry->seed, client, parent_entry->episode_id, fork_step);
  if (!entry) return reply(ShuttingDownError());
  Json forked{{"session", entry->handle},
              {"parent", parent_entry->handle},
              {"fork_step", fork_step},
              {"trajectory", entry->episode_id.empty() ? Json(nullptr) : Json(entry->episode_id)}};
  AddServerId(options_.server_id, forked);
  reply(std::move(forked));
}

void SessionTable::Close(const std::string& handle, Reply reply) {
  auto entry = registry_.Remove(handle);
  if (!entry) return reply(UnknownSessionError(handle));
  SessionGone(*entry, agents::EpisodeOutcome::kClosed, "closed");
  // NotFound here only means the manager forgot it already; the handle is gone either way.
  manager_->CloseSessionAsync(entry->manager_id, Guard(reply, [this, reply, handle](Status) {
                                AfterCommit([reply, handle] { reply(Json{{"closed", true}, {"session", handle}}); });
                              }));
}

std::shared_ptr<Lease> SessionTable::Acquire(const std::string& handle) {
  auto entry = registry_.Acquire(handle);
  if (!entry) return nullptr;
  return std::make_shared<Lease>(registry_, std::move(entry));
}

void SessionTable::EndEpisode(SessionEntry& entry, agents::EpisodeOutcome outcome) {
  std::lock_guard lock(entry.mutex);
  if (entry.episode_ended) return;
  entry.episode_ended = true;
  if (store_ && !entry.episode_id.empty()) store_->EndEpisode(entry.episode_id, outcome);
}

void SessionTable::SessionGone(SessionEntry& entry, agents::EpisodeOutcome outcome, std::string_view reason) {
  EndEpisode(entry, outcome);
  sessions_closed_++;
  metrics_.metrics().Increment("envforge_sessions_closed_total", {{"reason", std::string(reason)}}, 1,
                               "Sessions closed, by reason (closed, reset, expired, shutdown).");
}

// ---------------------------------------------------------------------------------------------
// Tool calls and their recording.

void SessionTable::CallTool(std::shared_ptr<Lease> lease, toolsets::ToolCall call,
                            std::function<void(ToolResult result, int64_t step)> then) {
  uint64_t manager_id = lease->entry()->manager_id;
  auto record = [this, lease, tool = call.name, arguments = call.arguments, started_at_us = UnixMicrosNow(),
                 start = Clock::now(), then = std::move(then)](ToolResult result) mutable {
    auto duration_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
    tool_calls_++;
    outcomes_[static_cast<size_t>(result.outcome)]++;
    metrics_.CountToolCall(result.outcome, static_cast<double>(duration_us) / 1e6);
    RecordedCall recorded = RecordToolResult(*lease->entry(), tool, arguments, result, started_at_us, duration_us);
    if (!recorded.ended_episode) return then(std::move(result), recorded.step);
    AfterCommit([then = std::move(then), result = std::move(result), step = recorded.step]() mutable {
      then(std::move(result), step);
    });
  };
  manager_->CallToolAsync(manager_id, std::move(call), std::move(record));
}

SessionTable::RecordedCall SessionTable::RecordToolResult(SessionEntry& entry, const std::string& tool,
                                                          const Json& arguments, const ToolResult& result,
                                                          int64_t started_at_us, int64_t duration_us) {
  bool is_submit = tool == toolsets::kSubmitResultTool;
  std::optional<agents::EpisodeOutcome> ends = EndingOutcome(is_submit, result);
  std::lock_guard lock(entry.mutex);
  int64_t step = entry.steps++;
  bool record = store_ && !entry.episode_id.empty();
  if (record) {
    agents::StepRecord record_step;
    record_step.step = step;
    record_step.tool = tool;
    record_step.arguments = arguments;
    record_step.result = result;
    record_step.started_at_us = started_at_us;
    record_step.duration_us = duration_us;
    store_->RecordStep(entry.episode_id, std::move(record_step));
  }
  if (!ends || entry.episode_ended) return {step, false};
  entry.episode_ended = true;
  if (!record) return {step, false};
  if (*ends == agents::EpisodeOutcome::kSubmitted) {
    const Json* answer =
        arguments.is_object() && arguments.contains("answer_text") ? &arguments["answer_text"] : nullptr;
    store_->RecordSubmit(entry.episode_id, answer && answer->is_string() ? answer->get<std::string>() : "",
                         result.content);
  }
  store_->EndEpisode(entry.episode_id, *ends);
  return {step, true};
}

void SessionTable::AfterCommit(std::function<void()> then) {
  if (!store_) return then();
  store_->WhenCommitted([then = std::move(then)](Status committed) {
    // The answer goes out regardless: the trainer needs its verdict; the store logged the error.
    if (!committed.ok()) {
      ENVFORGE_LOG(kError) << "answering before the episode is recorded: " << committed.message();
    }
    then();
  });
}

// ---------------------------------------------------------------------------------------------
// Introspection.

Json SessionTable::StatsJson() const {
  Json outcomes = Json::object();
  for (size_t index = 0; index < kOutcomeCount; ++index) {
    outcomes[std::string(toolsets::OutcomeName(static_cast<Outcome>(index)))] = outcomes_[index].load();
  }
  Json trajectories = {{"enabled", store_ != nullptr}};
  if (store_) {
    auto stats = store_->Stats();
    trajectories["path"] = store_->path();
    trajectories["queue_depth"] = stats.queue_depth;
    trajectories["records_enqueued"] = stats.records_enqueued;
    trajectories["records_written"] = stats.records_written;
    trajectories["write_errors"] = stats.write_errors;
    trajectories["last_error"] = stats.last_error;
  }
  return Json{{"server_id", options_.server_id.empty() ? Json(nullptr) : Json(options_.server_id)},
              {"creating", !creating_stopped_.load() && !draining_.load()},
              {"sessions",
               {{"live", registry_.size()},
                {"starting", registry_.reservations()},
                {"max", options_.max_sessions},
                {"created", sessions_created_.load()},
                {"closed", sessions_closed_.load()},
                {"expired", sessions_expired_.load()},
                {"ttl_ms", options_.session_ttl.count()}}},
              {"manager", ManagerStatsJson(manager_->Stats())},
              {"calls", tool_calls_.load()},
              {"outcomes", std::move(outcomes)},
              {"trajectories", std::move(trajectories)}};
}

}  // namespace envforge::server::internal

namespace envforge::server {

Status ValidateServerId(const std::string& server_id) {
  bool valid = server_id.size() <= 32 && std::all_of(server_id.begin(), server_id.end(), [](char c) {
                 return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
               });
  if (valid) return Status::Ok();
  return InvalidArgumentError("server id '" + server_id +
                              "' must be 1-32 letters, digits or '_' (no '-': it goes into handles as s-ID-...)");
}

}  // namespace envforge::server
