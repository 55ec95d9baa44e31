// FFN / router / sampler element-wise helpers (activation.h).
#include "kernels/cpu/activation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace envforge::kernels {

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void SoftmaxInPlace(float* x, int64_t n) {
  if (n <= 0) return;
  float max_value = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max_value = std::max(max_value, x[i]);
  if (max_value == -std::numeric_limits<float>::infinity()) {
    // Every entry is -inf: no mass anywhere (the header's "-inf entries get 0").
    std::fill(x, x + n, 0.0f);
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

double LogSumExp(const float* x, int64_t n) {
  double max_value = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) max_value = std::max(max_value, static_cast<double>(x[i]));
  if (max_value == -std::numeric_limits<double>::infinity()) return max_value;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max_value);
  return max_value + std::log(sum);
}

namespace ref {

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const long double g = gate[i];
    out[i] = static_cast<float>(g / (1.0L + std::exp(-g)) * up[i]);
  }
}

void SoftmaxInPlace(float* x, int64_t n) {
  if (n <= 0) return;
  const float max_value = *std::max_element(x, x + n);
  if (std::isinf(max_value) && max_value < 0) {
    std::fill(x, x + n, 0.0f);
    return;
  }
  std::vector<long double> e(static_cast<size_t>(n));
  long double sum = 0.0L;
  for (int64_t i = 0; i < n; ++i) {
    e[static_cast<size_t>(i)] = std::exp(static_cast<long double>(x[i]) - max_value);
    sum += e[static_cast<size_t>(i)];
  }
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(e[static_cast<size_t>(i)] / sum);
}

double LogSumExp(const float* x, int64_t n) {
  if (n <= 0) return -std::numeric_limits<double>::infinity();
  const float max_value = *std::max_element(x, x + n);
  if (std::isinf(max_value) && max_value < 0) return -std::numeric_limits<double>::infinity();
  long double sum = 0.0L;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<long double>(x[i]) - max_value);
  return static_cast<double>(max_value + std::log(sum));
}

}  // namespace ref

}  // namespace envforge::kernels
