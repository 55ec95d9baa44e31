// Paged-cache kernels: one thread per 4-byte word (keys) or per output entry (slot tables), grid-
// stride loops so any size runs with a bounded grid.
#include "kernels/cuda/internal/cuda_compat.cuh"

#include "kernels/cuda/page_table.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

namespace envforge::kernels::cuda {
namespace {

constexpr int kThreads = 256;

int GridFor(int64_t work) { return static_cast<int>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, 8192)); }

bool Aligned4(const void* p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; }

Status CheckKeyShape(int64_t count, int64_t dim, const char* count_name) {
  if (count < 0) return InvalidArgumentError(std::string(count_name) + " must be >= 0, got " + std::to_string(count));
  if (dim <= 0 || dim % 4 != 0)
    return InvalidArgumentError("dim must be a positive multiple of 4, got " + std::to_string(dim));
  return Status::Ok();
}

// Word w of key t sits at page (slot / 64), row slot % 64: codes at row * dim, the scale after the
// page's 64 code rows.
__global__ void WriteIndexerKeysKernel(const uint32_t* keys, const float* scales, const int32_t* slots, int64_t tokens,
                                       int64_t dim, uint8_t* pages) {
  const int64_t words = dim / 4, total = tokens * words, page_bytes = kPageTokens * (dim + 4);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / words, w = i % words;
    const int32_t slot = slots[t];
    if (slot < 0) continue;
    uint8_t* page = pages + (slot / kPageTokens) * page_bytes;
    const int64_t row = slot % kPageTokens;
    reinterpret_cast<uint32_t*>(page + row * dim)[w] = keys[i];
    if (w == 0) reinterpret_cast<float*>(page + kPageTokens * dim)[row] = scales[t];
  }
}

__global__ void GatherIndexerKeysKernel(const uint8_t* pages, const int32_t* block_row, int64_t count, int64_t dim,
                                        uint32_t* keys, float* scales) {
  const int64_t words = dim / 4, total = count * words, page_bytes = kPageTokens * (dim + 4);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / words, w = i % words;
    const uint8_t* page = pages + int64_t{block_row[t / kPageTokens]} * page_bytes;
    const int64_t row = t % kPageTokens;
    keys[i] = reinterpret_cast<const uint32_t*>(page + row * dim)[w];
    if (w == 0) scales[t] = reinterpret_cast<const float*>(page + kPageTokens * dim)[row];
  }
}

// causal == false: entry (r, j) maps positions[r * width + j]; true: it maps j when j <= last[r].
__global__ void SlotTableKernel(const int32_t* positions, const int32_t* last, int64_t rows, int64_t width,
                                const int32_t* dest_row, const int32_t* table_row, const int32_t* block_table,
                                int64_t max_pages, int32_t* out) {
  const int64_t total = rows * width, limit = max_pages * kPageTokens;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, j = i % width;
    int64_t p = -1;
    if (last != nullptr) {
      p = j <= last[r] ? j : -1;
    } else {
      p = positions[i];
    }
    int32_t slot = -1;
    if (p >= 0 && p < limit) {
      const int32_t page = block_table[int64_t{table_row[r]} * max_pages + p / kPageTokens];
      slot = static_cast<int32_t>(int64_t{page} * kPageTokens + p % kPageTokens);
    }
    const int64_t dest = dest_row != nullptr ? dest_row[r] : r;
    out[dest * width + j] = slot;
  }
}

Status CheckSlotTable(const SlotTableArgs& a, const void* source, const char* source_name) {
  if (a.rows < 0) return InvalidArgumentError("rows must be >= 0, got " + std::to_string(a.rows));
  if (a.width < 1) return InvalidArgumentError("width must be >= 1, got " + std::to_string(a.width));
  if (a.max_pages < 1) return InvalidArgumentError("max_pages must be >= 1, got " + std::to_string(a.max_pages));
  if (a.rows == 0) return Status::Ok();
  if (source == nullptr) return InvalidArgumentError(std::string(source_name) + " is null");
  if (a.table_row == nullptr) return InvalidArgumentError("table_row is null");
  if (a.block_table == nullptr) return InvalidArgumentError("block_table is null");
  if (a.out == nullptr) return InvalidArgumentError("out is null");
  return Status::Ok();
}

}  // namespace

Status WriteIndexerKeys(const WriteIndexerKeysArgs& args, cudaStream_t stream) {
  ENVFORGE_RETURN_IF_ERROR(CheckKeyShape(args.tokens, args.dim, "tokens"));
  if (args.tokens == 0) return Status::Ok();
  if (args.keys == nullptr || args.scales == nullptr || args.slots == nullptr || args.pages == nullptr) {
    return InvalidArgumentError("WriteIndexerKeys: keys, scales, slots and pages must be non-null");
  }
  if (!Aligned4(args.keys) || !Aligned4(args.pages))
    return InvalidArgumentError("WriteIndexerKeys: keys and pages must be 4-byte aligned");
  ENVFORGE_LAUNCH(GridFor(args.tokens * args.dim / 4), kThreads, 0, stream, WriteIndexerKeysKernel)
  (reinterpret_cast<const uint32_t*>(args.keys), args.scales, args.slots, args.tokens, args.dim, args.pages);
  return CheckCuda(cudaGetLastError(), "WriteIndexerKeys launch");
}

Status GatherIndexerKeys(const GatherIndexerKeysArgs& args, cudaStream_t stream) {
  ENVFORGE_RETURN_IF_ERROR(CheckKeyShape(args.count, args.dim, "count"));
  if (args.count == 0) return Status::Ok();
  if (args.pages == nullptr || args.block_row == nullptr || args.keys == nullptr || args.scales == nullptr) {
    return InvalidArgumentError("GatherIndexerKeys: pages, block_row, keys and scales must be non-null");
  }
  if (!Aligned4(args.keys) || !Aligned4(args.pages))
    return InvalidArgumentError("GatherIndexerKeys: keys and pages must be 4-byte aligned");
  ENVFORGE_LAUNCH(GridFor(args.count * args.dim / 4), kThreads, 0, stream, GatherIndexerKeysKernel)
  (args.pages, args.block_row, args.count, args.dim, reinterpret_cast<uint32_t*>(args.keys), args.scales);
  return CheckCuda(cudaGetLastError(), "GatherIndexerKeys launch");
}

Status PositionsToSlots(const SlotTableArgs& args, const int32_t* positions, cudaStream_t stream) {
  ENVFORGE_RETURN_IF_ERROR(CheckSlotTable(args, positions, "positions"));
  if (args.rows == 0) return Status::Ok();
  ENVFORGE_LAUNCH(GridFor(args.rows * args.width), kThreads, 0, stream, SlotTableKernel)
  (positions, nullptr, args.rows, args.width, args.dest_row, args.table_row, args.block_table, args.max_pages,
   args.out);
  return CheckCuda(cudaGetLastError(), "PositionsToSlots launch");
}

Status CausalSlots(const SlotTableArgs& args, const int32_t* position, cudaStream_t stream) {
  ENVFORGE_RETURN_IF_ERROR(CheckSlotTable(args, position, "position"));
  if (args.rows == 0) return Status::Ok();
  ENVFORGE_LAUNCH(GridFor(args.rows * args.width), kThreads, 0, stream, SlotTableKernel)
  (nullptr, position, args.rows, args.width, args.dest_row, args.table_row, args.block_table, args.max_pages, args.out);
  return CheckCuda(cudaGetLastError(), "CausalSlots launch");
}

}  // namespace envforge::kernels::cuda
