#include "server/load_client.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdio>
#include <exception>
#include <optional>
#include <random>
#include <string_view>
#include <thread>
#include <utility>

#include "server/internal/answer_head.h"

namespace envforge::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using ErrorCode = beast::error_code;
using Clock = std::chrono::steady_clock;

namespace {
class LoadClient;
}  // namespace

struct LoadRun::State {
  explicit State(const LoadOptions& o) : options(o), io(o.io_threads) { episodes.resize(o.sessions); }

  const LoadOptions options;
  net::io_context io;
  tcp::resolver::results_type endpoints;
  std::vector<EpisodeTally> episodes;
  std::atomic<size_t> next_episode{0};
  std::atomic<uint64_t> tool_calls_answered{0};
  std::atomic<uint64_t> episodes_done{0};
  std::atomic<size_t> active_clients{0};
  std::atomic<size_t> at_start{0};    // connect_first: clients connected (or given up) so far
  std::atomic<size_t> at_created{0};  // hold_sessions: clients whose create was answered (or gave up)
  std::vector<std::shared_ptr<LoadClient>> clients;
};

namespace {

const std::string kToolsCall = "tools/call";
constexpr int kRpcUnknownSession = -32001;
constexpr int kRpcShuttingDown = -32006;

// What a load balancer answers when the server it needs is gone (HAProxy: 502 when the server
// dropped the request, 503 when none is up, 504 when it stopped answering).
bool IsBalancerOutage(int http_status) { return http_status == 502 || http_status == 503 || http_status == 504; }

// A string member, or "" when it is absent, null or not a string (a server without trajectories
// answers "trajectory": null). Never throws: a malformed answer must not kill an io thread.
std::string StringMember(const Json& object, const char* key) {
  if (!object.is_object()) return {};
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Length of the valid UTF-8 sequence at text[i], or 0 when the bytes there are not one.
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  }
  return length;
}

// At most `max_bytes` of `text`, cut on a character boundary, each invalid byte replaced by
// U+FFFD: bytes from the wire go into error texts that end up in JSON reports.
std::string Utf8Excerpt(std::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    size_t length = Utf8SequenceLength(text, i);
    std::string_view piece = length ? text.substr(i, length) : std::string_view("\xEF\xBF\xBD");
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += length ? length : 1;
  }
  return out;
}

// The answer to one request as a client sees it. The accessors never throw.
struct Reply {
  bool transport_ok = true;
  bool dropped = false;  // the client dropped the connection on purpose (drop_rate)
  std::string transport_error;
  Json response;        // the JSON-RPC response object
  int http_status = 0;  // HTTP transport: the response's status (0 over WebSocket)
  bool ok() const { return transport_ok && response.is_object() && response.contains("result"); }
  const Json& result() const { return response["result"]; }
  Json error() const {
    auto it = response.is_object() ? response.find("error") : response.end();
    return it != response.end() ? *it : Json::object();
  }
  int code() const {
    Json e = error();
    return e.is_object() && e.contains("code") && e["code"].is_number_integer() ? e["code"].get<int>() : 0;
  }
  // A balancer's answer that the server owning the session is gone (not a JSON-RPC answer).
  bool owner_unreachable() const { return !transport_ok && IsBalancerOutage(http_status); }
  std::string kind() const {
    if (!transport_ok) return dropped ? "dropped_by_chaos" : "transport";
    Json e = error();
    if (!e.is_object()) return "malformed_error";
    std::string kind = e.contains("data") ? StringMember(e["data"], "kind") : std::string();
    return kind.empty() ? "rpc_" + std::to_string(code()) : kind;
  }
};

class LoadClient : public std::enable_shared_from_this<LoadClient> {
 public:
  LoadClient(LoadRun::State& run, uint32_t seed)
      : run_(run), strand_(net::make_strand(run.io)), timer_(strand_), rng_(seed) {}

  void Start() {
    ++run_.active_clients;
    net::post(strand_, [self = shared_from_this()] { self->Reconnect([self] { self->ArriveAtStart(); }); });
  }

  const LoadStats& stats() const { return stats_; }

 private:
  using Then = std::function<void()>;
  using OnReply = std::function<void(Reply)>;

