// pass@k and pass^k against exact enumeration of every k-subset of n episodes.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "agents/pass_at_k.h"

namespace envforge::agents {
namespace {

// Fractions of the k-subsets of {0..n-1} (episodes 0..c-1 pass) with at least one / only passes.
std::pair<double, double> Enumerate(int64_t n, int64_t c, int64_t k) {
  int64_t subsets = 0, any = 0, all = 0;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) != k) continue;
    subsets += 1;
    const int passes = __builtin_popcount(mask & ((1u << c) - 1));
    any += passes > 0 ? 1 : 0;
    all += passes == k ? 1 : 0;
  }
  return {static_cast<double>(any) / static_cast<double>(subsets),
          static_cast<double>(all) / static_cast<double>(subsets)};
}

TEST_CASE("pass@k and pass^k equal exact enumeration for every n <= 12") {
  for (int64_t n = 1; n <= 12; ++n) {
    for (int64_t c = 0; c <= n; ++c) {
      for (int64_t k = 1; k <= n; ++k) {
        auto [any, all] = Enumerate(n, c, k);
        CAPTURE(n);
        CAPTURE(c);
        CAPTURE(k);
        CHECK(*PassAtK(n, c, k) == doctest::Approx(any).epsilon(1e-12));
        CHECK(*PassHatK(n, c, k) == doctest::Approx(all).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("large n stays finite and monotone in k; bad counts are refused by name") {
  double previous = 0;
  for (int64_t k : PassAtKPoints(1000)) {
    double value = *PassAtK(1000, 3, k);
    CHECK(value >= previous);
    CHECK(value <= 1.0);
    previous = value;
  }
  CHECK(*PassAtK(1000, 3, 1) == doctest::Approx(0.003));
  CHECK(PassAtKPoints(100) == std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 100});
  CHECK(PassAtKPoints(8) == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(PassAtK(0, 0, 1).status().message().find("n >= 1") != std::string::npos);
  CHECK(PassAtK(5, 6, 1).status().message().find("c <= n") != std::string::npos);
  CHECK(PassAtK(5, 2, 6).status().message().find("k <= n") != std::string::npos);
}

}  // namespace
}  // namespace envforge::agents
