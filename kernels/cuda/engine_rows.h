// Row movements and small fused element-wise steps of the GPU engine (inference/cuda_forward.h)
// that the op kernels do not cover; each mirrors a few lines of the CPU forward (inference/
// model.cc), fp32 math:
//   CopyColumnsToBf16: out[r * out_stride + c] = bf16(x[r * x_stride + c]) for c < cols (the q_rope
//                      part of each head into the absorbed query);
//   CopyRows:          out row r = src row ids[r], rows of row_bytes (a multiple of 4) bytes
//                      (gathers of token rows: MoE inputs, rows needing logits, indexer queries);
//   ScaleByProduct:    y[i] = y[i] * (c * s[i]) (indexer head weights times their q scale and the
//                      constant factor, in the CPU's order of operations);
//   CombineExperts:    x[t][d] += (shared ? shared[t][d] : 0) + sum_k weight[t][k] * ys[row[t][k]][d],
//                      k in slot order, slots with row < 0 adding nothing (MoE output into the
//                      residual, summed in the CPU's order).
// Host-side validation first (InvalidArgument naming the argument).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

Status CopyColumnsToBf16(const float* x, int64_t x_stride, int64_t rows, int64_t cols, uint16_t* out,
                         int64_t out_stride, cudaStream_t stream);

Status CopyRows(const void* src, const int32_t* ids, int64_t count, int64_t row_bytes, void* out, cudaStream_t stream);

Status ScaleByProduct(float* y, const float* s, float c, int64_t n, cudaStream_t stream);

struct CombineExpertsArgs {
  float* x = nullptr;             // [tokens, dim] residual stream, added to
  const float* shared = nullptr;  // [tokens, dim] shared expert output; nullable
  const float* ys = nullptr;      // [*, dim] routed expert outputs, one row per (token, slot)
  const int32_t* row = nullptr;   // [tokens, top_k] row of ys of each slot, -1: none
  const float* weight = nullptr;  // [tokens, top_k] routing weights
  int64_t tokens = 0, dim = 0, top_k = 0;
};
Status CombineExperts(const CombineExpertsArgs& args, cudaStream_t stream);

}  // namespace envforge::kernels::cuda
