// Lightning-indexer scores (dsa-engine.md 4.4-4.5):
//   score[t][s] = key_scale[s] * sum_j head_weight[t][j] * max(0, Q[t][j] . K[s])
// Q: FP8 codes [queries, heads, dim] (decoded with the e4m3 table), K: FP8 codes [keys, dim],
// key_scale [keys], head_weight [queries, heads] fp32 (the caller folds in the query scales and
// the constant factors). Products are exact fp32 products of the decoded values, accumulated in
// fp32. Query t scores keys [0, key_end[t]); entries s >= key_end[t] are set to -inf (causal).
// scores: [queries, keys] row-major (row stride = keys).
//
// IndexerScores (fast) uses AVX2/FMA when present; ref::IndexerScores is the plain loop. One query
// (decode): threads split its keys. Several queries (prefill, or the decode rows of many sequences
// against one shared prompt prefix): each block of 16 keys is decoded once for all queries and
// threads split the key blocks. The fast result of a (query, key) pair is bitwise the same whatever
// the other queries of the call, so scoring rows together or one at a time selects the same keys.
#pragma once

#include <cstdint>

namespace envforge::kernels {

struct IndexerScoresArgs {
  const uint8_t* q = nullptr;          // [queries, heads, dim]
  const float* head_weight = nullptr;  // [queries, heads]
  const uint8_t* keys = nullptr;       // [keys, dim]
  const float* key_scale = nullptr;    // [keys]
  const int64_t* key_end = nullptr;    // [queries]; nullptr: every query sees all keys
  int64_t queries = 0, heads = 0, dim = 0, keys_count = 0;
};

void IndexerScores(const IndexerScoresArgs& args, float* scores);

namespace ref {
void IndexerScores(const IndexerScoresArgs& args, float* scores);
}  // namespace ref

}  // namespace envforge::kernels
