// Sparse MLA attention in MQA mode on the GPU (sparse_mla.h): the attention kernel (prefill, and
// one split of decode), the combine kernel of split-KV decode, and the host packer of cache rows.
//
// One block of 256 threads (8 warps) computes 64 head rows of one token over that token's
// selected slots, 64 slots (a "chunk") per pipeline step. Head rows past `heads` are zero query
// rows: their scores are 0, they stay finite, and they are never written. Per chunk:
//   1. gather  the chunk's rows are copied raw with cp.async into shared staging (fp8 codes, fp32
//              scales and bf16 rope in three arrays); skipped slots (index < 0, >= slots, or past
//              the end of the selection) are not read. The copy of chunk c + 1 is in flight while
//              chunk c is multiplied.
//   2. dequant every thread converts fp8 * scale -> bf16 into the K tile [64 keys][kRank + 64];
//              rows of skipped slots become zeros, so P * V never meets stale bits.
//   3. S = Q K^T with mma.sync m16n8k16 bf16 (K dim = kv_rank + rope_dim), fp32 accumulation.
//   4. online softmax in fp32, log2 domain: z2 = S * scale * log2(e); skipped slots are -inf.
//   5. O += P V with P rounded to bf16 and V = the first kv_rank columns of the same K tile.
//
// Warp roles (w = 0..7): row group rg = w / 4 owns head rows [32 rg, 32 rg + 32) (two m16 tiles);
// quarter q = w % 4 computes S for keys [16 q, 16 q + 16) of the chunk and owns value columns
// [q kRank / 4, (q + 1) kRank / 4) of O. Each thread thus holds 2 x (kRank / 32) x 4 fp32
// accumulators (128 for kv_rank 512). The four warps of a row group exchange their partial row
// maxima and their P columns through shared memory (named barrier 1 + rg, 128 threads). Every
// warp of a row group sees the same running maximum, so each keeps its own partial row sum and
// the four are added once at the end.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .bf16; g = lane / 4, t = lane % 4):
//   A (16 x 16, row-major): reg0 = (row g, cols 2t..2t+1), reg1 = (row g+8, same cols),
//                           reg2 = (row g, cols 2t+8..2t+9), reg3 = (row g+8, cols 2t+8..).
//   B (16 x 8, "col"):      reg0 = (k 2t..2t+1, n g), reg1 = (k 2t+8..2t+9, n g).
//   C (16 x 8):             c0, c1 = (row g, cols 2t, 2t+1); c2, c3 = (row g+8, same cols).
// ldmatrix .x4: lane l supplies the address of row l % 8 of 8x8 matrix l / 8 and receives
// register j = (row l / 4, elements 2(l % 4), 2(l % 4) + 1) of matrix j (.trans: the transposed
// matrix). Q and P (A operands) load as matrices {rows 0-7 | rows 8-15} x {k 0-7 | k 8-15};
// K for S (B operand, keys are n, stored [key][dim]) loads non-transposed; V for O (B operand,
// keys are k, stored [key][col]) loads transposed.
//
// Shared tiles of Q and K use rows of kRank + 64 bf16 (128-byte multiples) in 16-byte chunks
// whose index is XORed with (row & 7): the 8 rows one ldmatrix phase reads then fall on 8
// different bank groups. The P tile is padded instead (72 bf16 per row).
//
// Split-KV decode runs the same kernel with the chunks of each token divided over gridDim.y
// blocks, each writing its unnormalised O, running maximum (log2 domain) and row sum to the
// workspace; sparse_mla_combine_kernel merges them with log-sum-exp weights.
#include "kernels/cuda/internal/cuda_compat.cuh"
#include "base/int_math.h"
#include "kernels/cuda/internal/ptx.cuh"

