// Lightning-indexer scores (indexer_scores.h).
//
// Fast path: a query's FP8 heads are decoded to fp32 once; keys are decoded 16 at a time and
// transposed, so the head x key dot products of a block are a small GEMM run by the 6x16
// micro-kernel; each tile is ReLU'd, weighted by its head weight and summed over heads.
// One query (decode of one sequence): threads split its keys. Several queries (prefill, or the
// decode rows of many sequences sharing one prompt prefix): threads split the key blocks, and each
// block is decoded and transposed once for all queries, whose (query, head) rows go through the
// micro-kernel 6 at a time. Every micro-kernel row and column is an independent fp32 accumulation
// over dim in the same order, so a (query, key) score is bitwise the same on either route.
// On AVX-512 CPUs both routes run the 24-row zmm micro-kernel instead (twice the FMA width); its
// accumulations are the same chains, so the scores are bitwise the AVX2 ones. With AVX512_BF16
// (and dim % 16 == 0) the dot products run as VDPBF16PS on swapped bf16 pairs (bf16_pair_kernels.h:
// FP8 operands make those the same chains again), twice the products per instruction on half the
// bytes; the head sums are shared, so these scores too are bitwise the AVX2 ones.
#include "kernels/cpu/indexer_scores.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/internal/bf16_pair_kernels.h"
#include "kernels/cpu/internal/cpu_features.h"
#include "kernels/cpu/internal/gemm_kernels.h"
#include "kernels/cpu/internal/gemm_kernels_avx512.h"
#include "kernels/cpu/internal/simd.h"
#include "kernels/cpu/parallel.h"

namespace envforge::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t KeyEnd(const IndexerScoresArgs& a, int64_t t) {
  if (a.key_end == nullptr) return a.keys_count;
  return std::clamp<int64_t>(a.key_end[t], 0, a.keys_count);
}

void DecodeCodes(const uint8_t* codes, int64_t count, float* out) {
  const float* table = Fp8E4M3Table();
  for (int64_t i = 0; i < count; ++i) out[i] = table[codes[i]];
}

// Scores keys [begin, end) of query t (end <= its key end) with plain loops; q holds the
// decoded query heads.
void ScoreKeysPortable(const IndexerScoresArgs& a, int64_t t, const float* q, int64_t begin, int64_t end, float* out) {
  std::vector<float> key(static_cast<size_t>(a.dim));
  const float* weights = a.head_weight + t * a.heads;
  for (int64_t s = begin; s < end; ++s) {
    DecodeCodes(a.keys + s * a.dim, a.dim, key.data());
    float total = 0.0f;
    for (int64_t j = 0; j < a.heads; ++j) {
      const float* qj = q + j * a.dim;
      float dot = 0.0f;
      for (int64_t d = 0; d < a.dim; ++d) dot += qj[d] * key[static_cast<size_t>(d)];
      total += weights[j] * std::max(dot, 0.0f);
    }
    out[s] = a.key_scale[s] * total;
  }
}

#if ENVFORGE_KERNELS_X86

constexpr int64_t kKeysPerBlock = internal::kMicroCols;

// Decodes keys [s0, min(s0 + 16, end)) (zero rows past end) and transposes them to [dim][16].
ENVFORGE_TARGET_AVX2 void DecodeKeyBlock(const IndexerScoresArgs& a, int64_t s0, int64_t end, float* keys,
                                         float* transposed) {
  const int64_t dim = a.dim;
  const int64_t count = std::min(kKeysPerBlock, end - s0);
  for (int64_t r = 0; r < kKeysPerBlock; ++r) {
    float* key = keys + r * dim;
    if (r < count) {
      const uint8_t* codes = a.keys + (s0 + r) * dim;
      for (int64_t d = 0; d < dim; d += 8) _mm256_storeu_ps(key + d, internal::DecodeFp8x8(codes + d));
    } else {
      std::fill(key, key + dim, 0.0f);
    }
  }
  internal::TransposeRows16(keys, dim, dim, transposed);
}

