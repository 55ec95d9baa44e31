// The server's shared state: in-flight accounting, the stop gate, the connection registry, the
// token check and the transport metrics.
#include "server/internal/http_shared.h"

#include <openssl/crypto.h>

#include <string_view>
#include <utility>
#include <vector>

#include "base/sha256.h"
#include "server/internal/request_policy.h"

namespace envforge::server::internal {
namespace {

constexpr const char* kBytesHelp = "Bytes read (in) and written (out)";
constexpr const char* kWsMessagesHelp = "WebSocket messages received (in) and sent (out)";

bool StartsWithCaseInsensitive(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char a = text[i], b = prefix[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z') b = static_cast<char>(b - 'A' + 'a');
    if (a != b) return false;
  }
  return true;
}

}  // namespace

InFlightToken::InFlightToken(std::shared_ptr<TransportShared> shared) : shared_(std::move(shared)) {}
InFlightToken::~InFlightToken() { shared_->ReleaseInFlight(); }

TransportShared::TransportShared(RpcService& service, HttpServerOptions options)
    : service_(service),
      options_(std::move(options)),
      token_digest_(options_.token.empty() ? std::string() : Sha256Hex(options_.token)),
      started_(std::chrono::steady_clock::now()) {}

double TransportShared::UptimeSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

bool TransportShared::Authorized(std::string_view authorization_header) const {
  if (token_digest_.empty()) return true;
  constexpr std::string_view kScheme = "bearer ";
  std::string_view presented;
  if (StartsWithCaseInsensitive(authorization_header, kScheme)) presented = authorization_header.substr(kScheme.size());
  while (!presented.empty() && presented.front() == ' ') presented.remove_prefix(1);
  while (!presented.empty() && presented.back() == ' ') presented.remove_suffix(1);
  // Comparing digests of equal length takes the same time whatever the presented token's length
  // or content, so timing reveals neither.
  std::string digest = Sha256Hex(presented);
  return CRYPTO_memcmp(digest.data(), token_digest_.data(), digest.size()) == 0 && !presented.empty();
}

bool TransportShared::OriginAllowed(std::string_view origin) const {
  return origin.empty() || IsAllowedOrigin(origin, options_.allowed_origins);
}

std::shared_ptr<InFlightToken> TransportShared::AcquireInFlight() {
  {
    std::lock_guard<std::mutex> lock(in_flight_mutex_);
    ++in_flight_;
  }
  return std::make_shared<InFlightToken>(shared_from_this());
}

void TransportShared::ReleaseInFlight() {
  std::lock_guard<std::mutex> lock(in_flight_mutex_);
  if (--in_flight_ == 0) idle_cv_.notify_all();
}

size_t TransportShared::in_flight() const {
  std::lock_guard<std::mutex> lock(in_flight_mutex_);
  return in_flight_;
}

bool TransportShared::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(in_flight_mutex_);
  return idle_cv_.wait_for(lock, timeout, [this] { return in_flight_ == 0; });
}

void TransportShared::CloseGate() {
  std::lock_guard<std::mutex> lock(gate_mutex_);
  gate_open_ = false;
}

Admission TransportShared::Admit(std::shared_ptr<HttpConnectionBase> connection, std::string peer_address) {
  Admission admission;
  {
    std::lock_guard<std::mutex> lock(registry_mutex_);
    auto peer_pool = pool_by_peer_.find(peer_address);
    if (peer_pool != pool_by_peer_.end() && peer_pool->second.size() >= options_.max_unauthenticated_per_peer) {
      Evict(peer_pool->second.front(), "peer_limit", admission);
    }
    if (pool_.size() >= options_.max_unauthenticated_connections)
      Evict(pool_.front(), "unauthenticated_limit", admission);
    if (connections_.size() >= options_.max_connections) {
      if (pool_.empty()) {
        admission.refusal = "the server is at its connection limit (" + std::to_string(options_.max_connections) +
                            " open, all authenticated); retry later";
      } else {
        Evict(pool_.front(), "unauthenticated_limit", admission);
      }
    }
    if (admission.refusal.empty()) {
      uint64_t id = next_connection_id_++;
      Slot slot;
      slot.connection = std::move(connection);
      slot.in_pool = pool_.insert(pool_.end(), id);
      std::list<uint64_t>& peer_list = pool_by_peer_[peer_address];
      slot.in_peer_pool = peer_list.insert(peer_list.end(), id);
      slot.peer = std::move(peer_address);
      connections_.emplace(id, std::move(slot));
      admission.id = id;
    }
  }
  if (!admission.refusal.empty()) CountRefused("connection_limit");
  return admission;
}

void TransportShared::Evict(uint64_t id, const char* reason, Admission& admission) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  LeavePools(it->second);
  admission.evicted.push_back(std::move(it->second.connection));
  connections_.erase(it);
  CountRefused(reason);
}

