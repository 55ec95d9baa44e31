// Top-k: radix select against the sorting reference, and the edge cases of topk.h.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "kernels/cpu/topk.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::set<int32_t> Set(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }

std::vector<int32_t> Fast(const std::vector<float>& scores, int64_t k) {
  std::vector<int32_t> out(static_cast<size_t>(k), -7);
  TopK(scores.data(), static_cast<int64_t>(scores.size()), k, out.data());
  return out;
}

std::vector<int32_t> Ref(const std::vector<float>& scores, int64_t k) {
  std::vector<int32_t> out(static_cast<size_t>(k), -7);
  ref::TopK(scores.data(), static_cast<int64_t>(scores.size()), k, out.data());
  return out;
}

TEST_SUITE("kernels.topk") {
  TEST_CASE("radix top-k selects the same set as sorting when values are distinct") {
    for (int64_t n : {10, 257, 3000, 20000}) {
      for (int64_t k : {1, 7, 64, 2048}) {
        if (k >= n) continue;
        CAPTURE(n);
        CAPTURE(k);
        std::vector<float> scores = testing::RandomFloats(static_cast<size_t>(n), static_cast<uint32_t>(n + k));
        for (size_t i = 0; i < scores.size(); i += 5) scores[i] = -scores[i] * 1e-3f;  // mixed magnitudes and signs
        const std::vector<int32_t> fast = Fast(scores, k);
        CHECK(Set(fast).size() == static_cast<size_t>(k));
        CHECK(Set(fast) == Set(Ref(scores, k)));
      }
    }
  }

  TEST_CASE("values sharing their high bits still select exactly (deep radix passes)") {
    // All values in [1, 1 + 2^-10): equal top 12 and next bits for many of them.
    std::vector<float> scores(5000);
    for (size_t i = 0; i < scores.size(); ++i)
      scores[i] = 1.0f + static_cast<float>((i * 7919) % 5000) * std::ldexp(1.0f, -23);
    CHECK(Set(Fast(scores, 300)) == Set(Ref(scores, 300)));
  }

  TEST_CASE("ties at the k-th value take any of the tied entries") {
    std::vector<float> scores = {5, 1, 3, 3, 3, 0, 3, 9};
    const std::vector<int32_t> out = Fast(scores, 4);  // 9, 5 and two of the four 3s
    const std::set<int32_t> chosen = Set(out);
    CHECK(chosen.size() == 4);
    CHECK(chosen.count(7) == 1);
    CHECK(chosen.count(0) == 1);
    int threes = 0;
    for (int32_t i : out) threes += scores[static_cast<size_t>(i)] == 3.0f ? 1 : 0;
    CHECK(threes == 2);
  }

  TEST_CASE("-inf and NaN lose to every finite value; all -inf still fills k slots") {
    std::vector<float> scores = {-kInf, 2.0f, std::nanf(""), -1e30f, kInf, -kInf};
    CHECK(Set(Fast(scores, 3)) == std::set<int32_t>{1, 3, 4});
    CHECK(Set(Ref(scores, 3)) == std::set<int32_t>{1, 3, 4});
    std::vector<float> all_neg_inf(10, -kInf);
    const std::vector<int32_t> out = Fast(all_neg_inf, 4);
    CHECK(Set(out).size() == 4);
    for (int32_t i : out) CHECK((i >= 0 && i < 10));
  }

  TEST_CASE("n <= k writes 0..n-1 then pads with -1; k = 0 writes nothing") {
    std::vector<float> scores = {3, 1, 2};
    CHECK(Fast(scores, 5) == std::vector<int32_t>{0, 1, 2, -1, -1});
    CHECK(Ref(scores, 5) == std::vector<int32_t>{0, 1, 2, -1, -1});
    CHECK(Fast(scores, 3) == std::vector<int32_t>{0, 1, 2});
    int32_t untouched = 42;
    TopK(scores.data(), 3, 0, &untouched);
    CHECK(untouched == 42);
  }

  TEST_CASE("TopKRows limits each row to its length and uses the stride") {
    const int64_t rows = 4, n = 50, stride = 64, k = 10;
    std::vector<float> scores = testing::RandomFloats(static_cast<size_t>(rows * stride), 3);
    const std::vector<int64_t> lengths = {50, 3, 10, 0};
    std::vector<int32_t> out(static_cast<size_t>(rows * k));
    TopKRows(scores.data(), rows, n, stride, lengths.data(), k, out.data());
    for (int64_t r = 0; r < rows; ++r) {
      CAPTURE(r);
      std::vector<int32_t> expected(static_cast<size_t>(k));
      ref::TopK(scores.data() + r * stride, lengths[static_cast<size_t>(r)], k, expected.data());
      std::vector<int32_t> got(out.begin() + r * k, out.begin() + (r + 1) * k);
      CHECK(Set(got) == Set(expected));
    }
    CHECK(out[static_cast<size_t>(1 * k + 3)] == -1);
    CHECK(out[static_cast<size_t>(3 * k)] == -1);
  }

  // Rows of every shape the routes meet: distinct values, heavy ties, -inf / NaN / signed zeros,
  // ascending (every entry enters the heap) and descending, lengths around the 16-lane blocks.
  std::vector<float> ScoresOfKind(int kind, int64_t n, uint32_t seed) {
    std::vector<float> scores = testing::RandomFloats(static_cast<size_t>(n), seed);
    const float specials[] = {-kInf, std::numeric_limits<float>::quiet_NaN(), 0.0f, -0.0f, kInf, 1.0f};
    for (int64_t i = 0; i < n; ++i) {
      float& v = scores[static_cast<size_t>(i)];
      if (kind == 1) v = std::round(v * 3.0f);                        // a handful of values
      if (kind == 2 && i % 3 == 0) v = specials[(i / 3 + seed) % 6];  // specials among the rest
      if (kind == 3) v = static_cast<float>(i);                       // ascending
      if (kind == 4) v = static_cast<float>(n - i);                   // descending
    }
    return scores;
  }

  TEST_CASE("the threshold route writes the radix select's array exactly, on every path") {
    testing::OnEveryPath([&] {
      for (int kind = 0; kind < 5; ++kind) {
        for (int64_t n : {4, 17, 64, 1000, 1037, 5000}) {
          for (int64_t k : {1, 3, 16, 128, 256}) {
            CAPTURE(kind);
            CAPTURE(n);
            CAPTURE(k);
            const std::vector<float> scores = ScoresOfKind(kind, n, static_cast<uint32_t>(n * 31 + k));
            std::vector<int32_t> radix(static_cast<size_t>(k), -7), threshold(radix.size(), -9);
            internal::TopKRadix(scores.data(), n, k, radix.data());
            internal::TopKByThreshold(scores.data(), n, k, threshold.data());
            CHECK(threshold == radix);
            if (n > k) CHECK(Set(radix) == Set(Ref(scores, k)));
          }
        }
      }
    });
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
