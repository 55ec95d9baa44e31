// MQA-mode sparse attention over the FP8 latent cache (sparse_attention.h).
//
// Fast path: the valid selected rows are processed in chunks of kAttentionChunkRows, each in blocks
// of 16. Per block a pass dequantizes the 16 latent rows once (fp32, 16 x 576 floats, plus a
// transposed copy), computes the scores of its query rows (heads) as a small GEMM (6 rows x 16
// per micro-kernel call), and folds the block into each row's output with the online-softmax update
//   m' = max(m, max z), o <- o * e^(m - m') + sum_b e^(z_b - m') row_b, l likewise,
// the value sum again a 6x16 micro-kernel GEMM; chunks merge left to right and o is divided by l at
// the end. All heads share the rows (MQA), which is what makes blocking pay: the row traffic is
// per block, not per head -- and with DenseMqaAttentionGroup not per query either.
#include "kernels/cpu/sparse_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/internal/cpu_features.h"
#include "kernels/cpu/internal/exp_avx2.h"
#include "kernels/cpu/internal/gemm_kernels.h"
#include "kernels/cpu/internal/simd.h"
#include "kernels/cpu/parallel.h"

namespace envforge::kernels {
namespace {

constexpr int64_t kScaleGroup = 128;
constexpr int64_t kBlockRows = 8;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t ScaleGroups(const LatentCacheView& c) { return (c.kv_rank + kScaleGroup - 1) / kScaleGroup; }
int64_t RowWidth(const LatentCacheView& c) { return c.kv_rank + c.rope_dim; }

// A selected row that exists: the segment it lives in and its row there.
struct RowRef {
  const LatentCacheView* view;
  int64_t row;
};

// The selected rows that exist, in selection order (sparse_attention.h: two segments). The vector
// is per thread and reused, so a decode step allocates nothing here.
const std::vector<RowRef>& ValidRows(const SparseAttentionArgs& a) {
  thread_local std::vector<RowRef> rows;
  rows.clear();
  rows.reserve(static_cast<size_t>(std::max<int64_t>(a.count, 0)));
  const bool two_segments = a.suffix.rows > 0;
  for (int64_t i = 0; i < a.count; ++i) {
    const int64_t entry = a.indices != nullptr ? a.indices[i] : i;
    if (entry < 0) continue;
    if (two_segments && entry >= a.suffix_begin) {
      if (entry - a.suffix_begin < a.suffix.rows) rows.push_back({&a.suffix, entry - a.suffix_begin});
    } else if (entry < a.cache.rows) {
      rows.push_back({&a.cache, entry});
    }
  }
  return rows;
}

// Online-softmax state of one head.
struct HeadState {
  float max = kNegInf;
  float sum = 0.0f;
};

// ---------------------------------------------------------------------------------------------
// Portable block kernels.

void ScoreBlockPortable(const float* q, const float* block, int64_t rows, int64_t width, float scale, float* z) {
  for (int64_t b = 0; b < rows; ++b) {
    float dot = 0.0f;
    for (int64_t d = 0; d < width; ++d) dot += q[d] * block[b * width + d];
    z[b] = dot * scale;
  }
}

// Folds the block's scores z into the state and output row o (v_dim values).
void UpdateHeadPortable(HeadState& state, const float* z, const float* block, int64_t rows, int64_t width,
                        int64_t v_dim, float* o) {
  float block_max = kNegInf;
  for (int64_t b = 0; b < rows; ++b) block_max = std::max(block_max, z[b]);
  const float new_max = std::max(state.max, block_max);
  const float correction = state.max == kNegInf ? 0.0f : std::exp(state.max - new_max);
  float p[kBlockRows];
  float block_sum = 0.0f;
  for (int64_t b = 0; b < rows; ++b) {
    p[b] = std::exp(z[b] - new_max);
    block_sum += p[b];
  }
  for (int64_t d = 0; d < v_dim; ++d) {
    float acc = o[d] * correction;
    for (int64_t b = 0; b < rows; ++b) acc += p[b] * block[b * width + d];
    o[d] = acc;
  }
  state.sum = state.sum * correction + block_sum;
  state.max = new_max;
}

void DequantizeBlockPortable(const RowRef* rows, int64_t count, float* block) {
  for (int64_t b = 0; b < count; ++b)
    DequantizeLatentRow(*rows[b].view, rows[b].row, block + b * RowWidth(*rows[b].view));
}

void AttendHeadsPortable(const SparseAttentionArgs& a, const std::vector<RowRef>& rows, int64_t h0, int64_t h1,
                         float* out) {
  const int64_t width = RowWidth(a.cache), v_dim = a.cache.kv_rank;
  std::vector<float> block(static_cast<size_t>(kBlockRows * width));
  std::vector<HeadState> states(static_cast<size_t>(h1 - h0));
  std::fill(out + h0 * v_dim, out + h1 * v_dim, 0.0f);
  const int64_t n = static_cast<int64_t>(rows.size());
  float z[kBlockRows];
  for (int64_t start = 0; start < n; start += kBlockRows) {
    const int64_t count = std::min(kBlockRows, n - start);
    DequantizeBlockPortable(rows.data() + start, count, block.data());
    for (int64_t h = h0; h < h1; ++h) {
      ScoreBlockPortable(a.q + h * width, block.data(), count, width, a.scale, z);
      UpdateHeadPortable(states[static_cast<size_t>(h - h0)], z, block.data(), count, width, v_dim, out + h * v_dim);
    }
  }
  for (int64_t h = h0; h < h1; ++h) {
    const float sum = states[static_cast<size_t>(h - h0)].sum;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int64_t d = 0; d < v_dim; ++d) out[h * v_dim + d] *= inv;
  }
}

#if ENVFORGE_KERNELS_X86

constexpr int64_t kFastBlockRows = internal::kMicroCols;  // 16 rows: one micro-kernel width
static_assert(kAttentionChunkRows % kFastBlockRows == 0, "a chunk is whole blocks");
// Queries a thread takes through the shared rows together: enough head rows for full 6-row tiles
// and to spread each dequantized block over many queries, few enough to keep the scratch in cache.
constexpr int64_t kGroupQueries = 32;

bool FastPathFits(const SparseAttentionArgs& a) {
  return internal::UseAvx2() && a.cache.kv_rank % 8 == 0 && a.cache.rope_dim % 8 == 0;
}

// Dequantizes the block's rows to block[b * width] (rows past count are zeros).
ENVFORGE_TARGET_AVX2 void DequantizeBlockAvx2(const RowRef* rows, int64_t count, int64_t width, float* block) {
  for (int64_t b = 0; b < kFastBlockRows; ++b) {
    float* dst = block + b * width;
    if (b >= count) {  // padding rows: finite zeros, masked out of the softmax
      std::fill(dst, dst + width, 0.0f);
      continue;
    }
    const LatentCacheView& c = *rows[b].view;
    const int64_t groups = ScaleGroups(c);
    const int64_t row = rows[b].row;
    const uint8_t* nope = c.nope + row * c.kv_rank;
    const float* scales = c.scales + row * groups;
    for (int64_t d = 0; d < c.kv_rank; d += 8) {
      const __m256 v = internal::DecodeFp8x8(nope + d);
      _mm256_storeu_ps(dst + d, _mm256_mul_ps(v, _mm256_set1_ps(scales[d / kScaleGroup])));
    }
    const uint16_t* rope = c.rope + row * c.rope_dim;
    for (int64_t d = 0; d < c.rope_dim; d += 8) _mm256_storeu_ps(dst + c.kv_rank + d, internal::DecodeBf16x8(rope + d));
  }
}

// Folds 16 raw scores z (one head, masked beyond count) into the head's state: writes
// p = e^(scale z - m') and returns the correction e^(m - m') for the output row.
ENVFORGE_TARGET_AVX2 float SoftmaxStepAvx2(HeadState& state, const float* z, float scale, int64_t count, float* p) {
  const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 count_v = _mm256_set1_ps(static_cast<float>(count));
  const __m256 valid0 = _mm256_cmp_ps(lane, count_v, _CMP_LT_OQ);
  const __m256 valid1 = _mm256_cmp_ps(_mm256_add_ps(lane, _mm256_set1_ps(8.0f)), count_v, _CMP_LT_OQ);
  const __m256 neg_inf = _mm256_set1_ps(kNegInf), scale_v = _mm256_set1_ps(scale);
  const __m256 z0 = _mm256_blendv_ps(neg_inf, _mm256_mul_ps(_mm256_loadu_ps(z), scale_v), valid0);
  const __m256 z1 = _mm256_blendv_ps(neg_inf, _mm256_mul_ps(_mm256_loadu_ps(z + 8), scale_v), valid1);
  const float new_max = std::max(state.max, internal::HorizontalMax(_mm256_max_ps(z0, z1)));
  const float correction = state.max == kNegInf ? 0.0f : std::exp(state.max - new_max);
  const __m256 max_v = _mm256_set1_ps(new_max);
  const __m256 p0 = internal::ExpAvx2(_mm256_sub_ps(z0, max_v));
  const __m256 p1 = internal::ExpAvx2(_mm256_sub_ps(z1, max_v));
  _mm256_storeu_ps(p, p0);
  _mm256_storeu_ps(p + 8, p1);
  state.sum = state.sum * correction + internal::HorizontalSum(_mm256_add_ps(p0, p1));
  state.max = new_max;
  return correction;
}

ENVFORGE_TARGET_AVX2 void ScaleRowAvx2(float* row, int64_t n, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  for (int64_t d = 0; d < n; d += 8) _mm256_storeu_ps(row + d, _mm256_mul_ps(_mm256_loadu_ps(row + d), f));
}

// One online-softmax pass over rows[0, n) (blocks of 16 from rows[0]) for m query rows (q + r *
// width: each one head of one query) from a fresh state: out [m, v_dim] gets the unnormalised
// sums and states[m] the softmax states. Per block, Z = Q x rows^T and O = O * correction + P x V
// run as 6x16 micro-kernel GEMMs over tiles of 6 query rows; every value of a query row is
// computed the same whichever rows share its tile (the micro-kernel accumulates each output on
// its own), which is what lets a group of queries share the blocks (DenseMqaAttentionGroup).
ENVFORGE_TARGET_AVX2 void PassAvx2(const float* q, int64_t m, int64_t width, int64_t v_dim, const RowRef* rows,
                                   int64_t n, float scale, float* out, HeadState* states) {
  constexpr int64_t kTileRows = internal::kMicroRows;
  thread_local internal::AlignedFloats block_buffer, transposed_buffer;
  // +16: the micro-kernel reads a full 16-wide panel at the last (partial) value columns.
  float* block = block_buffer.Get(static_cast<size_t>(kFastBlockRows * width + 16));
  float* transposed = transposed_buffer.Get(static_cast<size_t>(kFastBlockRows * width));
  std::fill(states, states + m, HeadState());
  std::fill(out, out + m * v_dim, 0.0f);
  alignas(32) float z[kTileRows * kFastBlockRows];
  alignas(32) float p[kTileRows * kFastBlockRows];
  for (int64_t start = 0; start < n; start += kFastBlockRows) {
    const int64_t count = std::min(kFastBlockRows, n - start);
    DequantizeBlockAvx2(rows + start, count, width, block);
    internal::TransposeRows16(block, width, width, transposed);
    for (int64_t r = 0; r < m; r += kTileRows) {
      const int64_t mr = std::min(kTileRows, m - r);
      internal::RunMicroKernel(mr, q + r * width, width, transposed, kFastBlockRows, width, z, kFastBlockRows,
                               kFastBlockRows, false);
      for (int64_t i = 0; i < mr; ++i) {
        const float correction =
            SoftmaxStepAvx2(states[r + i], z + i * kFastBlockRows, scale, count, p + i * kFastBlockRows);
        if (correction != 1.0f) ScaleRowAvx2(out + (r + i) * v_dim, v_dim, correction);
      }
      for (int64_t d0 = 0; d0 < v_dim; d0 += internal::kMicroCols) {
        internal::RunMicroKernel(mr, p, kFastBlockRows, block + d0, width, kFastBlockRows, out + r * v_dim + d0, v_dim,
                                 std::min<int64_t>(internal::kMicroCols, v_dim - d0), true);
      }
    }
  }
}

// acc <- acc merged with part, row by row (two passes over disjoint rows of the same queries):
// M = max(m_a, m_p), o = o_a e^(m_a - M) + o_p e^(m_p - M), l likewise. Always left to right in row
// order, so a query's result never depends on how its chunks were scheduled.
ENVFORGE_TARGET_AVX2 void FoldAvx2(float* acc, HeadState* acc_states, const float* part, const HeadState* part_states,
                                   int64_t m, int64_t v_dim) {
  for (int64_t r = 0; r < m; ++r) {
    HeadState& a = acc_states[r];
    const HeadState& b = part_states[r];
    const float max = std::max(a.max, b.max);
    const float wa = a.max == kNegInf ? 0.0f : std::exp(a.max - max);
    const float wb = b.max == kNegInf ? 0.0f : std::exp(b.max - max);
    const __m256 wa_v = _mm256_set1_ps(wa), wb_v = _mm256_set1_ps(wb);
    float* o = acc + r * v_dim;
    const float* po = part + r * v_dim;
    for (int64_t d = 0; d < v_dim; d += 8) {
      _mm256_storeu_ps(o + d,
                       _mm256_fmadd_ps(_mm256_loadu_ps(po + d), wb_v, _mm256_mul_ps(_mm256_loadu_ps(o + d), wa_v)));
    }
    a.sum = std::fma(b.sum, wb, a.sum * wa);
    a.max = max;
  }
}

ENVFORGE_TARGET_AVX2 void NormalizeAvx2(float* out, const HeadState* states, int64_t m, int64_t v_dim) {
  for (int64_t r = 0; r < m; ++r)
    ScaleRowAvx2(out + r * v_dim, v_dim, states[r].sum > 0.0f ? 1.0f / states[r].sum : 0.0f);
}

int64_t Chunks(int64_t n) { return (n + kAttentionChunkRows - 1) / kAttentionChunkRows; }

// The query rows q [m, width] over selection entries [0, n), chunks [first_chunk, Chunks(n)) passed
// and folded into acc (which holds chunks before first_chunk when first_chunk > 0); leaves acc
// unnormalised. rows holds the entries from first_chunk's first on (rows[0] is entry
// first_chunk * kAttentionChunkRows).
ENVFORGE_TARGET_AVX2 void PassChunksAvx2(const float* q, int64_t m, int64_t width, int64_t v_dim, const RowRef* rows,
                                         int64_t n, float scale, int64_t first_chunk, float* acc,
                                         HeadState* acc_states) {
  const int64_t offset = first_chunk * kAttentionChunkRows;
  thread_local internal::AlignedFloats part_buffer;
  thread_local std::vector<HeadState> part_states;
  float* part = part_buffer.Get(static_cast<size_t>(m * v_dim));
  part_states.resize(static_cast<size_t>(m));
  for (int64_t k = first_chunk; k < Chunks(n); ++k) {
    const int64_t begin = k * kAttentionChunkRows, rows_in_chunk = std::min(kAttentionChunkRows, n - begin);
    if (k == 0) {
      PassAvx2(q, m, width, v_dim, rows + begin - offset, rows_in_chunk, scale, acc, acc_states);
      continue;
    }
    PassAvx2(q, m, width, v_dim, rows + begin - offset, rows_in_chunk, scale, part, part_states.data());
    FoldAvx2(acc, acc_states, part, part_states.data(), m, v_dim);
  }
  if (n == 0) {  // no row: zeros
    std::fill(acc, acc + m * v_dim, 0.0f);
    std::fill(acc_states, acc_states + m, HeadState());
  }
}

// One query (all heads) over a selection of more than one chunk: the chunks run in parallel, in
// waves of one chunk per thread, and fold in chunk order (the same result as one thread).
void AttendChunksParallelAvx2(const SparseAttentionArgs& a, const std::vector<RowRef>& rows, float* out) {
  const int64_t heads = a.heads, width = RowWidth(a.cache), v_dim = a.cache.kv_rank;
  const int64_t n = static_cast<int64_t>(rows.size()), chunks = Chunks(n);
  const int64_t wave = std::max<int64_t>(1, std::min<int64_t>(ThreadCount(), chunks));
  thread_local std::vector<float> partial_out;
  thread_local std::vector<HeadState> partial_states, acc_states;
  partial_out.resize(static_cast<size_t>(wave * heads * v_dim));
  partial_states.resize(static_cast<size_t>(wave * heads));
  acc_states.resize(static_cast<size_t>(heads));
  float* outs = partial_out.data();
  HeadState* states = partial_states.data();
  for (int64_t first = 0; first < chunks; first += wave) {
    const int64_t in_wave = std::min(wave, chunks - first);
    ParallelFor(in_wave, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t row_begin = (first + i) * kAttentionChunkRows;
        PassAvx2(a.q, heads, width, v_dim, rows.data() + row_begin, std::min(kAttentionChunkRows, n - row_begin),
                 a.scale, outs + i * heads * v_dim, states + i * heads);
      }
    });
    for (int64_t i = 0; i < in_wave; ++i) {
      if (first + i == 0) {
        std::copy(outs, outs + heads * v_dim, out);
        std::copy(states, states + heads, acc_states.begin());
        continue;
      }
      FoldAvx2(out, acc_states.data(), outs + i * heads * v_dim, states + i * heads, heads, v_dim);
    }
  }
  NormalizeAvx2(out, acc_states.data(), heads, v_dim);
}

