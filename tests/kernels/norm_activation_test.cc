// RMSNorm, LayerNorm, SwiGLU, softmax and log-sum-exp against direct formulas.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/norm.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

TEST_SUITE("kernels.norm_activation") {
  TEST_CASE("RmsNorm and LayerNorm follow their formulas row by row, in place too") {
    const int64_t rows = 3, dim = 37;
    const std::vector<float> x = testing::RandomFloats(static_cast<size_t>(rows * dim), 1, 2.0f);
    const std::vector<float> weight = testing::RandomFloats(static_cast<size_t>(dim), 2);
    const std::vector<float> bias = testing::RandomFloats(static_cast<size_t>(dim), 3);
    std::vector<float> rms(x.size()), layer(x.size());
    RmsNorm(x.data(), rows, dim, weight.data(), 1e-6f, rms.data());
    LayerNorm(x.data(), rows, dim, weight.data(), bias.data(), 1e-6f, layer.data());
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0, sum_sq = 0;
      for (int64_t i = 0; i < dim; ++i) {
        const double v = x[static_cast<size_t>(r * dim + i)];
        sum += v;
        sum_sq += v * v;
      }
      const double mean = sum / dim;
      double var = 0;
      for (int64_t i = 0; i < dim; ++i) var += std::pow(x[static_cast<size_t>(r * dim + i)] - mean, 2);
      var /= dim;
      for (int64_t i = 0; i < dim; ++i) {
        const size_t at = static_cast<size_t>(r * dim + i);
        CHECK(rms[at] ==
              doctest::Approx(x[at] / std::sqrt(sum_sq / dim + 1e-6) * weight[static_cast<size_t>(i)]).epsilon(1e-5));
        CHECK(layer[at] == doctest::Approx((x[at] - mean) / std::sqrt(var + 1e-6) * weight[static_cast<size_t>(i)] +
                                           bias[static_cast<size_t>(i)])
                               .epsilon(1e-4));
      }
    }
    std::vector<float> in_place = x;
    RmsNorm(in_place.data(), rows, dim, weight.data(), 1e-6f, in_place.data());
    CHECK(in_place == rms);
  }

  TEST_CASE("RmsNorm and LayerNorm agree with their ref:: twins over many rows and model widths") {
    // 300 rows so the fast ops split rows across the pool; widths of the tiny and the 671B models.
    for (int64_t dim : {37, 128, 512, 7168}) {
      CAPTURE(dim);
      const int64_t rows = dim >= 512 ? 40 : 300;
      const std::vector<float> x = testing::RandomFloats(static_cast<size_t>(rows * dim), 5, 3.0f);
      std::vector<float> weight = testing::RandomFloats(static_cast<size_t>(dim), 6);
      const std::vector<float> bias = testing::RandomFloats(static_cast<size_t>(dim), 7);
      std::vector<float> fast(x.size()), slow(x.size());
      RmsNorm(x.data(), rows, dim, weight.data(), 1e-6f, fast.data());
      ref::RmsNorm(x.data(), rows, dim, weight.data(), 1e-6f, slow.data());
      CHECK(testing::RelativeError(fast, slow) < 1e-6);
      LayerNorm(x.data(), rows, dim, weight.data(), bias.data(), 1e-6f, fast.data());
      ref::LayerNorm(x.data(), rows, dim, weight.data(), bias.data(), 1e-6f, slow.data());
      CHECK(testing::RelativeError(fast, slow) < 1e-6);
      std::vector<float> in_place = x;  // the ref twin may alias too
      ref::LayerNorm(in_place.data(), rows, dim, weight.data(), bias.data(), 1e-6f, in_place.data());
      CHECK(in_place == slow);
    }
  }

  TEST_CASE("SiluMul, softmax and log-sum-exp agree with their ref:: twins") {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> gate = testing::RandomFloats(4096, 8, 6.0f), up = testing::RandomFloats(4096, 9);
    gate[0] = -88.0f;  // exp(-g) near the fp32 limit
    gate[1] = 88.0f;
    std::vector<float> fast(gate.size()), slow(gate.size());
    SiluMul(gate.data(), up.data(), 4096, fast.data());
    ref::SiluMul(gate.data(), up.data(), 4096, slow.data());
    CHECK(testing::RelativeError(fast, slow) < 1e-6);

    std::vector<float> logits = testing::RandomFloats(1000, 10, 8.0f);
    logits[3] = -inf;  // masked entries
    logits[500] = -inf;
    logits[7] = 60.0f;  // a dominant one
    CHECK(LogSumExp(logits.data(), 1000) == doctest::Approx(ref::LogSumExp(logits.data(), 1000)).epsilon(1e-12));
    std::vector<float> soft = logits, soft_ref = logits;
    SoftmaxInPlace(soft.data(), 1000);
    ref::SoftmaxInPlace(soft_ref.data(), 1000);
    CHECK(testing::RelativeError(soft, soft_ref) < 1e-6);
    CHECK(soft[3] == 0.0f);
    CHECK(soft_ref[3] == 0.0f);
    std::vector<float> masked = {-inf, -inf, -inf};
    ref::SoftmaxInPlace(masked.data(), 3);
    CHECK(masked == std::vector<float>{0.0f, 0.0f, 0.0f});
    CHECK(ref::LogSumExp(masked.data(), 0) == -std::numeric_limits<double>::infinity());
  }

  TEST_CASE("SiluMul, softmax and log-sum-exp") {
    const std::vector<float> gate = {-2.0f, 0.0f, 1.5f}, up = {3.0f, 4.0f, -1.0f};
    std::vector<float> out(3);
    SiluMul(gate.data(), up.data(), 3, out.data());
    for (size_t i = 0; i < 3; ++i)
      CHECK(out[i] == doctest::Approx(gate[i] / (1 + std::exp(-gate[i])) * up[i]).epsilon(1e-6));

    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> logits = {1000.0f, 1001.0f, -inf};
    CHECK(LogSumExp(logits.data(), 3) == doctest::Approx(1001.0 + std::log(1.0 + std::exp(-1.0))).epsilon(1e-9));
    SoftmaxInPlace(logits.data(), 3);
    CHECK(logits[0] == doctest::Approx(1.0 / (1.0 + std::exp(1.0))).epsilon(1e-6));
    CHECK(logits[1] == doctest::Approx(1.0 / (1.0 + std::exp(-1.0))).epsilon(1e-6));
    CHECK(logits[2] == 0.0f);
    std::vector<float> all_masked = {-inf, -inf};
    SoftmaxInPlace(all_masked.data(), 2);
    CHECK(all_masked == std::vector<float>{0.0f, 0.0f});
    CHECK(Sigmoid(0.0f) == 0.5f);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
