#include "apps/envforge/percentiles.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace envforge::cli {
namespace {

double AtSorted(const std::vector<double>& sorted, double q) {
  size_t index = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(index, sorted.size() - 1)];
}

double Round3(double v) { return std::round(v * 1000) / 1000; }

}  // namespace

double Quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return AtSorted(samples, q);
}

Json Percentiles(std::vector<double> samples) {
  if (samples.empty()) {
    return Json{{"p50", nullptr}, {"p90", nullptr}, {"p99", nullptr}, {"max", nullptr}, {"mean", nullptr}, {"n", 0}};
  }
  std::sort(samples.begin(), samples.end());
  const double mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  return Json{{"p50", Round3(AtSorted(samples, 0.50))},
              {"p90", Round3(AtSorted(samples, 0.90))},
              {"p99", Round3(AtSorted(samples, 0.99))},
              {"max", Round3(samples.back())},
              {"mean", Round3(mean)},
              {"n", samples.size()}};
}

}  // namespace envforge::cli