// Keys in blocks of 16: decode, transpose to [dim][16], then Z = Q_heads x K^T with the 6x16
// micro-kernel (heads are the broadcast rows) and a ReLU-weighted head sum over each tile.
ENVFORGE_TARGET_AVX2 void ScoreKeysAvx2(const IndexerScoresArgs& a, int64_t t, const float* q, int64_t begin,
                                        int64_t end, float* out) {
  const int64_t dim = a.dim;
  const float* weights = a.head_weight + t * a.heads;
  thread_local internal::AlignedFloats key_buffer, transposed_buffer;
  float* keys = key_buffer.Get(static_cast<size_t>(kKeysPerBlock * dim));
  float* transposed = transposed_buffer.Get(static_cast<size_t>(kKeysPerBlock * dim));
  alignas(32) float z[internal::kMicroRows * kKeysPerBlock];
  for (int64_t s0 = begin; s0 < end; s0 += kKeysPerBlock) {
    const int64_t count = std::min(kKeysPerBlock, end - s0);
    DecodeKeyBlock(a, s0, end, keys, transposed);
    __m256 sum0 = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
    const __m256 zero = _mm256_setzero_ps();
    for (int64_t j = 0; j < a.heads; j += internal::kMicroRows) {
      const int64_t mr = std::min<int64_t>(internal::kMicroRows, a.heads - j);
      internal::RunMicroKernel(mr, q + j * dim, dim, transposed, kKeysPerBlock, dim, z, kKeysPerBlock, kKeysPerBlock,
                               false);
      for (int64_t i = 0; i < mr; ++i) {
        const __m256 w = _mm256_set1_ps(weights[j + i]);
        sum0 = _mm256_fmadd_ps(w, _mm256_max_ps(_mm256_load_ps(z + i * kKeysPerBlock), zero), sum0);
        sum1 = _mm256_fmadd_ps(w, _mm256_max_ps(_mm256_load_ps(z + i * kKeysPerBlock + 8), zero), sum1);
      }
    }
    alignas(32) float sums[kKeysPerBlock];
    _mm256_store_ps(sums, sum0);
    _mm256_store_ps(sums + 8, sum1);
    for (int64_t r = 0; r < count; ++r) out[s0 + r] = a.key_scale[s0 + r] * sums[r];
  }
}

// max(v, 0) as _mm256_max_ps(v, zero) computes it per lane. (The masked form because GCC 12's
// _mm512_max_ps reads an "undefined" vector and trips -Wmaybe-uninitialized.)
ENVFORGE_TARGET_AVX512 inline __m512 Relu512(__m512 v, __m512 zero) {
  return _mm512_maskz_max_ps(static_cast<__mmask16>(0xffff), v, zero);
}

// sum_j weights[j] * relu(z[j * 16 + lane]) over the heads in order, 16 keys (lanes) at once: each
// lane does ScoreKeysAvx2's operations in its order.
ENVFORGE_TARGET_AVX512 inline __m512 WeightedReluSum512(const float* weights, const float* z, int64_t heads) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < heads; ++j) {
    sum = _mm512_fmadd_ps(_mm512_set1_ps(weights[j]), Relu512(_mm512_loadu_ps(z + j * kKeysPerBlock), zero), sum);
  }
  return sum;
}

// Writes key_scale * sums for keys [s0, s0 + count).
inline void StoreScaled(const IndexerScoresArgs& a, const float* sums, int64_t s0, int64_t count, float* out) {
  for (int64_t r = 0; r < count; ++r) out[r] = a.key_scale[s0 + r] * sums[r];
}

