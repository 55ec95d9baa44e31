// Branch-light fp32 -> fp8 e4m3 rounding for the quantizers' inner loops. Bit-identical to
// FloatToFp8E4M3 followed by Fp8E4M3ToFloat for inputs already clamped to [-448, 448] (the
// quantizers clamp first); NaN stays NaN. The kernel tests check this over many values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/internal/cpu_features.h"

#if ENVFORGE_KERNELS_X86
#include <immintrin.h>
#endif

namespace envforge::kernels::internal {

// Rounds v (|v| <= 448 or NaN) to the nearest e4m3 value, ties to even.
inline float RoundClampedToFp8(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  uint32_t sign = bits & 0x80000000u;
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return v;  // NaN
  float result;
  if (magnitude < 0x3c800000u) {  // below 2^-6: the subnormal grid, multiples of 2^-9
    float a;
    std::memcpy(&a, &magnitude, 4);
    // Adding 2^14 leaves 2^-9 as the fp32 quantum, so the addition rounds a to the grid
    // (ties to even); subtracting it back is exact.
    result = (a + 0x1p14f) - 0x1p14f;
  } else {  // keep 3 mantissa bits, round to nearest even; a carry bumps the exponent correctly
    magnitude += 0x7ffffu + ((magnitude >> 20) & 1u);
    magnitude &= 0xfff00000u;
    std::memcpy(&result, &magnitude, 4);
  }
  uint32_t result_bits;
  std::memcpy(&result_bits, &result, 4);
  result_bits |= sign;
  std::memcpy(&result, &result_bits, 4);
  return result;
}

// The e4m3 code of a value that is exactly representable (RoundClampedToFp8's output).
inline uint8_t EncodeExactFp8(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7f;
  if (magnitude < 0x3c800000u) {  // subnormal (or zero): code = value * 2^9
    float a;
    std::memcpy(&a, &magnitude, 4);
    return sign | static_cast<uint8_t>(a * 512.0f);
  }
  uint32_t exponent = (magnitude >> 23) - 127 + 7;
  uint32_t mantissa = (magnitude >> 20) & 0x7u;
  return sign | static_cast<uint8_t>(exponent << 3 | mantissa);
}

#if ENVFORGE_KERNELS_X86

// Eight lanes of RoundClampedToFp8(clamp(x / scale, -448, 448)) * scale, bit-identical to the
// scalar FakeQuantFp8 element (NaN passes through): the division is IEEE (as the scalar one), the
// rounding is the same bit arithmetic per lane, the subnormal branch a blend.
ENVFORGE_TARGET_AVX2 inline __m256 FakeQuantFp8x8(__m256 x, __m256 scale) {
  const __m256 v = _mm256_div_ps(x, scale);
  const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m256 clamped = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-448.0f)), _mm256_set1_ps(448.0f));
  const __m256i bits = _mm256_castps_si256(clamped);
  const __m256i sign = _mm256_and_si256(bits, _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  // Normal range: keep 3 mantissa bits, round to nearest even.
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(magnitude, 20), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_and_si256(_mm256_add_epi32(magnitude, _mm256_add_epi32(_mm256_set1_epi32(0x7ffff), odd)),
                       _mm256_set1_epi32(static_cast<int>(0xfff00000u)));
  // Below 2^-6: the subnormal grid through the 2^14 addition.
  const __m256 a = _mm256_castsi256_ps(magnitude);
  const __m256 grid = _mm256_sub_ps(_mm256_add_ps(a, _mm256_set1_ps(0x1p14f)), _mm256_set1_ps(0x1p14f));
  const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3c800000), magnitude);
  const __m256 result = _mm256_blendv_ps(_mm256_castsi256_ps(rounded), grid, _mm256_castsi256_ps(small));
  const __m256 signed_result = _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(result), sign));
  return _mm256_blendv_ps(_mm256_mul_ps(signed_result, scale), v, is_nan);
}

#endif  // ENVFORGE_KERNELS_X86

}  // namespace envforge::kernels::internal