void TransportShared::LeavePools(Slot& slot) {
  if (slot.authenticated) return;
  slot.authenticated = true;  // out of the pools for good
  pool_.erase(slot.in_pool);
  auto peer_pool = pool_by_peer_.find(slot.peer);
  if (peer_pool == pool_by_peer_.end()) return;
  peer_pool->second.erase(slot.in_peer_pool);
  if (peer_pool->second.empty()) pool_by_peer_.erase(peer_pool);
}

void TransportShared::Authenticate(uint64_t id) {
  std::lock_guard<std::mutex> lock(registry_mutex_);
  auto it = connections_.find(id);
  if (it != connections_.end()) LeavePools(it->second);
}

void TransportShared::Replace(uint64_t id, std::shared_ptr<HttpConnectionBase> connection) {
  std::shared_ptr<HttpConnectionBase> replaced;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(registry_mutex_);
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  LeavePools(it->second);
  replaced = std::exchange(it->second.connection, std::move(connection));
}

void TransportShared::Unregister(uint64_t id) {
  std::shared_ptr<HttpConnectionBase> dropped;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(registry_mutex_);
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  LeavePools(it->second);
  dropped = std::move(it->second.connection);
  connections_.erase(it);
}

void TransportShared::CountRefused(const char* reason) {
  service_.metrics().Increment("envforge_transport_connections_refused_total", {{"reason", reason}}, 1,
                               "Connections refused (503) or evicted unauthenticated by the admission bounds");
}

void TransportShared::CloseAll() {
  std::vector<std::shared_ptr<HttpConnectionBase>> all;
  {
    std::lock_guard<std::mutex> lock(registry_mutex_);
    for (const auto& [id, slot] : connections_) all.push_back(slot.connection);
  }
  for (const auto& connection : all) connection->Close();
}

void TransportShared::ClearRegistry() {
  std::unordered_map<uint64_t, Slot> dropped;
  std::lock_guard<std::mutex> lock(registry_mutex_);
  dropped.swap(connections_);
  pool_.clear();
  pool_by_peer_.clear();
}

size_t TransportShared::open_connections() const {
  std::lock_guard<std::mutex> lock(registry_mutex_);
  return connections_.size();
}

void TransportShared::CountConnectionOpened(const char* transport) {
  service_.metrics().Increment("envforge_transport_connections_total", {{"transport", transport}}, 1,
                               "Connections accepted (http) or upgraded (ws)");
  std::lock_guard<std::mutex> lock(gauge_mutex_);
  double open = ++open_by_transport_[transport];
  service_.metrics().SetGauge("envforge_transport_connections_open", {{"transport", transport}}, open,
                              "Connections open now");
}

void TransportShared::CountConnectionClosed(const char* transport) {
  std::lock_guard<std::mutex> lock(gauge_mutex_);
  double open = --open_by_transport_[transport];
  service_.metrics().SetGauge("envforge_transport_connections_open", {{"transport", transport}}, open,
                              "Connections open now");
}

void TransportShared::CountBytes(const char* transport, const char* direction, size_t bytes) {
  if (bytes == 0) return;
  std::string_view transport_name(transport);
  std::string_view direction_name(direction);
  bool known =
      (transport_name == "http" || transport_name == "ws") && (direction_name == "in" || direction_name == "out");
  if (!known) {
    service_.metrics().Increment("envforge_transport_bytes_total", {{"transport", transport}, {"direction", direction}},
                                 static_cast<double>(bytes), kBytesHelp);
    return;
  }
  LazyCounter& series = bytes_series_[(transport_name == "ws" ? 2 : 0) + (direction_name == "out" ? 1 : 0)];
  std::call_once(series.resolved, [&] {
    series.counter = service_.metrics().CounterSeries("envforge_transport_bytes_total",
                                                      {{"transport", transport}, {"direction", direction}}, kBytesHelp);
  });
  series.counter.Add(static_cast<double>(bytes));
}

void TransportShared::CountResponse(unsigned status) {
  service_.metrics().Increment("envforge_http_responses_total", {{"code", std::to_string(status)}}, 1,
                               "HTTP responses by status code");
}

void TransportShared::CountWsMessage(const char* direction) {
  std::string_view direction_name(direction);
  if (direction_name != "in" && direction_name != "out") {
    service_.metrics().Increment("envforge_ws_messages_total", {{"direction", direction}}, 1, kWsMessagesHelp);
    return;
  }
  LazyCounter& series = ws_message_series_[direction_name == "out" ? 1 : 0];
  std::call_once(series.resolved, [&] {
    series.counter =
        service_.metrics().CounterSeries("envforge_ws_messages_total", {{"direction", direction}}, kWsMessagesHelp);
  });
  series.counter.Add();
}

}  // namespace envforge::server::internal
