// Fused Walsh-Hadamard rotation + FP8 quantization of indexer vectors on the GPU (dsa-engine.md
// 4.4 steps 4-5), the twin of kernels/cpu HadamardTransform followed by ActQuantFp8 with one group
// per vector:
//   y = scale * H_dim x (Sylvester order, as kernels/cpu/hadamard.h), then amax = max(|y|, 1e-4),
//   s = amax / 448 (or 2^ceil(log2(amax / 448)) with pow2_scales), q = e4m3(clamp(y / s)).
// One vector of `dim` fp32 values per row (a query head or a key); dim in {32, 64, 128}.
// Outputs q [rows, dim] codes and scales [rows]. InvalidArgument names the bad argument.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

struct HadamardQuantArgs {
  const float* x = nullptr;  // [rows, dim]
  int64_t rows = 0, dim = 128;
  float scale = 0;  // usually dim^-0.5
  bool pow2_scales = true;
  uint8_t* q = nullptr;     // [rows, dim]
  float* scales = nullptr;  // [rows]
};
Status HadamardQuantFp8(const HadamardQuantArgs& args, cudaStream_t stream);

}  // namespace envforge::kernels::cuda
