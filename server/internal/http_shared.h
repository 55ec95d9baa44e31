// State shared by the HTTP server's listener and its connections (server/http_server.h): the
// service, the options, the in-flight count behind WaitIdle, the gate that keeps late service
// callbacks away from a stopped io_context, and the registry of live connections, which also
// admits them (the connection bounds and the eviction of unauthenticated connections).
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
#include <list>
#include <unordered_map>
#include <vector>

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

// What the registry decided about a new connection.
struct Admission {
  uint64_t id = 0;      // 0: refused
  std::string refusal;  // why, when refused (for the 503 body)
  // Unauthenticated connections that made room; the caller closes them (outside the lock).
  std::vector<std::shared_ptr<HttpConnectionBase>> evicted;
};

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
  // True when a request with this Origin header value may be served (empty: no header).
  bool OriginAllowed(std::string_view origin) const;

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

  // Admits a new, unauthenticated connection from `peer_address` under the bounds of
  // HttpServerOptions (evicting the oldest unauthenticated ones as needed), or refuses it.
  Admission Admit(std::shared_ptr<HttpConnectionBase> connection, std::string peer_address);
  // The connection passed the token check: it leaves the unauthenticated pool for good.
  void Authenticate(uint64_t id);
  // The WebSocket connection takes over the upgraded HTTP connection's slot.
  void Replace(uint64_t id, std::shared_ptr<HttpConnectionBase> connection);
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

  struct Slot {
    std::shared_ptr<HttpConnectionBase> connection;
    std::string peer;  // address, without the port
    bool authenticated = false;
    std::list<uint64_t>::iterator in_pool;       // unauthenticated: its place in pool_
    std::list<uint64_t>::iterator in_peer_pool;  // unauthenticated: its place in its peer's list
  };
  // Takes an unauthenticated slot out of the pools (registry_mutex_ held).
  void LeavePools(Slot& slot);
  // Drops the slot of an unauthenticated connection and hands its connection to `admission`.
  void Evict(uint64_t id, const char* reason, Admission& admission);
  void CountRefused(const char* reason);

  mutable std::mutex registry_mutex_;
  std::unordered_map<uint64_t, Slot> connections_;
  std::list<uint64_t> pool_;  // unauthenticated connections, oldest first
  std::unordered_map<std::string, std::list<uint64_t>> pool_by_peer_;
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
