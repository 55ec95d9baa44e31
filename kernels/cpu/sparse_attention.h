// MLA attention in MQA mode over selected latent rows (dsa-engine.md 4.7), for one query token:
//   for each head h: z_s = scale * (q[h] . K_s) for s in the selection; p = softmax(z);
//   out[h] = sum_s p_s * K_s[0 : v_dim]
// q: [heads, qk_dim] fp32 (the absorbed query: [q~ (kv_rank) | q_rope (rope_dim)]). K_s is latent
// row s of the cache, qk_dim = kv_rank + rope_dim values, V = its first v_dim (= kv_rank) values.
// The selection is `indices[0, count)` (entries < 0 or >= cache rows are skipped), or, when
// indices is nullptr, rows [0, count) (dense causal attention over a prefix). A head with no
// valid row gets zeros. Softmax in fp32 with the running-max trick (online softmax).
//
// The latent cache is stored in the FP8 format of dsa-engine.md 5 (656 bytes per token for
// kv_rank 512 / rope 64): kv_rank fp8 values in groups of 128 with one fp32 scale per group, and
// rope_dim bf16 values. LatentCacheView points at the three arrays of one sequence and layer.
#pragma once

#include <cstdint>

namespace envforge::kernels {

struct LatentCacheView {
  const uint8_t* nope = nullptr;   // [rows, kv_rank] fp8 e4m3
  const float* scales = nullptr;   // [rows, kv_rank / 128]
  const uint16_t* rope = nullptr;  // [rows, rope_dim] bf16
  int64_t rows = 0;
  int64_t kv_rank = 512;
  int64_t rope_dim = 64;
};

// Decodes one row to fp32: out[kv_rank + rope_dim].
void DequantizeLatentRow(const LatentCacheView& cache, int64_t row, float* out);

struct SparseAttentionArgs {
  const float* q = nullptr;  // [heads, kv_rank + rope_dim]
  int64_t heads = 0;
  LatentCacheView cache;
  const int32_t* indices = nullptr;  // nullptr: rows [0, count)
  int64_t count = 0;
  float scale = 1.0f;
};

// out: [heads, kv_rank].
void SparseMqaAttention(const SparseAttentionArgs& args, float* out);

namespace ref {
void SparseMqaAttention(const SparseAttentionArgs& args, float* out);
}  // namespace ref

}  // namespace envforge::kernels
