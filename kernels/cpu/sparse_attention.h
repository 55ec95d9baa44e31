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
//
// Two segments (a forked sequence: a shared prompt prefix plus its private rows): with
// suffix.rows > 0, a selection entry e >= suffix_begin reads row e - suffix_begin of `suffix`
// (skipped past suffix.rows) and an entry e < suffix_begin reads row e of `cache`; so absolute
// positions index both without copying rows. suffix.rows == 0 (the default) is the one-segment
// case above. The two views must have the same kv_rank and rope_dim.
//
// Threading: SparseMqaAttention parallelises over heads on the kernels' pool; called from inside
// a ParallelFor body (one sequence per item) it runs inline on that thread.
//
// AbsorbQueries / ProjectValues are the per-head products around the attention (4.7) with
// kv_b_proj W = [heads * (nope + v_dim), kv_rank] in its stored dtype (no activation
// quantization, as the absorbed mode of the reference):
//   AbsorbQueries: q_out[t, h, 0 : kv_rank] = sum_{d < nope} q[t, h, d] * W[h * (nope + v_dim) + d, :]
//   ProjectValues: u[t, h, v] = sum_c o[t, h, c] * W[h * (nope + v_dim) + nope + v, c]
// With few tokens (decode) they stream W once in its stored form (fp8: a quarter of the bytes of
// an fp32 copy); with many tokens they run the register-blocked GEMM over `dequantized` (the fp32
// copy of W, when given). Both parallelise over heads and column blocks.
#pragma once

#include <cstdint>

#include "kernels/cpu/linear.h"

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
  LatentCacheView suffix;    // second segment; rows == 0: none
  int64_t suffix_begin = 0;  // selection entry of suffix row 0
};

// out: [heads, kv_rank].
void SparseMqaAttention(const SparseAttentionArgs& args, float* out);

struct KvbProjection {
  WeightMatrix w;                      // kv_b_proj, [heads * (nope + v_dim), kv_rank]
  const float* dequantized = nullptr;  // optional fp32 copy of w (row-major), for many tokens
  int64_t heads = 0, nope = 0, v_dim = 0;
};

// q: [tokens, heads, q_stride] (the first nope values of each head are q^N); q_out: [tokens,
// heads, out_stride], its first kv_rank values per head written, the rest untouched.
void AbsorbQueries(const KvbProjection& p, const float* q, int64_t tokens, int64_t q_stride, float* q_out,
                   int64_t out_stride);
// o: [tokens, heads, kv_rank]; u: [tokens, heads, v_dim].
void ProjectValues(const KvbProjection& p, const float* o, int64_t tokens, float* u);

namespace ref {
void SparseMqaAttention(const SparseAttentionArgs& args, float* out);
void AbsorbQueries(const KvbProjection& p, const float* q, int64_t tokens, int64_t q_stride, float* q_out,
                   int64_t out_stride);
void ProjectValues(const KvbProjection& p, const float* o, int64_t tokens, float* u);
}  // namespace ref

}  // namespace envforge::kernels
