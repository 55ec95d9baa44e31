// HTTP/1.1 and WebSocket connections of the server (Boost.Beast). Each connection runs on its own
// strand; the service answers on its own threads and the answer is posted back to the strand
// through the shared gate (http_shared.h), so no callback ever touches a stopped io_context.
#include "server/internal/http_connection.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "base/error_table.h"
#include "base/json.h"
#include "base/log.h"
#include "server/internal/mcp_mapping.h"
#include "server/internal/request_policy.h"
#include "server/openai_api.h"
#include "server/ui_api.h"

namespace envforge::server::internal {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using ErrorCode = beast::error_code;

constexpr size_t kHeaderLimit = 64 * 1024;
constexpr std::chrono::seconds kLingerTimeout{2};
constexpr const char* kServerName = "envforge";

using Response = http::response<http::string_body>;

struct Peer {
  std::string address;  // the admission bounds count per address
  std::string name;     // address:port, for logs and RequestContext
};

Peer PeerOf(const tcp::socket& socket) {
  ErrorCode ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return Peer{"unknown", "unknown"};
  std::string address = endpoint.address().to_string();
  std::string name = endpoint.address().is_v6() ? "[" + address + "]" : address;
  return Peer{address, name + ":" + std::to_string(endpoint.port())};
}

// Errors after which nothing can be said to the client: it left, or it was too slow.
bool IsQuietDisconnect(const ErrorCode& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message || ec == beast::error::timeout ||
         ec == net::error::eof || ec == net::error::operation_aborted || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::error::bad_descriptor || ec == net::error::not_connected;
}

std::string PlainError(std::string_view message) { return DumpJson(Json{{"error", message}}); }

std::string TooLargeBody(size_t limit, bool v1) {
  if (v1) {
    return V1ErrorBody("request body too large: the limit is " + std::to_string(limit) + " bytes (--max-payload)",
                       "invalid_request_error", "payload_too_large");
  }
  return RpcService::ErrorResponse(nullptr, kRpcPayloadTooLarge,
                                   "payload too large: the limit is " + std::to_string(limit) + " bytes",
                                   Json{{"kind", "payload_too_large"}, {"retryable", false}, {"limit", limit}});
}

enum class Route { kRpc, kMcp, kHealth, kMetrics, kWebSocket, kV1, kUi };

// Paths of the OpenAI-compatible endpoint: their refusals speak OpenAI's error shape.
bool IsV1Path(std::string_view path) { return path == "/v1" || path.rfind("/v1/", 0) == 0; }

// What to do with a request, decided from its header alone.
struct Decision {
  std::optional<Route> route;
  http::status status = http::status::ok;  // when !route
  std::string body;
  std::string allow;
  bool unauthorized = false;
  bool authenticated = false;     // the request passed the token check
  bool answer_at_header = false;  // refused before its body is read; the connection then closes
};

Decision Reject(http::status status, std::string body, std::string allow = {}) {
  Decision decision;
  decision.status = status;
  decision.body = std::move(body);
  decision.allow = std::move(allow);
  return decision;
}

Decision Accept(Route route) {
  Decision decision;
  decision.route = route;
  return decision;
}

// A refusal answered as soon as the header is read, body unread, then the connection closes: the
// client is not one to serve (a foreign web page, no token, not JSON).
Decision RefuseAtHeader(http::status status, std::string body) {
  Decision decision = Reject(status, std::move(body));
  decision.answer_at_header = true;
  return decision;
}

std::string_view View(beast::string_view text) { return std::string_view(text.data(), text.size()); }

// An attacker-chosen header value quoted in an error message: bounded.
std::string Quoted(std::string_view value) {
  constexpr size_t kMaxQuoted = 200;
  return "'" + std::string(value.substr(0, kMaxQuoted)) + (value.size() > kMaxQuoted ? "...'" : "'");
}

// POST /rpc and POST /mcp: JSON only (a web page can send text/plain cross-origin without a
// preflight, never application/json).
template <typename Header>
Decision AcceptJsonPost(const Header& request, Route route, std::string_view path) {
  std::string_view content_type = View(request[http::field::content_type]);
  if (IsJsonContentType(content_type)) return Accept(route);
  std::string message = "POST " + std::string(path) + " needs Content-Type: application/json, got " +
                        (content_type.empty() ? std::string("none") : Quoted(content_type));
  return RefuseAtHeader(
      http::status::unsupported_media_type,
      IsV1Path(path) ? V1ErrorBody(message, "invalid_request_error", "unsupported_media_type") : PlainError(message));
}

// Streamable HTTP (2025-06-18 on): after initialize a client names the negotiated revision in
// MCP-Protocol-Version on every request; one we do not speak is a 400. Without the header the
// request is served (older clients never send it).
template <typename Header>
Decision CheckMcpProtocolVersion(const Header& request, Decision accepted) {
  auto header = request.find("MCP-Protocol-Version");
  if (header == request.end() || IsSupportedProtocolVersion(View(header->value()))) return accepted;
  return Reject(http::status::bad_request,
                RpcService::ErrorResponse(nullptr, kRpcInvalidRequest,
                                          "unsupported MCP-Protocol-Version " + Quoted(View(header->value())) +
                                              " (supported: " + SupportedProtocolVersionsText() + ")"));
}

// The route of a request that passed the Origin and token checks.
template <typename Header>
Decision DecideAuthenticated(const Header& request, std::string_view path, http::verb method, bool get) {
  if (path == "/rpc") {
    return method == http::verb::post ? AcceptJsonPost(request, Route::kRpc, path)
                                      : Reject(http::status::method_not_allowed, PlainError("use POST /rpc"), "POST");
  }
  if (path == "/mcp") {
    // Streamable HTTP: GET would open a server-to-client SSE stream, which this server does not
    // offer; the specification answers that with 405.
    if (method != http::verb::post)
      return Reject(http::status::method_not_allowed, PlainError("use POST /mcp"), "POST");
    Decision decision = AcceptJsonPost(request, Route::kMcp, path);
    return decision.route ? CheckMcpProtocolVersion(request, std::move(decision)) : decision;
  }
  if (path == "/metrics")
    return get ? Accept(Route::kMetrics)
               : Reject(http::status::method_not_allowed, PlainError("use GET /metrics"), "GET");
  if (UiApi::IsReplayPath(path)) {
    return method == http::verb::post
               ? Accept(Route::kUi)
               : Reject(http::status::method_not_allowed, PlainError("use POST " + std::string(path)), "POST");
  }
  if (UiApi::IsApiPath(path)) {
    return get ? Accept(Route::kUi)
               : Reject(http::status::method_not_allowed, PlainError("use GET " + std::string(path)), "GET");
  }
  if (path == "/ws") {
    if (method != http::verb::get)
      return Reject(http::status::method_not_allowed, PlainError("use a WebSocket upgrade on GET /ws"), "GET");
    if (!websocket::is_upgrade(request))
      return Reject(http::status::upgrade_required, PlainError("/ws needs a WebSocket upgrade"));
    return Accept(Route::kWebSocket);
  }
  if (IsV1Path(path)) {
    // The endpoint answers wrong methods and unknown paths itself, in its own shape.
    return method == http::verb::post ? AcceptJsonPost(request, Route::kV1, path) : Accept(Route::kV1);
  }
  return Reject(http::status::not_found, PlainError("no route for " + std::string(path)));
}

template <typename Header>
Decision Decide(const Header& request, const TransportShared& shared) {
  std::string_view target(request.target().data(), request.target().size());
  std::string_view path = target.substr(0, target.find('?'));
  http::verb method = request.method();
  bool get = method == http::verb::get || method == http::verb::head;
  std::string_view origin = View(request[http::field::origin]);
  if (!shared.OriginAllowed(origin)) {
    std::string message =
        "origin " + Quoted(origin) + " is not allowed: only loopback origins and those given with --allow-origin";
    return RefuseAtHeader(
        http::status::forbidden,
        IsV1Path(path) ? V1ErrorBody(message, "invalid_request_error", "origin_not_allowed") : PlainError(message));
  }
  if (path == "/health")
    return get ? Accept(Route::kHealth)
               : Reject(http::status::method_not_allowed, PlainError("use GET /health"), "GET");
  // The viewer's page holds no data (it asks for the token and sends it on its API calls).
  if (UiApi::IsUiPath(path) && !UiApi::IsApiPath(path)) {
    return get ? Accept(Route::kUi)
               : Reject(http::status::method_not_allowed, PlainError("use GET " + std::string(path)), "GET");
  }
  if (!shared.Authorized(View(request[http::field::authorization]))) {
    // OpenAI clients send their API key as this same Bearer token.
    Decision decision = RefuseAtHeader(
        http::status::unauthorized,
        IsV1Path(path)
            ? V1ErrorBody("Incorrect or missing API key: send Authorization: Bearer <token>", "invalid_request_error",
                          "invalid_api_key")
            : RpcService::ErrorResponse(nullptr, kRpcUnauthorized, "unauthorized: send Authorization: Bearer <token>",
                                        Json{{"kind", "unauthorized"}, {"retryable", false}}));
    decision.unauthorized = true;
    return decision;
  }
  Decision decision = DecideAuthenticated(request, path, method, get);
  decision.authenticated = true;
  return decision;
}

// ------------------------------------------------------------------------------------------------

class WsConnection : public HttpConnectionBase, public std::enable_shared_from_this<WsConnection> {
 public:
  WsConnection(std::shared_ptr<TransportShared> shared, tcp::socket socket, std::string peer)
      : shared_(std::move(shared)), ws_(std::move(socket)), peer_(std::move(peer)) {}