// The AVX-512 route of ScoreKeysAvx2: all heads of a key block in one RunMicroKernel512 call
// (one zmm of 16 keys per head), then the same ReLU-weighted head sum in head order, 16 lanes at
// once. Each lane does the operations of the AVX2 route in the same order: bitwise the same scores.
ENVFORGE_TARGET_AVX512 void ScoreKeysAvx512(const IndexerScoresArgs& a, int64_t t, const float* q, int64_t begin,
                                            int64_t end, float* out) {
  const int64_t dim = a.dim;
  const float* weights = a.head_weight + t * a.heads;
  thread_local internal::AlignedFloats key_buffer, transposed_buffer, z_buffer;
  float* keys = key_buffer.Get(static_cast<size_t>(kKeysPerBlock * dim));
  float* transposed = transposed_buffer.Get(static_cast<size_t>(kKeysPerBlock * dim));
  thread_local std::vector<float> q_packed;
  float* z = z_buffer.Get(static_cast<size_t>(a.heads * kKeysPerBlock));
  q_packed.resize(static_cast<size_t>(a.heads * dim));
  internal::PackRowsKMajor(q, a.heads, dim, dim, q_packed.data(), a.heads);
  alignas(64) float sums[kKeysPerBlock];
  for (int64_t s0 = begin; s0 < end; s0 += kKeysPerBlock) {
    const int64_t count = std::min(kKeysPerBlock, end - s0);
    DecodeKeyBlock(a, s0, end, keys, transposed);
    internal::RunMicroKernel512(a.heads, q_packed.data(), a.heads, transposed, dim, z);
    _mm512_store_ps(sums, WeightedReluSum512(weights, z, a.heads));
    StoreScaled(a, sums, s0, count, out + s0);
  }
}

// Decodes keys [s0, min(s0 + 16, end)) to swapped bf16 pairs (zero rows past end) and transposes
// them to [dim / 2][16] words (dim % 16 == 0).
ENVFORGE_TARGET_AVX512BF16 void DecodeKeyBlockPairs(const IndexerScoresArgs& a, int64_t s0, int64_t end,
                                                    uint32_t* words, uint32_t* transposed) {
  const int64_t half = a.dim / 2;
  const int64_t count = std::min(kKeysPerBlock, end - s0);
  for (int64_t r = 0; r < kKeysPerBlock; ++r) {
    uint32_t* key = words + r * half;
    if (r < count) {
      const uint8_t* codes = a.keys + (s0 + r) * a.dim;
      for (int64_t d = 0; d < a.dim; d += 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(key + d / 2), internal::Fp8x16ToSwappedPairs(codes + d));
      }
    } else {
      std::fill(key, key + half, 0u);
    }
  }
  internal::TransposeRows16(reinterpret_cast<const float*>(words), half, half, reinterpret_cast<float*>(transposed));
}

// ScoreKeysAvx512 with the dot products on swapped bf16 pairs (bitwise the same scores).
ENVFORGE_TARGET_AVX512BF16 void ScoreKeysBf16(const IndexerScoresArgs& a, int64_t t, int64_t begin, int64_t end,
                                              float* out) {
  const int64_t half = a.dim / 2;
  const float* weights = a.head_weight + t * a.heads;
  thread_local std::vector<uint32_t> words, transposed, q_pairs;
  thread_local internal::AlignedFloats z_buffer;
  words.resize(static_cast<size_t>(kKeysPerBlock * half));
  transposed.resize(words.size());
  q_pairs.resize(static_cast<size_t>(a.heads * half));
  float* z = z_buffer.Get(static_cast<size_t>(a.heads * kKeysPerBlock));
  internal::PackFp8RowsAsPairs(a.q + t * a.heads * a.dim, a.heads, a.dim, q_pairs.data(), a.heads);
  alignas(64) float sums[kKeysPerBlock];
  for (int64_t s0 = begin; s0 < end; s0 += kKeysPerBlock) {
    DecodeKeyBlockPairs(a, s0, end, words.data(), transposed.data());
    internal::RunMicroKernelBf16(a.heads, q_pairs.data(), a.heads, transposed.data(), half, z);
    _mm512_store_ps(sums, WeightedReluSum512(weights, z, a.heads));
    StoreScaled(a, sums, s0, std::min(kKeysPerBlock, end - s0), out + s0);
  }
}

// Queries scored per micro-kernel pass over a key block: bounds the z tile a thread keeps.
constexpr int64_t kQueriesPerTile = 64;