  void Reconnect(Then then) {
    CloseStream();
    ++stats_.reconnects;
    beast::tcp_stream stream(strand_);
    stream.expires_after(run_.options.request_timeout);
    http_.emplace(std::move(stream));
    http_->async_connect(run_.endpoints, [self = shared_from_this(), then](ErrorCode ec, const tcp::endpoint&) {
      if (ec) return self->ConnectFailed(ec, then);
      ErrorCode ignored;
      self->http_->socket().set_option(tcp::no_delay(true), ignored);
      if (!self->run_.options.websocket) return then();
      self->ws_.emplace(std::move(*self->http_));
      self->http_.reset();
      self->ws_->set_option(
          websocket::stream_base::decorator([token = self->run_.options.token](websocket::request_type& request) {
            if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
          }));
      self->ws_->read_message_max(64u << 20);
      self->upgrade_response_ = {};
      const bool pinned = self->InEpisode();
      self->ws_->async_handshake(self->upgrade_response_, self->run_.options.host_header, self->UpgradeTarget(),
                                 [self, then, pinned](ErrorCode handshake_ec) {
                                   if (handshake_ec) return self->HandshakeFailed(handshake_ec, pinned, then);
                                   self->ws_->text(true);
                                   then();
                                 });
    });
  }

  // Between session/create and the episode's end: a reconnect must reach the session's owner.
  bool InEpisode() const {
    return episode_ != nullptr && episode_->created && episode_->end.empty() && !episode_->owner_lost;
  }

  // The upgrade request's target: in an episode it names the session, so that a balancer routes
  // the connection to the session's owner (a server ignores the query).
  std::string UpgradeTarget() const {
    const std::string& path = run_.options.path;
    if (!InEpisode()) return path;
    return path + (path.find('?') == std::string::npos ? "?" : "&") + "session=" + episode_->handle;
  }

  // A balancer refusing the upgrade to a session's owner means the owner is gone: the episode
  // ends and the client reconnects to whichever server the balancer picks.
  void HandshakeFailed(const ErrorCode& ec, bool pinned, Then then) {
    const int status = static_cast<int>(upgrade_response_.result_int());
    if (!pinned || !IsBalancerOutage(status) || !InEpisode()) return ConnectFailed(ec, then);
    ++stats_.errors["connect: the session's owner is gone (upgrade answered " + std::to_string(status) + ")"];
    episode_->owner_lost = true;
    Reconnect(std::move(then));
  }

  void ConnectFailed(const ErrorCode& ec, Then then) {
    ++stats_.errors["connect: " + ec.message()];
    if (++connect_failures_ > 20) return Done();  // the server is gone: stop this client
    timer_.expires_after(std::chrono::milliseconds(100));
    timer_.async_wait([self = shared_from_this(), then](ErrorCode) { self->Reconnect(then); });
  }

  void CloseStream() {
    ErrorCode ignored;
    if (ws_) {
      beast::get_lowest_layer(*ws_).socket().shutdown(tcp::socket::shutdown_both, ignored);
      beast::get_lowest_layer(*ws_).socket().close(ignored);
      ws_.reset();
    }
    if (http_) {
      http_->socket().shutdown(tcp::socket::shutdown_both, ignored);
      http_->socket().close(ignored);
      http_.reset();
    }
    buffer_.clear();
  }

  // One request: write, then read its answer. With `may_drop`, chaos may close the connection
  // right after the write.
  void Send(const std::string& method, Json params, bool may_drop, OnReply on_reply) {
    std::string payload =
        DumpJson(Json{{"jsonrpc", "2.0"}, {"id", ++next_id_}, {"method", method}, {"params", std::move(params)}});
    SendPayload(method, std::move(payload), may_drop, std::move(on_reply));
  }

  // tools/call, its text assembled around the pre-serialised name and arguments: the client
  // shares the machine with the server it measures, so it keeps its own per-call work small.
  void SendToolCall(OnReply on_reply) {
    if (tool_call_tail_.empty()) {
      tool_call_tail_ =
          ",\"name\":" + DumpJson(run_.options.tool) + ",\"arguments\":" + DumpJson(run_.options.arguments) + "}}";
    }
    std::string payload = "{\"jsonrpc\":\"2.0\",\"id\":" + std::to_string(++next_id_) +
                          ",\"method\":\"tools/call\",\"params\":{\"session\":" + DumpJson(episode_->handle) +
                          tool_call_tail_;
    SendPayload(kToolsCall, std::move(payload), true, std::move(on_reply));
  }