#include "kernels/cuda/sparse_mla.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace envforge::kernels::cuda {
namespace {

constexpr int kHeadTile = 64;  // head rows per block
constexpr int kChunk = 64;     // selected slots per pipeline step
constexpr int kThreads = 256;  // 8 warps
constexpr int kMaxRope = 64;
constexpr int kPStride = kChunk + 8;  // bf16 per P row; the 16-byte pad spreads ldmatrix rows over banks
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Byte offsets of the dynamic shared memory (every offset a multiple of 16).
template <int kRank>
struct SmemLayout {
  static constexpr int kStride = kRank + kMaxRope;  // bf16 per Q / K tile row
  static constexpr int kRowBytes = kStride * 2;
  static constexpr int kQ = 0;                                     // [64 heads][kStride] bf16
  static constexpr int kK = kQ + kHeadTile * kRowBytes;            // [64 keys][kStride] bf16
  static constexpr int kP = kK + kChunk * kRowBytes;               // [64 heads][kPStride] bf16
  static constexpr int kRawNope = kP + kHeadTile * kPStride * 2;   // [64][kRank] fp8
  static constexpr int kRawScale = kRawNope + kChunk * kRank;      // [64][4] fp32
  static constexpr int kRawRope = kRawScale + kChunk * 4 * 4;      // [64][64] bf16
  static constexpr int kFlags = kRawRope + kChunk * kMaxRope * 2;  // [2][64] int: slot valid
  static constexpr int kRedMax = kFlags + 2 * kChunk * 4;          // [4 quarters][64] fp32
  static constexpr int kRedSum = kRedMax + 4 * kHeadTile * 4;      // [4 quarters][64] fp32
  static constexpr int kBytes = kRedSum + 4 * kHeadTile * 4;
};
static_assert(SmemLayout<512>::kBytes <= 227 * 1024, "kv_rank 512 must fit an H100 block's shared memory");

struct KernelParams {
  const uint16_t* q;  // [tokens, heads, kRank + rope_dim]
  int64_t tokens;
  int heads, head_tiles;
  const uint8_t* cache;  // [slots, row_bytes]
  int64_t slots;
  int row_bytes, rope_dim;
  bool aligned16;          // rows can be gathered in 16-byte pieces (kv_rank 512 and a 16-byte aligned cache)
  const int32_t* indices;  // [tokens, topk]
  int topk;
  float scale_log2;      // scale * log2(e)
  uint16_t* out;         // [tokens, heads, kRank] (prefill)
  float* lse;            // [tokens, heads] or null (prefill)
  int chunks_per_split;  // split mode: chunks of a token per block
  float* ws_o;           // split mode: [splits, tokens, heads, kRank] unnormalised O
  float* ws_m;           // split mode: [splits, tokens, heads] running max, log2 domain (-inf: no valid slot)
  float* ws_l;           // split mode: [splits, tokens, heads] row sum
};

// PTX: kernels/cuda/internal/ptx.cuh
using internal::CpAsync;
using internal::CpAsyncCommit;
using internal::CpAsyncWaitAll;
using internal::LdMatrixX4;
using internal::LdMatrixX4Trans;
using internal::MmaBf16M16N8K16;

// Barrier of the 128 threads (4 warps) of one row group; id 0 is __syncthreads'.
__device__ __forceinline__ void RowGroupBarrier(int row_group) { internal::NamedBarrier(1 + row_group, 128); }

__device__ __forceinline__ uint32_t PackBf16x2(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  uint32_t bits;
  memcpy(&bits, &pair, 4);
  return bits;
}

// Two fp8 e4m3 codes (low byte first) times the group scale, as bf16x2. e4m3 -> f16 is exact,
// and the fp32 product rounded once to bf16 equals the CPU's fp32 dequantization rounded to bf16.
__device__ __forceinline__ uint32_t DequantFp8x2(uint32_t two_codes, float scale) {
  const __half2_raw halves =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes & 0xffffu), __NV_E4M3);
  const float2 values = __half22float2(__half2(halves));
  return PackBf16x2(values.x * scale, values.y * scale);
}

// Copies one cache row into the staging arrays, in kPiece-byte cp.async pieces spread over the
// warp's lanes.
template <int kRank, int kPiece>
__device__ __forceinline__ void CopyRow(const uint8_t* row, int rope_dim, uint8_t* nope_dst, uint8_t* scale_dst,
                                        uint8_t* rope_dst, int lane) {
  constexpr int kNopePieces = kRank / kPiece;
  constexpr int kScalePieces = (kRank / 128 * 4 + kPiece - 1) / kPiece;  // 16-byte pieces: kv_rank 512 only
  const int rope_pieces = rope_dim * 2 / kPiece;
  const int pieces = kNopePieces + kScalePieces + rope_pieces;
  for (int piece = lane; piece < pieces; piece += 32) {
    if (piece < kNopePieces) {
      CpAsync<kPiece>(nope_dst + piece * kPiece, row + piece * kPiece);
    } else if (piece < kNopePieces + kScalePieces) {
      const int offset = (piece - kNopePieces) * kPiece;
      CpAsync<kPiece>(scale_dst + offset, row + kRank + offset);
    } else {
      const int offset = (piece - kNopePieces - kScalePieces) * kPiece;
      CpAsync<kPiece>(rope_dst + offset, row + kRank + kRank / 32 + offset);
    }
  }
}

