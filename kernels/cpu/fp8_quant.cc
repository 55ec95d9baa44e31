// act_quant (dsa-engine.md 3) on the CPU. Scales are computed exactly as the reference does
// (fp32 amax / 448, UE8M0 by the exponent bit trick); values are divided by the scale (not
// multiplied by its inverse) so non-power-of-two scales round like the reference.
#include "kernels/cpu/fp8_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/internal/fp8_round.h"
#include "kernels/cpu/parallel.h"

namespace envforge::kernels {
namespace {

constexpr float kFp8Max = 448.0f;

float GroupAmax(const float* x, int64_t count) {
  float amax = 0.0f;
  for (int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

inline float ScaledAndClamped(float x, float scale) {
  float v = x / scale;
  return v != v ? v : std::clamp(v, -kFp8Max, kFp8Max);  // NaN passes through
}

template <typename PerRow>
void ForEachRow(int64_t rows, int64_t cols, const PerRow& per_row) {
  ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) per_row(row);
  });
}

}  // namespace

float Fp8GroupScale(float amax, bool pow2_scales) {
  float scale = std::max(amax, 1e-4f) / kFp8Max;
  if (!pow2_scales) return scale;
  uint32_t bits;
  std::memcpy(&bits, &scale, 4);
  int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127 + ((bits & 0x7fffffu) != 0 ? 1 : 0);
  return std::ldexp(1.0f, exponent);
}

void ActQuantFp8(const float* x, int64_t rows, int64_t cols, int64_t group, bool pow2_scales, uint8_t* q,
                 float* scales) {
  const int64_t groups = (cols + group - 1) / group;
  ForEachRow(rows, cols, [&](int64_t row) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = g * group;
      const int64_t count = std::min(group, cols - begin);
      const float* in = x + row * cols + begin;
      float scale = Fp8GroupScale(GroupAmax(in, count), pow2_scales);
      scales[row * groups + g] = scale;
      uint8_t* out = q + row * cols + begin;
      for (int64_t i = 0; i < count; ++i) {
        out[i] = internal::EncodeExactFp8(internal::RoundClampedToFp8(ScaledAndClamped(in[i], scale)));
      }
    }
  });
}

void FakeQuantFp8(float* x, int64_t rows, int64_t cols, int64_t group, bool pow2_scales) {
  const int64_t groups = (cols + group - 1) / group;
  ForEachRow(rows, cols, [&](int64_t row) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = g * group;
      const int64_t count = std::min(group, cols - begin);
      float* values = x + row * cols + begin;
      float scale = Fp8GroupScale(GroupAmax(values, count), pow2_scales);
      for (int64_t i = 0; i < count; ++i) {
        values[i] = internal::RoundClampedToFp8(ScaledAndClamped(values[i], scale)) * scale;
      }
    }
  });
}

namespace ref {

void ActQuantFp8(const float* x, int64_t rows, int64_t cols, int64_t group, bool pow2_scales, uint8_t* q,
                 float* scales) {
  const int64_t groups = (cols + group - 1) / group;
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = g * group, end = std::min(cols, begin + group);
      float amax = 0.0f;
      for (int64_t c = begin; c < end; ++c) amax = std::max(amax, std::fabs(x[row * cols + c]));
      float scale = std::max(amax, 1e-4f) / kFp8Max;
      // log2 in double: exact for powers of two, and far from an integer otherwise.
      if (pow2_scales) scale = std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(static_cast<double>(scale)))));
      scales[row * groups + g] = scale;
      for (int64_t c = begin; c < end; ++c) {
        const float v = x[row * cols + c] / scale;
        q[row * cols + c] = FloatToFp8E4M3(std::isnan(v) ? v : std::clamp(v, -kFp8Max, kFp8Max));
      }
    }
  }
}

}  // namespace ref

}  // namespace envforge::kernels