// Row e of a dense (indices == nullptr) selection: the two-segment mapping of ValidRows.
RowRef DenseRow(const SparseAttentionArgs& a, int64_t e) {
  if (a.suffix.rows > 0 && e >= a.suffix_begin) return {&a.suffix, e - a.suffix_begin};
  return {&a.cache, e};
}

// DenseMqaAttentionGroup's queries [q0, q1) on this thread: the shared chunks once for all their
// head rows, then each query's own chunks.
void AttendGroupRangeAvx2(std::span<const SparseAttentionArgs> queries, int64_t shared_chunks,
                          std::span<float* const> outs, int64_t q0, int64_t q1) {
  const SparseAttentionArgs& first = queries[static_cast<size_t>(q0)];
  const int64_t heads = first.heads, width = RowWidth(first.cache), v_dim = first.cache.kv_rank;
  const int64_t m = (q1 - q0) * heads;
  thread_local internal::AlignedFloats q_buffer, acc_buffer;
  thread_local std::vector<HeadState> acc_states;
  thread_local std::vector<RowRef> shared;
  float* q = q_buffer.Get(static_cast<size_t>(m * width));
  float* acc = acc_buffer.Get(static_cast<size_t>(m * v_dim));
  acc_states.resize(static_cast<size_t>(m));
  for (int64_t i = q0; i < q1; ++i) {
    const float* source = queries[static_cast<size_t>(i)].q;
    std::copy(source, source + heads * width, q + (i - q0) * heads * width);
  }
  shared.resize(static_cast<size_t>(shared_chunks * kAttentionChunkRows));
  for (size_t e = 0; e < shared.size(); ++e) shared[e] = DenseRow(first, static_cast<int64_t>(e));
  PassChunksAvx2(q, m, width, v_dim, shared.data(), static_cast<int64_t>(shared.size()), first.scale, 0, acc,
                 acc_states.data());
  thread_local std::vector<RowRef> tail;  // a query's entries after the shared chunks
  const int64_t shared_count = shared_chunks * kAttentionChunkRows;
  for (int64_t i = q0; i < q1; ++i) {
    const SparseAttentionArgs& a = queries[static_cast<size_t>(i)];
    tail.clear();
    for (int64_t e = shared_count; e < a.count; ++e) {
      const RowRef row = DenseRow(a, e);
      if (row.row < row.view->rows) tail.push_back(row);  // as ValidRows: entries past the cache are skipped
    }
    float* query_acc = acc + (i - q0) * heads * v_dim;
    HeadState* query_states = acc_states.data() + (i - q0) * heads;
    PassChunksAvx2(q + (i - q0) * heads * width, heads, width, v_dim, tail.data(),
                   shared_count + static_cast<int64_t>(tail.size()), a.scale, shared_chunks, query_acc, query_states);
    NormalizeAvx2(query_acc, query_states, heads, v_dim);
    std::copy(query_acc, query_acc + heads * v_dim, outs[static_cast<size_t>(i)]);
  }
}

