// Lightning-indexer logits on the GPU (indexer_logits.h): FP8 tensor-core MMAs, ReLU, weighted
// head sum, key scale.
//
// The GEMM of one query is Z = K . Q^T, M = keys (16 per MMA tile), N = heads (8 per MMA tile),
// K = dim (32 per MMA step), with mma.sync.m16n8k32.row.col.f32.e4m3.e4m3.f32 (sm_89+):
//   * A = keys: [key][dim] bytes in shared memory, i.e. row-major M x K as the .row operand wants;
//     fragments come from ldmatrix.x4 (8-bit data seen as b16 pairs; see ScoreTile).
//   * B = one query's heads: [head][dim] bytes, i.e. K x N column-major as the .col operand wants;
//     a warp holds its query's whole B fragment set in registers for the kernel's lifetime, so only
//     keys travel through shared memory.
// PTX fragment layouts used (groupID g = lane >> 2, threadID_in_group t = lane & 3; 4 fp8 per
// .b32, lowest byte = lowest index):
//   A (16x32): a[0] = row g, cols 4t..4t+3;  a[1] = row g+8, cols 4t..4t+3;
//              a[2] = row g, cols 16+4t..;   a[3] = row g+8, cols 16+4t..
//   B (32x8):  b[0] = col g, rows 4t..4t+3;  b[1] = col g, rows 16+4t..
//   C (16x8 f32): c[0], c[1] = row g, cols 2t, 2t+1;  c[2], c[3] = row g+8, cols 2t, 2t+1.
// So lane (g, t) ends a tile with keys g and g+8 against heads 2t, 2t+1 of every head tile: it
// sums w[h] * relu(z) over its heads in registers, then two xor-shuffles (lanes t = 0..3) finish
// the head sum of keys g and g+8.
//
// Heads are padded to a multiple of 8 with zero queries and zero weights. A warp owns kHeadTiles
// (1, 2, 4, or 8 at dim 32) head tiles; a query with more heads is split over 2 or 4 warps
// ("head groups": 64 heads of dim 64 or 128 take 2), whose partial sums are
// added in shared memory. Results go through shared memory so the CTA writes each logits row
// segment with coalesced 16-byte stores.
//
// Shared memory keeps 64-key tiles with rows padded to dim + 16 bytes: the 8 rows one ldmatrix
// matrix reads then start in 8 distinct 16-byte bank groups for dim 32, 64 and 128 (row strides
// 48, 80, 144 bytes), so ldmatrix is conflict-free without a swizzle.
//
// Prefill: a CTA of 8 warps owns 8 / head_groups consecutive queries and one chunk of key
// columns; it streams the 64-key tiles that meet any of its queries' windows through a two-stage
// cp.async pipeline, every warp scoring the shared tile against its own query (tiles, and 16-key
// MMA tiles, outside a warp's window are skipped), and fills the rest of its columns with -inf.
// Query blocks are launched last-first so the long rows of a causal prefill start early. Key
// chunks exist so that few queries against many keys still spread over the SMs.
//
// Decode: a CTA of 4 warps owns one sequence and a slice of its pages; each round it loads
// 4 / head_groups pages into shared memory with cp.async (one page per head group of warps), two
// rounds in flight. Every warp holds its share of the sequence's query in registers.
#include "kernels/cuda/internal/cuda_compat.cuh"
#include "kernels/cuda/internal/ptx.cuh"

