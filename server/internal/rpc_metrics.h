// The service's own metric series (server/metrics.h): requests by method, answer code and
// transport, their latency, and tool calls by typed outcome. The hot paths (an answered request,
// a tool call) resolve their series once and then count without a map lookup under a lock.
//
// Series:
//   envforge_rpc_requests_total{method, code="ok"|"<error code>", transport}
//   envforge_rpc_request_seconds{method}
//   envforge_tool_calls_total{outcome}, envforge_tool_call_seconds{outcome} (an outcome never seen
//   renders no series)
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <array>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "server/metrics.h"
#include "toolsets/tool_protocol.h"

namespace envforge::server::internal {

class RpcMetrics {
 public:
  explicit RpcMetrics(Metrics& metrics) : metrics_(metrics) {}

  // One request answered with `code` (0: a result). `method` is a bounded label (RpcDialect).
  void CountRequest(const std::string& method, int code, const std::string& transport, double seconds);
  // One tool call's outcome and its server-side latency.
  void CountToolCall(toolsets::Outcome outcome, double seconds);

  Metrics& metrics() { return metrics_; }

 private:
  struct RequestSeries {
    Metrics::Counter ok;
    Metrics::Histogram seconds;
  };
  const RequestSeries& AnsweredSeries(const std::string& method, const std::string& transport);
  struct OutcomeSeries {
    std::once_flag resolved;
    Metrics::Counter calls;
    Metrics::Histogram seconds;
  };
  static constexpr size_t kOutcomeCount = 6;

  Metrics& metrics_;
  std::shared_mutex series_mutex_;
  // Keyed by method + '\n' + transport; nodes are stable, so references to values stay valid.
  std::unordered_map<std::string, RequestSeries> request_series_;  // guarded by series_mutex_
  std::array<OutcomeSeries, kOutcomeCount> outcome_series_;
};

}  // namespace envforge::server::internal
