// RMSNorm and LayerNorm rows (norm.h). Sums accumulate in double: dim is at most a few
// thousand, so this costs nothing measurable and keeps the result independent of dim.
#include "kernels/cpu/norm.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/parallel.h"

namespace envforge::kernels {
namespace {

int64_t RowGrain(int64_t dim) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(dim, 1)); }

}  // namespace

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out) {
  ParallelFor(rows, RowGrain(dim), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const float* in = x + row * dim;
      double sum_squares = 0.0;
      for (int64_t i = 0; i < dim; ++i) sum_squares += static_cast<double>(in[i]) * in[i];
      const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(dim) + eps));
      float* dst = out + row * dim;
      for (int64_t i = 0; i < dim; ++i) dst[i] = in[i] * inv_rms * weight[i];
    }
  });
}

void LayerNorm(const float* x, int64_t rows, int64_t dim, const float* weight, const float* bias, float eps,
               float* out) {
  ParallelFor(rows, RowGrain(dim), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const float* in = x + row * dim;
      double sum = 0.0;
      for (int64_t i = 0; i < dim; ++i) sum += in[i];
      const double mean = sum / static_cast<double>(dim);
      double sum_squares = 0.0;
      for (int64_t i = 0; i < dim; ++i) sum_squares += (in[i] - mean) * (in[i] - mean);
      const float inv_std = static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(dim) + eps));
      const float mean_f = static_cast<float>(mean);
      float* dst = out + row * dim;
      for (int64_t i = 0; i < dim; ++i) dst[i] = (in[i] - mean_f) * inv_std * weight[i] + bias[i];
    }
  });
}

namespace ref {

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* in = x + row * dim;
    double mean_square = 0.0;
    for (int64_t i = 0; i < dim; ++i) mean_square += static_cast<double>(in[i]) * in[i] / static_cast<double>(dim);
    const double rms = std::sqrt(mean_square + eps);
    for (int64_t i = 0; i < dim; ++i) out[row * dim + i] = static_cast<float>(in[i] / rms * weight[i]);
  }
}

void LayerNorm(const float* x, int64_t rows, int64_t dim, const float* weight, const float* bias, float eps,
               float* out) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* in = x + row * dim;
    double mean = 0.0;
    for (int64_t i = 0; i < dim; ++i) mean += in[i] / static_cast<double>(dim);
    double variance = 0.0;
    for (int64_t i = 0; i < dim; ++i) variance += (in[i] - mean) * (in[i] - mean) / static_cast<double>(dim);
    const double std_dev = std::sqrt(variance + eps);
    for (int64_t i = 0; i < dim; ++i) {
      out[row * dim + i] = static_cast<float>((in[i] - mean) / std_dev * weight[i] + bias[i]);
    }
  }
}

}  // namespace ref

}  // namespace envforge::kernels
