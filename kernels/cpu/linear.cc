// y = x W^T for fp32 / bf16 / fp16 / fp8 weights (contract in linear.h).
//
// Fast path, chosen by m:
//   m <= 8 (decode): a GEMV that streams every weight row from memory once. Tiles of NR weight
//     rows x MR activation rows decode 8 weights at a time straight into AVX2 registers; the
//     activation rows (at most 8 x cols floats) stay in L1/L2 while the weights stream by.
//   m > 8 (prefill, batched decode): a cache-blocked GEMM. Per block of 128 weight rows and 256
//     columns of k, the weights are decoded once to fp32 and transposed into 16-wide panels (the
//     "packed B" of GotoBLAS), then a 6x16 register-blocked AVX2 micro-kernel runs over every 6
//     rows of x; on AVX-512 CPUs a 24x16 one over every 24 rows, packed k-major (bitwise the
//     same y: the same chains per k block, added in the same order).
// Both thread over blocks of weight rows (and over chunks of x's rows when the blocks are too few
// to keep every thread busy), so each thread writes its own part of y.
// FP8 weights: x is fake-quantized once (W8A8, see linear.h), then multiplied like any dtype;
// the 128x128 block scale is applied per 128-column block of a weight row.
#include "kernels/cpu/linear.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/internal/cpu_features.h"
#include "kernels/cpu/internal/fp8_round.h"
#include "kernels/cpu/internal/gemm_kernels.h"
#include "kernels/cpu/internal/gemm_kernels_avx512.h"
#include "kernels/cpu/internal/simd.h"
#include "kernels/cpu/parallel.h"

namespace envforge::kernels {
namespace {

constexpr int64_t kFp8Block = 128;

int64_t ScaleColumns(const WeightMatrix& w) { return (w.cols + kFp8Block - 1) / kFp8Block; }

float BlockScale(const WeightMatrix& w, int64_t row, int64_t col) {
  return w.block_scale_inv[(row / kFp8Block) * ScaleColumns(w) + col / kFp8Block];
}

// Element decoders, one per stored type; Vec decodes 8 consecutive elements.
template <DType D>
struct Codec;
template <>
struct Codec<DType::kF32> {
  using Stored = float;
  static float Scalar(const float* p) { return *p; }
#if ENVFORGE_KERNELS_X86
  ENVFORGE_TARGET_AVX2 static __m256 Vec(const float* p) { return _mm256_loadu_ps(p); }
#endif
};
template <>
struct Codec<DType::kBF16> {
  using Stored = uint16_t;
  static float Scalar(const uint16_t* p) { return Bf16ToFloat(*p); }
#if ENVFORGE_KERNELS_X86
  ENVFORGE_TARGET_AVX2 static __m256 Vec(const uint16_t* p) { return internal::DecodeBf16x8(p); }
#endif
};
template <>
struct Codec<DType::kF16> {
  using Stored = uint16_t;
  static float Scalar(const uint16_t* p) { return HalfToFloat(*p); }
#if ENVFORGE_KERNELS_X86
  ENVFORGE_TARGET_AVX2 static __m256 Vec(const uint16_t* p) { return internal::DecodeF16x8(p); }
#endif
};
template <>
struct Codec<DType::kF8E4M3> {
  using Stored = uint8_t;
  static float Scalar(const uint8_t* p) { return internal::Fp8BitsToFloat(*p); }
#if ENVFORGE_KERNELS_X86
  ENVFORGE_TARGET_AVX2 static __m256 Vec(const uint8_t* p) { return internal::DecodeFp8x8(p); }
#endif
};

// Columns over which one weight scale holds: a 128 block for fp8, the whole row otherwise.
template <DType D>
int64_t ScaleSpan(const WeightMatrix& w) {
  return D == DType::kF8E4M3 ? kFp8Block : std::max<int64_t>(w.cols, 1);
}

template <DType D>
float SpanScale(const WeightMatrix& w, int64_t row, int64_t col) {
  return D == DType::kF8E4M3 ? BlockScale(w, row, col) : 1.0f;
}

// ---------------------------------------------------------------------------------------------
// Portable path (no SIMD intrinsics; the compiler may still vectorise the dot product).

float DotPortable(const float* a, const float* b, int64_t n) {
  float partial[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int lane = 0; lane < 8; ++lane) partial[lane] += a[i + lane] * b[i + lane];
  }
  float sum = 0.0f;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float p : partial) sum += p;
  return sum;
}

