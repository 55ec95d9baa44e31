// Rotary embedding on the GPU, the twin of kernels/cpu/rope.h ApplyRope: for token t (position
// positions[t]) and each of `count` vectors of that token (vector j at x + t * token_stride +
// j * vector_stride), rotate rotary_dim values with angles pos * freqs[i] (fp32; the CPU computes
// the angle in double and rounds, so the GPU computes pos * f in double too). Pairing as
// kernels::RopeLayout: interleaved (2i, 2i+1) or half (i, i + rotary_dim / 2).
// vector_stride 0 means rotary_dim and token_stride 0 means count * vector_stride; rotary_dim must
// be even and <= 1024; overlapping vectors (vector_stride < rotary_dim with count > 1) are refused.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

struct RopeArgs {
  float* x = nullptr;
  int64_t tokens = 0, count = 1;
  int64_t token_stride = 0, vector_stride = 0;  // in floats
  int rotary_dim = 64;
  const int32_t* positions = nullptr;  // [tokens] device
  const float* freqs = nullptr;        // [rotary_dim / 2] device
  RopeLayout layout = RopeLayout::kInterleaved;
};
Status ApplyRope(const RopeArgs& args, cudaStream_t stream);

}  // namespace envforge::kernels::cuda