// Queries [t0, t1) (all of which see key s0) against the transposed block at s0: z rows are the
// queries' heads back to back, 6 per micro-kernel call; then per query the same ReLU-weighted
// head sum, in head order, as ScoreKeysAvx2.
ENVFORGE_TARGET_AVX2 void ScoreTileAvx2(const IndexerScoresArgs& a, const float* q, const float* transposed, int64_t s0,
                                        int64_t t0, int64_t t1, float* scores) {
  const int64_t dim = a.dim, rows = (t1 - t0) * a.heads;
  const int64_t count = std::min(kKeysPerBlock, a.keys_count - s0);
  thread_local internal::AlignedFloats z_buffer;
  float* z = z_buffer.Get(static_cast<size_t>(rows * kKeysPerBlock));
  for (int64_t r = 0; r < rows; r += internal::kMicroRows) {
    const int64_t mr = std::min<int64_t>(internal::kMicroRows, rows - r);
    internal::RunMicroKernel(mr, q + (t0 * a.heads + r) * dim, dim, transposed, kKeysPerBlock, dim,
                             z + r * kKeysPerBlock, kKeysPerBlock, kKeysPerBlock, false);
  }
  const __m256 zero = _mm256_setzero_ps();
  alignas(32) float sums[kKeysPerBlock];
  for (int64_t t = t0; t < t1; ++t) {
    const float* weights = a.head_weight + t * a.heads;
    const float* zt = z + (t - t0) * a.heads * kKeysPerBlock;
    __m256 sum0 = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
    for (int64_t j = 0; j < a.heads; ++j) {
      const __m256 w = _mm256_set1_ps(weights[j]);
      sum0 = _mm256_fmadd_ps(w, _mm256_max_ps(_mm256_loadu_ps(zt + j * kKeysPerBlock), zero), sum0);
      sum1 = _mm256_fmadd_ps(w, _mm256_max_ps(_mm256_loadu_ps(zt + j * kKeysPerBlock + 8), zero), sum1);
    }
    _mm256_store_ps(sums, sum0);
    _mm256_store_ps(sums + 8, sum1);
    float* row = scores + t * a.keys_count + s0;
    const int64_t visible = std::min(count, KeyEnd(a, t) - s0);
    for (int64_t r = 0; r < visible; ++r) row[r] = a.key_scale[s0 + r] * sums[r];
    std::fill(row + visible, row + count, kNegInf);
  }
}

// The per-query head sums of a z tile (queries [t0, t1), each query's head rows back to back) into
// the score rows at key block s0, 16 lanes at once in head order (bitwise the AVX2 tile's sums);
// keys at or past a query's key end get -inf.
ENVFORGE_TARGET_AVX512 void StoreTileSums512(const IndexerScoresArgs& a, const float* z, int64_t s0, int64_t t0,
                                             int64_t t1, float* scores) {
  const int64_t count = std::min(kKeysPerBlock, a.keys_count - s0);
  alignas(64) float sums[kKeysPerBlock];
  for (int64_t t = t0; t < t1; ++t) {
    _mm512_store_ps(sums,
                    WeightedReluSum512(a.head_weight + t * a.heads, z + (t - t0) * a.heads * kKeysPerBlock, a.heads));
    float* row = scores + t * a.keys_count + s0;
    const int64_t visible = std::min(count, KeyEnd(a, t) - s0);
    StoreScaled(a, sums, s0, visible, row);
    std::fill(row + visible, row + count, kNegInf);
  }
}

// ScoreTileAvx2 with AVX-512: every (query, head) row of the tile through RunMicroKernel512, then
// StoreTileSums512. q_packed: every query's heads packed k-major (PackRowsKMajor, stride
// queries * heads).
ENVFORGE_TARGET_AVX512 void ScoreTileAvx512(const IndexerScoresArgs& a, const float* q_packed, const float* transposed,
                                            int64_t s0, int64_t t0, int64_t t1, float* scores) {
  const int64_t rows = (t1 - t0) * a.heads;
  thread_local internal::AlignedFloats z_buffer;
  float* z = z_buffer.Get(static_cast<size_t>(rows * kKeysPerBlock));
  internal::RunMicroKernel512(rows, q_packed + t0 * a.heads, a.queries * a.heads, transposed, a.dim, z);
  StoreTileSums512(a, z, s0, t0, t1, scores);
}