#include "kernels/cuda/indexer_logits.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace envforge::kernels::cuda {
namespace {

constexpr int kTileKeys = 64;  // keys of one shared-memory tile: one page, 4 MMA row tiles
constexpr int kMmaRows = 16;
constexpr int kWarpSize = 32;
constexpr int kPrefillWarps = 8;
constexpr int kDecodeWarps = 4;
// Enough CTAs to give every SM of an H100 / H200 (132) several of them.
constexpr int64_t kTargetCtas = 132 * 4;
// A prefill key chunk has at least this many keys, so the query fragments (8 KB per query at
// 64 x 128) are loaded once per >= 8 tiles.
constexpr int64_t kMinChunkKeys = 512;

__host__ __device__ constexpr int RowBytes(int dim) { return dim + 16; }
// One tile in shared memory: 64 padded code rows, then the 64 fp32 key scales.
__host__ __device__ constexpr int SlotBytes(int dim) { return kTileKeys * RowBytes(dim) + kTileKeys * 4; }

// ---- PTX: kernels/cuda/internal/ptx.cuh

using internal::CpAsync16ZeroFill;
using internal::CpAsyncCommit;
using internal::CpAsyncWaitAll;
using internal::LdMatrixX4;
using internal::MmaE4m3M16N8K32;

__device__ __forceinline__ uint32_t LoadWord(const uint8_t* p) { return __ldg(reinterpret_cast<const uint32_t*>(p)); }

// ---- the per-warp query and the per-warp tile score

// One warp's share of a query: B fragments of head tiles [head_base / 8, + kHeadTiles) for every
// 32-wide k step, and the weights of the two heads (2t, 2t+1) of each head tile that this lane's
// accumulators hold. Heads >= heads are zero (query and weight).
template <int kDim, int kHeadTiles>
struct WarpQuery {
  uint32_t b[kHeadTiles][kDim / 32][2];
  float w[kHeadTiles][2];
};

template <int kDim, int kHeadTiles>
__device__ __forceinline__ void LoadWarpQuery(const uint8_t* q, const float* weights, int heads, int head_base,
                                              int lane, WarpQuery<kDim, kHeadTiles>& out) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < kHeadTiles; ++nt) {
    const int head = head_base + nt * 8 + g;  // B column g of this head tile
#pragma unroll
    for (int kk = 0; kk < kDim / 32; ++kk) {
      const uint8_t* row = q + static_cast<int64_t>(head) * kDim + kk * 32 + 4 * t;
      out.b[nt][kk][0] = head < heads ? LoadWord(row) : 0u;
      out.b[nt][kk][1] = head < heads ? LoadWord(row + 16) : 0u;
    }
    const int head0 = head_base + nt * 8 + 2 * t;  // accumulator columns 2t, 2t+1
    out.w[nt][0] = head0 < heads ? __ldg(weights + head0) : 0.0f;
    out.w[nt][1] = head0 + 1 < heads ? __ldg(weights + head0 + 1) : 0.0f;
  }
}

// Scores the 16-key MMA row tiles [tile_begin, tile_end) of the 64-key tile at `tile` (shared
// memory, padded rows) against the warp's query: partial[key] = sum over the warp's heads of
// w * relu(q . k), for the keys of those row tiles (other entries are left as they are).
template <int kDim, int kHeadTiles>
__device__ __forceinline__ void ScoreTile(const WarpQuery<kDim, kHeadTiles>& query, const uint8_t* tile, int tile_begin,
                                          int tile_end, float* partial, int lane) {
  const int g = lane >> 2, t = lane & 3;
  // ldmatrix.x4: lanes 8i..8i+7 address the rows of matrix i; matrices 0..3 = (rows 0-7, bytes
  // 0-15), (rows 8-15, bytes 0-15), (rows 0-7, bytes 16-31), (rows 8-15, bytes 16-31) of the
  // 16 x 32 A tile, which is exactly the a[0..3] order above.
  const int lane_row = (lane & 7) + ((lane >> 3) & 1) * 8;
  const int lane_col = (lane >> 4) * 16;
  const uint8_t* lane_base = tile + lane_row * RowBytes(kDim) + lane_col;
  for (int mt = tile_begin; mt < tile_end; ++mt) {
    float acc[kHeadTiles][4];
#pragma unroll
    for (int nt = 0; nt < kHeadTiles; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kDim / 32; ++kk) {
      uint32_t a[4];
      LdMatrixX4(lane_base + mt * kMmaRows * RowBytes(kDim) + kk * 32, a);
#pragma unroll
      for (int nt = 0; nt < kHeadTiles; ++nt) MmaE4m3M16N8K32(acc[nt], a, query.b[nt][kk]);
    }
    float low = 0.0f, high = 0.0f;  // keys g and g + 8 of this row tile
#pragma unroll
    for (int nt = 0; nt < kHeadTiles; ++nt) {
      low += query.w[nt][0] * fmaxf(acc[nt][0], 0.0f) + query.w[nt][1] * fmaxf(acc[nt][1], 0.0f);
      high += query.w[nt][0] * fmaxf(acc[nt][2], 0.0f) + query.w[nt][1] * fmaxf(acc[nt][3], 0.0f);
    }
    low += __shfl_xor_sync(0xffffffffu, low, 1);
    low += __shfl_xor_sync(0xffffffffu, low, 2);
    high += __shfl_xor_sync(0xffffffffu, high, 1);
    high += __shfl_xor_sync(0xffffffffu, high, 2);
    if (t == 0) partial[mt * kMmaRows + g] = low;
    if (t == 1) partial[mt * kMmaRows + 8 + g] = high;
  }
}

