// Prometheus metrics of the server: counters, gauges and latency histograms, rendered as the
// Prometheus text exposition format (version 0.0.4) for GET /metrics.
//
// Names follow Prometheus conventions (envforge_rpc_requests_total, envforge_tool_call_seconds,
// ...); labels are given as ordered (key, value) pairs and escaped on output. Histograms use fixed
// buckets suited to RPC latencies (50 us .. 10 s) and render _bucket{le}, _sum and _count.
// Gauge callbacks are evaluated at render time (e.g. live sessions from the SessionManager).
// Thread safety: every method may be called from any thread. Increment/Observe/SetGauge are a
// mutex-protected map lookup plus an atomic add. The request path resolves its series once
// (Counter/Histogram handles) and then updates them with atomic adds only: no lock, no lookup, no
// allocation. A render concurrent with updates may see a histogram's _count one observation
// apart from its buckets (each value is read atomically, the set is not a snapshot).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace envforge::server {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
  struct Series;

 public:
  // A resolved counter series; Add is lock-free. A default (null) handle, or one whose name was
  // registered with another type, ignores updates. Valid while its Metrics lives.
  class Counter {
   public:
    Counter() = default;
    void Add(double value = 1) const;
    explicit operator bool() const { return series_ != nullptr; }

   private:
    friend class Metrics;
    explicit Counter(Series* series) : series_(series) {}
    Series* series_ = nullptr;
  };
  // A resolved histogram series; Observe is lock-free. Same validity as Counter.
  class Histogram {
   public:
    Histogram() = default;
    void Observe(double seconds) const;
    explicit operator bool() const { return series_ != nullptr; }

   private:
    friend class Metrics;
    explicit Histogram(Series* series) : series_(series) {}
    Series* series_ = nullptr;
  };

  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The series (created at zero when new, so it renders from then on) for hot-path updates.
  Counter CounterSeries(std::string_view name, const MetricLabels& labels = {}, std::string_view help = {});
  Histogram HistogramSeries(std::string_view name, const MetricLabels& labels, std::string_view help = {});

  // help: the # HELP line, set on first use of the name.
  void Increment(std::string_view name, const MetricLabels& labels = {}, double value = 1, std::string_view help = {});
  void Observe(std::string_view histogram, const MetricLabels& labels, double seconds, std::string_view help = {});
  void SetGauge(std::string_view name, const MetricLabels& labels, double value, std::string_view help = {});
  void RegisterGaugeCallback(std::string_view name, std::string_view help, std::function<double()> read);
  std::string RenderPrometheus() const;
  // Sum of a counter over all label sets (tests, server/stats).
  double CounterTotal(std::string_view name) const;

 private:
  // The series of `name` with `labels`, created when new; nullptr when the name has another type.
  Series* FindOrCreate(std::string_view name, const MetricLabels& labels, const char* type, std::string_view help);

  mutable std::mutex mutex_;
  std::map<std::string, std::string> help_;
  std::map<std::string, std::string> type_;
  std::map<std::string, std::map<MetricLabels, std::unique_ptr<Series>>> series_;
  std::vector<std::pair<std::string, std::pair<std::string, std::function<double()>>>> gauge_callbacks_;
};

}  // namespace envforge::server
