// FP8 e4m3 block quantization on the GPU, the twin of kernels/cpu/fp8_quant.h ActQuantFp8 (group
// of 128 along each row, amax >= 1e-4, scale amax/448 or its UE8M0 power of two), plus the writer
// of FP8 latent cache rows (sparse_mla.h format):
//   WriteLatentRows: for token t, row slots[t] of `cache` <- [e4m3(c_kv[t]) per 128-group | the
//   group scales | bf16(k_rope[t])], as inference::KvCache::WriteLatent stores on the CPU. A
//   negative slot writes nothing; c_stride / r_stride 0 mean kv_rank / rope_dim; kv_rank must be a
//   positive multiple of 128.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

struct ActQuantArgs {
  const float* x = nullptr;
  int64_t rows = 0, cols = 0, x_stride = 0;  // 0: cols
  int64_t group = 128;
  bool pow2_scales = true;
  uint8_t* q = nullptr;     // [rows, cols]
  float* scales = nullptr;  // [rows, ceil(cols / group)]
};
Status ActQuantFp8(const ActQuantArgs& args, cudaStream_t stream);

struct WriteLatentRowsArgs {
  const float* c_kv = nullptr;    // [tokens, c_stride], first kv_rank values
  const float* k_rope = nullptr;  // [tokens, r_stride], first rope_dim values
  int64_t c_stride = 0, r_stride = 0;
  int64_t tokens = 0, kv_rank = 512, rope_dim = 64;
  bool pow2_scales = true;
  const int32_t* slots = nullptr;  // [tokens]
  uint8_t* cache = nullptr;        // [*, LatentRowBytes]
};
Status WriteLatentRows(const WriteLatentRowsArgs& args, cudaStream_t stream);

}  // namespace envforge::kernels::cuda
