// Metrics: the in-memory series behind GET /metrics and their Prometheus text rendering (format
// 0.0.4: # HELP / # TYPE lines, one sample per line, label values escaped).
#include "server/metrics.h"

#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace envforge::server {
namespace {

// Upper bounds (seconds) of the latency histograms; +Inf is implicit. RPC latencies range from
// tens of microseconds (a cached tools/list) to seconds (a tool at its wall-time limit).
constexpr std::array<double, 17> kBucketBounds = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                  0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
// A histogram series is stored as its per-bucket counts (not cumulative; the last one is +Inf),
// then the sum, then the count.
constexpr size_t kHistogramSlots = kBucketBounds.size() + 1 + 2;

// Metric and label names: [a-zA-Z_:][a-zA-Z0-9_:]* (labels without ':'); anything else becomes '_'.
std::string SanitizeName(std::string_view name, bool allow_colon) {
  std::string out(name);
  if (out.empty()) return "_";
  for (size_t i = 0; i < out.size(); ++i) {
    char c = out[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':') ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) out[i] = '_';
  }
  return out;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  } else {
    // The shortest of 15 or 17 significant digits that reads back exactly ("0.0025", not
    // "0.0025000000000000001").
    std::snprintf(buffer, sizeof buffer, "%.15g", value);
    if (std::strtod(buffer, nullptr) != value) std::snprintf(buffer, sizeof buffer, "%.17g", value);
  }
  return buffer;
}

// {a="x",b="y"} with `extra` (the histogram's le) appended; empty when there are no labels.
std::string RenderLabels(const MetricLabels& labels, const std::pair<std::string, std::string>* extra = nullptr) {
  if (labels.empty() && extra == nullptr) return "";
  std::string out = "{";
  bool first = true;
  auto add = [&](const std::string& key, const std::string& value) {
    if (!first) out += ',';
    first = false;
    out += SanitizeName(key, false);
    out += "=\"";
    out += EscapeLabelValue(value);
    out += '"';
  };
  for (const auto& [key, value] : labels) add(key, value);
  if (extra != nullptr) add(extra->first, extra->second);
  out += '}';
  return out;
}

}  // namespace

// One label set's values: a counter or gauge has one slot; a histogram has kHistogramSlots.
// Atomic so that resolved handles update without the map lock.
struct Metrics::Series {
  explicit Series(size_t size) : slots(std::make_unique<std::atomic<double>[]>(size)), size(size) {
    for (size_t i = 0; i < size; ++i) slots[i].store(0.0, std::memory_order_relaxed);
  }
  double Load(size_t i) const { return slots[i].load(std::memory_order_relaxed); }
  void Add(size_t i, double value) { slots[i].fetch_add(value, std::memory_order_relaxed); }

  std::unique_ptr<std::atomic<double>[]> slots;
  size_t size;
};

Metrics::Metrics() = default;
Metrics::~Metrics() = default;

void Metrics::Counter::Add(double value) const {
  if (series_ != nullptr) series_->Add(0, value);
}

void Metrics::Histogram::Observe(double seconds) const {
  if (series_ == nullptr) return;
  size_t bucket = 0;
  while (bucket < kBucketBounds.size() && seconds > kBucketBounds[bucket]) ++bucket;
  series_->Add(bucket, 1);
  series_->Add(kHistogramSlots - 2, seconds);
  series_->Add(kHistogramSlots - 1, 1);
}

Metrics::Series* Metrics::FindOrCreate(std::string_view name, const MetricLabels& labels, const char* type,
                                       std::string_view help) {
  std::string key = SanitizeName(name, true);
  std::lock_guard lock(mutex_);
  auto [known, inserted] = type_.try_emplace(key, type);
  if (!inserted && known->second != type) return nullptr;
  if (inserted && !help.empty()) help_[key] = std::string(help);
  auto& by_labels = series_[key];
  auto found = by_labels.find(labels);
  if (found != by_labels.end()) return found->second.get();
  size_t size = known->second == "histogram" ? kHistogramSlots : 1;
  return by_labels.emplace(labels, std::make_unique<Series>(size)).first->second.get();
}