// Issues the cp.async copies of one 64-key tile: code rows [0, 64) from `codes` (row r at
// codes + r * dim) and the 64 scales from `scales`; rows >= valid_rows and scales >= valid_rows
// are zero-filled. Threads [thread, thread + stride) split the 16-byte chunks among them.
template <int kDim>
__device__ __forceinline__ void LoadTileAsync(const uint8_t* codes, const float* scales, int valid_rows, uint8_t* slot,
                                              int thread, int stride) {
  constexpr int kRowChunks = kDim / 16;
  constexpr int kCodeChunks = kTileKeys * kRowChunks;
  constexpr int kChunks = kCodeChunks + kTileKeys / 4;
  for (int c = thread; c < kChunks; c += stride) {
    if (c < kCodeChunks) {
      const int row = c / kRowChunks, col = (c % kRowChunks) * 16;
      const bool valid = row < valid_rows;
      CpAsync16ZeroFill(slot + row * RowBytes(kDim) + col, valid ? codes + row * kDim + col : codes, valid ? 16 : 0);
    } else {
      const int first = (c - kCodeChunks) * 4;
      const int bytes = 4 * std::min(std::max(valid_rows - first, 0), 4);
      CpAsync16ZeroFill(slot + kTileKeys * RowBytes(kDim) + first * 4, bytes > 0 ? scales + first : scales, bytes);
    }
  }
}

__device__ __forceinline__ void StoreQuad(float* out, float4 v) { *reinterpret_cast<float4*>(out) = v; }

constexpr float kNegInf = -__builtin_huge_valf();

// Fills out[begin, end) with -inf; begin and end are multiples of 4 relative to a 16-byte aligned
// row, except that end may be ragged (scalar tail).
__device__ __forceinline__ void FillNegInf(float* row, int64_t begin, int64_t end, int thread, int stride) {
  const int64_t quads = (end - begin) / 4;
  for (int64_t i = thread; i < quads; i += stride) {
    StoreQuad(row + begin + 4 * i, make_float4(kNegInf, kNegInf, kNegInf, kNegInf));
  }
  for (int64_t c = begin + 4 * quads + thread; c < end; c += stride) row[c] = kNegInf;
}

// ---- prefill

struct PrefillParams {
  const uint8_t* q;
  const float* head_weight;
  const uint8_t* keys;
  const float* key_scale;
  const int32_t* key_begin;
  const int32_t* key_end;
  int queries, heads, keys_count;
  int head_groups;     // warps per query (SplitHeads): 1, 2 or 4
  int query_blocks;    // gridDim.x
  int64_t chunk_keys;  // columns per blockIdx.y, a multiple of 64
  float* logits;
  int64_t logits_stride;
};