#endif  // ENVFORGE_KERNELS_X86

// ---------------------------------------------------------------------------------------------
// kv_b_proj products (AbsorbQueries / ProjectValues).

constexpr int64_t kFp8Block = 128;
// Tokens up to which the products stream W in its stored dtype; beyond, the fp32 copy feeds the
// GEMM micro-kernel (the weights then stay in cache and FLOPs dominate).
constexpr int64_t kStreamedTokens = 8;
constexpr int64_t kAbsorbColumns = 64;  // columns of q~ per work item: 8 AVX2 accumulators
constexpr int64_t kProjectRows = 8;     // rows of W_UV per work item

int64_t KvbRow(const KvbProjection& p, int64_t head, int64_t r) { return head * (p.nope + p.v_dim) + r; }

// The fp8 block scale of W[row, col] (1 for other dtypes).
float WeightScale(const WeightMatrix& w, int64_t row, int64_t col) {
  if (w.dtype != DType::kF8E4M3) return 1.0f;
  const int64_t scale_cols = (w.cols + kFp8Block - 1) / kFp8Block;
  return w.block_scale_inv[(row / kFp8Block) * scale_cols + col / kFp8Block];
}

void AbsorbPortable(const KvbProjection& p, const float* q, int64_t tokens, int64_t q_stride, float* q_out,
                    int64_t out_stride) {
  const int64_t rank = p.w.cols;
  ParallelFor(p.heads, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> w_row(static_cast<size_t>(rank));
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t t = 0; t < tokens; ++t) std::fill_n(q_out + (t * p.heads + h) * out_stride, rank, 0.0f);
      for (int64_t d = 0; d < p.nope; ++d) {
        DequantizeRow(p.w, KvbRow(p, h, d), w_row.data());
        for (int64_t t = 0; t < tokens; ++t) {
          const float coef = q[(t * p.heads + h) * q_stride + d];
          float* out = q_out + (t * p.heads + h) * out_stride;
          for (int64_t c = 0; c < rank; ++c) out[c] += coef * w_row[static_cast<size_t>(c)];
        }
      }
    }
  });
}