// Issues the copies of the chunk [key_begin, key_begin + 64) of this token's selection (keys at
// or past key_end are skipped) and records which rows are valid in flags. Warp w gathers rows
// w, w + 8, ..., w + 56.
template <int kRank>
__device__ void GatherChunk(const KernelParams& p, int64_t token, int key_begin, int key_end, uint8_t* smem, int* flags,
                            int warp, int lane) {
  using L = SmemLayout<kRank>;
  int my_slot = -1;
  if (lane < 8) {
    const int key = key_begin + warp + 8 * lane;
    if (key < key_end) {
      const int32_t index = p.indices[token * p.topk + key];
      if (index >= 0 && index < p.slots) my_slot = index;
    }
  }
  for (int i = 0; i < 8; ++i) {
    const int row = warp + 8 * i;
    const int slot = __shfl_sync(0xffffffffu, my_slot, i);
    if (lane == 0) flags[row] = slot >= 0 ? 1 : 0;
    if (slot < 0) continue;
    const uint8_t* src = p.cache + static_cast<int64_t>(slot) * p.row_bytes;
    uint8_t* nope_dst = smem + L::kRawNope + row * kRank;
    uint8_t* scale_dst = smem + L::kRawScale + row * 16;
    uint8_t* rope_dst = smem + L::kRawRope + row * kMaxRope * 2;
    if constexpr (kRank == 512) {
      if (p.aligned16) {
        CopyRow<kRank, 16>(src, p.rope_dim, nope_dst, scale_dst, rope_dst, lane);
        continue;
      }
    }
    CopyRow<kRank, 4>(src, p.rope_dim, nope_dst, scale_dst, rope_dst, lane);
  }
}

// Staging -> K tile (bf16, swizzled), zero rows for skipped slots. Unit = 8 codes -> one 16-byte
// chunk, so the 8 lanes of one store phase write 8 distinct chunks of one 128-byte row segment.
template <int kRank>
__device__ void DequantizeChunk(uint8_t* smem, const int* flags, int rope_dim, int tid) {
  using L = SmemLayout<kRank>;
  constexpr int kUnits = kRank / 8;
  uint8_t* k_tile = smem + L::kK;
  const uint8_t* raw_nope = smem + L::kRawNope;
  const float* raw_scale = reinterpret_cast<const float*>(smem + L::kRawScale);
  for (int i = tid; i < kChunk * kUnits; i += kThreads) {
    const int row = i / kUnits, unit = i % kUnits;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (flags[row]) {
      const uint2 codes = *reinterpret_cast<const uint2*>(raw_nope + row * kRank + unit * 8);
      const float scale = raw_scale[row * 4 + unit / 16];
      value.x = DequantFp8x2(codes.x, scale);
      value.y = DequantFp8x2(codes.x >> 16, scale);
      value.z = DequantFp8x2(codes.y, scale);
      value.w = DequantFp8x2(codes.y >> 16, scale);
    }
    *reinterpret_cast<uint4*>(k_tile + row * L::kRowBytes + ((unit ^ (row & 7)) * 16)) = value;
  }
  const uint8_t* raw_rope = smem + L::kRawRope;
  for (int i = tid; i < kChunk * (kMaxRope / 8); i += kThreads) {
    const int row = i / (kMaxRope / 8), unit = i % (kMaxRope / 8);
    if (unit * 8 >= rope_dim) continue;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (flags[row]) value = *reinterpret_cast<const uint4*>(raw_rope + row * kMaxRope * 2 + unit * 16);
    *reinterpret_cast<uint4*>(k_tile + row * L::kRowBytes + ((kRank / 8 + (unit ^ (row & 7))) * 16)) = value;
  }
}

