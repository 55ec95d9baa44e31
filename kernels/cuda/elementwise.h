// Element-wise glue of the GPU engine (fp32 math), twins of the scalar code of the CPU forward:
//   SiluMul:      out[i] = silu(gate[i]) * up[i] for rows of `cols` at row strides (SwiGLU; the
//                 output may be bf16 for the next GEMM)
//   AddInPlace:   y[i] += alpha * x[i]
//   ScaleRowsAdd: y[r][c] += x[r][c] * row_scale[r] (weighted expert outputs into the residual)
//   ToBf16 / Bf16ToF32: conversions (round to nearest even, as kernels::FloatToBf16)
//   (SiluMul takes exactly one of out_f32 / out_bf16. ScaleRowsAdd adds with atomics, so row_of
//   may repeat (a row named once gets exactly y + x * s); negative row_of entries are skipped.)
//   GatherRows:   out[r] = table[ids[r]] widened to fp32 (an id outside [0, table_rows) gives zeros), table in any
//   kernels::DType (bf16, fp16,
//                 fp32; fp8 with 128x128 block scales) — the embedding lookup
#pragma once

#include <cstdint>

#include "base/status.h"
#include "kernels/cpu/float_formats.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

struct SiluMulArgs {
  const float* gate = nullptr;
  const float* up = nullptr;
  int64_t rows = 0, cols = 0, in_stride = 0;  // gate and up share the row stride (0: cols)
  float* out_f32 = nullptr;
  uint16_t* out_bf16 = nullptr;  // one of the two
  int64_t out_stride = 0;        // 0: cols
};
Status SiluMul(const SiluMulArgs& args, cudaStream_t stream);

Status AddInPlace(float* y, const float* x, int64_t n, float alpha, cudaStream_t stream);
Status ScaleRowsAdd(float* y, const float* x, const float* row_scale, const int32_t* row_of, int64_t rows, int64_t cols,
                    cudaStream_t stream);  // y[row_of[r]] += x[r] * s[r]
Status ToBf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);
Status Bf16ToF32(const uint16_t* x, int64_t n, float* out, cudaStream_t stream);

struct GatherRowsArgs {
  const void* table = nullptr;  // [table_rows, cols] in dtype
  DType dtype = DType::kBF16;
  const float* block_scales = nullptr;  // kF8E4M3: [ceil(rows/128), ceil(cols/128)]
  int64_t table_rows = 0, cols = 0;
  const int32_t* ids = nullptr;  // [count]
  int64_t count = 0;
  float* out = nullptr;  // [count, cols]
};
Status GatherRows(const GatherRowsArgs& args, cudaStream_t stream);

}  // namespace envforge::kernels::cuda