void ProjectPortable(const KvbProjection& p, const float* o, int64_t tokens, float* u) {
  const int64_t rank = p.w.cols;
  ParallelFor(p.heads, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> w_row(static_cast<size_t>(rank));
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t v = 0; v < p.v_dim; ++v) {
        DequantizeRow(p.w, KvbRow(p, h, p.nope + v), w_row.data());
        for (int64_t t = 0; t < tokens; ++t) {
          const float* x = o + (t * p.heads + h) * rank;
          float sum = 0.0f;
          for (int64_t c = 0; c < rank; ++c) sum += x[c] * w_row[static_cast<size_t>(c)];
          u[(t * p.heads + h) * p.v_dim + v] = sum;
        }
      }
    }
  });
}

#if ENVFORGE_KERNELS_X86

template <DType D>
ENVFORGE_TARGET_AVX2 inline __m256 LoadWeights8(const WeightMatrix& w, int64_t row, int64_t col) {
  const int64_t index = row * w.cols + col;
  if constexpr (D == DType::kF8E4M3) {
    return internal::DecodeFp8x8(static_cast<const uint8_t*>(w.data) + index);
  } else if constexpr (D == DType::kBF16) {
    return internal::DecodeBf16x8(static_cast<const uint16_t*>(w.data) + index);
  } else if constexpr (D == DType::kF16) {
    return internal::DecodeF16x8(static_cast<const uint16_t*>(w.data) + index);
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(w.data) + index);
  }
}

