// Branch-light fp32 -> fp8 e4m3 rounding for the quantizers' inner loops. Bit-identical to
// FloatToFp8E4M3 followed by Fp8E4M3ToFloat for inputs already clamped to [-448, 448] (the
// quantizers clamp first); NaN stays NaN. The kernel tests check this over many values.
#pragma once

#include <cstdint>
#include <cstring>

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

}  // namespace envforge::kernels::internal
