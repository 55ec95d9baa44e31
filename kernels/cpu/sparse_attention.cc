// MQA-mode sparse attention over the FP8 latent cache (sparse_attention.h).
//
// Fast path: the valid selected rows are processed in blocks of 16. Every thread owns a range of
// heads; per block it dequantizes the 16 latent rows once (fp32, 16 x 576 floats, plus a
// transposed copy), computes the scores of its heads as a small GEMM (6 heads x 16 rows per
// micro-kernel call), and folds the block into each head's output with the online-softmax update
//   m' = max(m, max z), o <- o * e^(m - m') + sum_b e^(z_b - m') row_b, l likewise,
// the value sum again a 6x16 micro-kernel GEMM; o is divided by l at the end. All heads share the
// rows (MQA), which is what makes blocking pay: the row traffic is per block, not per head.
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

// The selected rows that exist, in selection order.
std::vector<int32_t> ValidRows(const SparseAttentionArgs& a) {
  std::vector<int32_t> rows;
  rows.reserve(static_cast<size_t>(std::max<int64_t>(a.count, 0)));
  for (int64_t i = 0; i < a.count; ++i) {
    const int64_t row = a.indices != nullptr ? a.indices[i] : i;
    if (row >= 0 && row < a.cache.rows) rows.push_back(static_cast<int32_t>(row));
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

void DequantizeBlockPortable(const LatentCacheView& c, const int32_t* rows, int64_t count, float* block) {
  for (int64_t b = 0; b < count; ++b) DequantizeLatentRow(c, rows[b], block + b * RowWidth(c));
}

void AttendHeadsPortable(const SparseAttentionArgs& a, const std::vector<int32_t>& rows, int64_t h0, int64_t h1,
                         float* out) {
  const int64_t width = RowWidth(a.cache), v_dim = a.cache.kv_rank;
  std::vector<float> block(static_cast<size_t>(kBlockRows * width));
  std::vector<HeadState> states(static_cast<size_t>(h1 - h0));
  std::fill(out + h0 * v_dim, out + h1 * v_dim, 0.0f);
  const int64_t n = static_cast<int64_t>(rows.size());
  float z[kBlockRows];
  for (int64_t start = 0; start < n; start += kBlockRows) {
    const int64_t count = std::min(kBlockRows, n - start);
    DequantizeBlockPortable(a.cache, rows.data() + start, count, block.data());
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

// Dequantizes the block's rows to block[b * width] (rows past count are zeros).
ENVFORGE_TARGET_AVX2 void DequantizeBlockAvx2(const LatentCacheView& c, const int32_t* rows, int64_t count,
                                              float* block) {
  const int64_t width = RowWidth(c), groups = ScaleGroups(c);
  for (int64_t b = 0; b < kFastBlockRows; ++b) {
    float* dst = block + b * width;
    if (b >= count) {  // padding rows: finite zeros, masked out of the softmax
      std::fill(dst, dst + width, 0.0f);
      continue;
    }
    const int64_t row = rows[b];
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

// Per block of 16 rows: Z = Q_heads x rows^T and O = O * correction + P x V_rows, both as 6x16
// micro-kernel GEMMs (heads are the 6 broadcast rows).
ENVFORGE_TARGET_AVX2 void AttendHeadsAvx2(const SparseAttentionArgs& a, const std::vector<int32_t>& rows, int64_t h0,
                                          int64_t h1, float* out) {
  constexpr int64_t kHeadsPerTile = internal::kMicroRows;
  const int64_t width = RowWidth(a.cache), v_dim = a.cache.kv_rank;
  thread_local internal::AlignedFloats block_buffer, transposed_buffer;
  // +16: the micro-kernel reads a full 16-wide panel at the last (partial) value columns.
  float* block = block_buffer.Get(static_cast<size_t>(kFastBlockRows * width + 16));
  float* transposed = transposed_buffer.Get(static_cast<size_t>(kFastBlockRows * width));
  std::vector<HeadState> states(static_cast<size_t>(h1 - h0));
  std::fill(out + h0 * v_dim, out + h1 * v_dim, 0.0f);
  const int64_t n = static_cast<int64_t>(rows.size());
  alignas(32) float z[kHeadsPerTile * kFastBlockRows];
  alignas(32) float p[kHeadsPerTile * kFastBlockRows];
  for (int64_t start = 0; start < n; start += kFastBlockRows) {
    const int64_t count = std::min(kFastBlockRows, n - start);
    DequantizeBlockAvx2(a.cache, rows.data() + start, count, block);
    internal::TransposeRows16(block, width, width, transposed);
    for (int64_t h = h0; h < h1; h += kHeadsPerTile) {
      const int64_t mr = std::min(kHeadsPerTile, h1 - h);
      internal::RunMicroKernel(mr, a.q + h * width, width, transposed, kFastBlockRows, width, z, kFastBlockRows,
                               kFastBlockRows, false);
      for (int64_t i = 0; i < mr; ++i) {
        const float correction = SoftmaxStepAvx2(states[static_cast<size_t>(h + i - h0)], z + i * kFastBlockRows,
                                                 a.scale, count, p + i * kFastBlockRows);
        if (correction != 1.0f) ScaleRowAvx2(out + (h + i) * v_dim, v_dim, correction);
      }
      for (int64_t d0 = 0; d0 < v_dim; d0 += internal::kMicroCols) {
        internal::RunMicroKernel(mr, p, kFastBlockRows, block + d0, width, kFastBlockRows, out + h * v_dim + d0, v_dim,
                                 std::min<int64_t>(internal::kMicroCols, v_dim - d0), true);
      }
    }
  }
  for (int64_t h = h0; h < h1; ++h) {
    const float sum = states[static_cast<size_t>(h - h0)].sum;
    ScaleRowAvx2(out + h * v_dim, v_dim, sum > 0.0f ? 1.0f / sum : 0.0f);
  }
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
  const std::vector<int32_t> rows = ValidRows(args);
  const int64_t grain = std::max<int64_t>(2, args.heads / (2 * ThreadCount()));
  ParallelFor(args.heads, grain, [&](int64_t h0, int64_t h1) {
#if ENVFORGE_KERNELS_X86
    if (internal::UseAvx2() && args.cache.kv_rank % 8 == 0 && args.cache.rope_dim % 8 == 0) {
      AttendHeadsAvx2(args, rows, h0, h1, out);
      return;
    }
#endif
    AttendHeadsPortable(args, rows, h0, h1, out);
  });
}

namespace ref {

void SparseMqaAttention(const SparseAttentionArgs& a, float* out) {
  const int64_t width = RowWidth(a.cache), v_dim = a.cache.kv_rank;
  const std::vector<int32_t> rows = ValidRows(a);
  std::vector<float> latent(rows.size() * static_cast<size_t>(width));
  for (size_t i = 0; i < rows.size(); ++i) DequantizeLatentRow(a.cache, rows[i], latent.data() + i * static_cast<size_t>(width));
  std::vector<double> z(rows.size());
  for (int64_t h = 0; h < a.heads; ++h) {
    float* o = out + h * v_dim;
    std::fill(o, o + v_dim, 0.0f);
    if (rows.empty()) continue;
    double max_z = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < rows.size(); ++i) {
      double dot = 0.0;
      for (int64_t d = 0; d < width; ++d) dot += static_cast<double>(a.q[h * width + d]) * latent[i * static_cast<size_t>(width) + static_cast<size_t>(d)];
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
      for (size_t i = 0; i < rows.size(); ++i) acc += z[i] * latent[i * static_cast<size_t>(width) + static_cast<size_t>(d)];
      o[d] = static_cast<float>(acc / sum);
    }
  }
}

}  // namespace ref
}  // namespace envforge::kernels
