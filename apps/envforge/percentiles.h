// Latency summaries for the bench commands' JSON, one definition for all of them.
#pragma once

#include <vector>

#include "base/json.h"

namespace envforge::cli {

// The q-quantile (0 <= q <= 1) of samples by nearest rank on the sorted samples (the sample at
// index round(q * (n - 1))); 0 when there are none.
double Quantile(std::vector<double> samples, double q);

// {"p50", "p90", "p99", "max", "mean", "n"}, figures rounded to 3 decimals (the samples' unit);
// every figure null and n 0 when there are none.
Json Percentiles(std::vector<double> samples);

}  // namespace envforge::cli