Metrics::Counter Metrics::CounterSeries(std::string_view name, const MetricLabels& labels, std::string_view help) {
  return Counter(FindOrCreate(name, labels, "counter", help));
}

Metrics::Histogram Metrics::HistogramSeries(std::string_view name, const MetricLabels& labels, std::string_view help) {
  return Histogram(FindOrCreate(name, labels, "histogram", help));
}

void Metrics::Increment(std::string_view name, const MetricLabels& labels, double value, std::string_view help) {
  CounterSeries(name, labels, help).Add(value);
}

void Metrics::Observe(std::string_view histogram, const MetricLabels& labels, double seconds, std::string_view help) {
  HistogramSeries(histogram, labels, help).Observe(seconds);
}

void Metrics::SetGauge(std::string_view name, const MetricLabels& labels, double value, std::string_view help) {
  if (Series* series = FindOrCreate(name, labels, "gauge", help))
    series->slots[0].store(value, std::memory_order_relaxed);
}

void Metrics::RegisterGaugeCallback(std::string_view name, std::string_view help, std::function<double()> read) {
  std::string key = SanitizeName(name, true);
  std::lock_guard lock(mutex_);
  for (auto& [existing, entry] : gauge_callbacks_) {
    if (existing == key) {
      entry = {std::string(help), std::move(read)};
      return;
    }
  }
  gauge_callbacks_.emplace_back(key, std::make_pair(std::string(help), std::move(read)));
}

std::string Metrics::RenderPrometheus() const {
  // Callbacks run outside the lock: they read other components (the session manager, the
  // trajectory store) and must not be able to deadlock against a concurrent update.
  std::vector<std::pair<std::string, std::pair<std::string, std::function<double()>>>> callbacks;
  std::string out;
  {
    std::lock_guard lock(mutex_);
    callbacks = gauge_callbacks_;
    for (const auto& [name, by_labels] : series_) {
      const std::string& type = type_.at(name);
      auto help = help_.find(name);
      if (help != help_.end()) out += "# HELP " + name + " " + EscapeHelp(help->second) + "\n";
      out += "# TYPE " + name + " " + type + "\n";
      for (const auto& [labels, series] : by_labels) {
        const Series& slots = *series;
        if (type != "histogram") {
          out += name + RenderLabels(labels) + " " + FormatValue(slots.Load(0)) + "\n";
          continue;
        }
        double cumulative = 0;
        for (size_t bucket = 0; bucket <= kBucketBounds.size(); ++bucket) {
          cumulative += slots.Load(bucket);
          std::pair<std::string, std::string> le{
              "le", bucket < kBucketBounds.size() ? FormatValue(kBucketBounds[bucket]) : std::string("+Inf")};
          out += name + "_bucket" + RenderLabels(labels, &le) + " " + FormatValue(cumulative) + "\n";
        }
        out += name + "_sum" + RenderLabels(labels) + " " + FormatValue(slots.Load(kHistogramSlots - 2)) + "\n";
        out += name + "_count" + RenderLabels(labels) + " " + FormatValue(slots.Load(kHistogramSlots - 1)) + "\n";
      }
    }
  }
  for (const auto& [name, entry] : callbacks) {
    double value = 0;
    try {
      value = entry.second ? entry.second() : 0.0;
    } catch (...) {
      value = std::nan("");
    }
    if (!entry.first.empty()) out += "# HELP " + name + " " + EscapeHelp(entry.first) + "\n";
    out += "# TYPE " + name + " gauge\n";
    out += name + " " + FormatValue(value) + "\n";
  }
  return out;
}

double Metrics::CounterTotal(std::string_view name) const {
  std::string key = SanitizeName(name, true);
  std::lock_guard lock(mutex_);
  auto type = type_.find(key);
  if (type == type_.end() || type->second != "counter") return 0;
  double total = 0;
  for (const auto& [labels, series] : series_.at(key)) total += series->Load(0);
  return total;
}

}  // namespace envforge::server