template <int kRank, bool kSplit>
__global__ void __launch_bounds__(kThreads, 1) sparse_mla_kernel(const KernelParams p) {
  using L = SmemLayout<kRank>;
  constexpr int kNTiles = kRank / 32;  // n8 tiles of O per warp (kRank / 4 columns)
  ENVFORGE_DYNAMIC_SHARED(uint8_t, smem);
  int* flags = reinterpret_cast<int*>(smem + L::kFlags);
  float* red_max = reinterpret_cast<float*>(smem + L::kRedMax);
  float* red_sum = reinterpret_cast<float*>(smem + L::kRedSum);
  uint16_t* p_tile = reinterpret_cast<uint16_t*>(smem + L::kP);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int row_group = warp / 4, quarter = warp % 4;
  const int g = lane / 4, t = lane % 4;
  const int64_t token = blockIdx.x / p.head_tiles;
  const int head0 = static_cast<int>(blockIdx.x % p.head_tiles) * kHeadTile;

  const int chunks = (p.topk + kChunk - 1) / kChunk;
  int chunk_begin = 0, chunk_end = chunks;
  if constexpr (kSplit) {
    chunk_begin = static_cast<int>(blockIdx.y) * p.chunks_per_split;
    chunk_end = min(chunks, chunk_begin + p.chunks_per_split);
  }

  // Q tile: rows past `heads` are zeros. Warp w loads rows w, w + 8, ...; lanes walk the row.
  const int width = kRank + p.rope_dim;
  for (int row = warp; row < kHeadTile; row += 8) {
    const int head = head0 + row;
    const uint4* src = reinterpret_cast<const uint4*>(p.q + (token * p.heads + head) * width);
    for (int unit = lane; unit < width / 8; unit += 32) {
      const uint4 value = head < p.heads ? src[unit] : make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(smem + L::kQ + row * L::kRowBytes + ((unit ^ (row & 7)) * 16)) = value;
    }
  }

  if (chunk_begin < chunk_end) {
    GatherChunk<kRank>(p, token, chunk_begin * kChunk, p.topk, smem, flags, warp, lane);
  }
  CpAsyncCommit();

  float acc[2][kNTiles][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
  // Per thread rows: 32 rg + 16 mt + 8 h + g for mt, h in {0, 1}.
  float row_max[2][2] = {{kNegInf, kNegInf}, {kNegInf, kNegInf}};
  float row_sum[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};

  // Per-lane ldmatrix addresses (see the header comment for the lane -> row mapping).
  const uint8_t* q_base = smem + L::kQ;
  const uint8_t* k_base = smem + L::kK;
  const uint8_t* p_base = smem + L::kP;
  const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1);  // A operands: row within the m16 tile
  const int a_half = lane >> 4;                          // A operands: k 0-7 or 8-15
  const int swizzle = lane & 7;                          // every row an ldmatrix lane addresses has row & 7 == lane & 7
  const uint8_t* q_row_address[2] = {q_base + (32 * row_group + a_row) * L::kRowBytes,
                                     q_base + (32 * row_group + 16 + a_row) * L::kRowBytes};
  const int s_key = 16 * quarter + (lane & 7) + 8 * (lane >> 4);  // K for S: key (n) row
  const int s_half = (lane >> 3) & 1;                             // K for S: k 0-7 or 8-15
  const uint8_t* s_key_address = k_base + s_key * L::kRowBytes;
  const int v_key = a_row;  // V for O: key (k) row within the 16-key step
  const int v_half = lane >> 4;
  const int rope_steps = p.rope_dim / 16;

  for (int chunk = chunk_begin; chunk < chunk_end; ++chunk) {
    const int buffer = (chunk - chunk_begin) & 1;
    const int* chunk_flags = flags + buffer * kChunk;
    CpAsyncWaitAll();
    __syncthreads();  // staged rows visible; every warp is done with the previous K and P tiles
    DequantizeChunk<kRank>(smem, chunk_flags, p.rope_dim, tid);
    __syncthreads();  // K tile complete; staging free
    if (chunk + 1 < chunk_end) {
      GatherChunk<kRank>(p, token, (chunk + 1) * kChunk, p.topk, smem, flags + (buffer ^ 1) * kChunk, warp, lane);
    }
    CpAsyncCommit();

    // ---- S = Q K^T for rows [32 rg, +32) x keys [16 q, +16).
    float s[2][2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
    auto score_step = [&](int step) {
      uint32_t a[2][4], b[4];
      const int a_chunk = (2 * step + a_half) ^ swizzle;
      LdMatrixX4(q_row_address[0] + a_chunk * 16, a[0]);
      LdMatrixX4(q_row_address[1] + a_chunk * 16, a[1]);
      LdMatrixX4(s_key_address + ((2 * step + s_half) ^ swizzle) * 16, b);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        MmaBf16M16N8K16(s[mt][0], a[mt], b[0], b[1]);
        MmaBf16M16N8K16(s[mt][1], a[mt], b[2], b[3]);
      }
    };
#pragma unroll
    for (int step = 0; step < kRank / 16; ++step) score_step(step);
#pragma unroll 1
    for (int step = kRank / 16; step < kRank / 16 + rope_steps; ++step) score_step(step);

      // ---- Online softmax. Skipped slots -> -inf; chunk row maxima exchanged within the row group.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = 16 * quarter + 8 * nt + 2 * t + (e & 1);
          s[mt][nt][e] = chunk_flags[key] ? s[mt][nt][e] * p.scale_log2 : kNegInf;
        }
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float m = fmaxf(fmaxf(s[mt][0][2 * h], s[mt][0][2 * h + 1]), fmaxf(s[mt][1][2 * h], s[mt][1][2 * h + 1]));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        if (t == 0) red_max[quarter * kHeadTile + 32 * row_group + 16 * mt + 8 * h + g] = m;
      }
    RowGroupBarrier(row_group);
    float correction[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = 32 * row_group + 16 * mt + 8 * h + g;
        float m = row_max[mt][h];
#pragma unroll
        for (int other = 0; other < 4; ++other) m = fmaxf(m, red_max[other * kHeadTile + row]);
        // No valid slot yet: m stays -inf; subtracting 0 keeps exp2(-inf - 0) = 0 instead of NaN.
        const float m_use = m == kNegInf ? 0.0f : m;
        correction[mt][h] = exp2f(row_max[mt][h] - m_use);
        row_max[mt][h] = m;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const float p0 = exp2f(s[mt][nt][2 * h] - m_use);
          const float p1 = exp2f(s[mt][nt][2 * h + 1] - m_use);
          sum += p0 + p1;
          *reinterpret_cast<uint32_t*>(p_tile + row * kPStride + 16 * quarter + 8 * nt + 2 * t) = PackBf16x2(p0, p1);
        }
        row_sum[mt][h] = row_sum[mt][h] * correction[mt][h] + sum;
      }
    RowGroupBarrier(row_group);  // P of the row group complete

    // ---- O = O * correction + P V over this warp's value columns.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        acc[mt][nt][0] *= correction[mt][0];
        acc[mt][nt][1] *= correction[mt][0];
        acc[mt][nt][2] *= correction[mt][1];
        acc[mt][nt][3] *= correction[mt][1];
      }
