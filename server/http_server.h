// The network transport of `envforge serve`: JSON-RPC 2.0 over HTTP/1.1 and WebSocket
// (Boost.Beast on Boost.Asio), in front of one RpcService.
//
// Routes:
//   POST /rpc      one native-dialect payload (single or batch) per request, answered with
//                  application/json; a payload that needs no answer (notifications only) gets
//                  204 No Content.
//   POST /mcp      the MCP dialect, Streamable-HTTP style: a JSON response per request; a message
//                  without an answer (a notification, or a JSON-RPC response) gets 202 Accepted
//                  and no body. An MCP-Protocol-Version header naming a revision the service does
//                  not speak (server/internal/mcp_mapping.h) gets 400 with a JSON-RPC -32600 body;
//                  no header is fine. GET and DELETE /mcp answer 405 (this server offers no SSE
//                  stream).
//   GET  /health   {"status": "ok" | "draining", "sessions": <open sessions>, "uptime": <seconds>}.
//                  Open even when a token is configured, so that load balancers and process
//                  supervisors can probe it; it reveals nothing but these three figures.
//   GET  /metrics  Prometheus text: RpcService::metrics() plus this transport's counters
//                  (envforge_transport_connections_total / _open, envforge_transport_bytes_total,
//                  envforge_http_responses_total{code}, envforge_ws_messages_total{direction}).
//   /v1/...        the OpenAI-compatible endpoint (server/openai_api.h): GET /v1/models,
//                  POST /v1/chat/completions, POST /v1/completions; streamed answers are
//                  server-sent events over a chunked response. Its refusals (401, 403, 415 and
//                  the endpoint's own) carry OpenAI's {"error": {...}} body instead of JSON-RPC's.
//   GET  /ws       WebSocket upgrade; each text (or binary) message is one native-dialect payload.
//                  Requests on one connection run concurrently and their responses are written
//                  as they complete (match them by id), one frame per response.
// Every connection is HTTP/1.1 keep-alive unless the client asks otherwise. Any other path is
// 404; a known path with another method is 405 (with an Allow header).
//
// Auth: with a token set, every request but GET /health (the WebSocket upgrade and /metrics
// included) needs "Authorization: Bearer <token>", compared in constant time; otherwise 401 with
// a JSON-RPC error body (code -32005) and a WWW-Authenticate header. The 401 is sent as soon as
// the request's header is read: the body is never read, and the connection is closed.
//
// Origin (the MCP Streamable HTTP transport requires servers to validate it, against DNS
// rebinding and web pages driving a local server): a request without an Origin header
// (non-browser clients) is allowed; so is a loopback origin (http or https, host localhost,
// 127.0.0.1 or [::1], any port) and any origin in allowed_origins (compared case-insensitively,
// e.g. "https://app.example.com:8443"). Any other Origin, on every route and on the WebSocket
// upgrade, gets 403 naming it, at once, and the connection is closed. POST /rpc and POST /mcp
// need "Content-Type: application/json" (parameters such as charset allowed), else 415 at once
// and a close: a browser can send text/plain cross-origin without a preflight, never JSON.
//
// Connection admission. A connection is unauthenticated until one of its requests passes the
// token check (without a token: until its first request other than GET /health); an upgraded
// WebSocket connection is always authenticated. Unauthenticated connections:
//   * must deliver each request header whole within header_timeout of the accept (or of the end
//     of their previous response); past it they are closed;
//   * are bounded: at most max_unauthenticated_connections in all and
//     max_unauthenticated_per_peer from one peer address. A new connection over either bound
//     evicts the oldest unauthenticated connection (of its peer, resp. of all): it is closed
//     without an answer. An authorized client therefore always gets in: the idle sockets of
//     others make room for it, and once its request is read it leaves that pool.
// max_connections bounds every open connection (HTTP and WebSocket). At it, a new connection
// evicts the oldest unauthenticated one; when every open connection is authenticated it gets
// 503 with a JSON-RPC -32003 body (retryable, data.retry_after_ms) before any request, and is
// closed (after a lingering close of at most 2 s, during which it holds a descriptor). With
// max_unauthenticated_connections < max_connections, the difference is kept for authenticated
// clients. Evictions and refusals are counted in envforge_transport_connections_refused_total
// {reason="peer_limit"|"unauthenticated_limit"|"connection_limit"}.
//
// Limits and misbehaving clients:
//   * A body over max_payload_bytes is refused with 413 and a JSON-RPC -32008 body as soon as its
//     Content-Length (or, chunked, its running size) passes the limit; the rest is never buffered,
//     and the connection is closed. A WebSocket message over the limit closes the connection with
//     close code 1009 (message too big).
//   * Malformed HTTP gets 400 and the connection is closed; a header block over 64 KiB gets 431.
//   * A request must arrive whole (header and body) within read_timeout of its first byte; an
//     authenticated keep-alive connection may sit idle between requests for idle_timeout (an
//     unauthenticated one only for header_timeout, above); past either the connection is closed.
//     WebSocket connections are pinged and closed after idle_timeout of silence.
//   * A client that vanishes while its requests run loses their responses, silently; the requests
//     themselves complete and are recorded by the service, and their sessions stay open (until
//     closed or expired by the session TTL).
//   * Every handler catches: a failure answers 500 (HTTP) or is logged (WebSocket), never crashes
//     the process.
//
// Life cycle:  Create (binds, listens) -> Start (io threads) -> serving
//                -> BeginDrain (stops accepting, /health says "draining", RpcService::BeginDrain)
//                -> WaitIdle (responses of requests in flight are written)
//                -> RpcService::Shutdown (closes every session; calls still running answer)
//                -> WaitIdle (those answers are written)
//                -> Stop (closes every connection, joins the io threads).
// The io threads keep running from Start to Stop even when no connection has I/O pending (a
// request waiting for the service has none), so every answer produced before Stop is written.
// The destructor calls Stop.
//
// Thread safety: every method may be called from any thread; Stop must not be called from a
// callback of the service or from an io thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "server/rpc_service.h"