// ScoreTileAvx512 on swapped bf16 pairs (PackFp8RowsAsPairs, stride queries * heads; the key block
// from DecodeKeyBlockPairs): bitwise the same scores.
ENVFORGE_TARGET_AVX512BF16 void ScoreTileBf16(const IndexerScoresArgs& a, const uint32_t* q_pairs,
                                              const uint32_t* transposed, int64_t s0, int64_t t0, int64_t t1,
                                              float* scores) {
  const int64_t rows = (t1 - t0) * a.heads;
  thread_local internal::AlignedFloats z_buffer;
  float* z = z_buffer.Get(static_cast<size_t>(rows * kKeysPerBlock));
  internal::RunMicroKernelBf16(rows, q_pairs + t0 * a.heads, a.queries * a.heads, transposed, a.dim / 2, z);
  StoreTileSums512(a, z, s0, t0, t1, scores);
}

// The queries of a multi-query call in the layout of the widest tile this CPU runs: decoded rows
// (AVX2 tiles), packed k-major (AVX-512 tiles) or swapped bf16 pairs k-major (AVX512_BF16 tiles).
struct QueryPanels {
  const float* decoded = nullptr;
  const float* packed = nullptr;
  const uint32_t* pairs = nullptr;
};

// Key blocks [block_begin, block_end) against every query, each block decoded (and transposed)
// once for all of them. Queries whose key end is at or before a block's start get -inf there
// without being scored.
void ScoreBlocks(const IndexerScoresArgs& a, const QueryPanels& q, int64_t block_begin, int64_t block_end,
                 float* scores) {
  thread_local internal::AlignedFloats key_buffer, transposed_buffer;
  // Floats, or (the pair route) half as many 32-bit words in the same buffers.
  float* keys = key_buffer.Get(static_cast<size_t>(kKeysPerBlock * a.dim));
  float* transposed = transposed_buffer.Get(static_cast<size_t>(kKeysPerBlock * a.dim));
  auto* key_words = reinterpret_cast<uint32_t*>(keys);
  auto* transposed_words = reinterpret_cast<uint32_t*>(transposed);
  for (int64_t block = block_begin; block < block_end; ++block) {
    const int64_t s0 = block * kKeysPerBlock;
    const int64_t count = std::min(kKeysPerBlock, a.keys_count - s0);
    if (q.pairs != nullptr) {
      DecodeKeyBlockPairs(a, s0, a.keys_count, key_words, transposed_words);
    } else {
      DecodeKeyBlock(a, s0, a.keys_count, keys, transposed);
    }
    int64_t t = 0;
    while (t < a.queries) {
      if (KeyEnd(a, t) <= s0) {
        std::fill_n(scores + t * a.keys_count + s0, count, kNegInf);
        ++t;
        continue;
      }
      // A run of consecutive queries that see this block, at most one tile.
      int64_t t1 = t + 1;
      while (t1 < a.queries && t1 - t < kQueriesPerTile && KeyEnd(a, t1) > s0) ++t1;
      if (q.pairs != nullptr) {
        ScoreTileBf16(a, q.pairs, transposed_words, s0, t, t1, scores);
      } else if (q.packed != nullptr) {
        ScoreTileAvx512(a, q.packed, transposed, s0, t, t1, scores);
      } else {
        ScoreTileAvx2(a, q.decoded, transposed, s0, t, t1, scores);
      }
      t = t1;
    }
  }
}

bool UseBf16For(const IndexerScoresArgs& a) { return internal::UseAvx512Bf16() && a.dim % 16 == 0; }

