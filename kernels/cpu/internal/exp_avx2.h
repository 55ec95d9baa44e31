// Vectorised exp for the softmax inner loops: range reduction x = n ln2 + r, |r| <= ln2 / 2,
// a degree-6 polynomial for e^r, and 2^n built in the exponent field. Relative error below
// 2e-7 on [-87, 88]; inputs below -87.3 (including -inf) give exactly 0, NaN is not expected.
#pragma once

#include "kernels/cpu/internal/cpu_features.h"

#if ENVFORGE_KERNELS_X86
#include <immintrin.h>

namespace envforge::kernels::internal {

ENVFORGE_TARGET_AVX2 inline __m256 ExpAvx2(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln2 split in a high part with trailing zero bits (exact n * hi) and a low correction.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // 2^n: n in [-126, 128]; split as 2^(n/2) twice so n = 128 and n = -126 stay representable.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256i rest = _mm256_sub_epi32(ni, half);
  const __m256 scale_a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 scale_b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, _mm256_set1_epi32(127)), 23));
  const __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, scale_a), scale_b);
  return _mm256_andnot_ps(underflow, result);
}

}  // namespace envforge::kernels::internal

#endif  // ENVFORGE_KERNELS_X86