// Decode: per (head, 64 columns), q~ += q[d] * W[row d, 64 columns] over the nope rows, the W
// block decoded from its stored form (64 columns lie inside one fp8 128-column scale block, so
// the scale folds into the broadcast coefficient).
template <DType D>
ENVFORGE_TARGET_AVX2 void AbsorbStreamedItems(const KvbProjection& p, const float* q, int64_t tokens, int64_t q_stride,
                                              float* q_out, int64_t out_stride, int64_t begin, int64_t end) {
  const int64_t rank = p.w.cols, blocks = rank / kAbsorbColumns;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t h = item / blocks, c0 = (item % blocks) * kAbsorbColumns;
    for (int64_t t = 0; t < tokens; ++t) {
      const float* qn = q + (t * p.heads + h) * q_stride;
      __m256 acc[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
      for (int64_t d = 0; d < p.nope; ++d) {
        const int64_t row = KvbRow(p, h, d);
        const __m256 coef = _mm256_set1_ps(qn[d] * WeightScale(p.w, row, c0));
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(coef, LoadWeights8<D>(p.w, row, c0 + 8 * j), acc[j]);
      }
      float* out = q_out + (t * p.heads + h) * out_stride + c0;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + 8 * j, acc[j]);
    }
  }
}

template <DType D>
void AbsorbStreamed(const KvbProjection& p, const float* q, int64_t tokens, int64_t q_stride, float* q_out,
                    int64_t out_stride) {
  const int64_t blocks = p.w.cols / kAbsorbColumns;
  ParallelFor(p.heads * blocks, 4, [&](int64_t begin, int64_t end) {
    AbsorbStreamedItems<D>(p, q, tokens, q_stride, q_out, out_stride, begin, end);
  });
}

