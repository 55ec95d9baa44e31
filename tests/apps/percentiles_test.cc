// apps/envforge/percentiles.h: the one latency summary every bench command prints.
#include <doctest/doctest.h>

#include <vector>

#include "apps/envforge/percentiles.h"

namespace envforge::cli {
namespace {

TEST_CASE("Percentiles: nearest rank on the sorted samples, whatever their order") {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);  // 100 .. 1, unsorted on purpose
  Json summary = Percentiles(samples);
  CHECK(summary["n"] == 100);
  CHECK(summary["p50"].get<double>() == 51);  // index round(0.5 * 99) = 50
  CHECK(summary["p90"].get<double>() == 90);  // index round(0.9 * 99) = 89
  CHECK(summary["p99"].get<double>() == 99);  // index round(0.99 * 99) = 98
  CHECK(summary["max"].get<double>() == 100);
  CHECK(summary["mean"].get<double>() == 50.5);
  CHECK(Quantile(samples, 0.5) == 51);
  CHECK(Quantile(samples, 0.0) == 1);
  CHECK(Quantile(samples, 1.0) == 100);
}

TEST_CASE("Percentiles rounds to 3 decimals; none gives nulls and n 0") {
  Json one = Percentiles({0.12345});
  CHECK(one["p50"].get<double>() == doctest::Approx(0.123));
  CHECK(one["max"].get<double>() == doctest::Approx(0.123));
  CHECK(one["n"] == 1);
  Json none = Percentiles({});
  CHECK(none["n"] == 0);
  for (const char* key : {"p50", "p90", "p99", "max", "mean"}) CHECK(none[key].is_null());
  CHECK(Quantile({}, 0.5) == 0);
}

}  // namespace
}  // namespace envforge::cli
