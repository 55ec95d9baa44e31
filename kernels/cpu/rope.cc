// YaRN frequencies and the two RoPE pairings (rope.h, dsa-engine.md 1.3 and 4.2).
#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace envforge::kernels {
namespace {

// The dimension index whose wavelength makes `rotations` turns over the original context.
double CorrectionDim(const YarnParams& p, double rotations) {
  return p.rotary_dim * std::log(p.original_len / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(p.theta));
}

}  // namespace

std::vector<float> YarnFrequencies(const YarnParams& params) {
  const int pairs = params.rotary_dim / 2;
  std::vector<float> freqs(static_cast<size_t>(pairs));
  const double max_dim = params.rotary_dim - 1;
  const double low = std::clamp(std::floor(CorrectionDim(params, params.beta_fast)), 0.0, max_dim);
  double high = std::clamp(std::ceil(CorrectionDim(params, params.beta_slow)), 0.0, max_dim);
  if (high == low) high += 0.001;
  for (int i = 0; i < pairs; ++i) {
    const double base = std::pow(params.theta, -2.0 * i / params.rotary_dim);
    double f = base;
    if (params.factor > 1.0) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      f = base * (1.0 - ramp) + base / params.factor * ramp;
    }
    freqs[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return freqs;
}

double YarnMscale(double factor, double mscale) { return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

void ApplyRope(float* v, int64_t count, int64_t stride, int rotary_dim, int64_t pos, const float* freqs,
               RopeLayout layout) {
  const int pairs = rotary_dim / 2;
  // The angles are shared by every vector; sin/cos once per pair.
  std::vector<float> cos_values(static_cast<size_t>(pairs)), sin_values(static_cast<size_t>(pairs));
  for (int i = 0; i < pairs; ++i) {
    const float angle = static_cast<float>(static_cast<double>(pos) * static_cast<double>(freqs[i]));
    cos_values[static_cast<size_t>(i)] = static_cast<float>(std::cos(static_cast<double>(angle)));
    sin_values[static_cast<size_t>(i)] = static_cast<float>(std::sin(static_cast<double>(angle)));
  }
  const int64_t first_step = layout == RopeLayout::kInterleaved ? 2 : 1;
  const int64_t partner_offset = layout == RopeLayout::kInterleaved ? 1 : pairs;
  for (int64_t j = 0; j < count; ++j) {
    float* vec = v + j * stride;
    for (int i = 0; i < pairs; ++i) {
      float& a = vec[i * first_step];
      float& b = vec[i * first_step + partner_offset];
      const float c = cos_values[static_cast<size_t>(i)], s = sin_values[static_cast<size_t>(i)];
      const float a0 = a, b0 = b;
      a = a0 * c - b0 * s;
      b = a0 * s + b0 * c;
    }
  }
}

namespace ref {

void ApplyRope(float* v, int64_t count, int64_t stride, int rotary_dim, int64_t pos, const float* freqs,
               RopeLayout layout) {
  const int pairs = rotary_dim / 2;
  for (int64_t j = 0; j < count; ++j) {
    float* vec = v + j * stride;
    for (int i = 0; i < pairs; ++i) {
      const int first = layout == RopeLayout::kInterleaved ? 2 * i : i;
      const int second = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + pairs;
      const auto angle = static_cast<double>(static_cast<float>(static_cast<double>(pos) * freqs[i]));
      const double a = vec[first], b = vec[second];
      vec[first] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
      vec[second] = static_cast<float>(a * std::sin(angle) + b * std::cos(angle));
    }
  }
}

}  // namespace ref

}  // namespace envforge::kernels