#pragma unroll
    for (int step = 0; step < kChunk / 16; ++step) {
      uint32_t a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int row = 32 * row_group + 16 * mt + a_row;
        LdMatrixX4(p_base + (row * kPStride + 16 * step + 8 * a_half) * 2, a[mt]);
      }
      const int key = 16 * step + v_key;
      const uint8_t* v_row_address = k_base + key * L::kRowBytes;
#pragma unroll
      for (int pair = 0; pair < kNTiles / 2; ++pair) {
        const int col_chunk = quarter * (kRank / 32) + 2 * pair + v_half;
        uint32_t b[4];
        LdMatrixX4Trans(v_row_address + ((col_chunk ^ swizzle) * 16), b);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          MmaBf16M16N8K16(acc[mt][2 * pair], a[mt], b[0], b[1]);
          MmaBf16M16N8K16(acc[mt][2 * pair + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }

  // ---- Epilogue: total row sums, then O / l and lse (prefill) or the partial state (split).
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = row_sum[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      if (t == 0) red_sum[quarter * kHeadTile + 32 * row_group + 16 * mt + 8 * h + g] = l;
    }
  RowGroupBarrier(row_group);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = 32 * row_group + 16 * mt + 8 * h + g;
      const int head = head0 + row;
      if (head >= p.heads) continue;
      float l = 0.0f;
#pragma unroll
      for (int other = 0; other < 4; ++other) l += red_sum[other * kHeadTile + row];
      const int64_t state = token * p.heads + head;
      const int col0 = quarter * (kRank / 4) + 2 * t;
      if constexpr (kSplit) {
        const int64_t partial = static_cast<int64_t>(blockIdx.y) * p.tokens * p.heads + state;
        float* o = p.ws_o + partial * kRank + col0;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          *reinterpret_cast<float2*>(o + 8 * nt) = make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
        }
        if (quarter == 0 && t == 0) {
          p.ws_m[partial] = row_max[mt][h];
          p.ws_l[partial] = l;
        }
      } else {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        uint16_t* o = p.out + state * kRank + col0;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          *reinterpret_cast<uint32_t*>(o + 8 * nt) = PackBf16x2(acc[mt][nt][2 * h] * inv, acc[mt][nt][2 * h + 1] * inv);
        }
        if (p.lse != nullptr && quarter == 0 && t == 0) {
          // l > 0 exactly when some slot was valid (the maximum contributes exp2(0) = 1).
          p.lse[state] = l > 0.0f ? (row_max[mt][h] + log2f(l)) * kLn2 : std::numeric_limits<float>::infinity();
        }
      }
    }
}

