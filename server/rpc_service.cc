// RpcService: JSON-RPC 2.0 mechanics (batches, envelopes, in-flight accounting, request metrics)
// in front of two dialects over one session table (contract in server/rpc_service.h):
//   server/internal/native_dialect.h  the native methods
//   server/internal/mcp_dialect.h     the MCP methods
//   server/internal/session_table.h   environments, sessions, tool calls and their recording
// Every request gets one Reply, answered exactly once (server/internal/rpc_dialect.h).
#include "server/rpc_service.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <utility>
#include <vector>

#include "base/log.h"
#include "server/internal/mcp_dialect.h"
#include "server/internal/native_dialect.h"
#include "server/internal/rpc_dialect.h"
#include "server/internal/rpc_metrics.h"
#include "server/internal/rpc_protocol.h"
#include "server/internal/session_table.h"

namespace envforge::server {

using internal::MakeError;
using internal::Reply;
using internal::RpcError;
using internal::RpcReply;

namespace {

using Clock = std::chrono::steady_clock;
using Done = std::function<void(std::optional<Json>)>;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A transport's callback must not take the service down with it.
void CallDone(const Done& done, std::optional<Json> response) {
  try {
    done(std::move(response));
  } catch (...) {
    ENVFORGE_LOG(kError) << "rpc: a transport callback threw";
  }
}

// Collects the answers of a batch's members and answers the batch once all have answered.
class BatchState {
 public:
  BatchState(size_t size, Done done) : responses_(size), remaining_(size), done_(std::move(done)) {}