// Decode: per (head, 8 rows of W_UV), dot products with o, fp8 scales applied per 128 columns.
template <DType D>
ENVFORGE_TARGET_AVX2 void ProjectStreamedItems(const KvbProjection& p, const float* o, int64_t tokens, float* u,
                                               int64_t begin, int64_t end) {
  const int64_t rank = p.w.cols, groups = p.v_dim / kProjectRows;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t h = item / groups, v0 = (item % groups) * kProjectRows;
    const int64_t row0 = KvbRow(p, h, p.nope + v0);
    for (int64_t t = 0; t < tokens; ++t) {
      const float* x = o + (t * p.heads + h) * rank;
      float total[kProjectRows] = {};
      for (int64_t span = 0; span < rank; span += kFp8Block) {
        const int64_t span_end = std::min(rank, span + kFp8Block);
        __m256 acc[kProjectRows];
#pragma GCC unroll 8
        for (int j = 0; j < kProjectRows; ++j) acc[j] = _mm256_setzero_ps();
        for (int64_t c = span; c < span_end; c += 8) {
          const __m256 xv = _mm256_loadu_ps(x + c);
#pragma GCC unroll 8
          for (int j = 0; j < kProjectRows; ++j)
            acc[j] = _mm256_fmadd_ps(xv, LoadWeights8<D>(p.w, row0 + j, c), acc[j]);
        }
#pragma GCC unroll 8
        for (int j = 0; j < kProjectRows; ++j)
          total[j] += internal::HorizontalSum(acc[j]) * WeightScale(p.w, row0 + j, span);
      }
      float* y = u + (t * p.heads + h) * p.v_dim + v0;
      for (int j = 0; j < kProjectRows; ++j) y[j] = total[j];
    }
  }
}

template <DType D>
void ProjectStreamed(const KvbProjection& p, const float* o, int64_t tokens, float* u) {
  const int64_t groups = p.v_dim / kProjectRows;
  ParallelFor(p.heads * groups, 4,
              [&](int64_t begin, int64_t end) { ProjectStreamedItems<D>(p, o, tokens, u, begin, end); });
}

// Many tokens: q~[t, h, c0 : c0 + 16] = q^N[t, h, :] x W_f32[nope rows of h, c0 : c0 + 16], the fp32
// rows being directly the micro-kernel's k-major B panel.
ENVFORGE_TARGET_AVX2 void AbsorbGemmItems(const KvbProjection& p, const float* q, int64_t tokens, int64_t q_stride,
                                          float* q_out, int64_t out_stride, int64_t begin, int64_t end) {
  const int64_t rank = p.w.cols, panels = rank / internal::kMicroCols;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t h = item / panels, c0 = (item % panels) * internal::kMicroCols;
    const float* b = p.dequantized + KvbRow(p, h, 0) * rank + c0;
    for (int64_t t0 = 0; t0 < tokens; t0 += internal::kMicroRows) {
      const int64_t mr = std::min<int64_t>(internal::kMicroRows, tokens - t0);
      internal::RunMicroKernel(mr, q + (t0 * p.heads + h) * q_stride, p.heads * q_stride, b, rank, p.nope,
                               q_out + (t0 * p.heads + h) * out_stride + c0, p.heads * out_stride, internal::kMicroCols,
                               false);
    }
  }
}

void AbsorbGemm(const KvbProjection& p, const float* q, int64_t tokens, int64_t q_stride, float* q_out,
                int64_t out_stride) {
  const int64_t panels = p.w.cols / internal::kMicroCols;
  ParallelFor(p.heads * panels, 4, [&](int64_t begin, int64_t end) {
    AbsorbGemmItems(p, q, tokens, q_stride, q_out, out_stride, begin, end);
  });
}

// Many tokens: per (head, 16 rows of W_UV) the rows are packed k-major once, then every 6 tokens
// run the micro-kernel over them.
ENVFORGE_TARGET_AVX2 void ProjectGemmItems(const KvbProjection& p, const float* o, int64_t tokens, float* u,
                                           int64_t begin, int64_t end) {
  const int64_t rank = p.w.cols, panels = (p.v_dim + internal::kMicroCols - 1) / internal::kMicroCols;
  thread_local internal::AlignedFloats staging_buffer, packed_buffer;
  float* staging = staging_buffer.Get(static_cast<size_t>(internal::kMicroCols * rank));
  float* packed = packed_buffer.Get(static_cast<size_t>(internal::kMicroCols * rank));
  for (int64_t item = begin; item < end; ++item) {
    const int64_t h = item / panels, v0 = (item % panels) * internal::kMicroCols;
    const int64_t ncols = std::min<int64_t>(internal::kMicroCols, p.v_dim - v0);
    for (int64_t j = 0; j < internal::kMicroCols; ++j) {
      float* row = staging + j * rank;
      if (j < ncols) {
        std::copy_n(p.dequantized + KvbRow(p, h, p.nope + v0 + j) * rank, rank, row);
      } else {
        std::fill_n(row, rank, 0.0f);
      }
    }
    internal::TransposeRows16(staging, rank, rank, packed);
    for (int64_t t0 = 0; t0 < tokens; t0 += internal::kMicroRows) {
      const int64_t mr = std::min<int64_t>(internal::kMicroRows, tokens - t0);
      internal::RunMicroKernel(mr, o + (t0 * p.heads + h) * rank, p.heads * rank, packed, internal::kMicroCols, rank,
                               u + (t0 * p.heads + h) * p.v_dim + v0, p.heads * p.v_dim, ncols, false);
    }
  }
}

