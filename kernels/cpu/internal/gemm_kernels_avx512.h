// The AVX-512 counterpart of gemm_kernels.h's micro-kernel, for B panels packed 16 columns wide
// (TransposeRows16's layout): each row of A gets one zmm accumulator holding its 16 columns, so up
// to 24 rows run per pass (24 accumulators, the B row and a broadcast fit the 32 registers) and a
// pass costs one B load per 24 FMAs. Every output is one fp32 FMA chain over k in order, exactly as
// in the AVX2 kernel, so both kernels produce bitwise the same C.
#pragma once

#include <cstdint>

#include "kernels/cpu/internal/cpu_features.h"

#if ENVFORGE_KERNELS_X86
#include <immintrin.h>

namespace envforge::kernels::internal {

inline constexpr int kMicroRows512 = 24;

// A's rows packed k-major: packed[k * stride + i] = a[i * lda + k] for i < rows, k < kc, so that a
// micro-kernel pass reads its rows' k-th values at one base pointer plus constant offsets (24 row
// pointers would not fit the general registers).
inline void PackRowsKMajor(const float* a, int64_t rows, int64_t lda, int64_t kc, float* packed, int64_t stride) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < kc; ++k) packed[k * stride + i] = a[i * lda + k];
  }
}

// c[i * 16 + 0 : 16] = sum_{k < kc} a[k * stride + i] * b[k * 16 + 0 : 16] for i < MR.
template <int MR>
ENVFORGE_TARGET_AVX512 inline void MicroKernel512(const float* a, int64_t stride, const float* b, int64_t kc,
                                                  float* c) {
  __m512 acc[MR];
#pragma GCC unroll 24
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k, a += stride) {
    const __m512 bk = _mm512_loadu_ps(b + k * 16);
#pragma GCC unroll 24
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), bk, acc[i]);
  }
#pragma GCC unroll 24
  for (int i = 0; i < MR; ++i) _mm512_storeu_ps(c + i * 16, acc[i]);
}

// MicroKernel512 over `rows` rows of a k-major panel (PackRowsKMajor): passes of 24, then of 8,
// then the rest.
ENVFORGE_TARGET_AVX512 inline void RunMicroKernel512(int64_t rows, const float* a, int64_t stride, const float* b,
                                                     int64_t kc, float* c) {
  int64_t r = 0;
  for (; r + kMicroRows512 <= rows; r += kMicroRows512) MicroKernel512<kMicroRows512>(a + r, stride, b, kc, c + r * 16);
  for (; r + 8 <= rows; r += 8) MicroKernel512<8>(a + r, stride, b, kc, c + r * 16);
  a += r;
  c += r * 16;
  switch (rows - r) {
    case 0: break;
    case 1: MicroKernel512<1>(a, stride, b, kc, c); break;
    case 2: MicroKernel512<2>(a, stride, b, kc, c); break;
    case 3: MicroKernel512<3>(a, stride, b, kc, c); break;
    case 4: MicroKernel512<4>(a, stride, b, kc, c); break;
    case 5: MicroKernel512<5>(a, stride, b, kc, c); break;
    case 6: MicroKernel512<6>(a, stride, b, kc, c); break;
    default: MicroKernel512<7>(a, stride, b, kc, c); break;
  }
}

}  // namespace envforge::kernels::internal

#endif  // ENVFORGE_KERNELS_X86