  void Complete(size_t index, std::optional<Json> response) {
    Done done;
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
  Done done_;
};

}  // namespace

class RpcService::Impl {
 public:
  explicit Impl(RpcServiceOptions options) : options_(std::move(options)), started_(Clock::now()) {}
  ~Impl() {
    (void)Shutdown(std::chrono::milliseconds(10'000));
    // Before the members its pending callbacks use (the in-flight count, the metrics).
    sessions_.reset();
  }

  Status Start();
  void HandleMessage(Json message, const RequestContext& context, Done done);
  void CountParseError(const std::string& transport) {
    rpc_metrics_.CountRequest("invalid", kRpcParseError, transport, 0);
  }
  void BeginDrain() { sessions_->BeginDrain(); }
  void StopCreatingSessions() { sessions_->StopCreating(); }
  bool creating() const { return sessions_->creating(); }
  Status Shutdown(std::chrono::milliseconds grace);

  Metrics& metrics() { return metrics_; }
  internal::SessionTable& sessions() { return *sessions_; }
  size_t in_flight() const { return in_flight_.load(); }

 private:
  void HandleOne(Json message, const RequestContext& context, Done done);
  // The Reply of a parsed request: counts it, shapes the response (none for a notification),
  // calls `done` and ends the request.
  Reply ReplyFor(const internal::RpcRequest& request, std::string metric_label, const RequestContext& context,
                 Clock::time_point start, Done done);
  internal::RpcDialect& DialectOf(const RequestContext& context) {
    return context.dialect == Dialect::kMcp ? static_cast<internal::RpcDialect&>(*mcp_) : *native_;
  }
  void EndRequest();

  RpcServiceOptions options_;
  Metrics metrics_;
  internal::RpcMetrics rpc_metrics_{metrics_};
  const Clock::time_point started_;
  std::atomic<size_t> in_flight_{0};
  std::mutex in_flight_mutex_;
  std::condition_variable in_flight_cv_;
  std::mutex shutdown_mutex_;

  std::unique_ptr<internal::SessionTable> sessions_;
  std::unique_ptr<internal::NativeDialect> native_;
  std::unique_ptr<internal::McpDialect> mcp_;
};

Status RpcService::Impl::Start() {
  ENVFORGE_ASSIGN_OR_RETURN(sessions_, internal::SessionTable::Open(options_, rpc_metrics_));
  internal::ServiceFigures figures{[this] { return in_flight_.load(); }, [this] { return SecondsSince(started_); }};
  native_ = std::make_unique<internal::NativeDialect>(*sessions_, std::move(figures));
  mcp_ = std::make_unique<internal::McpDialect>(*sessions_, options_.mcp_page_size);
  metrics_.RegisterGaugeCallback("envforge_rpc_in_flight", "Requests being handled.",
                                 [this] { return static_cast<double>(in_flight_.load()); });
  metrics_.RegisterGaugeCallback("envforge_uptime_seconds", "Seconds since the service started.",
                                 [this] { return SecondsSince(started_); });
  return Status::Ok();
}

Status RpcService::Impl::Shutdown(std::chrono::milliseconds grace) {
  std::lock_guard shutdown_lock(shutdown_mutex_);
  if (!sessions_) return Status::Ok();
  sessions_->BeginDrain();
  {
    std::unique_lock lock(in_flight_mutex_);
    if (!in_flight_cv_.wait_for(lock, grace, [this] { return in_flight_.load() == 0; })) {
      ENVFORGE_LOG(kWarn) << "shutdown: " << in_flight_.load() << " requests still in flight after " << grace.count()
                          << " ms; closing their sessions";
    }
  }
  return sessions_->Shutdown(grace);
}

void RpcService::Impl::HandleMessage(Json message, const RequestContext& context, Done done) {
  if (!message.is_array()) return HandleOne(std::move(message), context, std::move(done));
  if (message.empty()) {
    rpc_metrics_.CountRequest("invalid", kRpcInvalidRequest, context.transport, 0);
    done(internal::ErrorResponse(nullptr, MakeError(kRpcInvalidRequest, "invalid request: an empty batch")));
    return;
  }
  auto batch = std::make_shared<BatchState>(message.size(), std::move(done));
  for (size_t index = 0; index < message.size(); ++index) {
    HandleOne(std::move(message[index]), context,
              [batch, index](std::optional<Json> response) { batch->Complete(index, std::move(response)); });
  }
}

void RpcService::Impl::HandleOne(Json message, const RequestContext& context, Done done) {
  // An MCP client answers requests of the server; this one sends none, so an answer is accepted
  // and dropped (over HTTP: 202 and no body).
  if (context.dialect == Dialect::kMcp && internal::IsResponse(message)) {
    rpc_metrics_.CountRequest("response", 0, context.transport, 0);
    return CallDone(done, std::nullopt);
  }
  in_flight_++;
  auto start = Clock::now();
  auto parsed = internal::ParseRequest(std::move(message));
  if (auto* invalid = std::get_if<internal::EnvelopeError>(&parsed)) {
    rpc_metrics_.CountRequest("invalid", invalid->error.code, context.transport, SecondsSince(start));
    CallDone(done, internal::ErrorResponse(invalid->id, invalid->error));
    EndRequest();
    return;
  }
  auto request = std::get<internal::RpcRequest>(std::move(parsed));
  internal::RpcDialect& dialect = DialectOf(context);
  Reply reply = ReplyFor(request, dialect.MetricLabel(request), context, start, std::move(done));
  try {
    dialect.Dispatch(request, context, reply);
  } catch (const std::exception& e) {
    reply(MakeError(kRpcInternalError, std::string("internal error: ") + e.what()));
  } catch (...) {
    reply(MakeError(kRpcInternalError, "internal error"));
  }
}

Reply RpcService::Impl::ReplyFor(const internal::RpcRequest& request, std::string metric_label,
                                 const RequestContext& context, Clock::time_point start, Done done) {
  return internal::MakeReply([this, done = std::move(done), id = request.id, notification = request.notification,
                              metric_label = std::move(metric_label), transport = context.transport,
                              start](RpcReply answer) {
    const auto* error = std::get_if<RpcError>(&answer);
    rpc_metrics_.CountRequest(metric_label, error ? error->code : 0, transport, SecondsSince(start));
    std::optional<Json> response;
    if (!notification) {
      response =
          error ? internal::ErrorResponse(id, *error) : internal::ResultResponse(id, std::get<Json>(std::move(answer)));
    }
    CallDone(done, std::move(response));
    EndRequest();
  });
}

void RpcService::Impl::EndRequest() {
  if (in_flight_.fetch_sub(1) == 1) {
    std::lock_guard lock(in_flight_mutex_);
    in_flight_cv_.notify_all();
  }
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

void RpcService::HandleAsync(std::string payload, const RequestContext& caller_context,
                             std::function<void(std::optional<std::string>)> done) {
  RequestContext context = caller_context;
  context.answer_written_as_text = true;  // dumped below
  auto parsed = ParseJson(payload, "request");
  if (!parsed.ok()) {
    impl_->CountParseError(context.transport);
    done(DumpJson(
        internal::ErrorResponse(nullptr, MakeError(kRpcParseError, "parse error: " + parsed.status().message()))));
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
void RpcService::StopCreatingSessions() { impl_->StopCreatingSessions(); }
bool RpcService::creating() const { return impl_->creating(); }
Status RpcService::Shutdown(std::chrono::milliseconds grace) { return impl_->Shutdown(grace); }
Metrics& RpcService::metrics() { return impl_->metrics(); }
sandbox::SessionManager& RpcService::manager() { return impl_->sessions().manager(); }
agents::TrajectoryStore* RpcService::trajectories() { return impl_->sessions().trajectories(); }
size_t RpcService::in_flight() const { return impl_->in_flight(); }

std::string RpcService::ErrorResponse(const Json& id, int code, std::string_view message, Json data) {
  RpcError error = MakeError(code, std::string(message), data.is_object() ? data : Json::object());
  if (!data.is_null() && !data.is_object()) error.data = std::move(data);
  return DumpJson(internal::ErrorResponse(id, error));
}

}  // namespace envforge::server