template <int kDim, int kHeadTiles>
__global__ void __launch_bounds__(kPrefillWarps* kWarpSize, 2) indexer_logits_prefill_kernel(const PrefillParams p) {
  ENVFORGE_DYNAMIC_SHARED(uint8_t, shared);
  constexpr int kThreads = kPrefillWarps * kWarpSize;
  uint8_t* stages = shared;                                                   // 2 slots
  float* partial = reinterpret_cast<float*>(shared + 2 * SlotBytes(kDim));    // [warp][64]
  int* window = reinterpret_cast<int*>(partial + kPrefillWarps * kTileKeys);  // [slot][2]

  const int thread = threadIdx.x, warp = thread / kWarpSize, lane = thread % kWarpSize;
  const int slots = kPrefillWarps / p.head_groups;
  const int query_block = p.query_blocks - 1 - static_cast<int>(blockIdx.x);  // longest rows first
  const int first_query = query_block * slots;
  const int64_t chunk_begin = static_cast<int64_t>(blockIdx.y) * p.chunk_keys;
  const int64_t chunk_end = std::min(chunk_begin + p.chunk_keys, static_cast<int64_t>(p.keys_count));

  // Each query's window, clamped to [0, keys_count) and intersected with this chunk; empty
  // windows (and queries past the end) are [0, 0).
  if (thread < slots) {
    const int query = first_query + thread;
    int lo = 0, hi = 0;
    if (query < p.queries) {
      hi = p.key_end != nullptr ? std::min(std::max(p.key_end[query], 0), p.keys_count) : p.keys_count;
      lo = p.key_begin != nullptr ? std::min(std::max(p.key_begin[query], 0), hi) : 0;
      lo = static_cast<int>(std::max(static_cast<int64_t>(lo), chunk_begin));
      hi = static_cast<int>(std::min(static_cast<int64_t>(hi), chunk_end));
      if (lo >= hi) lo = hi = 0;
    }
    window[2 * thread] = lo;
    window[2 * thread + 1] = hi;
  }
  __syncthreads();
  int64_t union_begin = chunk_end, union_end = chunk_begin;
  for (int s = 0; s < slots; ++s) {
    if (window[2 * s] < window[2 * s + 1]) {
      union_begin = std::min(union_begin, static_cast<int64_t>(window[2 * s]));
      union_end = std::max(union_end, static_cast<int64_t>(window[2 * s + 1]));
    }
  }
  // Tiles are aligned to multiples of 64 (chunk_begin is one), so row segments stay 16-byte aligned.
  int64_t tiles_begin = chunk_begin, tiles_end = chunk_begin;
  if (union_begin < union_end) {
    tiles_begin = union_begin / kTileKeys * kTileKeys;
    tiles_end = (union_end + kTileKeys - 1) / kTileKeys * kTileKeys;
  }
  const int tile_count = static_cast<int>((tiles_end - tiles_begin) / kTileKeys);
  if (tile_count > 0) {
    LoadTileAsync<kDim>(p.keys + tiles_begin * kDim, p.key_scale + tiles_begin,
                        static_cast<int>(std::min<int64_t>(kTileKeys, p.keys_count - tiles_begin)), stages, thread,
                        kThreads);
    CpAsyncCommit();
  }

  // -inf outside the tiles, within this chunk.
  for (int s = 0; s < slots; ++s) {
    const int query = first_query + s;
    if (query >= p.queries) break;
    float* row = p.logits + static_cast<int64_t>(query) * p.logits_stride;
    FillNegInf(row, chunk_begin, tiles_begin, thread, kThreads);
    FillNegInf(row, std::min(tiles_end, chunk_end), chunk_end, thread, kThreads);
  }

  const int slot = warp / p.head_groups, head_group = warp % p.head_groups;
  const int query = first_query + slot;
  const int lo = window[2 * slot], hi = window[2 * slot + 1];
  WarpQuery<kDim, kHeadTiles> wq;
  if (query < p.queries && lo < hi) {
    LoadWarpQuery<kDim, kHeadTiles>(p.q + static_cast<int64_t>(query) * p.heads * kDim,
                                    p.head_weight + static_cast<int64_t>(query) * p.heads, p.heads,
                                    head_group * kHeadTiles * 8, lane, wq);
  }

  for (int i = 0; i < tile_count; ++i) {
    const int64_t tile_key = tiles_begin + static_cast<int64_t>(i) * kTileKeys;
    uint8_t* tile = stages + (i & 1) * SlotBytes(kDim);
    CpAsyncWaitAll();
    __syncthreads();  // tile i is visible; the writer of tile i - 1 is done with the other stage
    if (i + 1 < tile_count) {
      const int64_t next_key = tile_key + kTileKeys;
      LoadTileAsync<kDim>(p.keys + next_key * kDim, p.key_scale + next_key,
                          static_cast<int>(std::min<int64_t>(kTileKeys, p.keys_count - next_key)),
                          stages + ((i + 1) & 1) * SlotBytes(kDim), thread, kThreads);
      CpAsyncCommit();
    }
    // Row tiles of 16 keys that meet [lo, hi); warp-uniform.
    const int64_t first_row = std::max<int64_t>(lo - tile_key, 0),
                  last_row = std::min<int64_t>(hi - tile_key, kTileKeys);
    if (first_row < last_row) {
      ScoreTile<kDim, kHeadTiles>(wq, tile, static_cast<int>(first_row / kMmaRows),
                                  static_cast<int>((last_row + kMmaRows - 1) / kMmaRows), partial + warp * kTileKeys,
                                  lane);
    }
    __syncthreads();  // partials complete
    const float* scales = reinterpret_cast<const float*>(tile + kTileKeys * RowBytes(kDim));
    for (int item = thread; item < slots * (kTileKeys / 4); item += kThreads) {
      const int s = item / (kTileKeys / 4), first = (item % (kTileKeys / 4)) * 4;
      const int out_query = first_query + s;
      if (out_query >= p.queries) continue;
      const int s_lo = window[2 * s], s_hi = window[2 * s + 1];
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t key = tile_key + first + j;
        if (key >= s_lo && key < s_hi) {
          float sum = 0.0f;
          for (int group = 0; group < p.head_groups; ++group)
            sum += partial[(s * p.head_groups + group) * kTileKeys + first + j];
          v[j] = scales[first + j] * sum;
        } else {
          v[j] = kNegInf;
        }
      }
      float* out = p.logits + static_cast<int64_t>(out_query) * p.logits_stride + tile_key + first;
      if (tile_key + first + 4 <= chunk_end) {
        StoreQuad(out, make_float4(v[0], v[1], v[2], v[3]));
      } else {
        for (int j = 0; j < 4 && tile_key + first + j < chunk_end; ++j) out[j] = v[j];
      }
    }
  }
}

