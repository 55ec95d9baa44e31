// RpcService: JSON-RPC 2.0 dispatch over the SessionManager, the session registry and the
// trajectory store (contract in server/rpc_service.h).
//
// Every request gets one Reply, called exactly once: handlers call it, and a Reply dropped without
// being called answers -32603 itself, so a lost callback can never leave a client hanging or the
// in-flight count stuck. Handlers never block: manager work goes through the *Async calls and the
// reply is sent from their callbacks (on the manager's io thread).
#include "server/rpc_service.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/log.h"
#include "sandbox/sandbox_limits.h"
#include "server/internal/mcp_dialect.h"
#include "server/internal/rpc_protocol.h"
#include "server/internal/session_registry.h"

namespace envforge::server {

using internal::InvalidParams;
using internal::MakeError;
using internal::RpcError;
using internal::RpcReply;
using internal::SessionEntry;
using internal::SessionRegistry;
using sandbox::EnvBundle;
using sandbox::TaskRecord;
using toolsets::Outcome;
using toolsets::ToolResult;

namespace {

using Clock = std::chrono::steady_clock;
using Reply = std::function<void(RpcReply)>;

constexpr const char* kServerVersion = "0.1.0";
constexpr const char* kRequestsHelp = "JSON-RPC requests by method, answer code and transport.";
constexpr const char* kRequestSecondsHelp = "Time from receiving a request to answering it, by method.";
constexpr size_t kOutcomeCount = 6;

int64_t UnixMicrosNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The Reply of one request: the first call wins; dropping every copy unanswered answers -32603.
Reply MakeReply(std::function<void(RpcReply)> finish) {
  struct State {
    std::function<void(RpcReply)> finish;
    std::atomic<bool> answered{false};
    ~State() {
      if (answered.exchange(true)) return;
      try {
        finish(MakeError(kRpcInternalError, "internal error: the request was dropped without an answer"));
      } catch (...) {
        ENVFORGE_LOG(kError) << "rpc: answering a dropped request failed";
      }
    }
  };
  auto state = std::make_shared<State>();
  state->finish = std::move(finish);
  return [state](RpcReply reply) {
    if (!state->answered.exchange(true)) state->finish(std::move(reply));
  };
}

// Wraps a callback so that an exception inside it answers -32603 instead of escaping into the
// manager's io thread.
template <typename Fn>
auto Guard(Reply reply, Fn fn) {
  return [reply = std::move(reply), fn = std::move(fn)](auto&&... args) mutable {
    try {
      fn(std::forward<decltype(args)>(args)...);
    } catch (const std::exception& e) {
      reply(MakeError(kRpcInternalError, std::string("internal error: ") + e.what()));
    } catch (...) {
      reply(MakeError(kRpcInternalError, "internal error"));
    }
  };
}

RpcError ShuttingDown() {
  return MakeError(kRpcShuttingDown, "the server is shutting down; retry on another server");
}

RpcError UnknownSession(const std::string& handle) {
  return MakeError(kRpcUnknownSession, "unknown session '" + handle + "' (closed, expired or never created)");
}

Json TaskVersionOrNull(const EnvBundle& bundle, const TaskRecord* task) {
  if (task == nullptr) return nullptr;
  return sandbox::TaskVersion(bundle.manifest.content_hash, *task);
}

// toolsets::ToJson(result) without copying the content (a tool's result may be large).
Json ResultJson(ToolResult result) {
  Json content = std::move(result.content);
  bool has_content = result.ok() || !content.is_null();
  result.content = nullptr;
  Json json = toolsets::ToJson(result);
  if (has_content) {
    json["content"] = std::move(content);
  } else {
    json.erase("content");
  }
  return json;
}

Json ToolSpecs(const EnvBundle& bundle) {
  Json tools = Json::array();
  for (const auto& tool : bundle.tools) tools.push_back(toolsets::ToJson(tool.spec));
  return tools;
}

Json ManagerStatsJson(const sandbox::ManagerStats& stats) {
  return Json{{"live_sessions", stats.live_sessions},       {"sessions_open", stats.sessions_open},
              {"sessions_created", stats.sessions_created}, {"sessions_forked", stats.sessions_forked},
              {"sessions_died", stats.sessions_died},       {"calls", stats.calls},
              {"zygote_starts", stats.zygote_starts},       {"zygotes_running", stats.zygotes_running}};
}

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

// Collects the answers of a batch's members and answers the batch once all have answered.
class BatchState {
 public:
  BatchState(size_t size, std::function<void(std::optional<Json>)> done)
      : responses_(size), remaining_(size), done_(std::move(done)) {}

  void Complete(size_t index, std::optional<Json> response) {
    std::function<void(std::optional<Json>)> done;
    Json answers = Json::array();
    {
      std::lock_guard lock(mutex_);
      responses_[index] = std::move(response);
      if (--remaining_ > 0) return;
      for (auto& answer : responses_) {
        if (answer) answers.push_back(std::move(*answer));
      }
      done = std::move(done_);
    }
    // Every member was a notification: the batch gets no answer at all.
    if (answers.empty()) {
      done(std::nullopt);
    } else {
      done(std::move(answers));
    }
  }

 private:
  std::mutex mutex_;
  std::vector<std::optional<Json>> responses_;
  size_t remaining_;
  std::function<void(std::optional<Json>)> done_;
};

// What session/create needs, whichever dialect asked.
struct CreateRequest {
  std::string env;
  std::string task;
  std::optional<int64_t> seed;
  Json limits;  // null: the manager's defaults
};

}  // namespace

class RpcService::Impl {
 public:
  explicit Impl(RpcServiceOptions options)
      : options_(std::move(options)), registry_(options_.max_sessions), started_(Clock::now()) {}

