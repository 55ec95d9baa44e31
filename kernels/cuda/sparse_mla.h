// Sparse MLA attention in MQA mode on the GPU (dsa-engine.md 4.7, 8.1), the twin of
// kernels/cpu/sparse_attention.h SparseMqaAttention:
//   for token t, head h: z_s = scale * (Q[t][h] . K_s) over the selected slots s; p = softmax(z);
//   out[t][h] = sum_s p_s * K_s[0 : kv_rank]
// Q [tokens, heads, kv_rank + rope_dim] bf16 (the absorbed query [q~ | q_rope]); K_s is the
// dequantized latent row in cache slot s. BF16 tensor-core MMAs with fp32 accumulation, online
// softmax in fp32; rows are dequantized from FP8 to bf16 in the kernel.
//
// Cache rows use FlashMLA's FP8 format, one row of LatentRowBytes per slot, contiguous:
//   [kv_rank e4m3 codes][kv_rank / 128 fp32 scales][rope_dim bf16]   (656 B for 512 / 64)
// i.e. the three arrays of kernels::LatentCacheView interleaved per row (PackLatentRows).
// indices [tokens, topk] are physical slots (FlashMLA decode convention); entries < 0 or >= slots
// are skipped; a head with no valid slot gets zeros and lse = +inf.
//
// SparseMlaPrefill: one block per (token, group of heads), all topk slots in one pass — for many
// tokens. SparseMlaDecode: additionally splits each token's slots over several blocks and merges
// the partial softmax states (split-KV), so a small decode batch fills the GPU; it needs
// SparseMlaDecodeWorkspaceBytes of workspace.
//
// Shapes: kv_rank a multiple of 128 (<= 512), rope_dim a multiple of 16 (<= 64), heads >= 1 (any
// count; 64 and 128 are the fast paths), topk >= 1. InvalidArgument names the bad argument.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "kernels/cpu/sparse_attention.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

inline constexpr int64_t LatentRowBytes(int64_t kv_rank, int64_t rope_dim) {
  return kv_rank + kv_rank / 128 * 4 + rope_dim * 2;
}

struct SparseMlaArgs {
  const uint16_t* q = nullptr;  // [tokens, heads, kv_rank + rope_dim] bf16
  int64_t tokens = 0, heads = 0;
  const uint8_t* cache = nullptr;  // [slots, LatentRowBytes]
  int64_t slots = 0, kv_rank = 512, rope_dim = 64;
  const int32_t* indices = nullptr;  // [tokens, topk]
  int64_t topk = 0;
  float scale = 1.0f;
  uint16_t* out = nullptr;  // [tokens, heads, kv_rank] bf16
  float* lse = nullptr;     // [tokens, heads] natural-log sum-exp of z; nullable
};

Status SparseMlaPrefill(const SparseMlaArgs& args, cudaStream_t stream);

size_t SparseMlaDecodeWorkspaceBytes(int64_t tokens, int64_t heads, int64_t kv_rank, int64_t topk, int sm_count);
Status SparseMlaDecode(const SparseMlaArgs& args, void* workspace, size_t workspace_bytes, int sm_count,
                       cudaStream_t stream);

// Host helper: rows [0, view.rows) of a CPU latent cache view into contiguous slots of `out`
// ([view.rows, LatentRowBytes]).
void PackLatentRows(const LatentCacheView& view, uint8_t* out);

}  // namespace envforge::kernels::cuda