  // Takes over the registry slot `id` of the upgraded HTTP connection.
  void Accept(http::request<http::string_body> request, uint64_t id) {
    id_ = id;
    shared_->Replace(id_, shared_from_this());
    shared_->CountConnectionOpened("ws");
    counted_ = true;
    const HttpServerOptions& options = shared_->options();
    // The websocket stream keeps its own deadlines; the tcp_stream's would cut long-lived
    // connections.
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout timeouts{};
    timeouts.handshake_timeout = options.read_timeout;
    timeouts.idle_timeout = options.idle_timeout;
    timeouts.keep_alive_pings = true;
    ws_.set_option(timeouts);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& response) { response.set(http::field::server, kServerName); }));
    ws_.read_message_max(options.max_payload_bytes);
    ws_.auto_fragment(false);
    ws_.async_accept(request, beast::bind_front_handler(&WsConnection::OnAccept, shared_from_this()));
  }

  void Close() override {
    net::post(ws_.get_executor(), [self = shared_from_this()] { self->Finish(); });
  }

 private:
  struct Outgoing {
    std::string text;
    std::shared_ptr<InFlightToken> token;
  };

  void OnAccept(ErrorCode ec) {
    if (ec) {
      ENVFORGE_LOG(kDebug) << "websocket handshake with " << peer_ << " failed: " << ec.message();
      return Finish();
    }
    DoRead();
  }

  void DoRead() {
    if (closed_ || reading_) return;
    if (in_flight_ >= shared_->options().max_in_flight_per_connection) return;  // resumed by OnAnswer
    reading_ = true;
    ws_.async_read(read_buffer_, beast::bind_front_handler(&WsConnection::OnRead, shared_from_this()));
  }

  void OnRead(ErrorCode ec, size_t bytes) {
    reading_ = false;
    if (ec) {
      if (ec == websocket::error::message_too_big) {
        // Beast has already sent close code 1009 (too big) and torn the connection down.
        ENVFORGE_LOG(kInfo) << "websocket message from " << peer_ << " over the limit; closed with 1009";
      } else if (ec != websocket::error::closed && !IsQuietDisconnect(ec)) {
        ENVFORGE_LOG(kDebug) << "websocket read from " << peer_ << ": " << ec.message();
      }
      return Finish();
    }
    shared_->CountBytes("ws", "in", bytes);
    shared_->CountWsMessage("in");
    std::string payload = beast::buffers_to_string(read_buffer_.data());
    read_buffer_.consume(read_buffer_.size());
    Dispatch(std::move(payload));
    DoRead();
  }

  void Dispatch(std::string payload) {
    ++in_flight_;
    auto token = shared_->AcquireInFlight();
    // Both paths below write the answer as DumpJson text (OnAnswer).
    RequestContext context{Dialect::kNative, peer_, "ws", /*answer_written_as_text=*/true};
    std::weak_ptr<WsConnection> weak = weak_from_this();
    std::shared_ptr<TransportShared> shared = shared_;
    try {
      // The answer is serialised here on the connection's strand, not in the service's callback:
      // that runs on the SessionManager's single io thread, which every session shares.
      auto message = ParseJson(payload, "request");
      if (!message.ok()) {
        // The service words (and counts) parse errors.
        shared_->service().HandleAsync(std::move(payload), context,
                                       [weak, shared, token](std::optional<std::string> answer) mutable {
                                         PostAnswer(*shared, weak, std::move(answer), std::move(token));
                                       });
        return;
      }
      shared_->service().HandleJsonAsync(std::move(message).value(), context,
                                         [weak, shared, token](std::optional<Json> answer) mutable {
                                           PostAnswer(*shared, weak, std::move(answer), std::move(token));
                                         });
    } catch (const std::exception& e) {
      ENVFORGE_LOG(kError) << "websocket request from " << peer_ << " failed: " << e.what();
      OnAnswer(std::optional<std::string>(
                   RpcService::ErrorResponse(nullptr, kRpcInternalError, std::string("internal error: ") + e.what())),
               token);
    }
  }

  // `Answer`: std::optional<std::string> (already text) or std::optional<Json>.
  template <typename Answer>
  static void PostAnswer(TransportShared& shared, const std::weak_ptr<WsConnection>& weak, Answer answer,
                         std::shared_ptr<InFlightToken> token) {
    shared.IfOpen([&] {
      auto self = weak.lock();
      if (!self) return;
      net::post(self->ws_.get_executor(), [self, answer = std::move(answer), token = std::move(token)]() mutable {
        self->OnAnswer(std::move(answer), std::move(token));
      });
    });
  }

  void OnAnswer(std::optional<Json> answer, std::shared_ptr<InFlightToken> token) {
    std::optional<std::string> text;
    if (answer && !closed_) text = DumpJson(*answer);
    OnAnswer(std::move(text), std::move(token));
  }

  void OnAnswer(std::optional<std::string> answer, std::shared_ptr<InFlightToken> token) {
    if (in_flight_ > 0) --in_flight_;
    if (closed_) return;  // the client is gone: the answer is dropped, the token released
    if (answer) {
      queue_.push_back(Outgoing{std::move(*answer), std::move(token)});
      DoWrite();
    }
    DoRead();
  }

  void DoWrite() {
    if (writing_ || queue_.empty() || closed_) return;
    writing_ = true;
    ws_.text(true);
    ws_.async_write(net::buffer(queue_.front().text),
                    beast::bind_front_handler(&WsConnection::OnWrite, shared_from_this()));
  }

  void OnWrite(ErrorCode ec, size_t bytes) {
    writing_ = false;
    if (!queue_.empty()) queue_.pop_front();
    if (ec) {
      if (!IsQuietDisconnect(ec) && ec != websocket::error::closed) {
        ENVFORGE_LOG(kDebug) << "websocket write to " << peer_ << ": " << ec.message();
      }
      return Finish();
    }
    shared_->CountBytes("ws", "out", bytes);
    shared_->CountWsMessage("out");
    DoWrite();
  }

  // Runs on the strand once the connection is over: drops what is queued, closes the socket and
  // leaves the registry.
  void Finish() {
    auto self = shared_from_this();
    if (closed_) return;
    closed_ = true;
    queue_.clear();
    ErrorCode ec;
    auto& socket = beast::get_lowest_layer(ws_).socket();
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
    if (counted_) shared_->CountConnectionClosed("ws");
    if (id_ != 0) shared_->Unregister(id_);
  }

  std::shared_ptr<TransportShared> shared_;
  websocket::stream<beast::tcp_stream> ws_;
  std::string peer_;
  uint64_t id_ = 0;
  bool counted_ = false;
  beast::flat_buffer read_buffer_;
  std::deque<Outgoing> queue_;
  size_t in_flight_ = 0;
  bool reading_ = false;
  bool writing_ = false;
  bool closed_ = false;
};

