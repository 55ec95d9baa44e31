// The register-blocked AVX2 GEMM pieces shared by Linear (prefill), the indexer scores and
// sparse attention: a 6x16 micro-kernel (6 rows of A broadcast against 16 columns of B held in
// two vectors; 12 accumulators, 8 loads per 12 FMAs) and a 16-row transposition that packs B.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/internal/cpu_features.h"

#if ENVFORGE_KERNELS_X86
#include <immintrin.h>

namespace envforge::kernels::internal {

inline constexpr int kMicroRows = 6;
inline constexpr int kMicroCols = 16;

// c[i][0 : ncols] (+)= sum_{k < kc} a[i * lda + k] * b[k * ldb + 0 : 16] for i < MR. b must
// hold 16 readable floats per k even when ncols < 16.
template <int MR>
ENVFORGE_TARGET_AVX2 inline void MicroKernel(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t kc,
                                             float* c, int64_t ldc, int64_t ncols, bool accumulate) {
  __m256 c0[MR], c1[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * ldb);
    const __m256 b1 = _mm256_loadu_ps(b + k * ldb + 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda + k);
      c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);
    }
  }
  if (ncols == kMicroCols) {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      float* out = c + i * ldc;
      if (accumulate) {
        c0[i] = _mm256_add_ps(c0[i], _mm256_loadu_ps(out));
        c1[i] = _mm256_add_ps(c1[i], _mm256_loadu_ps(out + 8));
      }
      _mm256_storeu_ps(out, c0[i]);
      _mm256_storeu_ps(out + 8, c1[i]);
    }
    return;
  }
  alignas(32) float tile[kMicroCols];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    _mm256_store_ps(tile, c0[i]);
    _mm256_store_ps(tile + 8, c1[i]);
    float* out = c + i * ldc;
    for (int64_t j = 0; j < ncols; ++j) out[j] = (accumulate ? out[j] : 0.0f) + tile[j];
  }
}

// MicroKernel for 1 <= mr <= 6 rows.
ENVFORGE_TARGET_AVX2 inline void RunMicroKernel(int64_t mr, const float* a, int64_t lda, const float* b, int64_t ldb,
                                                int64_t kc, float* c, int64_t ldc, int64_t ncols, bool accumulate) {
  switch (mr) {
    case 1: MicroKernel<1>(a, lda, b, ldb, kc, c, ldc, ncols, accumulate); break;
    case 2: MicroKernel<2>(a, lda, b, ldb, kc, c, ldc, ncols, accumulate); break;
    case 3: MicroKernel<3>(a, lda, b, ldb, kc, c, ldc, ncols, accumulate); break;
    case 4: MicroKernel<4>(a, lda, b, ldb, kc, c, ldc, ncols, accumulate); break;
    case 5: MicroKernel<5>(a, lda, b, ldb, kc, c, ldc, ncols, accumulate); break;
    default: MicroKernel<6>(a, lda, b, ldb, kc, c, ldc, ncols, accumulate); break;
  }
}

// Packs 16 rows of kc floats (row j at rows + j * ld) as packed[k * 16 + j], 8x8 tiles at a time.
ENVFORGE_TARGET_AVX2 inline void TransposeRows16(const float* rows, int64_t ld, int64_t kc, float* packed) {
  int64_t kk = 0;
  for (; kk + 8 <= kc; kk += 8) {
    for (int half = 0; half < 2; ++half) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(rows + (half * 8 + j) * ld + kk);
      const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
      const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
      const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
      float* out = packed + kk * kMicroCols + half * 8;
      _mm256_storeu_ps(out + 0 * kMicroCols, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(out + 1 * kMicroCols, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(out + 2 * kMicroCols, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(out + 3 * kMicroCols, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(out + 4 * kMicroCols, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(out + 5 * kMicroCols, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(out + 6 * kMicroCols, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(out + 7 * kMicroCols, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
  }
  for (; kk < kc; ++kk)
    for (int j = 0; j < kMicroCols; ++j) packed[kk * kMicroCols + j] = rows[j * ld + kk];
}

}  // namespace envforge::kernels::internal

#endif  // ENVFORGE_KERNELS_X86
