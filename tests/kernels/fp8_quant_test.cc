// act_quant on the CPU: scale rules, code ranges, agreement with the scalar conversion, and
// fake quantization.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/fp8_quant.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

bool IsPowerOfTwo(float v) {
  int exponent;
  return std::frexp(v, &exponent) == 0.5f;
}

TEST_SUITE("kernels.fp8_quant") {
  TEST_CASE("Fp8GroupScale follows amax / 448, UE8M0 rounding up to a power of two, amax >= 1e-4") {
    CHECK(Fp8GroupScale(448.0f, false) == 1.0f);
    CHECK(Fp8GroupScale(448.0f, true) == 1.0f);
    CHECK(Fp8GroupScale(449.0f, true) == 2.0f);
    CHECK(Fp8GroupScale(224.0f, true) == 0.5f);
    CHECK(Fp8GroupScale(300.0f, true) == 1.0f);
    CHECK(Fp8GroupScale(0.0f, false) == doctest::Approx(1e-4 / 448.0));
    CHECK(Fp8GroupScale(0.0f, true) == std::ldexp(1.0f, -22));  // 1e-4/448 = 2.23e-7 -> 2^-22
  }

  TEST_CASE("ActQuantFp8 with pow2 scales gives power-of-two scales, |q| <= 448 and the reference codes") {
    const int64_t rows = 5, cols = 300, group = 128;  // a partial last group of 44
    std::vector<float> x = testing::RandomFloats(static_cast<size_t>(rows * cols), 7, 3.0f);
    x[17] = 1e4f;                                                 // a large outlier in group 0 of row 0
    std::fill(x.begin() + cols, x.begin() + cols + group, 0.0f);  // an all-zero group
    const int64_t groups = 3;
    for (bool pow2 : {true, false}) {
      CAPTURE(pow2);
      std::vector<uint8_t> q(x.size());
      std::vector<float> scales(static_cast<size_t>(rows * groups));
      ActQuantFp8(x.data(), rows, cols, group, pow2, q.data(), scales.data());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          const float scale = scales[static_cast<size_t>(r * groups + g)];
          if (pow2) CHECK(IsPowerOfTwo(scale));
          float amax = 0.0f;
          for (int64_t c = g * group; c < std::min(cols, (g + 1) * group); ++c)
            amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * cols + c)]));
          CHECK(scale == Fp8GroupScale(amax, pow2));
          for (int64_t c = g * group; c < std::min(cols, (g + 1) * group); ++c) {
            const size_t i = static_cast<size_t>(r * cols + c);
            const float decoded = Fp8E4M3ToFloat(q[i]);
            REQUIRE(std::fabs(decoded) <= 448.0f);
            const float expected = Fp8E4M3ToFloat(FloatToFp8E4M3(std::clamp(x[i] / scale, -448.0f, 448.0f)));
            REQUIRE(decoded == expected);
          }
        }
      }
      // The all-zero group gets the minimum scale and zero codes.
      CHECK(scales[static_cast<size_t>(1 * groups)] == Fp8GroupScale(0.0f, pow2));
      CHECK(q[static_cast<size_t>(cols)] == 0);
    }
  }

  TEST_CASE("ActQuantFp8 equals ref::ActQuantFp8 bit for bit: groups, partial groups, outliers, zeros, many rows") {
    // 64 rows so the fast op splits rows across the pool; group 128 (activations and caches) and
    // smaller groups with a partial last one.
    const int64_t rows = 64, cols = 300;
    std::vector<float> x = testing::RandomFloats(static_cast<size_t>(rows * cols), 23, 2.0f);
    x[5] = 3e4f;                                                  // saturating outlier
    x[static_cast<size_t>(cols + 7)] = -1e-9f;                    // below the minimum amax
    std::fill(x.begin() + 2 * cols, x.begin() + 3 * cols, 0.0f);  // an all-zero row
    for (size_t i = static_cast<size_t>(3 * cols); i < static_cast<size_t>(4 * cols); ++i)
      x[i] *= 1e-6f;  // tiny values
    for (int64_t group : {128, 64, 7}) {
      for (bool pow2 : {true, false}) {
        CAPTURE(group);
        CAPTURE(pow2);
        const int64_t groups = (cols + group - 1) / group;
        std::vector<uint8_t> q(x.size()), q_ref(x.size());
        std::vector<float> scales(static_cast<size_t>(rows * groups)), scales_ref(scales.size());
        ActQuantFp8(x.data(), rows, cols, group, pow2, q.data(), scales.data());
        ref::ActQuantFp8(x.data(), rows, cols, group, pow2, q_ref.data(), scales_ref.data());
        CHECK(scales == scales_ref);
        CHECK(q == q_ref);
      }
    }
  }

  TEST_CASE("FakeQuantFp8 equals decode(ActQuantFp8) and is idempotent") {
    const int64_t rows = 3, cols = 200, group = 128;
    const std::vector<float> x = testing::RandomFloats(static_cast<size_t>(rows * cols), 11, 0.7f);
    for (bool pow2 : {true, false}) {
      CAPTURE(pow2);
      std::vector<uint8_t> q(x.size());
      std::vector<float> scales(static_cast<size_t>(rows * 2));
      ActQuantFp8(x.data(), rows, cols, group, pow2, q.data(), scales.data());
      std::vector<float> fake = x;
      FakeQuantFp8(fake.data(), rows, cols, group, pow2);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const size_t i = static_cast<size_t>(r * cols + c);
          REQUIRE(fake[i] == Fp8E4M3ToFloat(q[i]) * scales[static_cast<size_t>(r * 2 + c / group)]);
        }
      }
      std::vector<float> twice = fake;
      FakeQuantFp8(twice.data(), rows, cols, group, pow2);
      if (pow2) {
        CHECK(twice == fake);  // power-of-two scales: exactly idempotent
      } else {
        CHECK(testing::RelativeError(twice, fake) < 1e-6);  // amax / 448 rescaling may move one ulp
      }
      CHECK(testing::RelativeError(fake, x) < 0.05);  // 3 mantissa bits: ~2^-4 relative per value
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