  void SendPayload(const std::string& method, std::string payload, bool may_drop, OnReply on_reply) {
    method_ = method;
    on_reply_ = std::move(on_reply);
    payload_ = std::move(payload);
    drop_after_write_ = may_drop && run_.options.drop_rate > 0 &&
                        std::uniform_real_distribution<double>(0, 1)(rng_) < run_.options.drop_rate;
    sent_at_ = Clock::now();
    auto self = shared_from_this();
    if (ws_) {
      beast::get_lowest_layer(*ws_).expires_after(run_.options.request_timeout);
      ws_->async_write(net::buffer(payload_), [self](ErrorCode ec, size_t) { self->OnWritten(ec); });
      return;
    }
    request_ = {http::verb::post, run_.options.path, 11};
    request_.set(http::field::host, run_.options.host_header);
    request_.set(http::field::content_type, "application/json");
    if (!run_.options.token.empty()) request_.set(http::field::authorization, "Bearer " + run_.options.token);
    request_.keep_alive(true);
    request_.body() = payload_;
    request_.prepare_payload();
    http_->expires_after(run_.options.request_timeout);
    http::async_write(*http_, request_, [self](ErrorCode ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(const ErrorCode& ec) {
    if (ec) return Finish(Reply{false, false, "write: " + ec.message(), {}});
    if (drop_after_write_) {
      // Chaos: the client vanishes with its request in flight.
      CloseStream();
      ++stats_.dropped;
      return Finish(Reply{false, true, "dropped", {}});
    }
    auto self = shared_from_this();
    if (ws_) {
      ws_->async_read(buffer_, [self](ErrorCode read_ec, size_t) { self->OnAnswerText(read_ec, true); });
      return;
    }
    parser_.emplace();
    parser_->body_limit(64u << 20);
    http::async_read(*http_, buffer_, *parser_,
                     [self](ErrorCode read_ec, size_t) { self->OnAnswerText(read_ec, false); });
  }

  void OnAnswerText(const ErrorCode& ec, bool websocket_answer) {
    if (ec) return Finish(Reply{false, false, "read: " + ec.message(), {}});
    std::string text;
    bool keep_alive = true;
    int http_status = 0;
    if (websocket_answer) {
      text = beast::buffers_to_string(buffer_.data());
      buffer_.consume(buffer_.size());
    } else {
      auto response = parser_->release();
      keep_alive = response.keep_alive();
      http_status = static_cast<int>(response.result_int());
      text = std::move(response.body());
    }
    const double latency_ms = std::chrono::duration<double, std::milli>(Clock::now() - sent_at_).count();
    stats_.latency_ms[method_].push_back(latency_ms);
    // step_ counts answered calls once this answer's callback ran: 0 here is the episode's first.
    if (method_ == kToolsCall && step_ == 0) stats_.first_call_latency_ms.push_back(latency_ms);
    // The bulky members of a result (a tool's content, a new session's tools and prompt) are
    // never read here: skipping them keeps the client's parse cheap (server/internal/answer_head.h).
    auto parsed = internal::ParseAnswerHead(text, {"content", "tools", "prompt"});
    if (!keep_alive) CloseStream();  // e.g. 413, or the server draining
    if (!parsed.ok()) {
      std::string what = IsBalancerOutage(http_status) ? "HTTP " + std::to_string(http_status) + " (balancer)"
                                                       : "not JSON-RPC: " + Utf8Excerpt(text, 120);
      return Finish(Reply{false, false, std::move(what), {}, http_status});
    }
    Finish(Reply{true, false, {}, std::move(parsed).value(), http_status});
  }

  // Hands the reply over, reconnecting first when the connection is gone.
  void Finish(Reply reply) {
    if (!reply.transport_ok && !reply.dropped) ++stats_.errors["transport (" + method_ + "): " + reply.transport_error];
    if (!reply.ok() && reply.transport_ok) ++stats_.errors[method_ + ": " + reply.kind()];
    OnReply on_reply = std::move(on_reply_);
    if (!ws_ && !http_) {
      return Reconnect([on_reply, reply = std::move(reply)]() mutable { on_reply(std::move(reply)); });
    }
    if (!reply.transport_ok) {
      CloseStream();
      return Reconnect([on_reply, reply = std::move(reply)]() mutable { on_reply(std::move(reply)); });
    }
    on_reply(std::move(reply));
  }

  // connect_first: the last client to arrive starts every client's first episode (at once, on
  // their strands); otherwise a client starts as soon as it is connected.
  void ArriveAtStart() {
    if (!run_.options.connect_first) return NextEpisode();
    if (arrived_) return;
    arrived_ = true;
    if (++run_.at_start < run_.clients.size()) return;
    for (const auto& client : run_.clients) {
      if (client->done_) continue;
      net::post(client->strand_, [client] { client->NextEpisode(); });
    }
  }

  // hold_sessions: a created session stays open, unused, until every client's create was answered
  // (or the client gave up); the last to arrive lets them all go on.
  void AfterCreated() {
    if (!run_.options.hold_sessions) return Step();
    holding_ = true;
    ArriveCreated();
  }

  void ArriveCreated() {
    if (created_arrived_) return;
    created_arrived_ = true;
    if (++run_.at_created < run_.clients.size()) return;
    for (const auto& client : run_.clients) {
      net::post(client->strand_, [client] {
        if (!client->holding_) return;
        client->holding_ = false;
        client->Step();
      });
    }
  }

  void NextEpisode() {
    size_t index = run_.next_episode++;
    if (index >= run_.episodes.size()) return Done();
    episode_ = &run_.episodes[index];
    create_attempts_ = 0;
    Create();
  }

  void Create() {
    Json params = {{"env", run_.options.env}, {"task", run_.options.task}};
    if (!run_.options.create_with_tools) params["tools"] = false;
    Send("session/create", std::move(params), false, [this](Reply reply) {
      if (reply.ok()) {
        episode_->created = true;
        episode_->handle = StringMember(reply.result(), "session");
        episode_->trajectory = StringMember(reply.result(), "trajectory");
        episode_->server = StringMember(reply.result(), "server");
        step_ = 0;
        return AfterCreated();
      }
      if (++create_attempts_ >= 200) return EndEpisode();
      if (reply.transport_ok && reply.code() == kRpcShuttingDown) {
        // This server takes no new sessions: a fresh connection lets the balancer pick another.
        CloseStream();
        return Reconnect([self = shared_from_this()] { self->Create(); });
      }
      // No server up right now, or the answer was lost with its connection: ask again (a
      // session created meanwhile is never used and expires on its server).
      if (reply.owner_unreachable() || (!reply.transport_ok && !reply.dropped)) return RetryCreateAfter(100);
      if (reply.transport_ok && reply.code() == -32003) {
        // Server full: back off as told, then retry.
        int64_t wait_ms = 20;
        Json data = reply.error().value("data", Json::object());
        if (data.is_object() && data.contains("retry_after_ms") && data["retry_after_ms"].is_number()) {
          wait_ms = std::clamp<int64_t>(data["retry_after_ms"].get<int64_t>(), 1, 1000);
        }
        return RetryCreateAfter(wait_ms);
      }
      EndEpisode();
    });
  }

  void RetryCreateAfter(int64_t wait_ms) {
    timer_.expires_after(std::chrono::milliseconds(wait_ms));
    timer_.async_wait([self = shared_from_this()](ErrorCode) { self->Create(); });
  }

  // The episode cannot go on when its owner is gone or shutting down; says how it ended, or ""
  // while it may go on.
  std::string EndingFor(const Reply& reply) const {
    if (episode_->owner_lost || reply.owner_unreachable()) return "infra_error";
    if (!reply.transport_ok) return "";
    if (reply.code() == kRpcUnknownSession) return "infra_error";
    if (reply.code() == kRpcShuttingDown) return "shutdown";
    return "";
  }

  // Ends the episode as `end` without submit or close: its server is gone or closes it itself.
  void Abandon(const std::string& end) {
    episode_->end = end;
    if (end == "infra_error") episode_->owner_lost = true;
    EndEpisode();
  }

  void EndEpisode() {
    ++run_.episodes_done;
    NextEpisode();
  }

  void Step() {
    if (step_ >= run_.options.steps || episode_->crashed) {
      if (run_.options.submit) return Submit();
      episode_->end = episode_->crashed ? "crashed" : "unsubmitted";
      return Close();
    }
    SendToolCall([this](Reply reply) {
      ++step_;
      // Written but not answered: the owner may have run it (a balancer's 503 says it did not).
      if (!reply.transport_ok && reply.http_status != 503) ++episode_->uncertain_steps;
      if (std::string end = EndingFor(reply); !end.empty()) return Abandon(end);
      if (reply.ok()) {
        ++episode_->answered_steps;
        ++run_.tool_calls_answered;
        std::string outcome = StringMember(reply.result(), "outcome");
        ++stats_.outcomes[outcome.empty() ? "?" : outcome];
        const Json& alive = reply.result().contains("session_alive") ? reply.result()["session_alive"] : Json(true);
        if (outcome == "crashed" || alive == false) episode_->crashed = true;
      }
      Step();
    });
  }

  void Submit() {
    Send("session/submit", Json{{"session", episode_->handle}, {"answer", run_.options.answer}}, false,
         [this](Reply reply) {
           if (!reply.transport_ok && reply.http_status != 503) ++episode_->uncertain_steps;
           if (std::string end = EndingFor(reply); !end.empty()) return Abandon(end);
           episode_->end = episode_->crashed ? "crashed" : reply.ok() ? "submitted" : "submit_error";
           if (reply.ok()) {
             ++episode_->answered_steps;
           } else {
             // A submit that reached the session (it died, or the verdict failed) carries the outcome
             // in error.data and is recorded as a step.
             Json error = reply.error();
             if (error.is_object() && error.contains("data") && error["data"].is_object() &&
                 error["data"].contains("outcome")) {
               ++episode_->answered_steps;
             }
           }
           Close();
         });
  }

  void Close() {
    Send("session/close", Json{{"session", episode_->handle}}, false, [this](Reply reply) {
      episode_->closed = reply.ok();
      // A submit whose connection broke is only known here to have lost its owner.
      if (std::string end = EndingFor(reply); !end.empty()) {
        episode_->end = end;
        episode_->owner_lost = episode_->owner_lost || end == "infra_error";
      }
      EndEpisode();
    });
  }

  void Done() {
    if (done_) return;
    done_ = true;
    // A client that gave up connecting must not hold the others at the start.
    if (run_.options.connect_first && !arrived_) ArriveAtStart();
    if (run_.options.hold_sessions) ArriveCreated();
    CloseStream();
    timer_.cancel();
    --run_.active_clients;
  }

  LoadRun::State& run_;
  net::strand<net::io_context::executor_type> strand_;
  net::steady_timer timer_;
  std::mt19937 rng_;
  std::optional<beast::tcp_stream> http_;
  std::optional<websocket::stream<beast::tcp_stream>> ws_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  std::optional<http::response_parser<http::string_body>> parser_;
  websocket::response_type upgrade_response_;  // the last upgrade's answer (its status on refusal)
  std::string payload_;
  std::string method_;
  std::string tool_call_tail_;  // ,"name":...,"arguments":...}} of every tools/call
  OnReply on_reply_;
  Clock::time_point sent_at_;
  bool drop_after_write_ = false;
  int64_t next_id_ = 0;
  EpisodeTally* episode_ = nullptr;
  size_t step_ = 0;
  int create_attempts_ = 0;
  int connect_failures_ = 0;
  std::atomic<bool> done_{false};  // read by the client that starts everyone (ArriveAtStart)
  bool arrived_ = false;           // connect_first: counted in at_start
  bool created_arrived_ = false;   // hold_sessions: counted in at_created
  bool holding_ = false;           // hold_sessions: created, waiting for the others
  LoadStats stats_;
};

}  // namespace

Status ParseLoadUrl(const std::string& url, const std::string& transport, LoadOptions* options) {
  std::string_view rest = url;
  bool ws_url = false;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("ws://")) {
    rest.remove_prefix(5);
    ws_url = true;
  } else {
    return InvalidArgumentError("the URL must be http://HOST:PORT or ws://HOST:PORT/ws, got '" + url + "'");
  }
  if (transport != "ws" && transport != "http")
    return InvalidArgumentError("the transport is ws or http, got '" + transport + "'");
  options->websocket = transport == "ws";
  if (ws_url && !options->websocket) return InvalidArgumentError("the http transport needs an http:// URL");
  size_t slash = rest.find('/');
  options->host_header = std::string(rest.substr(0, slash));
  std::string explicit_path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  options->path = options->websocket ? (ws_url && !explicit_path.empty() ? explicit_path : "/ws")
                                     : (explicit_path.empty() ? "/rpc" : explicit_path);
  size_t colon = options->host_header.rfind(':');
  if (colon == std::string::npos) return InvalidArgumentError("the URL needs a port: '" + url + "'");
  options->host = options->host_header.substr(0, colon);
  options->port = options->host_header.substr(colon + 1);
  if (options->host.size() > 2 && options->host.front() == '[')
    options->host = options->host.substr(1, options->host.size() - 2);
  return Status::Ok();
}

void LoadStats::MergeInto(LoadStats& total) const {
  for (const auto& [method, samples] : latency_ms) {
    auto& all = total.latency_ms[method];
    all.insert(all.end(), samples.begin(), samples.end());
  }
  total.first_call_latency_ms.insert(total.first_call_latency_ms.end(), first_call_latency_ms.begin(),
                                     first_call_latency_ms.end());
  for (const auto& [kind, n] : errors) total.errors[kind] += n;
  for (const auto& [kind, n] : outcomes) total.outcomes[kind] += n;
  total.dropped += dropped;
  total.reconnects += reconnects;
}

Result<std::unique_ptr<LoadRun>> LoadRun::Create(const LoadOptions& options) {
  if (options.tool.empty()) return InvalidArgumentError("the load needs a tool to call");
  if (options.sessions == 0 || options.concurrency == 0)
    return InvalidArgumentError("sessions and concurrency must be positive");
  if (options.io_threads < 1 || options.io_threads > 64) return InvalidArgumentError("io_threads must be 1..64");
  if (options.host.empty() || options.port.empty()) return InvalidArgumentError("no host and port (ParseLoadUrl)");
  auto state = std::make_unique<State>(options);
  ErrorCode ec;
  tcp::resolver resolver(state->io);
  state->endpoints = resolver.resolve(options.host, options.port, tcp::resolver::numeric_service, ec);
  if (ec) return UnavailableError("cannot resolve " + options.host + ": " + ec.message());
  size_t count = std::min(options.concurrency, options.sessions);
  for (size_t i = 0; i < count; ++i)
    state->clients.push_back(std::make_shared<LoadClient>(*state, static_cast<uint32_t>(i + 1)));
  return std::unique_ptr<LoadRun>(new LoadRun(std::move(state)));
}

LoadRun::LoadRun(std::unique_ptr<State> state) : state_(std::move(state)) {}

LoadRun::~LoadRun() {
  // Clients hold their strand's handlers; none runs once Run has returned. Drop the clients
  // before the io_context so their sockets close against a live context.
  if (state_) state_->clients.clear();
}

void LoadRun::Run(const std::function<void(const LoadProgress&)>& on_progress,
                  std::chrono::milliseconds progress_every) {
  State& run = *state_;
  const auto started = Clock::now();
  for (auto& client : run.clients) client->Start();
  std::vector<std::thread> threads;
  for (int i = 0; i < run.options.io_threads; ++i) {
    threads.emplace_back([&run] {
      for (;;) {
        try {
          run.io.run();
          return;
        } catch (const std::exception& e) {  // a bug in a handler: say so, keep the other clients going
          std::fprintf(stderr, "load client: a handler threw: %s\n", e.what());
        }
      }
    });
  }
  auto last = started;
  while (run.active_clients.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (on_progress && Clock::now() - last >= progress_every) {
      last = Clock::now();
      on_progress({static_cast<size_t>(run.episodes_done.load()), run.tool_calls_answered.load(),
                   std::chrono::duration<double>(last - started).count()});
    }
  }
  for (auto& thread : threads) thread.join();
}

LoadStats LoadRun::Stats() const {
  LoadStats total;
  for (const auto& client : state_->clients) client->stats().MergeInto(total);
  return total;
}

const std::vector<EpisodeTally>& LoadRun::episodes() const { return state_->episodes; }
uint64_t LoadRun::tool_calls_answered() const { return state_->tool_calls_answered.load(); }
size_t LoadRun::clients() const { return state_->clients.size(); }

}  // namespace envforge::server
