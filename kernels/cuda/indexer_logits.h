// Lightning-indexer logits on the GPU (dsa-engine.md 3 fp8_index, 4.4-4.5, 8.2), the twin of
// kernels/cpu/indexer_scores.h:
//   logits[t][s] = key_scale[s] * sum_j head_weight[t][j] * max(0, Q[t][j] . K[s])
// Q and K are FP8 e4m3 codes, products exact, accumulated in fp32 (FP8 tensor-core MMA with fp32
// accumulators); head_weight already holds the query scales and constant factors.
//
// Prefill (IndexerLogitsPrefill): many queries against one contiguous key array (a chunk of
// concatenated requests, as DeepGEMM fp8_mqa_logits): query t scores keys [key_begin[t],
// key_end[t]) and every other entry of its row in [0, keys_count) is -inf. Causal prefill of one
// sequence is key_begin = 0, key_end[t] = position + 1.
//
// Decode (IndexerLogitsDecode): one query per sequence (batch of sequences) against a paged key
// cache, as DeepGEMM fp8_paged_mqa_logits: a page holds kIndexerPageTokens tokens laid out as
// [64 x dim fp8 codes][64 fp32 scales] (IndexerPageBytes); sequence b's token i lives in page
// block_table[b][i / 64], slot i % 64. Row b of logits gets context_len[b] scores and -inf in
// [context_len[b], logits_stride).
//
// Out-of-range inputs are defined, not errors: a prefill window is clamped (end to [0, keys_count],
// begin to [0, end], so an inverted window gives a row of -inf); in decode, a block_table entry
// outside [0, num_pages) is never read and its tokens score -inf, and context_len is clamped to
// min(max_pages_per_seq * 64, logits_stride).
//
// Shapes: dim in {32, 64, 128}; heads in [1, 128]; all device pointers 16-byte aligned; logits
// row stride a multiple of 4. InvalidArgument names the first bad argument (checked on the host
// before any launch).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

inline constexpr int64_t kIndexerPageTokens = 64;
inline constexpr int64_t IndexerPageBytes(int64_t dim) { return kIndexerPageTokens * (dim + 4); }

struct IndexerLogitsArgs {
  const uint8_t* q = nullptr;          // [queries, heads, dim]
  const float* head_weight = nullptr;  // [queries, heads]
  const uint8_t* keys = nullptr;       // [keys_count, dim]
  const float* key_scale = nullptr;    // [keys_count]
  const int32_t* key_begin = nullptr;  // [queries]; nullptr: 0
  const int32_t* key_end = nullptr;    // [queries]; nullptr: keys_count
  int64_t queries = 0, heads = 0, dim = 0, keys_count = 0;
  float* logits = nullptr;    // [queries, logits_stride]
  int64_t logits_stride = 0;  // >= keys_count
};
Status IndexerLogitsPrefill(const IndexerLogitsArgs& args, cudaStream_t stream);

struct PagedIndexerLogitsArgs {
  const uint8_t* q = nullptr;            // [batch, heads, dim]
  const float* head_weight = nullptr;    // [batch, heads]
  const uint8_t* pages = nullptr;        // [num_pages, IndexerPageBytes(dim)]
  const int32_t* block_table = nullptr;  // [batch, max_pages_per_seq]
  const int32_t* context_len = nullptr;  // [batch], each <= max_pages_per_seq * 64
  int64_t batch = 0, heads = 0, dim = 0, num_pages = 0, max_pages_per_seq = 0;
  float* logits = nullptr;    // [batch, logits_stride]
  int64_t logits_stride = 0;  // >= max_pages_per_seq * 64 is not required; >= every context_len
};
Status IndexerLogitsDecode(const PagedIndexerLogitsArgs& args, cudaStream_t stream);

// Host helper (tests, benchmarks, cache writers): stores token i of `tokens` contiguous keys
// ([tokens, dim] codes, [tokens] scales) into page page_of_token[i / 64], slot i % 64, of a host
// page array laid out as above.
void PackIndexerPages(const uint8_t* keys, const float* scales, int64_t tokens, int64_t dim,
                      const int32_t* page_of_block, uint8_t* pages);

}  // namespace envforge::kernels::cuda