struct CombineParams {
  int64_t rows;  // tokens * heads
  int splits, kv_rank;
  const float* ws_o;
  const float* ws_m;
  const float* ws_l;
  uint16_t* out;
  float* lse;
};

// One block per (token, head), kv_rank / 4 threads with 4 columns each:
//   M = max_s m_s; w_s = 2^(m_s - M); out = sum_s w_s O_s / sum_s w_s l_s; lse = (M + log2 L) ln 2.
__global__ void sparse_mla_combine_kernel(const CombineParams p) {
  const int64_t row = blockIdx.x;
  const int col = threadIdx.x * 4;
  float m = kNegInf;
  for (int s = 0; s < p.splits; ++s) m = fmaxf(m, p.ws_m[s * p.rows + row]);
  float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float l = 0.0f;
  if (m != kNegInf) {
    for (int s = 0; s < p.splits; ++s) {
      const int64_t partial = s * p.rows + row;
      const float w = exp2f(p.ws_m[partial] - m);  // a split without valid slots: 2^-inf = 0
      if (w == 0.0f) continue;
      l += w * p.ws_l[partial];
      const float4 part = *reinterpret_cast<const float4*>(p.ws_o + partial * p.kv_rank + col);
      o.x += w * part.x;
      o.y += w * part.y;
      o.z += w * part.z;
      o.w += w * part.w;
    }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  uint32_t* dst = reinterpret_cast<uint32_t*>(p.out + row * p.kv_rank + col);
  dst[0] = PackBf16x2(o.x * inv, o.y * inv);
  dst[1] = PackBf16x2(o.z * inv, o.w * inv);
  if (p.lse != nullptr && threadIdx.x == 0) {
    p.lse[row] = l > 0.0f ? (m + log2f(l)) * kLn2 : std::numeric_limits<float>::infinity();
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

bool IsAligned(const void* pointer, size_t alignment) { return reinterpret_cast<uintptr_t>(pointer) % alignment == 0; }

// Decode plan: the token's chunks (ceil(topk / 64)) are split so that tokens * head_tiles *
// splits blocks fill at most one wave of sm_count blocks (one block per SM: the shared memory of
// kv_rank 512 allows no second); every split gets chunks_per_split chunks except possibly the
// last. splits == 1 means no split: decode runs the prefill kernel and needs no workspace.
constexpr int64_t kMaxSplits = 65535;  // gridDim.y limit

struct DecodePlan {
  int64_t splits = 1;
  int64_t chunks_per_split = 1;
};

DecodePlan PlanDecode(int64_t tokens, int64_t heads, int64_t topk, int sm_count) {
  DecodePlan plan;
  const int64_t chunks = CeilDiv(topk, kChunk);
  plan.chunks_per_split = chunks;
  const int64_t blocks = tokens * CeilDiv(heads, kHeadTile);
  if (blocks >= sm_count) return plan;
  const int64_t splits = std::min<int64_t>({chunks, sm_count / blocks, kMaxSplits});
  plan.chunks_per_split = CeilDiv(chunks, splits);
  plan.splits = CeilDiv(chunks, plan.chunks_per_split);  // no empty split
  return plan;
}

Status ValidateArgs(const SparseMlaArgs& a, const char* op) {
  auto bad = [op](const std::string& what) { return InvalidArgumentError(std::string(op) + ": " + what); };
  if (a.tokens < 0) return bad("tokens must be >= 0, got " + std::to_string(a.tokens));
  if (a.heads < 1) return bad("heads must be >= 1, got " + std::to_string(a.heads));
  if (a.kv_rank < 128 || a.kv_rank > 512 || a.kv_rank % 128 != 0) {
    return bad("kv_rank must be a multiple of 128 in [128, 512], got " + std::to_string(a.kv_rank));
  }
  if (a.rope_dim < 0 || a.rope_dim > kMaxRope || a.rope_dim % 16 != 0) {
    return bad("rope_dim must be a multiple of 16 in [0, 64], got " + std::to_string(a.rope_dim));
  }
  if (a.topk < 1 || a.topk > std::numeric_limits<int32_t>::max()) {
    return bad("topk must be in [1, 2^31 - 1], got " + std::to_string(a.topk));
  }
  if (a.slots < 0) return bad("slots must be >= 0, got " + std::to_string(a.slots));
  if (!std::isfinite(a.scale)) return bad("scale must be finite, got " + std::to_string(a.scale));
  const int64_t blocks = a.tokens * CeilDiv(a.heads, kHeadTile);
  if (a.heads > std::numeric_limits<int32_t>::max() || blocks > std::numeric_limits<int32_t>::max()) {
    return bad("tokens * ceil(heads / 64) = " + std::to_string(blocks) + " blocks exceed the grid limit 2^31 - 1");
  }
  if (a.tokens == 0) return Status();
  if (a.q == nullptr) return bad("q is null");
  if (a.indices == nullptr) return bad("indices is null");
  if (a.out == nullptr) return bad("out is null");
  if (a.cache == nullptr && a.slots > 0) return bad("cache is null with slots = " + std::to_string(a.slots));
  if (!IsAligned(a.q, 16)) return bad("q must be 16-byte aligned");
  if (!IsAligned(a.cache, 4)) return bad("cache must be 4-byte aligned");
  if (!IsAligned(a.indices, 4)) return bad("indices must be 4-byte aligned");
  if (!IsAligned(a.out, 4)) return bad("out must be 4-byte aligned");
  if (!IsAligned(a.lse, 4)) return bad("lse must be 4-byte aligned");
  return Status();
}

KernelParams MakeParams(const SparseMlaArgs& a) {
  KernelParams p{};
  p.q = a.q;
  p.tokens = a.tokens;
  p.heads = static_cast<int>(a.heads);
  p.head_tiles = static_cast<int>(CeilDiv(a.heads, kHeadTile));
  p.cache = a.cache;
  p.slots = a.slots;
  p.row_bytes = static_cast<int>(LatentRowBytes(a.kv_rank, a.rope_dim));
  p.rope_dim = static_cast<int>(a.rope_dim);
  p.aligned16 = a.kv_rank == 512 && IsAligned(a.cache, 16);  // 656-byte rows keep 16-byte alignment
  p.indices = a.indices;
  p.topk = static_cast<int>(a.topk);
  p.scale_log2 = a.scale * kLog2e;
  p.out = a.out;
  p.lse = a.lse;
  return p;
}

template <int kRank, bool kSplit>
Status LaunchAttention(const KernelParams& p, int64_t splits, cudaStream_t stream) {
  constexpr int kBytes = SmemLayout<kRank>::kBytes;
  ENVFORGE_ASSIGN_OR_RETURN(DeviceInfo device, ProbeDevice());
  if (device.shared_memory_per_block_optin < kBytes) {
    return UnavailableError("sparse MLA with kv_rank " + std::to_string(kRank) + " needs " + std::to_string(kBytes) +
                            " bytes of shared memory per block; " + device.name + " allows " +
                            std::to_string(device.shared_memory_per_block_optin));
  }
  auto* kernel = &sparse_mla_kernel<kRank, kSplit>;
  ENVFORGE_RETURN_IF_ERROR(CheckCuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes),
                                     "sparse_mla_kernel: cudaFuncSetAttribute"));
  const dim3 grid(static_cast<unsigned>(p.tokens * p.head_tiles), static_cast<unsigned>(splits));
  ENVFORGE_LAUNCH(grid, kThreads, kBytes, stream, sparse_mla_kernel<kRank, kSplit>)(p);
  return CheckCuda(cudaGetLastError(), "sparse_mla_kernel launch");
}

template <bool kSplit>
Status DispatchAttention(int64_t kv_rank, const KernelParams& p, int64_t splits, cudaStream_t stream) {
  switch (kv_rank) {
    case 128: return LaunchAttention<128, kSplit>(p, splits, stream);
    case 256: return LaunchAttention<256, kSplit>(p, splits, stream);
    case 384: return LaunchAttention<384, kSplit>(p, splits, stream);
    case 512: return LaunchAttention<512, kSplit>(p, splits, stream);
    default:
      return InvalidArgumentError("sparse MLA: kv_rank must be 128, 256, 384 or 512, got " + std::to_string(kv_rank));
  }
}

}  // namespace

