// State shared by the HTTP server's listener and its connections (server/http_server.h): the
// service, the options, the in-flight count behind WaitIdle, the gate that keeps late service
// callbacks away from a stopped io_context, and the registry of live connections.
//
// Lifetime: owned by a shared_ptr held by the server, by every connection and by every in-flight
// token, so a service callback arriving after the server is gone still finds it. Connections are
// kept alive by the registry (an HTTP connection waiting for the service has no I/O pending);
// Stop closes the gate, closes them, joins the io threads, then clears the registry, which also
// breaks the connection -> shared -> registry -> connection cycle.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "server/http_server.h"
#include "server/rpc_service.h"

namespace envforge::server::internal {

// A connection as the server sees it when stopping.
class HttpConnectionBase {
 public:
  virtual ~HttpConnectionBase() = default;
  // Closes the socket on the connection's strand; pending operations end with an error.
  virtual void Close() = 0;
};

class TransportShared;

// Held from the moment a request is handed to the service until its response is written or
// dropped; its destruction decrements the in-flight count.
class InFlightToken {
 public:
  explicit InFlightToken(std::shared_ptr<TransportShared> shared);
  ~InFlightToken();
  InFlightToken(const InFlightToken&) = delete;
  InFlightToken& operator=(const InFlightToken&) = delete;

 private:
  std::shared_ptr<TransportShared> shared_;
};

class TransportShared : public std::enable_shared_from_this<TransportShared> {
 public:
  TransportShared(RpcService& service, HttpServerOptions options);

  RpcService& service() { return service_; }
  const HttpServerOptions& options() const { return options_; }
  double UptimeSeconds() const;

  bool draining() const { return draining_.load(); }
  void SetDraining() { draining_.store(true); }

  // True when the request carries the configured token (always true without one).
  bool Authorized(std::string_view authorization_header) const;

  std::shared_ptr<InFlightToken> AcquireInFlight();
  size_t in_flight() const;
  bool WaitIdle(std::chrono::milliseconds timeout);

  // The gate: `fn` runs under the gate lock only while the server is not stopped. Service
  // callbacks post to a connection's strand from inside it, so no post reaches a stopped
  // io_context.
  template <typename Fn>
  void IfOpen(Fn&& fn) {
    std::lock_guard<std::mutex> lock(gate_mutex_);
    if (gate_open_) fn();
  }
  void CloseGate();

  uint64_t Register(std::shared_ptr<HttpConnectionBase> connection);
  void Unregister(uint64_t id);
  // Closes every registered connection (posted to their strands).
  void CloseAll();
  // Drops every registration (after the io threads are joined).
  void ClearRegistry();
  size_t open_connections() const;

  // Transport metrics, into service().metrics().
  void CountConnectionOpened(const char* transport);
  void CountConnectionClosed(const char* transport);
  void CountBytes(const char* transport, const char* direction, size_t bytes);
  void CountResponse(unsigned status);
  void CountWsMessage(const char* direction);

 private:
  friend class InFlightToken;
  void ReleaseInFlight();

  RpcService& service_;
  const HttpServerOptions options_;
  const std::string token_digest_;  // SHA-256 hex of the token; empty without a token
  const std::chrono::steady_clock::time_point started_;
  std::atomic<bool> draining_{false};

  mutable std::mutex in_flight_mutex_;
  std::condition_variable idle_cv_;
  size_t in_flight_ = 0;

  std::mutex gate_mutex_;
  bool gate_open_ = true;

  mutable std::mutex registry_mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<HttpConnectionBase>> connections_;
  uint64_t next_connection_id_ = 1;

  std::mutex gauge_mutex_;
  std::unordered_map<std::string, double> open_by_transport_;

  // The per-message series (bytes and WebSocket messages), resolved on first use so that the
  // request path updates them without a lookup. Index: transport (http, ws) x direction (in, out).
  struct LazyCounter {
    std::once_flag resolved;
    Metrics::Counter counter;
  };
  std::array<LazyCounter, 4> bytes_series_;
  std::array<LazyCounter, 2> ws_message_series_;
};

}  // namespace envforge::server::internal
