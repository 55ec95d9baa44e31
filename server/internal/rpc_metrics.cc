// The service's metric series (contract in server/internal/rpc_metrics.h).
#include "server/internal/rpc_metrics.h"

#include <utility>

namespace envforge::server::internal {

namespace {

constexpr const char* kRequestsHelp = "JSON-RPC requests by method, answer code and transport.";
constexpr const char* kRequestSecondsHelp = "Time from receiving a request to answering it, by method.";

std::string TransportLabel(const std::string& transport) {
  return transport.empty() ? std::string("unknown") : transport;
}

}  // namespace

void RpcMetrics::CountRequest(const std::string& method, int code, const std::string& transport, double seconds) {
  if (code == 0) {
    const RequestSeries& series = AnsweredSeries(method, transport);
    series.ok.Add();
    series.seconds.Observe(seconds);
    return;
  }
  metrics_.Increment("envforge_rpc_requests_total",
                     {{"method", method}, {"code", std::to_string(code)}, {"transport", TransportLabel(transport)}}, 1,
                     kRequestsHelp);
  metrics_.Observe("envforge_rpc_request_seconds", {{"method", method}}, seconds, kRequestSecondsHelp);
}

const RpcMetrics::RequestSeries& RpcMetrics::AnsweredSeries(const std::string& method, const std::string& transport) {
  std::string key;
  key.reserve(method.size() + 1 + transport.size());
  key.append(method).append(1, '\n').append(transport);
  {
    std::shared_lock lock(series_mutex_);
    auto found = request_series_.find(key);
    if (found != request_series_.end()) return found->second;
  }
  RequestSeries series;
  series.ok = metrics_.CounterSeries("envforge_rpc_requests_total",
                                     {{"method", method}, {"code", "ok"}, {"transport", TransportLabel(transport)}},
                                     kRequestsHelp);
  series.seconds = metrics_.HistogramSeries("envforge_rpc_request_seconds", {{"method", method}}, kRequestSecondsHelp);
  std::unique_lock lock(series_mutex_);
  return request_series_.try_emplace(std::move(key), std::move(series)).first->second;
}

void RpcMetrics::CountToolCall(toolsets::Outcome outcome, double seconds) {
  OutcomeSeries& series = outcome_series_[static_cast<size_t>(outcome)];
  std::call_once(series.resolved, [&] {
    std::string name(toolsets::OutcomeName(outcome));
    series.calls =
        metrics_.CounterSeries("envforge_tool_calls_total", {{"outcome", name}}, "Tool calls by typed outcome.");
    series.seconds = metrics_.HistogramSeries("envforge_tool_call_seconds", {{"outcome", name}},
                                              "Server-side tool call latency (request to result), by outcome.");
  });
  series.calls.Add();
  series.seconds.Observe(seconds);
}

}  // namespace envforge::server::internal
