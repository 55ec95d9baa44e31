// Walsh-Hadamard transform: butterfly == matrix product, orthonormality, involution.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/hadamard.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

double Dot(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

TEST_SUITE("kernels.hadamard") {
  TEST_CASE("the fast transform equals the matrix product for every power of two up to 256") {
    for (int64_t n : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      CAPTURE(n);
      const int64_t rows = 5;
      std::vector<float> fast = testing::RandomFloats(static_cast<size_t>(rows * n), static_cast<uint32_t>(n));
      std::vector<float> slow = fast;
      const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
      HadamardTransform(fast.data(), rows, n, scale);
      ref::HadamardTransform(slow.data(), rows, n, scale);
      CHECK(testing::RelativeError(fast, slow) < 1e-6);
    }
  }

  TEST_CASE("H_2 and H_4 in natural (Sylvester) order") {
    std::vector<float> e1 = {0, 1, 0, 0};
    HadamardTransform(e1.data(), 1, 4, 1.0f);
    CHECK(e1 == std::vector<float>{1, -1, 1, -1});  // column 1 of [[H2, H2], [H2, -H2]]
    std::vector<float> e2 = {0, 0, 1, 0};
    HadamardTransform(e2.data(), 1, 4, 1.0f);
    CHECK(e2 == std::vector<float>{1, 1, -1, -1});
  }

  TEST_CASE("scaled by n^-0.5 the transform is orthonormal and its own inverse") {
    const int64_t n = 128;
    const std::vector<float> a = testing::RandomFloats(n, 1), b = testing::RandomFloats(n, 2);
    std::vector<float> ha = a, hb = b;
    const float scale = static_cast<float>(1.0 / std::sqrt(128.0));
    HadamardTransform(ha.data(), 1, n, scale);
    HadamardTransform(hb.data(), 1, n, scale);
    CHECK(Dot(ha.data(), hb.data(), n) == doctest::Approx(Dot(a.data(), b.data(), n)).epsilon(1e-5));
    CHECK(Dot(ha.data(), ha.data(), n) == doctest::Approx(Dot(a.data(), a.data(), n)).epsilon(1e-5));
    HadamardTransform(ha.data(), 1, n, scale);
    CHECK(testing::RelativeError(ha, a) < 1e-6);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
