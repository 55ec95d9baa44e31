// A small synchronous JSON-RPC 2.0 client for `envforge serve` (server/http_server.h), over HTTP
// keep-alive (POST /rpc, or /mcp) or one WebSocket connection (/ws). Used by the tests, by the
// Python module and by anyone scripting a server from C++.
//
//   auto client = RpcClient::Connect("ws://127.0.0.1:8080/ws", {.token = "secret"});
//   auto created = (*client)->Call("session/create", {{"env", "trip_planning"}, {"task", "t1"}});
//   if (!created.ok()) ... created.status().message() is "rpc error -32002: unknown task ..."
//
// URLs: "http://HOST:PORT[/PATH]" (PATH defaults to /rpc; /mcp speaks the MCP dialect) or
// "ws://HOST:PORT[/PATH]" (PATH defaults to /ws). HOST is a name, an IPv4 literal or a bracketed
// IPv6 literal ("[::1]"). TLS (https, wss) is not supported.
//
// Failures come in two kinds, both in RpcReply:
//   * the server answered with a JSON-RPC error object: RpcReply::error (code, message, data);
//     RpcReply::status() turns it into a Status whose message is "rpc error CODE: MESSAGE" and
//     whose code follows StatusCodeForRpcError;
//   * no answer came (connect refused, connection lost, timeout, an answer that is not JSON-RPC):
//     RpcReply::transport is non-OK (Unavailable, DeadlineExceeded or DataLoss). The connection is
//     then dropped and the next call reconnects. A request is never sent twice: one that may have
//     reached the server is reported as failed, not retried (tools/call is not idempotent).
// HTTP answers that are not 200 but carry a JSON-RPC error body (401 -> -32005, 413 -> -32008)
// are reported as that error.
//
// Pipelining: CallPipelined writes every request before reading any answer (HTTP/1.1 pipelining
// on one keep-alive connection, or concurrent requests on the WebSocket, answered in any order and
// matched by id); the replies come back in the order of the calls.
//
// Thread safety: thread-compatible. Use one client per thread (a client owns one connection and
// its own io_context).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error_table.h"
#include "base/json.h"
#include "base/status.h"

namespace envforge::server {

// A JSON-RPC error object as the server sent it.
struct RpcError {
  int code = 0;
  std::string message;
  Json data;  // null when absent; for envforge's application errors {"kind", "retryable", ...}
};

// RpcReply::status() gives an error the code of base/error_table.h StatusCodeForRpcError.

struct RpcReply {
  Json result;                    // when ok()
  std::optional<RpcError> error;  // the server answered with an error
  Status transport;               // no (usable) answer came
  bool ok() const { return transport.ok() && !error.has_value(); }
  // OK; the transport failure; or the JSON-RPC error as "rpc error CODE: MESSAGE".
  Status status() const;
};

struct RpcClientOptions {
  std::string token;                          // sent as "Authorization: Bearer <token>" when set
  std::chrono::milliseconds timeout{60'000};  // per call: connect, write and read together
  size_t max_message_bytes = 64u << 20;       // largest answer accepted
};

class RpcClient {
 public:
  // Parses the URL and connects (and, for ws://, completes the WebSocket handshake, where a bad
  // token is refused). Errors: InvalidArgument (bad URL), Unavailable (cannot connect, handshake
  // refused), Unauthenticated (the WebSocket upgrade was refused with 401: wrong or missing
  // token), DeadlineExceeded.
  static Result<std::unique_ptr<RpcClient>> Connect(const std::string& url, RpcClientOptions options = {});
  ~RpcClient();
  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  // One call: the result, or an error Status (see the file comment).
  Result<Json> Call(const std::string& method, Json params = Json::object());
  RpcReply CallDetailed(const std::string& method, Json params = Json::object());
  // Every request is written before the first answer is read; replies in the order of `calls`.
  std::vector<RpcReply> CallPipelined(const std::vector<std::pair<std::string, Json>>& calls);
  // A notification (no id): the server answers nothing. OK once it is written (and, over HTTP,
  // acknowledged with 202/204).
  Status Notify(const std::string& method, Json params = Json::object());
  // Sends a raw payload (anything, even invalid JSON or a batch) and returns the raw answer text:
  // nullopt when the server answers nothing (HTTP 202/204). Over WebSocket a payload that gets no
  // answer would block until the timeout, so only send ones that are answered.
  Result<std::optional<std::string>> SendRaw(const std::string& payload);

  // Names the session this client's calls are for: a WebSocket connection opened from now on
  // (a reconnect: the idle limit, a lost connection) asks for PATH?session=HANDLE, which a
  // balancer routes to the session's owner (server/README.md "A fleet behind HAProxy"); the
  // connection open now is kept. Empty: plain PATH again. HTTP routes by the request body and
  // ignores it.
  void PinSession(const std::string& handle);
  // Closes the connection (the next call reconnects).
  void Close();
  bool websocket() const;
  const std::string& url() const;

 private:
  class Impl;
  explicit RpcClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace envforge::server
