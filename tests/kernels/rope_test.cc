// YaRN constants of the 671B config (dsa-engine.md 1.3) and RoPE properties.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/rope.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

YarnParams DeepSeekYarn() {
  YarnParams p;
  p.rotary_dim = 64;
  p.theta = 10000.0;
  p.factor = 40.0;
  p.original_len = 4096;
  p.beta_fast = 32;
  p.beta_slow = 1;
  return p;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

TEST_SUITE("kernels.rope") {
  TEST_CASE("YaRN frequencies of the 671B config: unchanged up to i = 10, divided by 40 from i = 23") {
    const std::vector<float> f = YarnFrequencies(DeepSeekYarn());
    REQUIRE(f.size() == 32);
    for (int i = 0; i < 32; ++i) {
      CAPTURE(i);
      const double base = std::pow(10000.0, -2.0 * i / 64.0);
      if (i <= 10) CHECK(f[static_cast<size_t>(i)] == doctest::Approx(base).epsilon(1e-6));
      if (i >= 23) CHECK(f[static_cast<size_t>(i)] == doctest::Approx(base / 40.0).epsilon(1e-6));
      if (i > 10 && i < 23) {  // the ramp: strictly between the two
        CHECK(f[static_cast<size_t>(i)] < base);
        CHECK(f[static_cast<size_t>(i)] > base / 40.0);
        const double ramp = (i - 10) / 13.0;
        CHECK(f[static_cast<size_t>(i)] == doctest::Approx(base * (1 - ramp) + base / 40 * ramp).epsilon(1e-6));
      }
    }
    CHECK(f[0] == 1.0f);
    CHECK(f[31] == doctest::Approx(3.334e-6).epsilon(1e-3));
  }

  TEST_CASE("YaRN mscale gives the MLA softmax scale 0.1352338 for qk dim 192 and factor 40") {
    const double mscale = YarnMscale(40.0, 1.0);
    CHECK(mscale == doctest::Approx(1.368888).epsilon(1e-6));
    CHECK(std::pow(192.0, -0.5) * mscale * mscale == doctest::Approx(0.1352338).epsilon(1e-6));
    CHECK(YarnMscale(1.0, 1.0) == 1.0);
  }

  TEST_CASE("without scaling the frequencies are the plain RoPE bases") {
    YarnParams p = DeepSeekYarn();
    p.factor = 1.0;
    const std::vector<float> f = YarnFrequencies(p);
    for (int i = 0; i < 32; ++i)
      CHECK(f[static_cast<size_t>(i)] == doctest::Approx(std::pow(10000.0, -2.0 * i / 64.0)).epsilon(1e-6));
  }

  TEST_CASE("interleaved and half pairings rotate different pairs") {
    const std::vector<float> f = YarnFrequencies(DeepSeekYarn());
    const std::vector<float> v = testing::RandomFloats(64, 1);
    std::vector<float> interleaved = v, half = v;
    ApplyRope(interleaved.data(), 1, 64, 64, 123, f.data(), RopeLayout::kInterleaved);
    ApplyRope(half.data(), 1, 64, 64, 123, f.data(), RopeLayout::kHalf);
    CHECK(testing::RelativeError(interleaved, half) > 0.1);
    // The exact pairs: pair 0 is (v0, v1) interleaved and (v0, v32) half, angle 123 * f0 = 123.
    const float c = static_cast<float>(std::cos(123.0)), s = static_cast<float>(std::sin(123.0));
    CHECK(interleaved[0] == doctest::Approx(v[0] * c - v[1] * s).epsilon(1e-5));
    CHECK(interleaved[1] == doctest::Approx(v[0] * s + v[1] * c).epsilon(1e-5));
    CHECK(half[0] == doctest::Approx(v[0] * c - v[32] * s).epsilon(1e-5));
    CHECK(half[32] == doctest::Approx(v[0] * s + v[32] * c).epsilon(1e-5));
    // Position 0 is the identity.
    std::vector<float> zero = v;
    ApplyRope(zero.data(), 1, 64, 64, 0, f.data(), RopeLayout::kHalf);
    CHECK(zero == v);
  }

  TEST_CASE("RoPE preserves norms and dot products depend only on the position difference") {
    const std::vector<float> f = YarnFrequencies(DeepSeekYarn());
    for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
      const std::vector<float> q = testing::RandomFloats(64, 2), k = testing::RandomFloats(64, 3);
      std::vector<float> rotated = q;
      ApplyRope(rotated.data(), 1, 64, 64, 5000, f.data(), layout);
      CHECK(Dot(rotated, rotated) == doctest::Approx(Dot(q, q)).epsilon(1e-5));
      auto score = [&](int64_t tq, int64_t tk) {
        std::vector<float> a = q, b = k;
        ApplyRope(a.data(), 1, 64, 64, tq, f.data(), layout);
        ApplyRope(b.data(), 1, 64, 64, tk, f.data(), layout);
        return Dot(a, b);
      };
      const double reference = score(17, 10);
      CHECK(score(107, 100) == doctest::Approx(reference).epsilon(1e-4));
      CHECK(score(1007, 1000) == doctest::Approx(reference).epsilon(1e-4));
      CHECK(score(10, 17) != doctest::Approx(reference).epsilon(1e-4));  // the sign of t1 - t2 matters
    }
  }

  TEST_CASE("ApplyRope agrees with ref::ApplyRope in both layouts, at small and large positions") {
    const std::vector<float> f = YarnFrequencies(DeepSeekYarn());
    // 4 heads of 96 values, the rotary part (64) at the start of each; the rest must stay as it is.
    for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
      for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{77}, int64_t{4095}, int64_t{163839}}) {
        CAPTURE(pos);
        const std::vector<float> heads = testing::RandomFloats(4 * 96, static_cast<uint32_t>(pos + 5));
        std::vector<float> fast = heads, slow = heads;
        ApplyRope(fast.data(), 4, 96, 64, pos, f.data(), layout);
        ref::ApplyRope(slow.data(), 4, 96, 64, pos, f.data(), layout);
        for (int64_t h = 0; h < 4; ++h) {
          CHECK(testing::RelativeError(fast.data() + h * 96, slow.data() + h * 96, 64) < 1e-6);
          CHECK(std::equal(fast.begin() + h * 96 + 64, fast.begin() + (h + 1) * 96, heads.begin() + h * 96 + 64));
          CHECK(std::equal(slow.begin() + h * 96 + 64, slow.begin() + (h + 1) * 96, heads.begin() + h * 96 + 64));
        }
      }
    }
  }

  TEST_CASE("ApplyRope rotates every vector of a strided batch") {
    const std::vector<float> f = YarnFrequencies(DeepSeekYarn());
    // 3 heads of 96 values each, the rotary part at the start of each head.
    std::vector<float> heads = testing::RandomFloats(3 * 96, 4);
    std::vector<float> expected = heads;
    for (int h = 0; h < 3; ++h) ApplyRope(expected.data() + h * 96, 1, 96, 64, 77, f.data(), RopeLayout::kInterleaved);
    ApplyRope(heads.data(), 3, 96, 64, 77, f.data(), RopeLayout::kInterleaved);
    CHECK(heads == expected);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