Status SparseMlaPrefill(const SparseMlaArgs& args, cudaStream_t stream) {
  ENVFORGE_RETURN_IF_ERROR(ValidateArgs(args, "SparseMlaPrefill"));
  if (args.tokens == 0) return Status();
  return DispatchAttention<false>(args.kv_rank, MakeParams(args), 1, stream);
}

// Workspace of split-KV decode, when PlanDecode gives splits > 1 (else 0):
//   [splits, tokens, heads, kv_rank] fp32 unnormalised outputs, then [splits, tokens, heads] fp32
//   running maxima (log2 domain), then [splits, tokens, heads] fp32 row sums
// = splits * tokens * heads * (kv_rank + 2) * 4 bytes. Arguments out of range give 0 (the op
// itself reports them).
size_t SparseMlaDecodeWorkspaceBytes(int64_t tokens, int64_t heads, int64_t kv_rank, int64_t topk, int sm_count) {
  if (tokens < 1 || heads < 1 || kv_rank < 1 || topk < 1 || sm_count < 1) return 0;
  const DecodePlan plan = PlanDecode(tokens, heads, topk, sm_count);
  if (plan.splits == 1) return 0;
  return static_cast<size_t>(plan.splits * tokens * heads * (kv_rank + 2)) * sizeof(float);
}