// The multi-query route (see the file comment): queries decoded once, threads over key blocks.
void ScoreQueriesByKeyBlocks(const IndexerScoresArgs& a, float* scores) {
  const int64_t rows = a.queries * a.heads;
  thread_local std::vector<float> q, q_packed;
  thread_local std::vector<uint32_t> q_pairs;
  QueryPanels panels;
  if (UseBf16For(a)) {
    q_pairs.resize(static_cast<size_t>(rows * a.dim / 2));
    internal::PackFp8RowsAsPairs(a.q, rows, a.dim, q_pairs.data(), rows);
    panels.pairs = q_pairs.data();
  } else {
    q.resize(static_cast<size_t>(rows * a.dim));
    DecodeCodes(a.q, rows * a.dim, q.data());
    panels.decoded = q.data();
    if (internal::UseAvx512()) {
      q_packed.resize(static_cast<size_t>(rows * a.dim));
      internal::PackRowsKMajor(q.data(), rows, a.dim, a.dim, q_packed.data(), rows);
      panels.packed = q_packed.data();
    }
  }
  const int64_t blocks = (a.keys_count + kKeysPerBlock - 1) / kKeysPerBlock;
  // About 256 (query, key) scores per chunk at least, so tiny calls stay inline.
  const int64_t grain = std::max<int64_t>(1, 16 / a.queries);
  ParallelFor(blocks, grain, [&](int64_t begin, int64_t end) { ScoreBlocks(a, panels, begin, end, scores); });
}

#endif  // ENVFORGE_KERNELS_X86

bool UseAvx2For(const IndexerScoresArgs& a) { return internal::UseAvx2() && a.dim % 8 == 0; }

// Query t, keys [begin, end): scores inside its causal range, -inf beyond it.
void ScoreRange(const IndexerScoresArgs& a, int64_t t, int64_t begin, int64_t end, float* row) {
  const int64_t visible_end = std::clamp(KeyEnd(a, t), begin, end);
#if ENVFORGE_KERNELS_X86
  if (UseAvx2For(a) && UseBf16For(a)) {  // reads the query's codes itself
    ScoreKeysBf16(a, t, begin, visible_end, row);
    std::fill(row + visible_end, row + end, kNegInf);
    return;
  }
#endif
  thread_local std::vector<float> q;
  q.resize(static_cast<size_t>(a.heads * a.dim));
  DecodeCodes(a.q + t * a.heads * a.dim, a.heads * a.dim, q.data());
#if ENVFORGE_KERNELS_X86
  if (UseAvx2For(a) && internal::UseAvx512()) {
    ScoreKeysAvx512(a, t, q.data(), begin, visible_end, row);
  } else if (UseAvx2For(a)) {
    ScoreKeysAvx2(a, t, q.data(), begin, visible_end, row);
  } else {
    ScoreKeysPortable(a, t, q.data(), begin, visible_end, row);
  }
#else
  ScoreKeysPortable(a, t, q.data(), begin, visible_end, row);
#endif
  std::fill(row + visible_end, row + end, kNegInf);
}

}  // namespace

void IndexerScores(const IndexerScoresArgs& args, float* scores) {
  const int64_t keys = args.keys_count;
#if ENVFORGE_KERNELS_X86
  if (args.queries > 1 && UseAvx2For(args)) {
    ScoreQueriesByKeyBlocks(args, scores);
    return;
  }
#endif
  if (args.queries >= 2 * ThreadCount()) {
    ParallelFor(args.queries, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) ScoreRange(args, t, 0, keys, scores + t * keys);
    });
    return;
  }
  for (int64_t t = 0; t < args.queries; ++t) {
    ParallelFor(keys, 256, [&](int64_t begin, int64_t end) { ScoreRange(args, t, begin, end, scores + t * keys); });
  }
}

namespace ref {

void IndexerScores(const IndexerScoresArgs& a, float* scores) {
  const float* table = Fp8E4M3Table();
  for (int64_t t = 0; t < a.queries; ++t) {
    const int64_t key_end = KeyEnd(a, t);
    for (int64_t s = 0; s < a.keys_count; ++s) {
      float& out = scores[t * a.keys_count + s];
      if (s >= key_end) {
        out = kNegInf;
        continue;
      }
      float total = 0.0f;
      for (int64_t j = 0; j < a.heads; ++j) {
        const uint8_t* qj = a.q + (t * a.heads + j) * a.dim;
        const uint8_t* k = a.keys + s * a.dim;
        float dot = 0.0f;
        for (int64_t d = 0; d < a.dim; ++d) dot += table[qj[d]] * table[k[d]];
        total += a.head_weight[t * a.heads + j] * std::max(dot, 0.0f);
      }
      out = a.key_scale[s] * total;
    }
  }
}

}  // namespace ref
}  // namespace envforge::kernels
