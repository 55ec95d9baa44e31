// Scalar conversions between fp32 and the storage formats of checkpoints and caches: bfloat16,
// IEEE half (fp16) and float8 e4m3fn (OCP "FN" variant: no infinities, 0x7f/0xff are NaN, max
// finite 448). Float -> narrow conversions round to nearest, ties to even, as PyTorch/numpy-style
// casts do; float -> e4m3fn of a finite value beyond +-448 saturates to +-448 (callers clamp
// first anyway, dsa-engine.md section 3), NaN maps to NaN (0x7f).
#pragma once

#include <cstdint>
#include <cstring>

namespace envforge::kernels {

// The element type of a stored tensor (weights, caches).
enum class DType : unsigned char { kF32, kBF16, kF16, kF8E4M3 };
inline constexpr int DTypeSize(DType t) { return t == DType::kF32 ? 4 : (t == DType::kF8E4M3 ? 1 : 2); }
const char* DTypeName(DType t);  // "F32", "BF16", "F16", "F8_E4M3" (safetensors spelling)

inline float Bf16ToFloat(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t FloatToBf16(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Fp8E4M3ToFloat(uint8_t v);  // table lookup
uint8_t FloatToFp8E4M3(float f);
// The 256-entry decode table (index = the fp8 byte).
const float* Fp8E4M3Table();

// Rounds through the format and back (what storing then loading does).
inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }
inline float RoundToFp8E4M3(float f) { return Fp8E4M3ToFloat(FloatToFp8E4M3(f)); }

}  // namespace envforge::kernels
