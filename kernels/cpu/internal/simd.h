// AVX2 building blocks shared by the fast CPU kernels: widening 8 stored values (fp8 e4m3,
// bf16, fp16, fp32) to one __m256, horizontal sums, and an aligned scratch buffer. Every
// function carries ENVFORGE_TARGET_AVX2; call them only from functions that do too.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/cpu/internal/cpu_features.h"

#if ENVFORGE_KERNELS_X86
#include <immintrin.h>
#endif

namespace envforge::kernels::internal {

// A 64-byte aligned float buffer that only grows (per-thread scratch space).
class AlignedFloats {
 public:
  float* Get(size_t count) {
    if (count > capacity_) {
      size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
      data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
      capacity_ = count;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t capacity_ = 0;
};

// fp8 e4m3 -> fp32 without a table: place the 7 exponent/mantissa bits at the top of an fp32
// mantissa/exponent field and multiply by 2^(127-7) to fix the bias. Subnormal fp8 values become
// fp32 subnormals that the multiply scales exactly. The NaN codes (0x7f, 0xff) decode to +-480
// instead of NaN; quantizers never produce them (they clamp to +-448).
inline float Fp8BitsToFloat(uint8_t code) {
  uint32_t magnitude_bits = static_cast<uint32_t>(code & 0x7f) << 20;
  float magnitude;
  std::memcpy(&magnitude, &magnitude_bits, 4);
  magnitude *= 0x1p120f;
  return (code & 0x80) ? -magnitude : magnitude;
}

#if ENVFORGE_KERNELS_X86

ENVFORGE_TARGET_AVX2 inline __m256 DecodeFp8x8(const uint8_t* p) {
  // Sign-extending the byte and shifting it by 20 puts the 7 magnitude bits at 20..26 and copies
  // of the sign at 27..31; the mask keeps the magnitude and bit 31.
  __m256i codes = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  __m256i bits = _mm256_and_si256(_mm256_slli_epi32(codes, 20), _mm256_set1_epi32(static_cast<int>(0x87f00000u)));
  return _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_set1_ps(0x1p120f));
}

ENVFORGE_TARGET_AVX2 inline __m256 DecodeBf16x8(const uint16_t* p) {
  __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

ENVFORGE_TARGET_AVX2 inline __m256 DecodeF16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

ENVFORGE_TARGET_AVX2 inline float HorizontalSum(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

ENVFORGE_TARGET_AVX2 inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

#endif  // ENVFORGE_KERNELS_X86

}  // namespace envforge::kernels::internal