Status SparseMlaDecode(const SparseMlaArgs& args, void* workspace, size_t workspace_bytes, int sm_count,
                       cudaStream_t stream) {
  ENVFORGE_RETURN_IF_ERROR(ValidateArgs(args, "SparseMlaDecode"));
  if (sm_count < 1)
    return InvalidArgumentError("SparseMlaDecode: sm_count must be >= 1, got " + std::to_string(sm_count));
  if (args.tokens == 0) return Status();
  const size_t needed = SparseMlaDecodeWorkspaceBytes(args.tokens, args.heads, args.kv_rank, args.topk, sm_count);
  if (workspace_bytes < needed) {
    return InvalidArgumentError("SparseMlaDecode: workspace_bytes = " + std::to_string(workspace_bytes) +
                                " is less than the " + std::to_string(needed) +
                                " bytes SparseMlaDecodeWorkspaceBytes gives for this shape");
  }
  if (needed > 0 && workspace == nullptr) return InvalidArgumentError("SparseMlaDecode: workspace is null");
  if (!IsAligned(workspace, 16)) return InvalidArgumentError("SparseMlaDecode: workspace must be 16-byte aligned");
  KernelParams p = MakeParams(args);
  if (needed == 0) return DispatchAttention<false>(args.kv_rank, p, 1, stream);

  const DecodePlan plan = PlanDecode(args.tokens, args.heads, args.topk, sm_count);
  const int64_t rows = args.tokens * args.heads;
  p.chunks_per_split = static_cast<int>(plan.chunks_per_split);
  p.ws_o = static_cast<float*>(workspace);
  p.ws_m = p.ws_o + plan.splits * rows * args.kv_rank;
  p.ws_l = p.ws_m + plan.splits * rows;
  ENVFORGE_RETURN_IF_ERROR(DispatchAttention<true>(args.kv_rank, p, plan.splits, stream));

  CombineParams c{};
  c.rows = rows;
  c.splits = static_cast<int>(plan.splits);
  c.kv_rank = static_cast<int>(args.kv_rank);
  c.ws_o = p.ws_o;
  c.ws_m = p.ws_m;
  c.ws_l = p.ws_l;
  c.out = args.out;
  c.lse = args.lse;
  ENVFORGE_LAUNCH(static_cast<unsigned>(rows), static_cast<unsigned>(args.kv_rank / 4), 0, stream,
                  sparse_mla_combine_kernel)
  (c);
  return CheckCuda(cudaGetLastError(), "sparse_mla_combine_kernel launch");
}

void PackLatentRows(const LatentCacheView& view, uint8_t* out) {
  const int64_t row_bytes = LatentRowBytes(view.kv_rank, view.rope_dim);
  const int64_t groups = view.kv_rank / 128;
  for (int64_t row = 0; row < view.rows; ++row) {
    uint8_t* dst = out + row * row_bytes;
    std::memcpy(dst, view.nope + row * view.kv_rank, static_cast<size_t>(view.kv_rank));
    std::memcpy(dst + view.kv_rank, view.scales + row * groups, static_cast<size_t>(groups) * sizeof(float));
    std::memcpy(dst + view.kv_rank + groups * 4, view.rope + row * view.rope_dim,
                static_cast<size_t>(view.rope_dim) * sizeof(uint16_t));
  }
}

}  // namespace envforge::kernels::cuda