// ---- decode

struct DecodeParams {
  const uint8_t* q;
  const float* head_weight;
  const uint8_t* pages;
  const int32_t* block_table;
  const int32_t* context_len;
  int batch, heads, num_pages, max_pages;
  int head_groups;      // warps per page (SplitHeads): 1, 2 or 4
  int slices;           // CTAs per sequence
  int pages_per_slice;  // a multiple of the pages per round
  float* logits;
  int64_t logits_stride;
};

template <int kDim, int kHeadTiles>
__global__ void __launch_bounds__(kDecodeWarps* kWarpSize, 4) indexer_logits_decode_kernel(const DecodeParams p) {
  ENVFORGE_DYNAMIC_SHARED(uint8_t, shared);
  constexpr int kThreads = kDecodeWarps * kWarpSize;
  constexpr int64_t kPageBytes = IndexerPageBytes(kDim);
  const int round_pages = kDecodeWarps / p.head_groups;
  uint8_t* stages = shared;  // 2 stages x round_pages slots
  float* partial = reinterpret_cast<float*>(shared + 2 * round_pages * SlotBytes(kDim));  // [warp][64]

  const int thread = threadIdx.x, warp = thread / kWarpSize, lane = thread % kWarpSize;
  const int sequence = static_cast<int>(blockIdx.x / p.slices), slice = static_cast<int>(blockIdx.x % p.slices);
  const int64_t stride = p.logits_stride;
  const int64_t ctx = std::min<int64_t>(std::max(p.context_len[sequence], 0),
                                        std::min(static_cast<int64_t>(p.max_pages) * kTileKeys, stride));
  const int page_begin = std::min(slice * p.pages_per_slice, p.max_pages);
  const int page_end = std::min(page_begin + p.pages_per_slice, p.max_pages);
  const int active_end = static_cast<int>(std::min<int64_t>(page_end, (ctx + kTileKeys - 1) / kTileKeys));
  const int active_pages = std::max(active_end - page_begin, 0);
  const int32_t* table = p.block_table + static_cast<int64_t>(sequence) * p.max_pages;
  float* row = p.logits + static_cast<int64_t>(sequence) * stride;

  // The slot's page id in round r, or -1 when the slot is past the active pages or the table
  // entry is not a page id in [0, num_pages): such a page is never read and its tokens score -inf.
  auto page_id = [&](int round, int slot_index) -> int {
    const int page = page_begin + round * round_pages + slot_index;
    if (page >= active_end) return -1;
    const int id = __ldg(table + page);
    return id >= 0 && id < p.num_pages ? id : -1;
  };
  auto load_round = [&](int round) {
    uint8_t* stage = stages + (round & 1) * round_pages * SlotBytes(kDim);
    for (int s = 0; s < round_pages; ++s) {
      const int id = page_id(round, s);
      if (id < 0) continue;
      const uint8_t* page = p.pages + static_cast<int64_t>(id) * kPageBytes;
      LoadTileAsync<kDim>(page, reinterpret_cast<const float*>(page + kTileKeys * kDim), kTileKeys,
                          stage + s * SlotBytes(kDim), thread, kThreads);
    }
    CpAsyncCommit();
  };

  const int rounds = (active_pages + round_pages - 1) / round_pages;
  if (rounds > 0) load_round(0);

  // -inf past the active pages: to the end of this slice, and for the last slice to the row end.
  const int64_t fill_begin =
      std::max<int64_t>(static_cast<int64_t>(page_begin) * kTileKeys, static_cast<int64_t>(active_end) * kTileKeys);
  const int64_t fill_end =
      slice == p.slices - 1 ? stride : std::min<int64_t>(static_cast<int64_t>(page_end) * kTileKeys, stride);
  if (fill_begin < fill_end) FillNegInf(row, fill_begin, fill_end, thread, kThreads);

  const int slot = warp / p.head_groups, head_group = warp % p.head_groups;
  WarpQuery<kDim, kHeadTiles> wq;
  if (rounds > 0) {
    LoadWarpQuery<kDim, kHeadTiles>(p.q + static_cast<int64_t>(sequence) * p.heads * kDim,
                                    p.head_weight + static_cast<int64_t>(sequence) * p.heads, p.heads,
                                    head_group * kHeadTiles * 8, lane, wq);
  }

  for (int r = 0; r < rounds; ++r) {
    uint8_t* stage = stages + (r & 1) * round_pages * SlotBytes(kDim);
    CpAsyncWaitAll();
    __syncthreads();  // round r is visible; the writer of round r - 1 is done with the other stage
    if (r + 1 < rounds) load_round(r + 1);
    const int page = page_begin + r * round_pages + slot;
    if (page_id(r, slot) >= 0) {
      const int64_t keys_left = ctx - static_cast<int64_t>(page) * kTileKeys;  // > 0 for an active page
      ScoreTile<kDim, kHeadTiles>(wq, stage + slot * SlotBytes(kDim), 0,
                                  static_cast<int>(std::min<int64_t>((keys_left + kMmaRows - 1) / kMmaRows, 4)),
                                  partial + warp * kTileKeys, lane);
    }
    __syncthreads();  // partials complete
    for (int item = thread; item < round_pages * (kTileKeys / 4); item += kThreads) {
      const int s = item / (kTileKeys / 4), first = (item % (kTileKeys / 4)) * 4;
      const int out_page = page_begin + r * round_pages + s;
      if (out_page >= active_end) continue;
      const bool valid = page_id(r, s) >= 0;
      const float* scales = reinterpret_cast<const float*>(stage + s * SlotBytes(kDim) + kTileKeys * RowBytes(kDim));
      const int64_t column = static_cast<int64_t>(out_page) * kTileKeys + first;
      if (column >= stride) continue;  // stride is a multiple of 4: a quad is all in or all out
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (valid && column + j < ctx) {
          float sum = 0.0f;
          for (int group = 0; group < p.head_groups; ++group)
            sum += partial[(s * p.head_groups + group) * kTileKeys + first + j];
          v[j] = scales[first + j] * sum;
        } else {
          v[j] = kNegInf;
        }
      }
      StoreQuad(row + column, make_float4(v[0], v[1], v[2], v[3]));
    }
  }
}

