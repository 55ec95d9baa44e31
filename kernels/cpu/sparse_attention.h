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
// Order of the sums (AVX2 path): the selected rows are taken in chunks of kAttentionChunkRows, each
// chunk an online-softmax pass in blocks of 16 from a fresh state, and the chunks' partial results
// merged left to right. That order is fixed by the rows alone, so a query's output is the same bit
// for bit whatever the thread count, whichever other queries ran beside it, and whether it ran
// alone, in a decode batch or as one row of a prefill (the engine's batching-independent tokens
// rest on it). The portable path (no AVX2) keeps its own order, also independent of threads.
//
// Threading: SparseMqaAttention parallelises over chunks when there are several, else over heads,
// on the kernels' pool; called from inside a ParallelFor body (one sequence per item) it runs
// inline on that thread.
//
// DenseMqaAttentionGroup: many dense queries (indices == nullptr) that read the same rows at the
// start of their selections -- the n episodes of one task over their shared prompt, or the rows of
// one prefill -- at once. Each chunk of the shared rows is dequantized once per thread for the
// whole group and its scores and value sums run as GEMMs over all the group's heads, instead of
// once per query. Each output equals SparseMqaAttention(queries[i]) bit for bit.
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
#include <span>

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

// Rows per chunk of the fixed summation order (see the file comment); a multiple of 16.
inline constexpr int64_t kAttentionChunkRows = 256;

// out: [heads, kv_rank].
void SparseMqaAttention(const SparseAttentionArgs& args, float* out);

// outs[i] ([heads, kv_rank]) = SparseMqaAttention(queries[i]). Contract: every query is dense
// (indices == nullptr) with the same heads, scale, kv_rank and rope_dim, and its entries
// [0, shared_rows) name the same cache rows as every other query's (the same shared prefix, or the
// same sequence) with count >= shared_rows. Only whole chunks of shared_rows are shared; the rest
// of each selection runs per query. Parallel over the queries.
void DenseMqaAttentionGroup(std::span<const SparseAttentionArgs> queries, int64_t shared_rows,
                            std::span<float* const> outs);

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
