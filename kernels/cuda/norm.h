// Row-wise normalisations on the GPU, twins of kernels/cpu/norm.h (fp32 math, one block per row):
//   RmsNorm:   out = x / sqrt(mean(x^2) + eps) * weight
//   LayerNorm: out = (x - mean) / sqrt(var + eps) * weight + bias   (biased variance)
// x rows at x_stride; results go to out_f32 and/or out_bf16 (either may be null, not both), rows
// at out_stride; out_f32 may alias x only with out_stride == x_stride. InvalidArgument names the bad argument.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

struct NormArgs {
  const float* x = nullptr;
  int64_t rows = 0, dim = 0, x_stride = 0;  // x_stride 0: dim
  const float* weight = nullptr;            // [dim]
  const float* bias = nullptr;              // [dim], LayerNorm only
  float eps = 1e-6f;
  float* out_f32 = nullptr;
  uint16_t* out_bf16 = nullptr;
  int64_t out_stride = 0;  // 0: dim
};
Status RmsNorm(const NormArgs& args, cudaStream_t stream);
Status LayerNorm(const NormArgs& args, cudaStream_t stream);

}  // namespace envforge::kernels::cuda
