// Exact fp32 dot-product chains with AVX512_BF16 for operands that are exactly bf16, as FP8 E4M3
// values are (4 significant bits, exponents well inside bf16's range).
//
// VDPBF16PS adds each lane's two products to its accumulator one at a time, the high (odd) half's
// product first, each add rounded to fp32 like an FMA. Storing element k in the high half and
// element k + 1 in the low half of a 32-bit word ("swapped pairs") makes a lane's chain
// acc += x[k] * y[k], then acc += x[k + 1] * y[k + 1]: the FMA chain over k in order of the fp32
// micro-kernels (gemm_kernels.h, gemm_kernels_avx512.h). The sums are then bitwise theirs when
// every product is exact in fp32 (two E4M3 values: at most 8 significant bits) and no partial sum
// is subnormal (E4M3 products are multiples of 2^-18, so every partial sum is 0 or at least
// 2^-18): the instruction's flush of subnormals never applies. One instruction does 32 products,
// twice an fp32 FMA's 16, on half the bytes.
#pragma once

#include <cstdint>

#include "kernels/cpu/internal/cpu_features.h"

#if ENVFORGE_KERNELS_X86
#include <immintrin.h>

namespace envforge::kernels::internal {

inline constexpr int kMicroRowsBf16 = 24;

// The swapped pair words of 16 consecutive FP8 E4M3 codes v[0..15]: word p (p < 8) holds bf16(v[2p])
// in its high half and bf16(v[2p + 1]) in its low half. The decode is DecodeFp8x8's (simd.h) at
// 16 lanes; a decoded value's fp32 bits below the top 16 are zero, so truncating to bf16 is exact.
ENVFORGE_TARGET_AVX512BF16 inline __m256i Fp8x16ToSwappedPairs(const uint8_t* codes) {
  // The zero-masked forms with an all-ones mask: GCC 12's plain forms read an "undefined" vector
  // and trip -Wmaybe-uninitialized.
  const auto all = static_cast<__mmask16>(0xffff);
  const __m512i wide = _mm512_maskz_cvtepi8_epi32(all, _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m512i bits =
      _mm512_and_si512(_mm512_maskz_slli_epi32(all, wide, 20), _mm512_set1_epi32(static_cast<int>(0x87f00000u)));
  const __m512 values = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p120f));
  const __m256i halves =
      _mm512_maskz_cvtepi32_epi16(all, _mm512_maskz_srli_epi32(all, _mm512_castps_si512(values), 16));
  // halves holds v[0], v[1], ... in order (v[2p] low, v[2p + 1] high in word p): swap the halves.
  return _mm256_or_si256(_mm256_slli_epi32(halves, 16), _mm256_srli_epi32(halves, 16));
}

// Swapped pair words of `rows` rows of `dim` E4M3 codes (dim % 16 == 0), k-major:
// packed[p * stride + i] = word p of row i, for the micro-kernel's broadcasts.
ENVFORGE_TARGET_AVX512BF16 inline void PackFp8RowsAsPairs(const uint8_t* codes, int64_t rows, int64_t dim,
                                                          uint32_t* packed, int64_t stride) {
  alignas(32) uint32_t words[8];
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t d = 0; d < dim; d += 16) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(words), Fp8x16ToSwappedPairs(codes + i * dim + d));
      for (int64_t w = 0; w < 8; ++w) packed[(d / 2 + w) * stride + i] = words[w];
    }
  }
}

// c[i * 16 + 0 : 16] = the fp32 chains over k < 2 * pairs of a's row i against b's 16 columns, for
// i < MR: a is swapped pairs k-major (a[p * stride + i]), b swapped pairs 16 columns wide
// (b[p * 16 + j], TransposeRows16's layout of 32-bit words).
template <int MR>
ENVFORGE_TARGET_AVX512BF16 inline void MicroKernelBf16(const uint32_t* a, int64_t stride, const uint32_t* b,
                                                       int64_t pairs, float* c) {
  __m512 acc[MR];
#pragma GCC unroll 24
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p, a += stride) {
    const __m512bh bp = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + p * 16));
#pragma GCC unroll 24
    for (int i = 0; i < MR; ++i) {
      acc[i] = _mm512_dpbf16_ps(acc[i], reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a[i]))), bp);
    }
  }
#pragma GCC unroll 24
  for (int i = 0; i < MR; ++i) _mm512_storeu_ps(c + i * 16, acc[i]);
}

// MicroKernelBf16 over `rows` rows of a k-major pair panel: passes of 24, then of 8, then the rest.
ENVFORGE_TARGET_AVX512BF16 inline void RunMicroKernelBf16(int64_t rows, const uint32_t* a, int64_t stride,
                                                          const uint32_t* b, int64_t pairs, float* c) {
  int64_t r = 0;
  for (; r + kMicroRowsBf16 <= rows; r += kMicroRowsBf16) {
    MicroKernelBf16<kMicroRowsBf16>(a + r, stride, b, pairs, c + r * 16);
  }
  for (; r + 8 <= rows; r += 8) MicroKernelBf16<8>(a + r, stride, b, pairs, c + r * 16);
  a += r;
  c += r * 16;
  switch (rows - r) {
    case 0: break;
    case 1: MicroKernelBf16<1>(a, stride, b, pairs, c); break;
    case 2: MicroKernelBf16<2>(a, stride, b, pairs, c); break;
    case 3: MicroKernelBf16<3>(a, stride, b, pairs, c); break;
    case 4: MicroKernelBf16<4>(a, stride, b, pairs, c); break;
    case 5: MicroKernelBf16<5>(a, stride, b, pairs, c); break;
    case 6: MicroKernelBf16<6>(a, stride, b, pairs, c); break;
    default: MicroKernelBf16<7>(a, stride, b, pairs, c); break;
  }
}

}  // namespace envforge::kernels::internal

#endif  // ENVFORGE_KERNELS_X86
