// Row-wise top-k on the GPU (dsa-engine.md 4.6, 8.7), the twin of kernels/cpu/topk.h TopKRows:
// out[r][0, k) = the indices of the k largest scores of row r among [0, row_len[r]), unsorted;
// when row_len[r] <= k, 0..row_len[r]-1 then -1 padding. NaN counts as -inf; -inf entries are
// taken only when fewer than k larger ones exist; entries tied with the k-th largest are taken in
// an unspecified order. So index sets equal the CPU's whenever the k-th value is not tied.
//
// Radix select on order-preserving 32-bit keys. Short rows: one block per row (histogram of the
// top bits, threshold bin, refine passes over the candidates). Long rows with few rows in the batch
// (decode at batch 1): several blocks per row each histogram a slice, the per-row threshold comes
// from the merged histogram, then the blocks emit their slice's winners (PlanTopK decides).
//
// k in [1, 4096]; row stride >= n; device pointers 16-byte aligned. The caller provides a
// workspace of TopKWorkspaceBytes (zero-filled by TopK itself, so it may be reused).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

struct TopKArgs {
  const float* scores = nullptr;  // [rows, stride]
  int64_t rows = 0, n = 0, stride = 0;
  const int32_t* row_len = nullptr;  // [rows] device; nullptr: n for every row (each <= n)
  int64_t k = 0;
  int32_t* out = nullptr;  // [rows, k]
};

struct TopKPlan {
  int blocks_per_row = 1;  // > 1: the multi-block path
  int threads = 1024;
};
// Host-side planning, exposed for tests and benchmarks: multi-block when rows alone cannot fill
// the device's SMs and rows are long enough for slices of at least a few thousand scores.
TopKPlan PlanTopK(int64_t rows, int64_t n, int64_t k, int sm_count);
size_t TopKWorkspaceBytes(int64_t rows, int64_t n, int64_t k, int sm_count);

Status TopK(const TopKArgs& args, void* workspace, size_t workspace_bytes, int sm_count, cudaStream_t stream);

}  // namespace envforge::kernels::cuda