void ProjectGemm(const KvbProjection& p, const float* o, int64_t tokens, float* u) {
  const int64_t panels = (p.v_dim + internal::kMicroCols - 1) / internal::kMicroCols;
  ParallelFor(p.heads * panels, 1, [&](int64_t begin, int64_t end) { ProjectGemmItems(p, o, tokens, u, begin, end); });
}

template <DType D>
void ProductsStreamed(bool absorb, const KvbProjection& p, const float* x, int64_t tokens, int64_t x_stride, float* y,
                      int64_t y_stride) {
  if (absorb) {
    AbsorbStreamed<D>(p, x, tokens, x_stride, y, y_stride);
  } else {
    ProjectStreamed<D>(p, x, tokens, y);
  }
}

// The AVX2 paths; false when the shapes do not fit them (the caller then runs the portable one).
bool KvbProductAvx2(bool absorb, const KvbProjection& p, const float* x, int64_t tokens, int64_t x_stride, float* y,
                    int64_t y_stride) {
  if (!internal::UseAvx2() || p.w.cols % kAbsorbColumns != 0) return false;
  if (tokens > kStreamedTokens && p.dequantized != nullptr) {
    if (absorb) {
      AbsorbGemm(p, x, tokens, x_stride, y, y_stride);
    } else {
      ProjectGemm(p, x, tokens, y);
    }
    return true;
  }
  if (!absorb && p.v_dim % kProjectRows != 0) return false;
  switch (p.w.dtype) {
    case DType::kF32: ProductsStreamed<DType::kF32>(absorb, p, x, tokens, x_stride, y, y_stride); break;
    case DType::kBF16: ProductsStreamed<DType::kBF16>(absorb, p, x, tokens, x_stride, y, y_stride); break;
    case DType::kF16: ProductsStreamed<DType::kF16>(absorb, p, x, tokens, x_stride, y, y_stride); break;
    case DType::kF8E4M3: ProductsStreamed<DType::kF8E4M3>(absorb, p, x, tokens, x_stride, y, y_stride); break;
  }
  return true;
}

#endif  // ENVFORGE_KERNELS_X86

}  // namespace

void DequantizeLatentRow(const LatentCacheView& cache, int64_t row, float* out) {
  const float* table = Fp8E4M3Table();
  const uint8_t* nope = cache.nope + row * cache.kv_rank;
  const float* scales = cache.scales + row * ScaleGroups(cache);
  for (int64_t d = 0; d < cache.kv_rank; ++d) out[d] = table[nope[d]] * scales[d / kScaleGroup];
  const uint16_t* rope = cache.rope + row * cache.rope_dim;
  for (int64_t d = 0; d < cache.rope_dim; ++d) out[cache.kv_rank + d] = Bf16ToFloat(rope[d]);
}

void SparseMqaAttention(const SparseAttentionArgs& args, float* out) {
  if (args.heads <= 0) return;
  const std::vector<RowRef>& rows = ValidRows(args);
  const int64_t threads = ThreadCount();
#if ENVFORGE_KERNELS_X86
  if (FastPathFits(args)) {
    if (Chunks(static_cast<int64_t>(rows.size())) > 1) {
      AttendChunksParallelAvx2(args, rows, out);
      return;
    }
    // One chunk: the heads split across threads (each head's result is the same either way).
    const int64_t grain = std::max<int64_t>(1, (args.heads + threads - 1) / threads);
    const int64_t width = RowWidth(args.cache), v_dim = args.cache.kv_rank;
    ParallelFor(args.heads, grain, [&](int64_t h0, int64_t h1) {
      thread_local std::vector<HeadState> states;
      states.resize(static_cast<size_t>(h1 - h0));
      PassAvx2(args.q + h0 * width, h1 - h0, width, v_dim, rows.data(), static_cast<int64_t>(rows.size()), args.scale,
               out + h0 * v_dim, states.data());
      NormalizeAvx2(out + h0 * v_dim, states.data(), h1 - h0, v_dim);
    });
    return;
  }
#endif
  // One chunk of heads per thread: every chunk dequantizes all selected rows once, so more chunks
  // would repeat that work.
  const int64_t grain = std::max<int64_t>(1, (args.heads + threads - 1) / threads);
  ParallelFor(args.heads, grain, [&](int64_t h0, int64_t h1) { AttendHeadsPortable(args, rows, h0, h1, out); });
}