// ------------------------------------------------------------------------------------------------

class HttpConnection : public HttpConnectionBase, public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(std::shared_ptr<TransportShared> shared, tcp::socket socket, Peer peer)
      : shared_(std::move(shared)),
        peer_address_(std::move(peer.address)),
        peer_(std::move(peer.name)),
        stream_(std::move(socket)) {}

  void Start() {
    Admission admission = shared_->Admit(shared_from_this(), peer_address_);
    for (const auto& evicted : admission.evicted) evicted->Close();
    if (admission.id == 0) {
      ENVFORGE_LOG(kDebug) << "refusing " << peer_ << ": " << admission.refusal;
      return net::dispatch(stream_.get_executor(),
                           [self = shared_from_this(), reason = std::move(admission.refusal)]() mutable {
                             self->Refuse(std::move(reason));
                           });
    }
    id_ = admission.id;
    counted_ = true;
    shared_->CountConnectionOpened("http");
    net::dispatch(stream_.get_executor(), beast::bind_front_handler(&HttpConnection::DoIdleWait, shared_from_this()));
  }

  void Close() override {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->Finish(); });
  }

 private:
  // Between requests an authenticated connection may idle for idle_timeout; its next request must
  // then arrive whole within read_timeout of its first byte (a slow client cannot hold a
  // connection forever). An unauthenticated one must deliver its whole header within
  // header_timeout of now.
  void DoIdleWait() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(shared_->options().max_payload_bytes);
    request_bytes_ = 0;
    header_deadline_ = !authenticated_;
    if (header_deadline_) {
      header_deadline_at_ = std::chrono::steady_clock::now() + shared_->options().header_timeout;
      stream_.expires_at(header_deadline_at_);
    }
    if (buffer_.size() > 0) return DoReadHeader();  // a pipelined request is already here
    if (!header_deadline_) stream_.expires_after(shared_->options().idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            beast::bind_front_handler(&HttpConnection::OnIdleBytes, shared_from_this()));
  }

  void OnIdleBytes(ErrorCode ec, size_t bytes) {
    if (ec) return Finish();
    buffer_.commit(bytes);
    DoReadHeader();
  }

  void DoReadHeader() {
    request_deadline_at_ = std::chrono::steady_clock::now() + shared_->options().read_timeout;
    stream_.expires_at(header_deadline_ ? std::min(request_deadline_at_, header_deadline_at_) : request_deadline_at_);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&HttpConnection::OnHeader, shared_from_this()));
  }

  void OnHeader(ErrorCode ec, size_t bytes) {
    request_bytes_ += bytes;
    if (ec) return OnReadError(ec);
    try {
      const auto& request = parser_->get();
      decision_ = Decide(request, *shared_);
      if (decision_.authenticated && !authenticated_) {
        authenticated_ = true;
        shared_->Authenticate(id_);
      }
      if (decision_.answer_at_header) return SendDecision(true);
      // The header deadline bounded the header only; the body has the rest of read_timeout.
      if (header_deadline_) stream_.expires_at(request_deadline_at_);
      auto length = parser_->content_length();
      if (length && *length > shared_->options().max_payload_bytes) {
        return SendFinal(http::status::payload_too_large,
                         TooLargeBody(shared_->options().max_payload_bytes, RequestIsV1()), true);
      }
      auto expect = request[http::field::expect];
      bool expects_continue = beast::iequals(expect, "100-continue");
      bool has_body = parser_->chunked() || (length && *length > 0);
      if (expects_continue && has_body) {
        // The client waits before sending its body: refuse at once (and close, so the unsent
        // body never desynchronises the connection), or invite it.
        if (!decision_.route) return SendDecision(true);
        continue_response_.emplace(http::status::continue_, request.version());
        return http::async_write(stream_, *continue_response_,
                                 beast::bind_front_handler(&HttpConnection::OnContinueWritten, shared_from_this()));
      }
      DoReadBody();
    } catch (const std::exception& e) {
      SendInternalError(e);
    }
  }

  void OnContinueWritten(ErrorCode ec, size_t) {
    if (ec) return Finish();
    DoReadBody();
  }

  void DoReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&HttpConnection::OnBody, shared_from_this()));
  }

  void OnBody(ErrorCode ec, size_t bytes) {
    request_bytes_ += bytes;
    if (ec) return OnReadError(ec);
    stream_.expires_never();  // the service may take its time (a tool at its wall-time limit)
    shared_->CountBytes("http", "in", request_bytes_);
    try {
      if (!decision_.route) return SendDecision(false);
      switch (*decision_.route) {
        case Route::kRpc: return Dispatch(Dialect::kNative);
        case Route::kMcp: return Dispatch(Dialect::kMcp);
        case Route::kHealth: return SendHealth();
        case Route::kMetrics:
          return Send(MakeResponse(http::status::ok, shared_->service().metrics().RenderPrometheus(),
                                   "text/plain; version=0.0.4; charset=utf-8"),
                      false);
        case Route::kWebSocket: return Upgrade();
        case Route::kV1: return DispatchV1();
        case Route::kUi: return SendUi();
      }
    } catch (const std::exception& e) {
      SendInternalError(e);
    }
  }

  // The request being read is for /v1 (its header is read). Beast may refuse a declared length
  // while reading the header, before Decide runs, so this reads the target itself.
  bool RequestIsV1() const {
    std::string_view target = View(parser_->get().target());
    return IsV1Path(target.substr(0, target.find('?')));
  }

  void OnReadError(const ErrorCode& ec) {
    if (ec == http::error::body_limit) {
      return SendFinal(http::status::payload_too_large,
                       TooLargeBody(shared_->options().max_payload_bytes, RequestIsV1()), true);
    }
    if (ec == http::error::header_limit) {
      return SendFinal(http::status::request_header_fields_too_large, PlainError("header block over 64 KiB"), true);
    }
    if (IsQuietDisconnect(ec) || ec.category() != http::make_error_code(http::error::bad_method).category()) {
      if (ec == beast::error::timeout) {
        ENVFORGE_LOG(kDebug) << "closing " << peer_ << ": request not read in time";
      }
      return Finish();
    }
    SendFinal(http::status::bad_request, PlainError("malformed HTTP request: " + ec.message()), true);
  }

  void Dispatch(Dialect dialect) {
    auto token = shared_->AcquireInFlight();
    RequestContext context{dialect, peer_, "http", /*answer_written_as_text=*/true};
    std::weak_ptr<HttpConnection> weak = weak_from_this();
    std::shared_ptr<TransportShared> shared = shared_;
    try {
      // As for WebSocket: the answer is serialised on this connection's strand, off the
      // SessionManager's io thread.
      auto message = ParseJson(parser_->get().body(), "request");
      if (!message.ok()) {
        // The service words (and counts) parse errors.
        shared_->service().HandleAsync(std::move(parser_->get().body()), context,
                                       [weak, shared, token, dialect](std::optional<std::string> answer) mutable {
                                         PostAnswer(*shared, weak, std::move(answer), dialect, std::move(token));
                                       });
        return;
      }
      shared_->service().HandleJsonAsync(std::move(message).value(), context,
                                         [weak, shared, token, dialect](std::optional<Json> answer) mutable {
                                           PostAnswer(*shared, weak, std::move(answer), dialect, std::move(token));
                                         });
    } catch (const std::exception& e) {
      SendInternalError(e);
    }
  }

  // `Answer`: std::optional<std::string> (already text) or std::optional<Json>.
  template <typename Answer>
  static void PostAnswer(TransportShared& shared, const std::weak_ptr<HttpConnection>& weak, Answer answer,
                         Dialect dialect, std::shared_ptr<InFlightToken> token) {
    shared.IfOpen([&] {
      auto self = weak.lock();
      if (!self) return;
      net::post(self->stream_.get_executor(),
                [self, answer = std::move(answer), token = std::move(token), dialect]() mutable {
                  self->OnAnswer(std::move(answer), dialect, std::move(token));
                });
    });
  }

  void OnAnswer(std::optional<Json> answer, Dialect dialect, std::shared_ptr<InFlightToken> token) {
    std::optional<std::string> text;
    if (answer && !closed_) text = DumpJson(*answer);
    OnAnswer(std::move(text), dialect, std::move(token));
  }

  void OnAnswer(std::optional<std::string> answer, Dialect dialect, std::shared_ptr<InFlightToken> token) {
    if (closed_) return;        // the client is gone: its answer is dropped
    token_ = std::move(token);  // released once the response is written
    if (!answer) {
      // Nothing to send back: MCP's Streamable HTTP says 202 for accepted notifications; plain
      // JSON-RPC over HTTP conventionally uses 204.
      return Send(MakeResponse(dialect == Dialect::kMcp ? http::status::accepted : http::status::no_content, {}, {}),
                  false);
    }
    Send(MakeResponse(http::status::ok, std::move(*answer), "application/json"), false);
  }

  // ---- /v1 (server/openai_api.h) ----------------------------------------------------------------

  // The connection as a V1Responder: every call is posted to the strand through the gate, as the
  // service's answers are. It holds the in-flight token until it is dropped, so WaitIdle waits for
  // completions still running on the endpoint's pool.
  class V1Sink : public V1Responder {
   public:
    V1Sink(std::shared_ptr<TransportShared> shared, std::weak_ptr<HttpConnection> connection,
           std::shared_ptr<InFlightToken> token)
        : shared_(std::move(shared)), connection_(std::move(connection)), token_(std::move(token)) {}

    void Reply(int status, std::string body, Headers headers) override {
      Post(
          [status, body = std::move(body), headers = std::move(headers), token = token_](HttpConnection& self) mutable {
            self.OnV1Reply(status, std::move(body), std::move(headers), std::move(token));
          });
    }
    void BeginStream() override {
      Post([token = token_](HttpConnection& self) mutable { self.OnV1StreamBegin(std::move(token)); });
    }
    void Event(std::string data) override {
      Post([data = std::move(data)](HttpConnection& self) mutable { self.OnV1StreamEvent(data); });
    }
    void EndStream() override {
      Post([](HttpConnection& self) { self.OnV1StreamEnd(); });
    }

   private:
    template <typename Fn>
    void Post(Fn&& fn) {
      shared_->IfOpen([&] {
        auto self = connection_.lock();
        if (!self) return;
        net::post(self->stream_.get_executor(), [self, fn = std::forward<Fn>(fn)]() mutable { fn(*self); });
      });
    }

    std::shared_ptr<TransportShared> shared_;
    std::weak_ptr<HttpConnection> connection_;
    std::shared_ptr<InFlightToken> token_;
  };

  void DispatchV1() {
    // Without an endpoint configured, one with no backend words the 503.
    static OpenAiApi no_backend(nullptr, OpenAiApiOptions{});
    OpenAiApi* api = shared_->options().openai != nullptr ? shared_->options().openai : &no_backend;
    auto& request = parser_->get();
    std::string_view target = View(request.target());
    std::string_view path = target.substr(0, target.find('?'));
    auto sink = std::make_shared<V1Sink>(shared_, weak_from_this(), shared_->AcquireInFlight());
    api->Handle(View(request.method_string()), path, std::move(request.body()), std::move(sink));
  }

  void OnV1Reply(int status, std::string body, V1Responder::Headers headers, std::shared_ptr<InFlightToken> token) {
    if (closed_) return;
    token_ = std::move(token);  // released once the response is written
    Response response = MakeResponse(static_cast<http::status>(status), std::move(body), "application/json");
    for (const auto& [name, value] : headers) response.set(name, value);
    Send(std::move(response), false);
  }

  // The header of a server-sent event stream. HTTP/1.1 frames it in chunks and keeps the
  // connection; an HTTP/1.0 client gets the bare stream, ended by the close.
  void OnV1StreamBegin(std::shared_ptr<InFlightToken> token) {
    if (closed_) return;
    token_ = std::move(token);
    const auto& request = parser_->get();
    stream_chunked_ = request.version() >= 11;
    close_after_write_ = !request.keep_alive() || shared_->draining() || !stream_chunked_;
    std::string head = std::string(stream_chunked_ ? "HTTP/1.1" : "HTTP/1.0") + " 200 OK\r\nServer: " + kServerName +
                       "\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n" +
                       (stream_chunked_ ? "Transfer-Encoding: chunked\r\n" : "") +
                       (close_after_write_ ? "Connection: close\r\n" : "Connection: keep-alive\r\n") + "\r\n";
    shared_->CountResponse(200);
    stream_out_ += head;
    DoStreamWrite();
  }

  // One server-sent event, "data: <data>\n\n", appended straight to the output (in an HTTP/1.1
  // chunk when chunked).
  void OnV1StreamEvent(const std::string& data) {
    if (closed_) return;
    constexpr std::string_view kPrefix = "data: ", kEnd = "\n\n";
    if (stream_chunked_) {
      char size[20];
      std::snprintf(size, sizeof(size), "%zx\r\n", kPrefix.size() + data.size() + kEnd.size());
      stream_out_.append(size);
    }
    stream_out_.append(kPrefix).append(data).append(kEnd);
    if (stream_chunked_) stream_out_.append("\r\n");
    DoStreamWrite();
  }

  void OnV1StreamEnd() {
    if (closed_) return;
    if (stream_chunked_) stream_out_ += "0\r\n\r\n";
    stream_ended_ = true;
    DoStreamWrite();
  }

  // Events that arrive while a write runs gather in stream_out_ and leave in the next write.
  void DoStreamWrite() {
    if (stream_writing_ || closed_) return;
    if (stream_out_.empty()) {
      if (stream_ended_) return OnStreamDone();
      return;
    }
    stream_writing_ = true;
    stream_in_flight_.swap(stream_out_);                     // stream_in_flight_ was empty: stream_out_ now is
    stream_.expires_after(shared_->options().read_timeout);  // a client that does not read is slow too
    net::async_write(stream_, net::buffer(stream_in_flight_),
                     beast::bind_front_handler(&HttpConnection::OnStreamWrite, shared_from_this()));
  }

  void OnStreamWrite(ErrorCode ec, size_t bytes) {
    stream_writing_ = false;
    stream_in_flight_.clear();
    if (ec) return Finish();  // the client left; the completion runs on, its events are dropped
    stream_.expires_never();
    shared_->CountBytes("http", "out", bytes);
    DoStreamWrite();
  }

  void OnStreamDone() {
    stream_ended_ = false;
    stream_chunked_ = false;
    token_.reset();
    if (close_after_write_) return LingeringClose();
    DoIdleWait();
  }

  // The viewer (server/ui_api.h): its reads are short SQL queries, answered on this thread.
  void SendUi() {
    const UiApi* ui = shared_->options().ui;
    std::string_view target = View(parser_->get().target());
    if (ui == nullptr) {
      return SendUiAnswer({404, "application/json",
                           "{\"error\":\"this server records no trajectories: start it with --trajectories FILE\"}"});
    }
    if (!UiApi::IsReplayPath(target.substr(0, target.find('?')))) return SendUiAnswer(ui->Handle(target));
    // A replay takes as long as the episode's tools: answered from the replay thread, later.
    std::weak_ptr<HttpConnection> weak = weak_from_this();
    ui->ReplayAsync(target, [shared = shared_, weak, token = shared_->AcquireInFlight()](UiResponse answer) mutable {
      shared->IfOpen([&] {
        auto self = weak.lock();
        if (!self) return;
        net::post(self->stream_.get_executor(), [self, answer = std::move(answer), token = std::move(token)]() mutable {
          if (self->closed_) return;
          self->token_ = std::move(token);  // released once the response is written
          self->SendUiAnswer(std::move(answer));
        });
      });
    });
  }

  void SendUiAnswer(UiResponse answer) {
    Response response =
        MakeResponse(static_cast<http::status>(answer.status), std::move(answer.body), answer.content_type);
    response.set("Content-Security-Policy", UiApi::ContentSecurityPolicy());
    response.set("X-Content-Type-Options", "nosniff");
    response.set(http::field::cache_control, "no-store");
    Send(std::move(response), false);
  }

  void SendHealth() {
    auto stats = shared_->service().manager().Stats();
    // A server that takes no new sessions (SIGUSR1) fails the check: a balancer then sends it no
    // new episodes, while its sessions' requests still reach it (forced persistence).
    const bool not_creating = !shared_->draining() && !shared_->service().creating();
    Json health{{"status", shared_->draining() ? "draining"
                           : not_creating      ? "not_creating"
                                               : "ok"},
                {"sessions", stats.sessions_open},
                {"uptime", shared_->UptimeSeconds()}};
    Send(MakeResponse(not_creating ? http::status::service_unavailable : http::status::ok, DumpJson(health),
                      "application/json"),
         false);
  }

  void SendDecision(bool close) {
    Response response = MakeResponse(decision_.status, decision_.body, "application/json");
    if (!decision_.allow.empty()) response.set(http::field::allow, decision_.allow);
    if (decision_.unauthorized) response.set(http::field::www_authenticate, "Bearer");
    if (decision_.status == http::status::upgrade_required) response.set(http::field::upgrade, "websocket");
    Send(std::move(response), close);
  }

  // Over the connection bounds: 503 at once (before any request), then a close.
  void Refuse(std::string reason) {
    Response response{http::status::service_unavailable, 11};
    response.set(http::field::server, kServerName);
    response.set(http::field::content_type, "application/json");
    response.set(http::field::retry_after, "1");
    response.body() =
        RpcService::ErrorResponse(nullptr, kRpcServerFull, "server full: " + reason,
                                  Json{{"kind", "server_full"}, {"retryable", true}, {"retry_after_ms", 1000}});
    response.prepare_payload();
    Send(std::move(response), true);
  }

  void SendFinal(http::status status, std::string body, bool close) {
    Send(MakeResponse(status, std::move(body), "application/json"), close);
  }

  void SendInternalError(const std::exception& e) {
    ENVFORGE_LOG(kError) << "request from " << peer_ << " failed: " << e.what();
    SendFinal(http::status::internal_server_error,
              RpcService::ErrorResponse(nullptr, kRpcInternalError, std::string("internal error: ") + e.what()), true);
  }

  Response MakeResponse(http::status status, std::string body, std::string_view content_type) {
    const auto& request = parser_->get();
    Response response{status, request.version() == 10 ? 10u : 11u};
    response.set(http::field::server, kServerName);
    if (!content_type.empty())
      response.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
    bool is_head = request.method() == http::verb::head;
    response.body() = std::move(body);
    response.prepare_payload();
    if (is_head) response.body().clear();
    response.keep_alive(request.keep_alive());
    return response;
  }

  void Send(Response response, bool close) {
    if (closed_) return;
    if (close || shared_->draining()) response.keep_alive(false);
    close_after_write_ = !response.keep_alive();
    shared_->CountResponse(response.result_int());
    response_ = std::make_unique<Response>(std::move(response));
    stream_.expires_after(shared_->options().read_timeout);  // a client that does not read is slow too
    http::async_write(stream_, *response_, beast::bind_front_handler(&HttpConnection::OnWrite, shared_from_this()));
  }

  void OnWrite(ErrorCode ec, size_t bytes) {
    token_.reset();
    response_.reset();
    if (ec) return Finish();
    shared_->CountBytes("http", "out", bytes);
    if (close_after_write_) return LingeringClose();
    DoIdleWait();
  }

  // Half-closes, then reads and discards what the client still sends (an unread oversized body),
  // so the kernel does not answer it with a reset that could destroy the response in flight.
  void LingeringClose() {
    ErrorCode ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(kLingerTimeout);
    DoDiscard();
  }

  void DoDiscard() {
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(64 * 1024),
                            beast::bind_front_handler(&HttpConnection::OnDiscard, shared_from_this()));
  }

  void OnDiscard(ErrorCode ec, size_t) {
    if (ec) return Finish();
    DoDiscard();
  }

  void Upgrade() {
    // The connection becomes a WebSocket one: this object hands its socket over and ends.
    closed_ = true;
    stream_.expires_never();
    auto ws = std::make_shared<WsConnection>(shared_, stream_.release_socket(), peer_);
    shared_->CountResponse(101);
    ws->Accept(parser_->release(), id_);
    shared_->CountConnectionClosed("http");
  }

  void Finish() {
    auto self = shared_from_this();
    if (closed_) return;
    closed_ = true;
    token_.reset();
    ErrorCode ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
    if (counted_) shared_->CountConnectionClosed("http");
    if (id_ != 0) shared_->Unregister(id_);
  }

  std::shared_ptr<TransportShared> shared_;
  std::string peer_address_;
  std::string peer_;
  beast::tcp_stream stream_;
  uint64_t id_ = 0;  // 0: refused (never registered)
  bool counted_ = false;
  bool authenticated_ = false;    // a request passed the token check
  bool header_deadline_ = false;  // the request being read is under header_timeout
  std::chrono::steady_clock::time_point header_deadline_at_;
  std::chrono::steady_clock::time_point request_deadline_at_;  // first byte + read_timeout
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> continue_response_;
  Decision decision_;
  size_t request_bytes_ = 0;
  // Keeps the response alive while async_write runs (Beast writes from it in place).
  std::unique_ptr<Response> response_;
  std::shared_ptr<InFlightToken> token_;
  bool close_after_write_ = false;
  bool closed_ = false;
  // A /v1 event stream being written: bytes waiting, bytes being written, and its state.
  std::string stream_out_;
  std::string stream_in_flight_;
  bool stream_writing_ = false;
  bool stream_ended_ = false;
  bool stream_chunked_ = false;
};

}  // namespace

void StartHttpConnection(std::shared_ptr<TransportShared> shared, tcp::socket socket) {
  try {
    ErrorCode ec;
    socket.set_option(tcp::no_delay(true), ec);  // small JSON-RPC answers must not wait for Nagle
    Peer peer = PeerOf(socket);
    auto connection = std::make_shared<HttpConnection>(std::move(shared), std::move(socket), std::move(peer));
    connection->Start();
  } catch (const std::exception& e) {
    ENVFORGE_LOG(kError) << "cannot start a connection: " << e.what();
  }
}

}  // namespace envforge::server::internal
