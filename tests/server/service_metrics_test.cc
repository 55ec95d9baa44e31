// Metrics: counters, gauges, histograms and callbacks rendered in the Prometheus text format.
#include <doctest/doctest.h>

#include <string>

#include "server/metrics.h"

namespace envforge::server {
namespace {

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_SUITE("server.metrics") {
  TEST_CASE("counters add up per label set and render with HELP and TYPE lines") {
    Metrics metrics;
    metrics.Increment("requests_total", {{"method", "a"}}, 1, "Requests.");
    metrics.Increment("requests_total", {{"method", "a"}});
    metrics.Increment("requests_total", {{"method", "b"}}, 3);
    std::string text = metrics.RenderPrometheus();
    INFO(text);
    CHECK(Contains(text, "# HELP requests_total Requests.\n# TYPE requests_total counter\n"));
    CHECK(Contains(text, "requests_total{method=\"a\"} 2\n"));
    CHECK(Contains(text, "requests_total{method=\"b\"} 3\n"));
    CHECK(metrics.CounterTotal("requests_total") == 5);
    CHECK(metrics.CounterTotal("missing") == 0);
  }

  TEST_CASE("label values and help text are escaped; invalid names are sanitised") {
    Metrics metrics;
    metrics.Increment("odd-name", {{"path", "a\"b\\c\nd"}}, 1, "line one\nline two \\ end");
    std::string text = metrics.RenderPrometheus();
    INFO(text);
    CHECK(Contains(text, "odd_name{path=\"a\\\"b\\\\c\\nd\"} 1\n"));
    CHECK(Contains(text, "# HELP odd_name line one\\nline two \\\\ end\n"));
  }

  TEST_CASE("histograms render cumulative buckets from 50 us to 10 s, +Inf, sum and count") {
    Metrics metrics;
    metrics.Observe("latency_seconds", {{"method", "m"}}, 0.00004);
    metrics.Observe("latency_seconds", {{"method", "m"}}, 0.003);
    metrics.Observe("latency_seconds", {{"method", "m"}}, 42);
    std::string text = metrics.RenderPrometheus();
    INFO(text);
    CHECK(Contains(text, "# TYPE latency_seconds histogram\n"));
    CHECK(Contains(text, "latency_seconds_bucket{method=\"m\",le=\"5e-05\"} 1\n"));
    CHECK(Contains(text, "latency_seconds_bucket{method=\"m\",le=\"0.0025\"} 1\n"));
    CHECK(Contains(text, "latency_seconds_bucket{method=\"m\",le=\"0.005\"} 2\n"));
    CHECK(Contains(text, "latency_seconds_bucket{method=\"m\",le=\"10\"} 2\n"));
    CHECK(Contains(text, "latency_seconds_bucket{method=\"m\",le=\"+Inf\"} 3\n"));
    CHECK(Contains(text, "latency_seconds_count{method=\"m\"} 3\n"));
    CHECK(Contains(text, "latency_seconds_sum{method=\"m\"} 42.003"));
  }

  TEST_CASE("gauges: set values and callbacks read at render time; a name keeps its first type") {
    Metrics metrics;
    metrics.SetGauge("temperature", {}, 3.5, "Degrees.");
    metrics.SetGauge("temperature", {}, 4);
    int reads = 0;
    metrics.RegisterGaugeCallback("live", "Live things.", [&reads] { return static_cast<double>(++reads); });
    metrics.Increment("temperature", {}, 100);  // a counter update of a gauge is ignored
    std::string first = metrics.RenderPrometheus();
    std::string second = metrics.RenderPrometheus();
    CHECK(Contains(first, "# TYPE temperature gauge\ntemperature 4\n"));
    CHECK(Contains(first, "# HELP live Live things.\n# TYPE live gauge\nlive 1\n"));
    CHECK(Contains(second, "live 2\n"));
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::server