  ~Impl() {
    (void)Shutdown(std::chrono::milliseconds(10'000));
    StopSweeper();
    // The manager first: its pending callbacks run during its destruction and still use the
    // registry, the metrics and the store.
    manager_.reset();
    store_.reset();
  }

  Status Start();
  void HandleMessage(Json message, const RequestContext& context, std::function<void(std::optional<Json>)> done);
  void BeginDrain() { draining_ = true; }
  void CountParseError(const std::string& transport) { CountRequest("invalid", kRpcParseError, transport, 0); }
  Status Shutdown(std::chrono::milliseconds grace);

  Metrics& metrics() { return metrics_; }
  sandbox::SessionManager& manager() { return *manager_; }
  agents::TrajectoryStore* trajectories() { return store_.get(); }
  size_t in_flight() const { return in_flight_.load(); }

 private:
  using Handler = void (Impl::*)(Json& params, const RequestContext& context, Reply reply);

  void HandleOne(Json message, const RequestContext& context, std::function<void(std::optional<Json>)> done);
  void Dispatch(internal::RpcRequest& request, const RequestContext& context, Reply reply);
  const std::unordered_map<std::string, Handler>& Handlers(Dialect dialect) const;
  void CountRequest(const std::string& method, int code, const std::string& transport, double seconds);
  // The request series of (method, transport) for answers without an error, resolved once.
  struct RequestSeries {
    Metrics::Counter ok;         // envforge_rpc_requests_total{method, code="ok", transport}
    Metrics::Histogram seconds;  // envforge_rpc_request_seconds{method}
  };
  const RequestSeries* SeriesFor(const std::string& method, const std::string& transport);
  // envforge_tool_calls_total / envforge_tool_call_seconds of one outcome, resolved on first use
  // (so an outcome never seen renders no series).
  struct OutcomeSeries {
    std::once_flag resolved;
    Metrics::Counter calls;
    Metrics::Histogram seconds;
  };
  OutcomeSeries& SeriesFor(Outcome outcome);
  void EndRequest();

  // Native dialect.
  void Ping(Json& params, const RequestContext& context, Reply reply);
  void EnvsList(Json& params, const RequestContext& context, Reply reply);
  void EnvsGet(Json& params, const RequestContext& context, Reply reply);
  void TasksList(Json& params, const RequestContext& context, Reply reply);
  void SessionCreate(Json& params, const RequestContext& context, Reply reply);
  void ToolsList(Json& params, const RequestContext& context, Reply reply);
  void ToolsCall(Json& params, const RequestContext& context, Reply reply);
  void SessionSubmit(Json& params, const RequestContext& context, Reply reply);
  void SessionReset(Json& params, const RequestContext& context, Reply reply);
  void SessionFork(Json& params, const RequestContext& context, Reply reply);
  void SessionClose(Json& params, const RequestContext& context, Reply reply);
  void ServerStats(Json& params, const RequestContext& context, Reply reply);
  // MCP dialect.
  void McpInitialize(Json& params, const RequestContext& context, Reply reply);
  void McpNotification(Json& params, const RequestContext& context, Reply reply);
  void McpToolsList(Json& params, const RequestContext& context, Reply reply);
  void McpToolsCall(Json& params, const RequestContext& context, Reply reply);

  // Shared paths.
  Result<const EnvBundle*> ResolveEnv(const std::string& key) const;
  void StartSession(CreateRequest request, const RequestContext& context, Reply reply);
  void CloseSession(const std::string& handle, Reply reply);
  std::shared_ptr<SessionEntry> Register(uint64_t manager_id, const EnvBundle& bundle, const TaskRecord* task,
                                         std::optional<int64_t> seed, const std::string& client,
                                         const std::string& parent_episode, int64_t fork_step);
  Json CreatedJson(const SessionEntry& entry, const EnvBundle& bundle, const TaskRecord* task) const;
  std::shared_ptr<Lease> AcquireLease(const std::string& handle);
  // Runs one tool call on the session, records it (step, submit, episode end) and counts it,
  // then hands the result to `then` (on the manager's io thread).
  void RunToolCall(std::shared_ptr<Lease> lease, toolsets::ToolCall call,
                   std::function<void(ToolResult result, int64_t step)> then);
  int64_t RecordToolResult(SessionEntry& entry, const std::string& tool, const Json& arguments,
                           const ToolResult& result, int64_t started_at_us, int64_t duration_us);
  void EndEpisode(SessionEntry& entry, agents::EpisodeOutcome outcome);
  void SessionGone(SessionEntry& entry, agents::EpisodeOutcome outcome, std::string_view reason);

  void SweepLoop();
  void StopSweeper();

  RpcServiceOptions options_;
  std::unique_ptr<sandbox::SessionManager> manager_;
  std::unique_ptr<agents::TrajectoryStore> store_;
  std::vector<std::string> env_ids_;  // sorted by name, then id
  Metrics metrics_;
  SessionRegistry registry_;
  const Clock::time_point started_;

  std::atomic<bool> draining_{false};
  std::atomic<size_t> in_flight_{0};
  std::mutex in_flight_mutex_;
  std::condition_variable in_flight_cv_;

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

  std::shared_mutex series_mutex_;
  // Keyed by method + '\n' + transport; nodes are stable, so pointers to values stay valid.
  std::unordered_map<std::string, RequestSeries> request_series_;  // guarded by series_mutex_
  std::array<OutcomeSeries, kOutcomeCount> outcome_series_;
};

// ---------------------------------------------------------------------------------------------
// Setup and teardown.

Status RpcService::Impl::Start() {
  if (options_.max_sessions == 0) return InvalidArgumentError("max_sessions must be at least 1");
  if (options_.session_ttl.count() <= 0) return InvalidArgumentError("session_ttl must be positive");
  ENVFORGE_ASSIGN_OR_RETURN(manager_, sandbox::SessionManager::Create(options_.manager));
  if (!options_.envs_dir.empty()) {
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
    }
    std::sort(env_ids_.begin(), env_ids_.end(), [this](const std::string& a, const std::string& b) {
      const auto& name_a = manager_->FindEnvironment(a)->manifest.name;
      const auto& name_b = manager_->FindEnvironment(b)->manifest.name;
      return name_a != name_b ? name_a < name_b : a < b;
    });
  }
  if (!options_.trajectories_path.empty()) {
    // Under load a batch per 100 ms amortises each commit over more steps (one transaction
    // writes every page it touched); Flush and shutdown still wake the writer at once.
    agents::TrajectoryStoreOptions store_options;
    store_options.batch_max_records = 4096;
    store_options.flush_interval = std::chrono::milliseconds(100);
    ENVFORGE_ASSIGN_OR_RETURN(store_, agents::TrajectoryStore::Open(options_.trajectories_path, store_options));
  }
  metrics_.RegisterGaugeCallback("envforge_sessions_live", "Sessions registered with the service (alive or dead, not closed).",
                                 [this] { return static_cast<double>(registry_.size()); });
  metrics_.RegisterGaugeCallback("envforge_rpc_in_flight", "Requests being handled.",
                                 [this] { return static_cast<double>(in_flight_.load()); });
  metrics_.RegisterGaugeCallback("envforge_trajectories_queue_depth",
                                 "Trajectory records waiting to be written (0 when not recording).", [this] {
                                   return store_ ? static_cast<double>(store_->Stats().queue_depth) : 0.0;
                                 });
  metrics_.RegisterGaugeCallback("envforge_uptime_seconds", "Seconds since the service started.",
                                 [this] { return SecondsSince(started_); });
  sweeper_ = std::thread([this] { SweepLoop(); });
  return Status::Ok();
}

void RpcService::Impl::SweepLoop() {
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

void RpcService::Impl::StopSweeper() {
  {
    std::lock_guard lock(sweep_mutex_);
    stop_sweeping_ = true;
  }
  sweep_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

Status RpcService::Impl::Shutdown(std::chrono::milliseconds grace) {
  std::lock_guard shutdown_lock(shutdown_mutex_);
  if (shut_down_ || !manager_) return Status::Ok();
  BeginDrain();
  {
    std::unique_lock lock(in_flight_mutex_);
    if (!in_flight_cv_.wait_for(lock, grace, [this] { return in_flight_.load() == 0; })) {
      ENVFORGE_LOG(kWarn) << "shutdown: " << in_flight_.load() << " requests still in flight after "
                          << grace.count() << " ms; closing their sessions";
    }
  }
  StopSweeper();
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
  {
    std::unique_lock lock(latch->mutex);
    auto wait = std::max(grace, std::chrono::milliseconds(5'000));
    if (!latch->cv.wait_for(lock, wait, [&] { return latch->remaining == 0; })) {
      ENVFORGE_LOG(kWarn) << "shutdown: " << latch->remaining << " sessions did not confirm their close";
    }
  }
  shut_down_ = true;
  return store_ ? store_->Flush() : Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// JSON-RPC mechanics.

void RpcService::Impl::HandleMessage(Json message, const RequestContext& context,
                                     std::function<void(std::optional<Json>)> done) {
  if (!message.is_array()) {
    HandleOne(std::move(message), context, std::move(done));
    return;
  }
  if (message.empty()) {
    CountRequest("invalid", kRpcInvalidRequest, context.transport, 0);
    done(internal::ErrorResponse(nullptr, MakeError(kRpcInvalidRequest, "invalid request: an empty batch")));
    return;
  }
  auto batch = std::make_shared<BatchState>(message.size(), std::move(done));
  for (size_t index = 0; index < message.size(); ++index) {
    HandleOne(std::move(message[index]), context,
              [batch, index](std::optional<Json> response) { batch->Complete(index, std::move(response)); });
  }
}

void RpcService::Impl::HandleOne(Json message, const RequestContext& context,
                                 std::function<void(std::optional<Json>)> done) {
  in_flight_++;
  auto start = Clock::now();
  auto parsed = internal::ParseRequest(std::move(message));
  if (auto* invalid = std::get_if<internal::EnvelopeError>(&parsed)) {
    CountRequest("invalid", invalid->error.code, context.transport, SecondsSince(start));
    try {
      done(internal::ErrorResponse(invalid->id, invalid->error));
    } catch (...) {
      ENVFORGE_LOG(kError) << "rpc: a transport callback threw";
    }
    EndRequest();
    return;
  }
  auto request = std::get<internal::RpcRequest>(std::move(parsed));
  // The metric label stays a bounded set: unknown methods and MCP notifications are pooled.
  std::string metric_method = "unknown";
  if (Handlers(context.dialect).count(request.method) != 0) {
    metric_method = request.method;
  } else if (context.dialect == Dialect::kMcp && request.method.rfind("notifications/", 0) == 0) {
    metric_method = "notifications";
  }
  Reply reply = MakeReply([this, done = std::move(done), id = std::move(request.id), notification = request.notification,
                           metric_method = std::move(metric_method), transport = context.transport, start](RpcReply answer) {
    const auto* error = std::get_if<RpcError>(&answer);
    double seconds = SecondsSince(start);
    if (error == nullptr) {
      const RequestSeries* series = SeriesFor(metric_method, transport);
      series->ok.Add();
      series->seconds.Observe(seconds);
    } else {
      CountRequest(metric_method, error->code, transport, seconds);
    }
    std::optional<Json> response;
    if (!notification) {
      response = error ? internal::ErrorResponse(id, *error)
                       : internal::ResultResponse(id, std::get<Json>(std::move(answer)));
    }
    try {
      done(std::move(response));
    } catch (...) {
      ENVFORGE_LOG(kError) << "rpc: a transport callback threw";
    }
    EndRequest();
  });
  try {
    Dispatch(request, context, reply);
  } catch (const std::exception& e) {
    reply(MakeError(kRpcInternalError, std::string("internal error: ") + e.what()));
  } catch (...) {
    reply(MakeError(kRpcInternalError, "internal error"));
  }
}

void RpcService::Impl::Dispatch(internal::RpcRequest& request, const RequestContext& context, Reply reply) {
  const auto& handlers = Handlers(context.dialect);
  auto handler = handlers.find(request.method);
  if (handler == handlers.end()) {
    if (context.dialect == Dialect::kMcp && request.method.rfind("notifications/", 0) == 0) {
      McpNotification(request.params, context, std::move(reply));
      return;
    }
    reply(MakeError(kRpcMethodNotFound, "method not found: '" + request.method + "'"));
    return;
  }
  // These methods take named parameters; an empty array is as good as no params.
  if (request.params.is_array()) {
    if (!request.params.empty()) {
      reply(MakeError(kRpcInvalidParams, "params must be an object (named parameters) for " + request.method,
                      Json{{"field", "params"}}));
      return;
    }
    Json no_params = Json::object();
    (this->*handler->second)(no_params, context, std::move(reply));
    return;
  }
  (this->*handler->second)(request.params, context, std::move(reply));
}

const std::unordered_map<std::string, RpcService::Impl::Handler>& RpcService::Impl::Handlers(Dialect dialect) const {
  static const std::unordered_map<std::string, Handler> native = {
      {"ping", &Impl::Ping},
      {"envs/list", &Impl::EnvsList},
      {"envs/get", &Impl::EnvsGet},
      {"tasks/list", &Impl::TasksList},
      {"session/create", &Impl::SessionCreate},
      {"tools/list", &Impl::ToolsList},
      {"tools/call", &Impl::ToolsCall},
      {"session/submit", &Impl::SessionSubmit},
      {"session/reset", &Impl::SessionReset},
      {"session/fork", &Impl::SessionFork},
      {"session/close", &Impl::SessionClose},
      {"server/stats", &Impl::ServerStats},
  };
  static const std::unordered_map<std::string, Handler> mcp = {
      {"initialize", &Impl::McpInitialize},
      {"ping", &Impl::Ping},
      {"tools/list", &Impl::McpToolsList},
      {"tools/call", &Impl::McpToolsCall},
  };
  return dialect == Dialect::kMcp ? mcp : native;
}

void RpcService::Impl::CountRequest(const std::string& method, int code, const std::string& transport,
                                    double seconds) {
  metrics_.Increment("envforge_rpc_requests_total",
                     {{"method", method}, {"code", code == 0 ? std::string("ok") : std::to_string(code)},
                      {"transport", transport.empty() ? std::string("unknown") : transport}},
                     1, kRequestsHelp);
  metrics_.Observe("envforge_rpc_request_seconds", {{"method", method}}, seconds, kRequestSecondsHelp);
}

const RpcService::Impl::RequestSeries* RpcService::Impl::SeriesFor(const std::string& method,
                                                                     const std::string& transport) {
  std::string key;
  key.reserve(method.size() + 1 + transport.size());
  key.append(method).append(1, '\n').append(transport);
  {
    std::shared_lock lock(series_mutex_);
    auto found = request_series_.find(key);
    if (found != request_series_.end()) return &found->second;
  }
  RequestSeries series;
  series.ok = metrics_.CounterSeries(
      "envforge_rpc_requests_total",
      {{"method", method}, {"code", "ok"}, {"transport", transport.empty() ? std::string("unknown") : transport}},
      kRequestsHelp);
  series.seconds = metrics_.HistogramSeries("envforge_rpc_request_seconds", {{"method", method}}, kRequestSecondsHelp);
  std::unique_lock lock(series_mutex_);
  return &request_series_.try_emplace(std::move(key), std::move(series)).first->second;
}

RpcService::Impl::OutcomeSeries& RpcService::Impl::SeriesFor(Outcome outcome) {
  OutcomeSeries& series = outcome_series_[static_cast<size_t>(outcome)];
  std::call_once(series.resolved, [&] {
    std::string name(toolsets::OutcomeName(outcome));
    series.calls = metrics_.CounterSeries("envforge_tool_calls_total", {{"outcome", name}}, "Tool calls by typed outcome.");
    series.seconds = metrics_.HistogramSeries("envforge_tool_call_seconds", {{"outcome", name}},
                                              "Server-side tool call latency (request to result), by outcome.");
  });
  return series;
}

void RpcService::Impl::EndRequest() {
  if (in_flight_.fetch_sub(1) == 1) {
    std::lock_guard lock(in_flight_mutex_);
    in_flight_cv_.notify_all();
  }
}

// ---------------------------------------------------------------------------------------------
// Shared paths.

Result<const EnvBundle*> RpcService::Impl::ResolveEnv(const std::string& key) const {
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

std::shared_ptr<Lease> RpcService::Impl::AcquireLease(const std::string& handle) {
  auto entry = registry_.Acquire(handle);
  if (!entry) return nullptr;
  return std::make_shared<Lease>(registry_, std::move(entry));
}

void RpcService::Impl::StartSession(CreateRequest request, const RequestContext& context, Reply reply) {
  if (draining_) return reply(ShuttingDown());
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
  switch (registry_.TryReserve()) {
    case SessionRegistry::Reserve::kOk: break;
    case SessionRegistry::Reserve::kSealed: return reply(ShuttingDown());
    case SessionRegistry::Reserve::kFull:
      return reply(MakeError(kRpcServerFull, "server full: max_sessions (" +
                                                        std::to_string(options_.max_sessions) +
                                                        ") sessions are open; close one or retry later"));
  }
  auto on_created = [this, reply, bundle, task, seed = request.seed, client = context.peer](
                        Result<sandbox::SessionManager::SessionId> id) {
    if (!id.ok()) {
      registry_.CancelReservation();
      return reply(internal::ErrorFromStatus(id.status()));
    }
    auto entry = Register(*id, *bundle, task, seed, client, "", 0);
    if (!entry) return reply(ShuttingDown());
    reply(CreatedJson(*entry, *bundle, task));
  };
  manager_->CreateSessionAsync(bundle->manifest.content_hash, std::move(session_options),
                               Guard(reply, std::move(on_created)));
}

std::shared_ptr<SessionEntry> RpcService::Impl::Register(uint64_t manager_id, const EnvBundle& bundle,
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
  metrics_.Increment("envforge_sessions_created_total", {}, 1, "Sessions created (create, reset and fork).");
  return entry;
}

Json RpcService::Impl::CreatedJson(const SessionEntry& entry, const EnvBundle& bundle, const TaskRecord* task) const {
  return Json{
      {"session", entry.handle},
      {"env", {{"id", bundle.manifest.content_hash}, {"name", bundle.manifest.name}}},
      {"task", task ? Json(task->id) : Json(nullptr)},
      {"prompt", task ? Json(task->prompt) : Json(nullptr)},
      {"tools", ToolSpecs(bundle)},
      {"versions",
       {{"env", bundle.manifest.content_hash},
        {"task", TaskVersionOrNull(bundle, task)},
        {"verifier", task ? Json(task->version) : Json(nullptr)}}},
      {"trajectory", entry.episode_id.empty() ? Json(nullptr) : Json(entry.episode_id)},
  };
}

void RpcService::Impl::EndEpisode(SessionEntry& entry, agents::EpisodeOutcome outcome) {
  std::lock_guard lock(entry.mutex);
  if (entry.episode_ended) return;
  entry.episode_ended = true;
  if (store_ && !entry.episode_id.empty()) store_->EndEpisode(entry.episode_id, outcome);
}

void RpcService::Impl::SessionGone(SessionEntry& entry, agents::EpisodeOutcome outcome, std::string_view reason) {
  EndEpisode(entry, outcome);
  sessions_closed_++;
  metrics_.Increment("envforge_sessions_closed_total", {{"reason", std::string(reason)}}, 1,
                     "Sessions closed, by reason (closed, reset, expired, shutdown).");
}

void RpcService::Impl::CloseSession(const std::string& handle, Reply reply) {
  auto entry = registry_.Remove(handle);
  if (!entry) return reply(UnknownSession(handle));
  SessionGone(*entry, agents::EpisodeOutcome::kClosed, "closed");
  // NotFound here only means the manager forgot it already; the handle is gone either way.
  manager_->CloseSessionAsync(entry->manager_id, Guard(reply, [reply, handle](Status) {
                                reply(Json{{"closed", true}, {"session", handle}});
                              }));
}

void RpcService::Impl::RunToolCall(std::shared_ptr<Lease> lease, toolsets::ToolCall call,
                                   std::function<void(ToolResult result, int64_t step)> then) {
  uint64_t manager_id = lease->entry()->manager_id;
  auto record = [this, lease, tool = call.name, arguments = call.arguments, started_at_us = UnixMicrosNow(),
                 start = Clock::now(), then = std::move(then)](ToolResult result) {
    auto duration_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
    tool_calls_++;
    outcomes_[static_cast<size_t>(result.outcome)]++;
    OutcomeSeries& series = SeriesFor(result.outcome);
    series.calls.Add();
    series.seconds.Observe(static_cast<double>(duration_us) / 1e6);
    int64_t step = RecordToolResult(*lease->entry(), tool, arguments, result, started_at_us, duration_us);
    then(std::move(result), step);
  };
  manager_->CallToolAsync(manager_id, std::move(call), std::move(record));
}

int64_t RpcService::Impl::RecordToolResult(SessionEntry& entry, const std::string& tool, const Json& arguments,
                                           const ToolResult& result, int64_t started_at_us, int64_t duration_us) {
  bool is_submit = tool == toolsets::kSubmitResultTool;
  std::optional<agents::EpisodeOutcome> ends;
  if (is_submit && result.ok()) {
    ends = agents::EpisodeOutcome::kSubmitted;
  } else if (result.outcome == Outcome::kCrashed || (result.outcome == Outcome::kTimeout && !result.session_alive)) {
    ends = agents::EpisodeOutcome::kCrashed;
  } else if (result.outcome == Outcome::kInfraError && (!result.session_alive || is_submit)) {
    // The runtime (or the task's verifier) failed: the episode must never be scored as reward 0.
    ends = agents::EpisodeOutcome::kInfraError;
  }
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
  if (ends && !entry.episode_ended) {
    entry.episode_ended = true;
    if (record) {
      if (*ends == agents::EpisodeOutcome::kSubmitted) {
        const Json* answer = arguments.is_object() && arguments.contains("answer_text") ? &arguments["answer_text"] : nullptr;
        store_->RecordSubmit(entry.episode_id, answer && answer->is_string() ? answer->get<std::string>() : "",
                             result.content);
      }
      store_->EndEpisode(entry.episode_id, *ends);
    }
  }
  return step;
}

// ---------------------------------------------------------------------------------------------
// Native dialect.

void RpcService::Impl::Ping(Json&, const RequestContext&, Reply reply) { reply(Json::object()); }

void RpcService::Impl::EnvsList(Json&, const RequestContext&, Reply reply) {
  Json envs = Json::array();
  for (const auto& id : env_ids_) {
    const EnvBundle* bundle = manager_->FindEnvironment(id);
    envs.push_back(Json{{"id", id},
                        {"name", bundle->manifest.name},
                        {"kind", bundle->manifest.kind},
                        {"category", bundle->manifest.category},
                        {"description", bundle->manifest.description},
                        {"tasks", bundle->tasks.size()},
                        {"version", bundle->manifest.content_hash}});
  }
  reply(Json{{"envs", std::move(envs)}});
}

void RpcService::Impl::EnvsGet(Json& params, const RequestContext&, Reply reply) {
  std::string key;
  if (auto error = internal::RequireString(params, "env", &key)) return reply(*error);
  auto bundle = ResolveEnv(key);
  if (!bundle.ok()) return reply(MakeError(kRpcUnknownEnv, bundle.status().message(), Json{{"field", "params.env"}}));
  Json full = (*bundle)->ToJson();
  const auto& manifest = (*bundle)->manifest;
  reply(Json{{"id", manifest.content_hash},
             {"name", manifest.name},
             {"kind", manifest.kind},
             {"category", manifest.category},
             {"description", manifest.description},
             {"provenance", manifest.provenance},
             {"version", manifest.content_hash},
             {"tools", std::move(full["tools"])},
             {"tasks", std::move(full["tasks"])}});
}

void RpcService::Impl::TasksList(Json& params, const RequestContext&, Reply reply) {
  std::string key;
  if (auto error = internal::RequireString(params, "env", &key)) return reply(*error);
  auto bundle = ResolveEnv(key);
  if (!bundle.ok()) return reply(MakeError(kRpcUnknownEnv, bundle.status().message(), Json{{"field", "params.env"}}));
  reply(Json{{"tasks", (*bundle)->ToJson()["tasks"]}});
}

void RpcService::Impl::SessionCreate(Json& params, const RequestContext& context, Reply reply) {
  CreateRequest request;
  if (auto error = internal::RequireString(params, "env", &request.env)) return reply(*error);
  if (auto error = internal::OptionalString(params, "task", &request.task)) return reply(*error);
  if (auto error = internal::OptionalInteger(params, "seed", &request.seed)) return reply(*error);
  if (auto error = internal::OptionalObject(params, "limits", &request.limits)) return reply(*error);
  StartSession(std::move(request), context, std::move(reply));
}

void RpcService::Impl::ToolsList(Json& params, const RequestContext&, Reply reply) {
  std::string handle;
  std::string env;
  if (auto error = internal::OptionalString(params, "session", &handle)) return reply(*error);
  if (auto error = internal::OptionalString(params, "env", &env)) return reply(*error);
  const EnvBundle* bundle = nullptr;
  if (!handle.empty()) {
    auto lease = AcquireLease(handle);
    if (!lease) return reply(UnknownSession(handle));
    bundle = manager_->FindEnvironment(lease->entry()->env_id);
  } else if (!env.empty()) {
    auto resolved = ResolveEnv(env);
    if (!resolved.ok()) return reply(MakeError(kRpcUnknownEnv, resolved.status().message()));
    bundle = *resolved;
  } else {
    return reply(InvalidParams("session", "params.session is required (a string; or params.env)"));
  }
  reply(Json{{"tools", ToolSpecs(*bundle)}});
}

void RpcService::Impl::ToolsCall(Json& params, const RequestContext&, Reply reply) {
  std::string handle;
  toolsets::ToolCall call;
  if (auto error = internal::RequireString(params, "session", &handle)) return reply(*error);
  if (auto error = internal::RequireString(params, "name", &call.name)) return reply(*error);
  if (auto error = internal::TakeOptionalObject(params, "arguments", &call.arguments)) return reply(*error);
  if (auto error = internal::OptionalString(params, "id", &call.id)) return reply(*error);
  if (draining_) return reply(ShuttingDown());
  auto lease = AcquireLease(handle);
  if (!lease) return reply(UnknownSession(handle));
  // A crashed session answers its typed death here (the manager keeps it until it is closed);
  // trainers read the outcome, so even infra_error is a result, not an RPC error.
  RunToolCall(std::move(lease), std::move(call),
              Guard(reply, [reply](ToolResult result, int64_t) { reply(ResultJson(std::move(result))); }));
}

void RpcService::Impl::SessionSubmit(Json& params, const RequestContext&, Reply reply) {
  std::string handle;
  if (auto error = internal::RequireString(params, "session", &handle)) return reply(*error);
  auto answer = params.find("answer");
  if (answer == params.end()) return reply(InvalidParams("answer", "params.answer is required (the answer text)"));
  std::string answer_text = answer->is_string() ? answer->get<std::string>() : DumpJson(*answer);
  // Submitting stays allowed while draining: it finishes an episode instead of starting work.
  auto lease = AcquireLease(handle);
  if (!lease) return reply(UnknownSession(handle));
  toolsets::ToolCall call;
  call.id = "submit";
  call.name = std::string(toolsets::kSubmitResultTool);
  call.arguments = Json{{"answer_text", std::move(answer_text)}};
  RunToolCall(std::move(lease), std::move(call), Guard(reply, [reply](const ToolResult& result, int64_t) {
                Json detail = {{"outcome", std::string(toolsets::OutcomeName(result.outcome))},
                               {"message", result.message},
                               {"session_alive", result.session_alive}};
                if (!result.limit.empty()) detail["limit"] = result.limit;
                switch (result.outcome) {
                  case Outcome::kOk: {
                    Json verdict = result.content.is_object() ? result.content : Json::object();
                    verdict["outcome"] = "ok";
                    return reply(std::move(verdict));
                  }
                  case Outcome::kCrashed:
                  case Outcome::kTimeout:
                    return reply(MakeError(kRpcSessionDead, "session died during submit: " + result.message,
                                           std::move(detail)));
                  case Outcome::kInvalidCall:
                    return reply(MakeError(kRpcInvalidParams, "submit rejected: " + result.message,
                                           std::move(detail)));
                  case Outcome::kToolError:
                  case Outcome::kInfraError:
                    return reply(MakeError(kRpcInfraError, "the verdict could not be computed: " + result.message,
                                           std::move(detail)));
                }
                reply(MakeError(kRpcInternalError, "unexpected submit outcome"));
              }));
}

void RpcService::Impl::SessionReset(Json& params, const RequestContext& context, Reply reply) {
  std::string handle;
  if (auto error = internal::RequireString(params, "session", &handle)) return reply(*error);
  if (draining_) return reply(ShuttingDown());
  auto old = registry_.Remove(handle, /*keep_reservation=*/true);
  if (!old) return reply(UnknownSession(handle));
  SessionGone(*old, agents::EpisodeOutcome::kReset, "reset");
  const EnvBundle* bundle = manager_->FindEnvironment(old->env_id);
  const TaskRecord* task = old->task_id.empty() ? nullptr : bundle->FindTask(old->task_id);
  auto on_reset = [this, reply, bundle, task, seed = old->seed, client = context.peer](
                      Result<sandbox::SessionManager::SessionId> id) {
    if (!id.ok()) {
      registry_.CancelReservation();
      return reply(internal::ErrorFromStatus(id.status()));
    }
    auto entry = Register(*id, *bundle, task, seed, client, "", 0);
    if (!entry) return reply(ShuttingDown());
    reply(CreatedJson(*entry, *bundle, task));
  };
  manager_->ResetSessionAsync(old->manager_id, Guard(reply, std::move(on_reset)));
}

void RpcService::Impl::SessionFork(Json& params, const RequestContext& context, Reply reply) {
  std::string handle;
  if (auto error = internal::RequireString(params, "session", &handle)) return reply(*error);
  if (draining_) return reply(ShuttingDown());
  auto lease = AcquireLease(handle);
  if (!lease) return reply(UnknownSession(handle));
  switch (registry_.TryReserve()) {
    case SessionRegistry::Reserve::kOk: break;
    case SessionRegistry::Reserve::kSealed: return reply(ShuttingDown());
    case SessionRegistry::Reserve::kFull:
      return reply(MakeError(kRpcServerFull, "server full: max_sessions (" +
                                                        std::to_string(options_.max_sessions) +
                                                        ") sessions are open; close one or retry later"));
  }
  const auto& parent = lease->entry();
  uint64_t parent_id = parent->manager_id;
  auto on_forked = [this, reply, lease, client = context.peer](Result<sandbox::SessionManager::SessionId> id) {
    const auto& parent_entry = lease->entry();
    if (!id.ok()) {
      registry_.CancelReservation();
      auto info = manager_->GetSessionInfo(parent_entry->manager_id);
      if (id.status().code() == StatusCode::kUnavailable && info.ok() && !info->alive) {
        return reply(MakeError(kRpcSessionDead, "cannot fork: " + id.status().message(),
                               Json{{"outcome", "crashed"}}));
      }
      return reply(internal::ErrorFromStatus(id.status()));
    }
    const EnvBundle* bundle = manager_->FindEnvironment(parent_entry->env_id);
    const TaskRecord* task = parent_entry->task_id.empty() ? nullptr : bundle->FindTask(parent_entry->task_id);
    int64_t fork_step = 0;
    {
      std::lock_guard lock(parent_entry->mutex);
      fork_step = parent_entry->steps;
    }
    auto entry = Register(*id, *bundle, task, parent_entry->seed, client, parent_entry->episode_id, fork_step);
    if (!entry) return reply(ShuttingDown());
    reply(Json{{"session", entry->handle},
               {"parent", parent_entry->handle},
               {"fork_step", fork_step},
               {"trajectory", entry->episode_id.empty() ? Json(nullptr) : Json(entry->episode_id)}});
  };
  manager_->ForkSessionAsync(parent_id, Guard(reply, std::move(on_forked)));
}

void RpcService::Impl::SessionClose(Json& params, const RequestContext&, Reply reply) {
  std::string handle;
  if (auto error = internal::RequireString(params, "session", &handle)) return reply(*error);
  CloseSession(handle, std::move(reply));
}

void RpcService::Impl::ServerStats(Json&, const RequestContext&, Reply reply) {
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
  reply(Json{{"sessions",
              {{"live", registry_.size()},
               {"max", options_.max_sessions},
               {"created", sessions_created_.load()},
               {"closed", sessions_closed_.load()},
               {"expired", sessions_expired_.load()},
               {"ttl_ms", options_.session_ttl.count()}}},
             {"manager", ManagerStatsJson(manager_->Stats())},
             {"calls", tool_calls_.load()},
             {"outcomes", std::move(outcomes)},
             {"trajectories", std::move(trajectories)},
             {"envs", env_ids_.size()},
             {"in_flight", in_flight_.load()},
             {"draining", draining_.load()},
             {"uptime_s", SecondsSince(started_)}});
}

// ---------------------------------------------------------------------------------------------
// MCP dialect.

void RpcService::Impl::McpInitialize(Json& params, const RequestContext&, Reply reply) {
  std::string requested;
  if (auto error = internal::OptionalString(params, "protocolVersion", &requested)) return reply(*error);
  reply(Json{
      {"protocolVersion", internal::NegotiateProtocolVersion(requested)},
      {"capabilities", {{"tools", {{"listChanged", false}}}}},
      {"serverInfo", {{"name", "envforge"}, {"version", kServerVersion}}},
      {"instructions",
       "Call envforge_create_session {env, task} to start an episode; pass the returned session "
       "handle as _meta[\"envforge/session\"] or arguments.session to the environment's tools; "
       "submit with submit_result {answer_text}."},
  });
}

void RpcService::Impl::McpNotification(Json&, const RequestContext&, Reply reply) { reply(Json::object()); }

namespace {

// The episode an MCP request names: params._meta["envforge/session"], else params.session.
std::optional<RpcError> McpSessionFromMeta(const Json& params, std::string* handle) {
  auto meta = params.find("_meta");
  if (meta != params.end() && !meta->is_null()) {
    if (!meta->is_object()) return InvalidParams("_meta", "params._meta must be an object");
    auto session = meta->find(internal::kSessionMetaKey);
    if (session != meta->end() && !session->is_null()) {
      if (!session->is_string()) {
        return InvalidParams("_meta.envforge/session", "params._meta[\"envforge/session\"] must be a string");
      }
      *handle = session->get<std::string>();
      return std::nullopt;
    }
  }
  return internal::OptionalString(params, "session", handle);
}

}  // namespace

void RpcService::Impl::McpToolsList(Json& params, const RequestContext&, Reply reply) {
  std::string handle;
  if (auto error = McpSessionFromMeta(params, &handle)) return reply(*error);
  Json tools = Json::array();
  if (!handle.empty()) {
    auto lease = AcquireLease(handle);
    if (!lease) return reply(UnknownSession(handle));
    const EnvBundle* bundle = manager_->FindEnvironment(lease->entry()->env_id);
    for (const auto& tool : bundle->tools) tools.push_back(internal::McpToolDescriptor(tool.spec));
  } else {
    for (const auto& id : env_ids_) {
      const EnvBundle* bundle = manager_->FindEnvironment(id);
      for (const auto& tool : bundle->tools) {
        tools.push_back(internal::McpSessionlessToolDescriptor(tool.spec, bundle->manifest.name));
      }
    }
  }
  tools.push_back(internal::CreateSessionToolDescriptor());
  tools.push_back(internal::CloseSessionToolDescriptor());
  reply(Json{{"tools", std::move(tools)}});
}

void RpcService::Impl::McpToolsCall(Json& params, const RequestContext& context, Reply reply) {
  std::string name;
  Json arguments = Json::object();
  if (auto error = internal::RequireString(params, "name", &name)) return reply(*error);
  if (auto error = internal::OptionalObject(params, "arguments", &arguments)) return reply(*error);

  if (name == internal::kCreateSessionTool) {
    CreateRequest request;
    // Argument problems go back to the model as a tool error it can correct.
    std::optional<RpcError> error = internal::RequireString(arguments, "env", &request.env);
    if (!error) error = internal::RequireString(arguments, "task", &request.task);
    if (!error) error = internal::OptionalInteger(arguments, "seed", &request.seed);
    if (!error) error = internal::OptionalObject(arguments, "limits", &request.limits);
    if (error) return reply(internal::McpTextResult("arguments: " + error->message, true));
    StartSession(std::move(request), context, [reply](RpcReply created) {
      if (auto* failure = std::get_if<RpcError>(&created)) {
        if (failure->code == kRpcInvalidParams || failure->code == kRpcUnknownEnv) {
          return reply(internal::McpTextResult(failure->message, true));
        }
        return reply(std::move(*failure));
      }
      Json session = std::get<Json>(std::move(created));
      Json meta = {{"envforge/session", session["session"]}, {"envforge/trajectory", session["trajectory"]}};
      reply(internal::McpTextResult(DumpJson(session), false, session, std::move(meta)));
    });
    return;
  }

  std::string handle;
  if (auto error = McpSessionFromMeta(params, &handle)) return reply(*error);
  if (handle.empty() && arguments.contains("session")) {
    if (!arguments["session"].is_string()) {
      return reply(InvalidParams("arguments.session", "params.arguments.session must be a string"));
    }
    handle = arguments["session"].get<std::string>();
  }
  // The handle is the service's, never the tool's.
  arguments.erase("session");

  if (name == internal::kCloseSessionTool) {
    if (handle.empty()) return reply(internal::McpTextResult("arguments.session is required", true));
    CloseSession(handle, [reply, handle](RpcReply closed) {
      if (auto* failure = std::get_if<RpcError>(&closed)) return reply(std::move(*failure));
      reply(internal::McpTextResult("closed " + handle, false, nullptr, Json{{"envforge/session", handle}}));
    });
    return;
  }
  if (handle.empty()) {
    return reply(InvalidParams("_meta.envforge/session",
                               "no session: pass params._meta[\"envforge/session\"] or arguments.session "
                               "(create one with envforge_create_session)"));
  }
  if (draining_) return reply(ShuttingDown());
  auto lease = AcquireLease(handle);
  if (!lease) return reply(UnknownSession(handle));
  const EnvBundle* bundle = manager_->FindEnvironment(lease->entry()->env_id);
  std::string prefix = internal::McpToolPrefix(bundle->manifest.name);
  if (name.rfind(prefix, 0) == 0) name.erase(0, prefix.size());

  toolsets::ToolCall call;
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  std::string episode = lease->entry()->episode_id;
  RunToolCall(std::move(lease), std::move(call),
              Guard(reply, [reply, handle, episode](const ToolResult& result, int64_t step) {
                if (result.outcome == Outcome::kInfraError) {
                  // Not the agent's fault: a protocol error the client retries, never a tool
                  // result a trainer could score.
                  return reply(MakeError(kRpcInfraError, "infrastructure error: " + result.message,
                                         Json{{"outcome", "infra_error"},
                                              {"session", handle},
                                              {"session_alive", result.session_alive}}));
                }
                Json meta = {{"envforge/session", handle}, {"envforge/step", step}};
                if (!episode.empty()) meta["envforge/trajectory"] = episode;
                reply(internal::McpCallToolResult(result, std::move(meta)));
              }));
}

// ---------------------------------------------------------------------------------------------
// RpcService.

Result<std::unique_ptr<RpcService>> RpcService::Create(RpcServiceOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  ENVFORGE_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<RpcService>(new RpcService(std::move(impl)));
}

RpcService::RpcService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RpcService::~RpcService() = default;

void RpcService::HandleAsync(std::string payload, const RequestContext& context,
                             std::function<void(std::optional<std::string>)> done) {
  auto parsed = ParseJson(payload, "request");
  if (!parsed.ok()) {
    impl_->CountParseError(context.transport);
    done(DumpJson(internal::ErrorResponse(
        nullptr, MakeError(kRpcParseError, "parse error: " + parsed.status().message()))));
    return;
  }
  impl_->HandleMessage(std::move(parsed).value(), context, [done = std::move(done)](std::optional<Json> response) {
    if (!response) return done(std::nullopt);
    done(DumpJson(*response));
  });
}

void RpcService::HandleJsonAsync(Json message, const RequestContext& context,
                                 std::function<void(std::optional<Json>)> done) {
  impl_->HandleMessage(std::move(message), context, std::move(done));
}

void RpcService::BeginDrain() { impl_->BeginDrain(); }
Status RpcService::Shutdown(std::chrono::milliseconds grace) { return impl_->Shutdown(grace); }
Metrics& RpcService::metrics() { return impl_->metrics(); }
sandbox::SessionManager& RpcService::manager() { return impl_->manager(); }
agents::TrajectoryStore* RpcService::trajectories() { return impl_->trajectories(); }
size_t RpcService::in_flight() const { return impl_->in_flight(); }

std::string RpcService::ErrorResponse(const Json& id, int code, std::string_view message, Json data) {
  RpcError error = MakeError(code, std::string(message), data.is_object() ? data : Json::object());
  if (!data.is_null() && !data.is_object()) error.data = std::move(data);
  return DumpJson(internal::ErrorResponse(id, error));
}

}  // namespace envforge::server