void LinearPortable(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  ParallelFor(w.rows, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t n = begin; n < end; ++n) {
      DequantizeRow(w, n, row.data());
      for (int64_t i = 0; i < m; ++i) y[i * w.rows + n] = DotPortable(x + i * w.cols, row.data(), w.cols);
    }
  });
}

#if ENVFORGE_KERNELS_X86

// ---------------------------------------------------------------------------------------------
// GEMV: y[i][n0 + j] for i < MR, j < NR.

template <DType D, int MR, int NR>
ENVFORGE_TARGET_AVX2 void GemvTile(const float* x, const WeightMatrix& w, int64_t n0, float* y) {
  using Stored = typename Codec<D>::Stored;
  const int64_t cols = w.cols;
  const Stored* rows[NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) rows[j] = static_cast<const Stored*>(w.data) + (n0 + j) * cols;
  float total[MR][NR] = {};
  const int64_t span = ScaleSpan<D>(w);
  for (int64_t span_begin = 0; span_begin < cols; span_begin += span) {
    const int64_t span_end = std::min(cols, span_begin + span);
    __m256 acc[MR][NR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
    }
    int64_t k = span_begin;
    for (; k + 8 <= span_end; k += 8) {
      __m256 xv[MR];
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_ps(x + i * cols + k);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) {
        __m256 wv = Codec<D>::Vec(rows[j] + k);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const float scale = SpanScale<D>(w, n0 + j, span_begin);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        float sum = internal::HorizontalSum(acc[i][j]);
        for (int64_t kk = k; kk < span_end; ++kk) sum += x[i * cols + kk] * Codec<D>::Scalar(rows[j] + kk);
        total[i][j] += sum * scale;
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) y[i * w.rows + n0 + j] = total[i][j];
  }
}

template <DType D, int NR>
ENVFORGE_TARGET_AVX2 void GemvRows(const float* x, int64_t mr, const WeightMatrix& w, int64_t n0, float* y) {
  switch (mr) {
    case 1: GemvTile<D, 1, NR>(x, w, n0, y); break;
    case 2: GemvTile<D, 2, NR>(x, w, n0, y); break;
    case 3: GemvTile<D, 3, NR>(x, w, n0, y); break;
    default: GemvTile<D, 4, NR>(x, w, n0, y); break;
  }
}

