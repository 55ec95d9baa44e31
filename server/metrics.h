// Prometheus metrics of the server: counters, gauges and latency histograms, rendered as the
// Prometheus text exposition format (version 0.0.4) for GET /metrics.
//
// Names follow Prometheus conventions (envforge_rpc_requests_total, envforge_tool_call_seconds,
// ...); labels are given as ordered (key, value) pairs and escaped on output. Histograms use fixed
// buckets suited to RPC latencies (50 us .. 10 s) and render _bucket{le}, _sum and _count.
// Gauge callbacks are evaluated at render time (e.g. live sessions from the SessionManager).
// Thread safety: every method may be called from any thread; updates are a mutex-protected map
// lookup plus an add (cheap enough for the request path at 10^4-10^5 updates/s).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace envforge::server {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  // help: the # HELP line, set on first use of the name.
  void Increment(std::string_view name, const MetricLabels& labels = {}, double value = 1,
                 std::string_view help = {});
  void Observe(std::string_view histogram, const MetricLabels& labels, double seconds,
               std::string_view help = {});
  void SetGauge(std::string_view name, const MetricLabels& labels, double value, std::string_view help = {});
  void RegisterGaugeCallback(std::string_view name, std::string_view help, std::function<double()> read);
  std::string RenderPrometheus() const;
  // Sum of a counter over all label sets (tests, server/stats).
  double CounterTotal(std::string_view name) const;

 private:
  struct Series;
  mutable std::mutex mutex_;
  std::map<std::string, std::string> help_;
  std::map<std::string, std::string> type_;
  std::map<std::string, std::map<MetricLabels, std::vector<double>>> series_;
  std::vector<std::pair<std::string, std::pair<std::string, std::function<double()>>>> gauge_callbacks_;
};

}  // namespace envforge::server