// ---- host side

// Head tiles per warp (a power of two) and warps per query ("head groups") for `heads`. A warp
// takes at most 4 head tiles (8 at dim 32) so that query fragments plus accumulators fit 128
// registers per thread without spilling (ptxas -v): 64 heads of dim 64 or 128 take two warps.
struct HeadSplit {
  int tiles_per_warp;
  int groups;
};
HeadSplit SplitHeads(int64_t heads, int64_t dim) {
  const int tiles = static_cast<int>((heads + 7) / 8);
  const int max_tiles = dim == 32 ? 8 : 4;
  int per_warp = 1;
  while (per_warp < tiles && per_warp < max_tiles) per_warp *= 2;
  // Groups are a power of two (so they divide the CTA's warps): 9..12 tiles of 4 take 4 groups.
  int groups = 1;
  while (groups * per_warp < tiles) groups *= 2;
  return {per_warp, groups};
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Status CheckPointer(const void* p, const char* name) {
  if (p == nullptr) return InvalidArgumentError(std::string(name) + " is null");
  if (!Aligned16(p)) return InvalidArgumentError(std::string(name) + " is not 16-byte aligned");
  return Status();
}

Status CheckShape(int64_t heads, int64_t dim) {
  if (dim != 32 && dim != 64 && dim != 128) {
    return InvalidArgumentError("dim must be 32, 64 or 128, got " + std::to_string(dim));
  }
  if (heads < 1 || heads > 128) return InvalidArgumentError("heads must be in [1, 128], got " + std::to_string(heads));
  return Status();
}

// Calls fn.template operator()<kDim, kHeadTiles>() for the runtime (dim, tiles per warp).
template <typename Fn>
Status DispatchShape(int64_t dim, int tiles_per_warp, Fn&& fn) {
  auto by_tiles = [&]<int kDim>() -> Status {
    switch (tiles_per_warp) {
      case 1: return fn.template operator()<kDim, 1>();
      case 2: return fn.template operator()<kDim, 2>();
      case 4: return fn.template operator()<kDim, 4>();
      default:
        if constexpr (kDim == 32) {
          return fn.template operator()<kDim, 8>();
        } else {
          return InternalError("no indexer kernel for 8 head tiles of dim " + std::to_string(kDim));
        }
    }
  };
  switch (dim) {
    case 32: return by_tiles.template operator()<32>();
    case 64: return by_tiles.template operator()<64>();
    default: return by_tiles.template operator()<128>();
  }
}

// Raises the kernel's dynamic shared memory limit past the 48 KB default to max_bytes, once per
// kernel (the attribute is sticky for the process; a failure is retried on the next call).
template <auto kKernel>
Status AllowSharedMemory(int max_bytes) {
  if (max_bytes <= 48 * 1024) return Status();
  static std::atomic<bool> done{false};  // one flag per kernel
  if (done.load(std::memory_order_acquire)) return Status();
  // The C API (what nvcc's template overload calls), which the host emulator also provides.
  Status status = CheckCuda(cudaFuncSetAttribute(reinterpret_cast<const void*>(kKernel),
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, max_bytes),
                            "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  if (status.ok()) done.store(true, std::memory_order_release);
  return status;
}

}  // namespace

Status IndexerLogitsPrefill(const IndexerLogitsArgs& args, cudaStream_t stream) {
  if (args.queries < 0 || args.queries > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("queries must be in [0, 2^31), got " + std::to_string(args.queries));
  }
  ENVFORGE_RETURN_IF_ERROR(CheckShape(args.heads, args.dim));
  if (args.keys_count < 0 || args.keys_count > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("keys_count must be in [0, 2^31), got " + std::to_string(args.keys_count));
  }
  if (args.logits_stride < args.keys_count || args.logits_stride % 4 != 0) {
    return InvalidArgumentError("logits_stride must be a multiple of 4 and >= keys_count (" +
                                std::to_string(args.keys_count) + "), got " + std::to_string(args.logits_stride));
  }
  if (args.queries == 0 || args.keys_count == 0) return Status();
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.q, "q"));
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.head_weight, "head_weight"));
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.keys, "keys"));
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.key_scale, "key_scale"));
  if (args.key_begin != nullptr) ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.key_begin, "key_begin"));
  if (args.key_end != nullptr) ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.key_end, "key_end"));
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.logits, "logits"));

  const HeadSplit split = SplitHeads(args.heads, args.dim);
  PrefillParams p{};
  p.q = args.q;
  p.head_weight = args.head_weight;
  p.keys = args.keys;
  p.key_scale = args.key_scale;
  p.key_begin = args.key_begin;
  p.key_end = args.key_end;
  p.queries = static_cast<int>(args.queries);
  p.heads = static_cast<int>(args.heads);
  p.keys_count = static_cast<int>(args.keys_count);
  p.head_groups = split.groups;
  const int64_t slots = kPrefillWarps / split.groups;
  const int64_t query_blocks = (args.queries + slots - 1) / slots;
  p.query_blocks = static_cast<int>(query_blocks);
  // Key chunks: enough CTAs for the GPU, each chunk >= kMinChunkKeys, gridDim.y <= 65535.
  const int64_t wanted_chunks = std::max<int64_t>(1, (kTargetCtas + query_blocks - 1) / query_blocks);
  int64_t chunk = (args.keys_count + wanted_chunks - 1) / wanted_chunks;
  chunk = std::max({chunk, kMinChunkKeys, (args.keys_count + 65534) / 65535});
  chunk = (chunk + kTileKeys - 1) / kTileKeys * kTileKeys;
  p.chunk_keys = chunk;
  p.logits = args.logits;
  p.logits_stride = args.logits_stride;
  const dim3 grid(static_cast<unsigned>(query_blocks), static_cast<unsigned>((args.keys_count + chunk - 1) / chunk));

  return DispatchShape(args.dim, split.tiles_per_warp, [&]<int kDim, int kHeadTiles>() -> Status {
    const int shared_bytes = 2 * SlotBytes(kDim) + kPrefillWarps * kTileKeys * 4 + kPrefillWarps * 2 * 4;
    ENVFORGE_RETURN_IF_ERROR((AllowSharedMemory<indexer_logits_prefill_kernel<kDim, kHeadTiles>>(shared_bytes)));
    ENVFORGE_LAUNCH(grid, kPrefillWarps * kWarpSize, shared_bytes, stream,
                    indexer_logits_prefill_kernel<kDim, kHeadTiles>)
    (p);
    return CheckCuda(cudaGetLastError(), "indexer_logits_prefill_kernel launch");
  });
}