template <DType D>
void GemvAvx2(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  // Few activation rows: several weight rows per tile so one x load feeds several FMAs.
  const int64_t nr = m == 1 ? 8 : m <= 2 ? 4 : 2;
  const int64_t groups = (w.rows + nr - 1) / nr;
  ParallelFor(groups, std::max<int64_t>(1, 32 / nr), [&](int64_t begin, int64_t end) {
    for (int64_t group = begin; group < end; ++group) {
      const int64_t n0 = group * nr;
      const int64_t rows_here = std::min(nr, w.rows - n0);
      for (int64_t i0 = 0; i0 < m; i0 += 4) {
        const int64_t mr = std::min<int64_t>(4, m - i0);
        const float* xi = x + i0 * w.cols;
        float* yi = y + i0 * w.rows;
        if (rows_here == 8) {
          GemvTile<D, 1, 8>(xi, w, n0, yi);
        } else if (rows_here == 4) {
          GemvRows<D, 4>(xi, mr, w, n0, yi);
        } else if (rows_here == 2) {
          GemvRows<D, 2>(xi, mr, w, n0, yi);
        } else {
          for (int64_t j = 0; j < rows_here; ++j) GemvRows<D, 1>(xi, mr, w, n0 + j, yi);
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// GEMM: packed 16-wide weight panels and a 6x16 micro-kernel.

constexpr int kMr = internal::kMicroRows;
constexpr int kNr = internal::kMicroCols;
constexpr int64_t kKc = 256;  // k block: a 16 x 256 panel is 16 KiB (L1)
constexpr int64_t kNc = 128;  // weight rows per block: 128 x 256 floats = 128 KiB (L2)
static_assert(kKc % kFp8Block == 0, "k blocks must not straddle fp8 scale blocks");

// Decodes w[row, k0 : k0 + count] to fp32 (scales applied).
template <DType D>
ENVFORGE_TARGET_AVX2 void DecodeRowSegment(const WeightMatrix& w, int64_t row, int64_t k0, int64_t count, float* out) {
  using Stored = typename Codec<D>::Stored;
  const Stored* src = static_cast<const Stored*>(w.data) + row * w.cols;
  const int64_t span = ScaleSpan<D>(w);
  for (int64_t begin = k0; begin < k0 + count; begin += span) {
    const int64_t end = std::min(k0 + count, begin + span);
    const float scale = SpanScale<D>(w, row, begin);
    const __m256 scale_v = _mm256_set1_ps(scale);
    int64_t k = begin;
    for (; k + 8 <= end; k += 8) {
      __m256 v = Codec<D>::Vec(src + k);
      if (D == DType::kF8E4M3) v = _mm256_mul_ps(v, scale_v);
      _mm256_storeu_ps(out + (k - k0), v);
    }
    for (; k < end; ++k) out[k - k0] = Codec<D>::Scalar(src + k) * scale;
  }
}

// Packs weight rows [n0, n0 + 16) x columns [k0, k0 + kc) as packed[kk * 16 + j] (rows past
// the matrix are zeros).
template <DType D>
ENVFORGE_TARGET_AVX2 void PackPanel(const WeightMatrix& w, int64_t n0, int64_t k0, int64_t kc, float* staging,
                                    float* packed) {
  for (int j = 0; j < kNr; ++j) {
    float* row = staging + j * kc;
    if (n0 + j < w.rows) {
      DecodeRowSegment<D>(w, n0 + j, k0, kc, row);
    } else {
      std::fill(row, row + kc, 0.0f);
    }
  }
  internal::TransposeRows16(staging, kc, kc, packed);
}

// The GEMM's work items: blocks of kNc weight rows, times chunks of token rows when the weight
// blocks alone are fewer than two per thread (a small model's 128-row matrix is one block, and a
// 100-row batch would otherwise run on one thread). Chunks are whole multiples of 24 rows (the
// AVX-512 micro-kernel's height), so splitting never changes which rows a kernel call holds.
struct GemmItems {
  int64_t row_blocks = 0, token_chunks = 1, chunk_rows = 0;
  int64_t count() const { return row_blocks * token_chunks; }
};

GemmItems PlanGemm(int64_t m, const WeightMatrix& w) {
  constexpr int64_t kChunkAlign = 24;
  GemmItems items;
  items.row_blocks = (w.rows + kNc - 1) / kNc;
  const int64_t wanted = 2 * static_cast<int64_t>(ThreadCount());
  const int64_t most_chunks = std::max<int64_t>(1, m / kChunkAlign);
  items.token_chunks = std::clamp<int64_t>((wanted + items.row_blocks - 1) / items.row_blocks, 1, most_chunks);
  const int64_t rows = (m + items.token_chunks - 1) / items.token_chunks;
  items.chunk_rows = (rows + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
  items.token_chunks = (m + items.chunk_rows - 1) / items.chunk_rows;
  return items;
}

// Runs item(n_begin, n_count, i_begin, i_end) for every work item, threads over items.
template <typename Item>
void ForEachGemmItem(int64_t m, const WeightMatrix& w, const Item& item) {
  const GemmItems plan = PlanGemm(m, w);
  ParallelFor(plan.count(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      const int64_t block = index / plan.token_chunks, chunk = index % plan.token_chunks;
      const int64_t n_begin = block * kNc;
      item(n_begin, std::min(kNc, w.rows - n_begin), chunk * plan.chunk_rows,
           std::min(m, (chunk + 1) * plan.chunk_rows));
    }
  });
}

template <DType D>
void GemmAvx2(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  ForEachGemmItem(m, w, [&](int64_t n_begin, int64_t n_count, int64_t i_begin, int64_t i_end) {
    thread_local internal::AlignedFloats packed_buffer, staging_buffer;
    float* packed = packed_buffer.Get(static_cast<size_t>(kNc * kKc));
    float* staging = staging_buffer.Get(static_cast<size_t>(kNr * kKc));
    const int64_t panels = (n_count + kNr - 1) / kNr;
    for (int64_t k0 = 0; k0 < w.cols; k0 += kKc) {
      const int64_t kc = std::min(kKc, w.cols - k0);
      for (int64_t p = 0; p < panels; ++p) PackPanel<D>(w, n_begin + p * kNr, k0, kc, staging, packed + p * kNr * kc);
      for (int64_t i0 = i_begin; i0 < i_end; i0 += kMr) {
        const int64_t mr = std::min<int64_t>(kMr, i_end - i0);
        for (int64_t p = 0; p < panels; ++p) {
          internal::RunMicroKernel(mr, x + i0 * w.cols + k0, w.cols, packed + p * kNr * kc, kNr, kc,
                                   y + i0 * w.rows + n_begin + p * kNr, w.rows,
                                   std::min<int64_t>(kNr, n_count - p * kNr), k0 > 0);
        }
      }
    }
    if (w.cols == 0) {
      for (int64_t i = i_begin; i < i_end; ++i)
        std::fill(y + i * w.rows + n_begin, y + i * w.rows + n_begin + n_count, 0.0f);
    }
  });
}

// Adds (accumulate: a later k block) or stores a micro-kernel tile z[rows][16] into y, which
// points at the tile's first row and column (row stride ldy; ncols <= 16 columns written), as the
// AVX2 micro-kernel does (tile + previous, in that order).
ENVFORGE_TARGET_AVX512 void StoreGemmTile(const float* z, int64_t rows, int64_t ncols, bool accumulate, float* y,
                                          int64_t ldy) {
  for (int64_t i = 0; i < rows; ++i) {
    float* out = y + i * ldy;
    const float* tile = z + i * kNr;
    if (ncols == kNr) {
      __m512 v = _mm512_loadu_ps(tile);
      if (accumulate) v = _mm512_add_ps(v, _mm512_loadu_ps(out));
      _mm512_storeu_ps(out, v);
    } else {
      for (int64_t j = 0; j < ncols; ++j) out[j] = (accumulate ? out[j] : 0.0f) + tile[j];
    }
  }
}

// GemmAvx2 with the 24-row AVX-512 micro-kernel: x's rows packed k-major per k block, each output
// the same fp32 chain per k block added in the same order, so y is bitwise GemmAvx2's.
template <DType D>
ENVFORGE_TARGET_AVX512 void GemmAvx512Block(const float* x, const WeightMatrix& w, float* y, int64_t n_begin,
                                            int64_t n_count, int64_t i_begin, int64_t i_end) {
  constexpr int64_t kRows = internal::kMicroRows512;
  thread_local internal::AlignedFloats packed_buffer, staging_buffer, a_buffer, z_buffer;
  float* packed = packed_buffer.Get(static_cast<size_t>(kNc * kKc));
  float* staging = staging_buffer.Get(static_cast<size_t>(kNr * kKc));
  float* a_packed = a_buffer.Get(static_cast<size_t>(kRows * kKc));
  float* z = z_buffer.Get(static_cast<size_t>(kRows * kNr));
  const int64_t panels = (n_count + kNr - 1) / kNr;
  for (int64_t k0 = 0; k0 < w.cols; k0 += kKc) {
    const int64_t kc = std::min(kKc, w.cols - k0);
    for (int64_t p = 0; p < panels; ++p) PackPanel<D>(w, n_begin + p * kNr, k0, kc, staging, packed + p * kNr * kc);
    for (int64_t i0 = i_begin; i0 < i_end; i0 += kRows) {
      const int64_t rows = std::min(kRows, i_end - i0);
      internal::PackRowsKMajor(x + i0 * w.cols + k0, rows, w.cols, kc, a_packed, rows);
      for (int64_t p = 0; p < panels; ++p) {
        internal::RunMicroKernel512(rows, a_packed, rows, packed + p * kNr * kc, kc, z);
        StoreGemmTile(z, rows, std::min<int64_t>(kNr, n_count - p * kNr), k0 > 0, y + i0 * w.rows + n_begin + p * kNr,
                      w.rows);
      }
    }
  }
}

template <DType D>
void GemmAvx512(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  if (w.cols == 0) {
    GemmAvx2<D>(x, m, w, y);  // writes the zeros
    return;
  }
  ForEachGemmItem(m, w, [&](int64_t n_begin, int64_t n_count, int64_t i_begin, int64_t i_end) {
    GemmAvx512Block<D>(x, w, y, n_begin, n_count, i_begin, i_end);
  });
}

template <DType D>
void LinearAvx2(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  if (m <= 8) {
    GemvAvx2<D>(x, m, w, y);
  } else if (internal::UseAvx512()) {
    GemmAvx512<D>(x, m, w, y);
  } else {
    GemmAvx2<D>(x, m, w, y);
  }
}

#endif  // ENVFORGE_KERNELS_X86

// Decode one element of w (scales applied) for the plain paths.
float WeightAt(const WeightMatrix& w, int64_t row, int64_t col) {
  const int64_t index = row * w.cols + col;
  switch (w.dtype) {
    case DType::kF32: return static_cast<const float*>(w.data)[index];
    case DType::kBF16: return Bf16ToFloat(static_cast<const uint16_t*>(w.data)[index]);
    case DType::kF16: return HalfToFloat(static_cast<const uint16_t*>(w.data)[index]);
    case DType::kF8E4M3: return Fp8E4M3ToFloat(static_cast<const uint8_t*>(w.data)[index]) * BlockScale(w, row, col);
  }
  return 0.0f;
}

#if ENVFORGE_KERNELS_X86
// FakeQuantFp8 of rows [begin, end) with the 8-lane rounding of internal/fp8_round.h (bit-identical
// to the scalar quantizer; act_quant is a per-call cost of every fp8 Linear, large for batches).
ENVFORGE_TARGET_AVX2 void FakeQuantRowsAvx2(float* x, int64_t begin, int64_t end, int64_t cols, bool pow2_scales) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t row = begin; row < end; ++row) {
    for (int64_t group = 0; group < cols; group += kFp8Block) {
      float* values = x + row * cols + group;
      const int64_t count = std::min(kFp8Block, cols - group);
      const int64_t vector_end = count / 8 * 8;
      __m256 amax_v = _mm256_setzero_ps();
      for (int64_t i = 0; i < vector_end; i += 8)
        amax_v = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(values + i), abs_mask), amax_v);
      float amax = internal::HorizontalMax(amax_v);
      for (int64_t i = vector_end; i < count; ++i) amax = std::max(amax, std::fabs(values[i]));
      const float scale = Fp8GroupScale(amax, pow2_scales);
      const __m256 scale_v = _mm256_set1_ps(scale);
      for (int64_t i = 0; i < vector_end; i += 8) {
        _mm256_storeu_ps(values + i, internal::FakeQuantFp8x8(_mm256_loadu_ps(values + i), scale_v));
      }
      for (int64_t i = vector_end; i < count; ++i) {
        float v = values[i] / scale;
        if (v == v) v = std::clamp(v, -448.0f, 448.0f);
        values[i] = internal::RoundClampedToFp8(v) * scale;
      }
    }
  }
}
#endif  // ENVFORGE_KERNELS_X86

// W8A8: the activations the fp8 product sees (linear.h). storage is per calling thread and only
// grows, so decode steps do not allocate here. `fast` takes the AVX2 quantizer when it can.
const float* ActivationsFor(const float* x, int64_t m, const WeightMatrix& w, std::vector<float>& storage, bool fast) {
  if (w.dtype != DType::kF8E4M3) return x;
  storage.assign(x, x + m * w.cols);
#if ENVFORGE_KERNELS_X86
  if (fast && internal::UseAvx2()) {
    float* values = storage.data();
    const int64_t cols = w.cols;
    ParallelFor(m, std::max<int64_t>(1, 65536 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
      FakeQuantRowsAvx2(values, begin, end, cols, w.pow2_activation_scales);
    });
    return storage.data();
  }
#endif
  FakeQuantFp8(storage.data(), m, w.cols, kFp8Block, w.pow2_activation_scales);
  return storage.data();
}

}  // namespace

void DequantizeRow(const WeightMatrix& w, int64_t row, float* out) {
  if (w.dtype == DType::kF8E4M3) {
    const uint8_t* src = static_cast<const uint8_t*>(w.data) + row * w.cols;
    const float* table = Fp8E4M3Table();
    for (int64_t begin = 0; begin < w.cols; begin += kFp8Block) {
      const int64_t end = std::min(w.cols, begin + kFp8Block);
      const float scale = BlockScale(w, row, begin);
      for (int64_t k = begin; k < end; ++k) out[k] = table[src[k]] * scale;
    }
    return;
  }
  for (int64_t k = 0; k < w.cols; ++k) out[k] = WeightAt(w, row, k);
}

void Linear(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  assert(x != y);
  if (m <= 0 || w.rows <= 0) return;
  thread_local std::vector<float> quantized;
  const float* activations = ActivationsFor(x, m, w, quantized, true);
#if ENVFORGE_KERNELS_X86
  if (internal::UseAvx2()) {
    switch (w.dtype) {
      case DType::kF32: LinearAvx2<DType::kF32>(activations, m, w, y); return;
      case DType::kBF16: LinearAvx2<DType::kBF16>(activations, m, w, y); return;
      case DType::kF16: LinearAvx2<DType::kF16>(activations, m, w, y); return;
      case DType::kF8E4M3: LinearAvx2<DType::kF8E4M3>(activations, m, w, y); return;
    }
  }
#endif
  LinearPortable(activations, m, w, y);
}

namespace ref {

void Linear(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  std::vector<float> quantized;
  const float* activations = ActivationsFor(x, m, w, quantized, false);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t n = 0; n < w.rows; ++n) {
      double sum = 0.0;
      for (int64_t k = 0; k < w.cols; ++k) sum += static_cast<double>(activations[i * w.cols + k]) * WeightAt(w, n, k);
      y[i * w.rows + n] = static_cast<float>(sum);
    }
  }
}

}  // namespace ref
}  // namespace envforge::kernels