void DenseMqaAttentionGroup(std::span<const SparseAttentionArgs> queries, int64_t shared_rows,
                            std::span<float* const> outs) {
  const auto n = static_cast<int64_t>(queries.size());
  if (n == 0 || queries[0].heads <= 0) return;
#if ENVFORGE_KERNELS_X86
  if (FastPathFits(queries[0])) {
    const int64_t shared_chunks = std::max<int64_t>(0, shared_rows) / kAttentionChunkRows;
    // One contiguous range of queries per thread: each thread dequantizes the shared rows once.
    const int64_t threads = ThreadCount();
    const int64_t grain = std::max<int64_t>(1, (n + threads - 1) / threads);
    ParallelFor(n, grain, [&](int64_t q0, int64_t q1) {
      // At most kGroupQueries at a time, so that a whole prefill's rows keep bounded scratch.
      for (int64_t begin = q0; begin < q1; begin += kGroupQueries) {
        AttendGroupRangeAvx2(queries, shared_chunks, outs, begin, std::min(q1, begin + kGroupQueries));
      }
    });
    return;
  }
#endif
  (void)shared_rows;
  for (int64_t i = 0; i < n; ++i) SparseMqaAttention(queries[static_cast<size_t>(i)], outs[static_cast<size_t>(i)]);
}

void AbsorbQueries(const KvbProjection& p, const float* q, int64_t tokens, int64_t q_stride, float* q_out,
                   int64_t out_stride) {
  if (tokens <= 0 || p.heads <= 0) return;
#if ENVFORGE_KERNELS_X86
  if (KvbProductAvx2(true, p, q, tokens, q_stride, q_out, out_stride)) return;
#endif
  AbsorbPortable(p, q, tokens, q_stride, q_out, out_stride);
}

void ProjectValues(const KvbProjection& p, const float* o, int64_t tokens, float* u) {
  if (tokens <= 0 || p.heads <= 0) return;
#if ENVFORGE_KERNELS_X86
  if (KvbProductAvx2(false, p, o, tokens, 0, u, 0)) return;
#endif
  ProjectPortable(p, o, tokens, u);
}

namespace ref {

void SparseMqaAttention(const SparseAttentionArgs& a, float* out) {
  const int64_t width = RowWidth(a.cache), v_dim = a.cache.kv_rank;
  const std::vector<RowRef> rows = ValidRows(a);
  std::vector<float> latent(rows.size() * static_cast<size_t>(width));
  for (size_t i = 0; i < rows.size(); ++i) {
    DequantizeLatentRow(*rows[i].view, rows[i].row, latent.data() + i * static_cast<size_t>(width));
  }
  std::vector<double> z(rows.size());
  for (int64_t h = 0; h < a.heads; ++h) {
    float* o = out + h * v_dim;
    std::fill(o, o + v_dim, 0.0f);
    if (rows.empty()) continue;
    double max_z = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < rows.size(); ++i) {
      double dot = 0.0;
      for (int64_t d = 0; d < width; ++d)
        dot +=
            static_cast<double>(a.q[h * width + d]) * latent[i * static_cast<size_t>(width) + static_cast<size_t>(d)];
      z[i] = dot * a.scale;
      max_z = std::max(max_z, z[i]);
    }
    double sum = 0.0;
    for (double& value : z) {
      value = std::exp(value - max_z);
      sum += value;
    }
    for (int64_t d = 0; d < v_dim; ++d) {
      double acc = 0.0;
      for (size_t i = 0; i < rows.size(); ++i)
        acc += z[i] * latent[i * static_cast<size_t>(width) + static_cast<size_t>(d)];
      o[d] = static_cast<float>(acc / sum);
    }
  }
}

void AbsorbQueries(const KvbProjection& p, const float* q, int64_t tokens, int64_t q_stride, float* q_out,
                   int64_t out_stride) {
  const int64_t rank = p.w.cols;
  std::vector<float> w_row(static_cast<size_t>(rank));
  std::vector<double> acc(static_cast<size_t>(rank));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < p.heads; ++h) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t d = 0; d < p.nope; ++d) {
        DequantizeRow(p.w, KvbRow(p, h, d), w_row.data());
        const double coef = q[(t * p.heads + h) * q_stride + d];
        for (int64_t c = 0; c < rank; ++c) acc[static_cast<size_t>(c)] += coef * w_row[static_cast<size_t>(c)];
      }
      for (int64_t c = 0; c < rank; ++c)
        q_out[(t * p.heads + h) * out_stride + c] = static_cast<float>(acc[static_cast<size_t>(c)]);
    }
  }
}

void ProjectValues(const KvbProjection& p, const float* o, int64_t tokens, float* u) {
  const int64_t rank = p.w.cols;
  std::vector<float> w_row(static_cast<size_t>(rank));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < p.heads; ++h) {
      for (int64_t v = 0; v < p.v_dim; ++v) {
        DequantizeRow(p.w, KvbRow(p, h, p.nope + v), w_row.data());
        double sum = 0.0;
        for (int64_t c = 0; c < rank; ++c)
          sum += static_cast<double>(o[(t * p.heads + h) * rank + c]) * w_row[static_cast<size_t>(c)];
        u[(t * p.heads + h) * p.v_dim + v] = static_cast<float>(sum);
      }
    }
  }
}

}  // namespace ref
}  // namespace envforge::kernels
