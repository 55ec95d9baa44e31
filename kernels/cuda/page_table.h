// Paged KV caches of the GPU engine (inference/cuda_forward.h): every sequence keeps its tokens in
// pages of kPageTokens (64) tokens, the page size of both cache formats the attention kernels read:
//   * latent rows (sparse_mla.h): token i of a sequence is physical slot
//     block_row[i / 64] * 64 + i % 64 of a layer's latent array [pages * 64, LatentRowBytes];
//   * indexer keys (indexer_logits.h): token i is row i % 64 of indexer page block_row[i / 64],
//     laid out [64 x dim fp8 codes][64 fp32 scales] (IndexerPageBytes).
// A block table is [sequences, max_pages] int32; row b lists sequence b's pages in token order
// (entries past the sequence's last page are never read for valid positions).
//
// These kernels move keys into and out of pages and turn token positions (what the indexer's top-k
// returns) into the physical slots the attention kernels take:
//   WriteIndexerKeys:  key t ([tokens, dim] codes, [tokens] scales) -> its slot slots[t];
//   GatherIndexerKeys: tokens [0, count) of one sequence -> contiguous [count, dim] + [count], the
//                      key array IndexerLogitsPrefill reads;
//   PositionsToSlots:  out row dest_row[r] <- slots of the positions in row r (-1 stays -1, so do
//                      positions outside [0, max_pages * 64));
//   CausalSlots:       out row dest_row[r] <- slots of positions 0..position[r], then -1 up to
//                      width (dense attention, and selections with no more candidates than k).
// Host-side validation first (InvalidArgument naming the argument); launches are asynchronous on
// the stream.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "kernels/cuda/device_runtime.h"
#include "kernels/cuda/indexer_logits.h"

namespace envforge::kernels::cuda {

inline constexpr int64_t kPageTokens = kIndexerPageTokens;

struct WriteIndexerKeysArgs {
  const uint8_t* keys = nullptr;   // [tokens, dim] e4m3 codes
  const float* scales = nullptr;   // [tokens]
  const int32_t* slots = nullptr;  // [tokens] physical slots (page * 64 + row)
  int64_t tokens = 0, dim = 128;   // dim a multiple of 4
  uint8_t* pages = nullptr;        // [*, IndexerPageBytes(dim)]
};
Status WriteIndexerKeys(const WriteIndexerKeysArgs& args, cudaStream_t stream);

struct GatherIndexerKeysArgs {
  const uint8_t* pages = nullptr;
  const int32_t* block_row = nullptr;  // [ceil(count / 64)] the sequence's pages
  int64_t count = 0, dim = 128;        // dim a multiple of 4
  uint8_t* keys = nullptr;             // [count, dim]
  float* scales = nullptr;             // [count]
};
Status GatherIndexerKeys(const GatherIndexerKeysArgs& args, cudaStream_t stream);

struct SlotTableArgs {
  int64_t rows = 0, width = 0;
  const int32_t* dest_row = nullptr;     // [rows] row of `out` written for row r; nullptr: r
  const int32_t* table_row = nullptr;    // [rows] block-table row (sequence) of row r
  const int32_t* block_table = nullptr;  // [sequences, max_pages]
  int64_t max_pages = 0;
  int32_t* out = nullptr;  // [*, width]
};

// positions [rows, width] token positions (or -1).
Status PositionsToSlots(const SlotTableArgs& args, const int32_t* positions, cudaStream_t stream);
// position [rows]: the last position row r may attend to.
Status CausalSlots(const SlotTableArgs& args, const int32_t* position, cudaStream_t stream);

}  // namespace envforge::kernels::cuda
