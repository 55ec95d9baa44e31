// Row-wise normalisations, fp32 math. x and out are [rows, dim]; out may alias x.
//   RmsNorm:   out = x / sqrt(mean(x^2) + eps) * weight
//   LayerNorm: out = (x - mean) / sqrt(var + eps) * weight + bias   (biased variance)
#pragma once

#include <cstdint>

namespace envforge::kernels {

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out);
void LayerNorm(const float* x, int64_t rows, int64_t dim, const float* weight, const float* bias, float eps,
               float* out);

namespace ref {
// The formulas above in double, one thread, rounded once per output, for tests (out may alias x).
void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out);
void LayerNorm(const float* x, int64_t rows, int64_t dim, const float* weight, const float* bias, float eps,
               float* out);
}  // namespace ref

}  // namespace envforge::kernels
