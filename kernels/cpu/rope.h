// Rotary position embedding with YaRN frequency scaling (dsa-engine.md 1.3 and 4.2).
//
// YarnFrequencies(rotary_dim, theta, factor, original_len, beta_fast, beta_slow) returns the
// rotary_dim / 2 frequencies f_i: base_i = theta^(-2i/rotary_dim); low = floor(c(beta_fast)),
// high = ceil(c(beta_slow)) with c(r) = rotary_dim * ln(original_len / (2 pi r)) / (2 ln theta),
// clamped to [0, rotary_dim - 1]; ramp_i = clamp((i - low) / (high - low), 0, 1) (high == low:
// high += 0.001); f_i = base_i * (1 - ramp_i) + base_i / factor * ramp_i. factor <= 1 gives the
// plain base frequencies. For the 671B config: low 10, high 23, f_0 = 1, f_31 = 3.334e-6.
//
// The angle of position t and pair i is t * f_i, in fp32 (computed in double then rounded, so
// large positions keep precision). Two pairings:
//   interleaved (MLA):           pairs (v[2i], v[2i+1])
//   half / non-interleaved (indexer, "NeoX"): pairs (v[i], v[i + rotary_dim/2])
// Each pair (a, b) <- (a cos - b sin, a sin + b cos). v holds `rotary_dim` values.
#pragma once

#include <cstdint>
#include <vector>

namespace envforge::kernels {

struct YarnParams {
  int rotary_dim = 64;
  double theta = 10000.0;
  double factor = 1.0;  // <= 1: no YaRN scaling
  double original_len = 4096;
  double beta_fast = 32;
  double beta_slow = 1;
};
std::vector<float> YarnFrequencies(const YarnParams& params);
// The attention-scale correction: 0.1 * mscale * ln(factor) + 1 for factor > 1, else 1.
double YarnMscale(double factor, double mscale);

enum class RopeLayout { kInterleaved, kHalf };
// Rotates `count` vectors of rotary_dim values, vector j at v + j * stride, all at position pos.
void ApplyRope(float* v, int64_t count, int64_t stride, int rotary_dim, int64_t pos, const float* freqs,
               RopeLayout layout);

namespace ref {
// The rotation of the comment above, for tests: the pairs listed explicitly per layout, the fp32
// angle as specified, each pair rotated in double. Agrees with ApplyRope to fp32 rounding.
void ApplyRope(float* v, int64_t count, int64_t stride, int rotary_dim, int64_t pos, const float* freqs,
               RopeLayout layout);
}  // namespace ref

}  // namespace envforge::kernels