Status IndexerLogitsDecode(const PagedIndexerLogitsArgs& args, cudaStream_t stream) {
  if (args.batch < 0 || args.batch > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("batch must be in [0, 2^31), got " + std::to_string(args.batch));
  }
  ENVFORGE_RETURN_IF_ERROR(CheckShape(args.heads, args.dim));
  if (args.num_pages < 0 || args.num_pages > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("num_pages must be in [0, 2^31), got " + std::to_string(args.num_pages));
  }
  if (args.max_pages_per_seq < 0 || args.max_pages_per_seq > std::numeric_limits<int32_t>::max() / kIndexerPageTokens) {
    return InvalidArgumentError("max_pages_per_seq must be in [0, 2^31 / 64), got " +
                                std::to_string(args.max_pages_per_seq));
  }
  if (args.logits_stride < 0 || args.logits_stride % 4 != 0) {
    return InvalidArgumentError("logits_stride must be a non-negative multiple of 4, got " +
                                std::to_string(args.logits_stride));
  }
  if (args.batch == 0 || args.logits_stride == 0) return Status();
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.q, "q"));
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.head_weight, "head_weight"));
  if (args.num_pages > 0) ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.pages, "pages"));
  if (args.max_pages_per_seq > 0) ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.block_table, "block_table"));
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.context_len, "context_len"));
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.logits, "logits"));

  const HeadSplit split = SplitHeads(args.heads, args.dim);
  const int round_pages = kDecodeWarps / split.groups;
  DecodeParams p{};
  p.q = args.q;
  p.head_weight = args.head_weight;
  p.pages = args.pages;
  p.block_table = args.block_table;
  p.context_len = args.context_len;
  p.batch = static_cast<int>(args.batch);
  p.heads = static_cast<int>(args.heads);
  p.num_pages = static_cast<int>(args.num_pages);
  p.max_pages = static_cast<int>(args.max_pages_per_seq);
  p.head_groups = split.groups;
  // Slices: enough CTAs for the GPU, each with whole rounds of pages.
  const int64_t max_rounds = std::max<int64_t>(1, (args.max_pages_per_seq + round_pages - 1) / round_pages);
  const int64_t wanted_slices = std::max<int64_t>(1, (kTargetCtas + args.batch - 1) / args.batch);
  const int64_t rounds_per_slice = (max_rounds + wanted_slices - 1) / wanted_slices;
  const int64_t slices = (max_rounds + rounds_per_slice - 1) / rounds_per_slice;
  if (slices * args.batch > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("batch x page slices exceeds the grid limit (batch " + std::to_string(args.batch) +
                                ")");
  }
  p.slices = static_cast<int>(slices);
  p.pages_per_slice = static_cast<int>(rounds_per_slice * round_pages);
  p.logits = args.logits;
  p.logits_stride = args.logits_stride;
  const unsigned grid = static_cast<unsigned>(slices * args.batch);

  return DispatchShape(args.dim, split.tiles_per_warp, [&]<int kDim, int kHeadTiles>() -> Status {
    const int shared_bytes = 2 * round_pages * SlotBytes(kDim) + kDecodeWarps * kTileKeys * 4;
    const int max_shared_bytes = 2 * kDecodeWarps * SlotBytes(kDim) + kDecodeWarps * kTileKeys * 4;
    ENVFORGE_RETURN_IF_ERROR((AllowSharedMemory<indexer_logits_decode_kernel<kDim, kHeadTiles>>(max_shared_bytes)));
    ENVFORGE_LAUNCH(grid, kDecodeWarps * kWarpSize, shared_bytes, stream,
                    indexer_logits_decode_kernel<kDim, kHeadTiles>)
    (p);
    return CheckCuda(cudaGetLastError(), "indexer_logits_decode_kernel launch");
  });
}

void PackIndexerPages(const uint8_t* keys, const float* scales, int64_t tokens, int64_t dim,
                      const int32_t* page_of_block, uint8_t* pages) {
  const int64_t page_bytes = IndexerPageBytes(dim);
  for (int64_t i = 0; i < tokens; ++i) {
    uint8_t* page = pages + static_cast<int64_t>(page_of_block[i / kIndexerPageTokens]) * page_bytes;
    const int64_t slot = i % kIndexerPageTokens;
    std::memcpy(page + slot * dim, keys + i * dim, static_cast<size_t>(dim));
    std::memcpy(page + kIndexerPageTokens * dim + slot * 4, scales + i, 4);
  }
}

}  // namespace envforge::kernels::cuda