namespace envforge::server {

class OpenAiApi;
class UiApi;

struct HttpServerOptions {
  std::string host = "127.0.0.1";        // an IPv4 or IPv6 literal, or "localhost"
  uint16_t port = 0;                     // 0: an ephemeral port (see HttpServer::port())
  std::string token;                     // empty: no authentication
  size_t max_payload_bytes = 16u << 20;  // request body and WebSocket message limit
  int io_threads = 2;
  std::chrono::milliseconds read_timeout{30'000};   // first byte -> whole request read
  std::chrono::milliseconds idle_timeout{120'000};  // keep-alive / WebSocket silence
  // WebSocket requests one connection may have in flight; reading pauses beyond it.
  size_t max_in_flight_per_connection = 4096;
  // Admission (see "Connection admission" above). Create requires
  // 1 <= max_unauthenticated_per_peer <= max_unauthenticated_connections <= max_connections.
  size_t max_connections = 4096;
  size_t max_unauthenticated_connections = 1024;
  size_t max_unauthenticated_per_peer = 256;
  std::chrono::milliseconds header_timeout{5'000};  // unauthenticated: accept -> whole header
  // Origins allowed besides the loopback ones, "scheme://host[:port]" (no path).
  std::vector<std::string> allowed_origins;
  // Serves every path under /v1 (server/openai_api.h); must outlive the server. Null: /v1
  // requests are answered 503 ("no model is served").
  OpenAiApi* openai = nullptr;
  // Serves the trajectory viewer under /ui/ (server/ui_api.h: the page without a token, its
  // /ui/api/ under the token like /rpc); must outlive the server. Null: /ui answers 404.
  const UiApi* ui = nullptr;
};

// The checks of HttpServer::Create on `options` alone (no binding): InvalidArgument naming the
// option. Normalises options->allowed_origins (lower case, no trailing '/').
Status ValidateHttpServerOptions(HttpServerOptions* options);

class HttpServer {
 public:
  // Resolves host, binds and listens (so port() is known at once). InvalidArgument for bad
  // options (io_threads < 1, max_payload_bytes 0, admission bounds out of order, an allowed
  // origin that is not "scheme://host[:port]", an unresolvable host); Unavailable when the
  // address cannot be bound (in use, no permission). `service` must outlive the server.
  static Result<std::unique_ptr<HttpServer>> Create(RpcService& service, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port (the ephemeral one when options.port was 0).
  uint16_t port() const;
  const HttpServerOptions& options() const;

  // Starts the io threads and accepting; returns at once. Idempotent.
  void Start();
  // Start, then block until Stop is called (from another thread).
  void Run();
  // Stops accepting new connections, marks the server draining (/health) and calls
  // RpcService::BeginDrain. Connections already open keep being served (new sessions and tool
  // calls are refused by the service with -32006).
  void BeginDrain();
  // Blocks until no request is in flight (each has been answered and its response written or
  // dropped), or `timeout` passes. Returns true when idle.
  bool WaitIdle(std::chrono::milliseconds timeout);
  // Closes the listener and every connection, stops and joins the io threads. Responses still
  // owed to clients are dropped. Idempotent.
  void Stop();

  // Requests handed to the service whose responses are not written yet.
  size_t in_flight() const;
  size_t open_connections() const;

 private:
  class Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace envforge::server
