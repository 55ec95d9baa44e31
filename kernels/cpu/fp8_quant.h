// FP8 e4m3 block quantization of activations (dsa-engine.md 3, act_quant).
//
// For each row of x ([rows, cols]) and each group of `group` consecutive elements (the last group
// of a row may be shorter): amax = max(|x|) over the group, at least 1e-4; the scale is
// amax / 448, or with pow2_scales 2^ceil(log2(amax / 448)) (UE8M0); q = fp8(clamp(x / scale,
// -448, 448)). scales is [rows, ceil(cols / group)].
#pragma once

#include <cstdint>

namespace envforge::kernels {

void ActQuantFp8(const float* x, int64_t rows, int64_t cols, int64_t group, bool pow2_scales, uint8_t* q,
                 float* scales);
// Quantize-dequantize in place: x <- fp8(x / s) * s per group (what W8A8 and the FP8 caches see).
void FakeQuantFp8(float* x, int64_t rows, int64_t cols, int64_t group, bool pow2_scales);
// The scale one group gets (exposed for tests and for the cache writers).
float Fp8GroupScale(float amax, bool pow2_scales);

namespace ref {
// The definition above written out plainly, for tests: one thread, the UE8M0 scale as
// 2^ceil(log2(amax / 448)) and codes through the scalar FloatToFp8E4M3 (float_formats.h). Codes
// and scales equal ActQuantFp8's bit for bit.
void ActQuantFp8(const float* x, int64_t rows, int64_t cols, int64_t group, bool pow2_scales, uint8_t* q,
                 float* scales);
}  // namespace ref

}  // namespace envforge::kernels
