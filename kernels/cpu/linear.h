// y = x * W^T for a weight matrix in any checkpoint format (the engine's GEMM / GEMV).
//
// W is [rows, cols] row-major ("out_features x in_features", as in safetensors). For kF8E4M3,
// `block_scale_inv` is the [ceil(rows/128), ceil(cols/128)] fp32 grid of dsa-engine.md 2.2:
// W[n,k] = fp8(W8[n,k]) * block_scale_inv[n/128][k/128]. Other dtypes have no scales.
//
// FP8 weights run W8A8 as the reference does (dsa-engine.md 3): each row of x is first quantized
// in 1x128 groups (ActQuantFp8 with `pow2_scales`, i.e. UE8M0 when the checkpoint's scale_fmt is
// ue8m0) and the product uses the dequantized values, accumulated in fp32. Other dtypes multiply
// fp32 activations by the weights widened to fp32.
//
// Linear (fast): threads over output rows (ParallelFor), AVX2/FMA when the CPU has them (runtime
// dispatch; the build never requires them), blocked for m > 1 so the weights stream from memory
// once per block of rows of x. ref::Linear is the plain triple loop it is tested against; the two
// agree within fp32 summation-order error.
#pragma once

#include <cstdint>

#include "kernels/cpu/float_formats.h"

namespace envforge::kernels {

struct WeightMatrix {
  DType dtype = DType::kF32;
  const void* data = nullptr;  // rows * cols elements; for fp8 one byte each
  int64_t rows = 0;
  int64_t cols = 0;
  const float* block_scale_inv = nullptr;  // kF8E4M3 only
  bool pow2_activation_scales = true;      // kF8E4M3 only: UE8M0 activation scales
};

// Widens row `row` of w to fp32 (scales applied): out[cols].
void DequantizeRow(const WeightMatrix& w, int64_t row, float* out);

// x: [m, w.cols] fp32 row-major; y: [m, w.rows] fp32. y may not alias x.
void Linear(const float* x, int64_t m, const WeightMatrix& w, float* y);

namespace ref {
void Linear(const float* x, int64_t m, const WeightMatrix& w, float* y);
}  // namespace ref

}  // namespace envforge::kernels
