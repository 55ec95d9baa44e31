#include "kernels/cpu/float_formats.h"

#include <array>
#include <cmath>

namespace envforge::kernels {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF8E4M3: return "F8_E4M3";
  }
  return "?";
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ffu;
      bits = sign | static_cast<uint32_t>(127 - 15 - shift + 1) << 23 | mantissa << 13;
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | mantissa << 13;
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (abs < 0x38800000u) {                        // below the smallest normal half: subnormal
    float magnitude;
    std::memcpy(&magnitude, &abs, 4);
    // Subnormal halves are multiples of 2^-24; nearbyint rounds ties to even.
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - (static_cast<uint32_t>(127 - 15) << 23)) >> 13);
}

namespace {

float DecodeFp8(uint8_t v) {
  int sign = v >> 7;
  int exponent = (v >> 3) & 0xf;
  int mantissa = v & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                  : std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  return sign ? -magnitude : magnitude;
}

const std::array<float, 256>& Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = DecodeFp8(static_cast<uint8_t>(i));
    return t;
  }();
  return table;
}

}  // namespace

const float* Fp8E4M3Table() { return Table().data(); }
float Fp8E4M3ToFloat(uint8_t v) { return Table()[v]; }

uint8_t FloatToFp8E4M3(float f) {
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;  // saturate to the largest finite value
  // The representable magnitudes are a step function; find the quantum of a's binade.
  int exponent;
  std::frexp(a, &exponent);  // a = m * 2^exponent, m in [0.5, 1)
  int unbiased = exponent - 1;
  if (unbiased < -6) unbiased = -6;  // subnormal range: quantum 2^-9
  float quantum = std::ldexp(1.0f, unbiased - 3);
  float q = std::nearbyint(a / quantum) * quantum;  // ties to even (default rounding mode)
  // Encode q exactly.
  if (q == 0.0f) return sign;
  int e;
  float m = std::frexp(q, &e);  // q = m * 2^e
  int biased = e - 1 + 7;
  if (biased <= 0) {  // subnormal: q = mantissa * 2^-9
    return sign | static_cast<uint8_t>(std::lround(q * 512.0f));
  }
  int mantissa = static_cast<int>(std::lround((m * 2.0f - 1.0f) * 8.0f));
  return sign | static_cast<uint8_t>(biased << 3 | mantissa);
}

}  // namespace envforge::kernels
