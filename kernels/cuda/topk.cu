// Row-wise top-k on the GPU (topk.h): radix select on order-preserving 32-bit keys.
//
// Keys. A float maps to a uint32 that sorts like the float: NaN first becomes -inf, then every bit
// of a negative is flipped and the sign bit of a positive is set (so +0 sorts just above -0, as in
// the CPU twin). A key is resolved in three digits: bits 31..20 (4096 bins: sign, exponent and 3
// mantissa bits, i.e. 8 bins per binade), then bits 19..10 and 9..0 (1024 bins each).
//
// One radix pass visits a source (the row, or a candidate list), restricted to the keys whose
// already-resolved high bits equal `prefix`:
//   1. histogram the pass's digit in shared memory;
//   2. find the pivot digit p with count(digit > p) < need <= count(digit >= p) (a block scan of
//      the bins from the top);
//   3. emit every key with digit > p (warp-aggregated atomic slot counter). The keys with digit == p
//      are all taken when this is the last pass (they are ties) or when exactly `need` of them are
//      wanted; otherwise they are appended to a candidate buffer for the next pass when they fit,
//      and when they do not, the next pass reads the same source again with the longer prefix.
//      Nothing is ever dropped: an overflow costs another read, never correctness.
// Winners above a pivot fill out[0, k - last_need) through one counter; the digit == p keys of the
// final pass fill out[k - last_need, k) by rank, the first last_need of them (ties in atomic order).
// So every output slot is written exactly once, and the output is unsorted.
//
// Single-block path (PlanTopK gives blocks_per_row == 1): one block of 1024 threads per row. Pass 1
// reads the row twice (histogram, emit) and collects the pivot bin into a 4096-entry shared buffer;
// passes 2 and 3 then normally touch shared memory only.
//
// Multi-block path (few long rows, e.g. decode at batch 1..8): blocks_per_row blocks per row, each
// owning a slice of >= 4096 scores.
//   topk_slice_histogram_kernel: each block histograms its slice's top digit in shared memory and
//     adds the nonzero bins to the row's global histogram (workspace).
//   topk_slice_select_kernel: each block reloads the merged histogram and computes the same pivot
//     (deterministic), emits its slice's winners through the row's global slot counter and appends
//     its pivot-bin keys to the row's global candidate list (capacity min(n, 65536)). The last block
//     of the row to finish (atomic ticket after __threadfence, the pattern of CUDA's
//     threadFenceReduction sample) runs passes 2 and 3 on that list, or on the whole row when the
//     list overflowed. No block ever waits for another, so the path needs no co-residency; the
//     kernel boundary orders the histograms before their use.
//
// Workspace (multi-block only): [rows][4096] uint32 histograms, [rows] RowCounters, then
// [rows][capacity] keys and [rows][capacity] indices. TopK zeroes the histograms and counters with
// cudaMemsetAsync on its stream before every multi-block launch, so a workspace may be reused.
#include "kernels/cuda/internal/cuda_compat.cuh"

#include "kernels/cuda/topk.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>

namespace envforge::kernels::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;

constexpr int kFirstBits = 12;
constexpr int kFirstShift = 32 - kFirstBits;
constexpr int kFirstBins = 1 << kFirstBits;
constexpr int kRefineBits = 10;
constexpr int kSecondShift = kFirstShift - kRefineBits;
constexpr int kThirdShift = kSecondShift - kRefineBits;
static_assert(kThirdShift == 0, "the three digits must cover the 32-bit key");
static_assert(kFirstBins % kThreads == 0 && (1 << kRefineBits) % kThreads == 0,
              "FindPivot gives every thread the same number of bins");

constexpr int64_t kMaxK = 4096;
constexpr int kSharedCandidates = 4096;       // per shared candidate buffer
constexpr int64_t kMinSliceScores = 4096;     // multi-block: the smallest slice worth a block
constexpr int64_t kGlobalCandidates = 65536;  // multi-block: per-row candidate list capacity

// Dynamic shared memory: histogram | refine buffer (pass 2 -> 3) | first buffer (pass 1 -> 2).
// The select kernel needs only the first two.
constexpr size_t kHistogramBytes = kFirstBins * sizeof(uint32_t);
constexpr size_t kBufferBytes = kSharedCandidates * (sizeof(uint32_t) + sizeof(int32_t));
constexpr size_t kRowKernelSharedBytes = kHistogramBytes + 2 * kBufferBytes;  // 80 KiB
constexpr size_t kSelectKernelSharedBytes = kHistogramBytes + kBufferBytes;   // 48 KiB

struct TopKParams {
  const float* scores;
  int64_t stride;
  int n, k;
  const int32_t* row_len;  // nullptr: n
  int32_t* out;            // [rows, k]
};

// Per-row counters of the multi-block path (global memory, zeroed by TopK).
struct RowCounters {
  int written;    // next output slot for a winner above the pass-1 pivot
  int collected;  // entries appended to the row's candidate list
  int finished;   // blocks of the row done with their slice (the ticket)
  int unused;     // pads the struct to 16 bytes
};

struct SliceParams {
  int blocks_per_row;
  int slice_len;             // scores per block; a multiple of 4
  uint32_t* histograms;      // [rows][kFirstBins]
  RowCounters* counters;     // [rows]
  uint32_t* candidate_keys;  // [rows][capacity]
  int32_t* candidate_index;  // [rows][capacity]
  int capacity;
};

// Block-wide selection state, in shared memory. Written by thread 0 between barriers (or by the
// one thread that finds the pivot), read by all.
struct PassState {
  uint32_t prefix;                // the key bits resolved by earlier passes
  uint32_t prefix_mask;           // which bits those are
  int need;                       // output slots still to fill
  int written;                    // next slot for a winner above the pivot
  int ties;                       // digit == pivot keys claimed in a taking pass
  int collected;                  // candidates appended to the buffer being filled
  int pivot, above, pivot_count;  // FindPivot's result for the current pass
  int ticket;                     // multi-block: this block's arrival order in its row
};

struct BlockShared {
  uint32_t* histogram;  // kFirstBins
  PassState* state;
  int* warp_sums;  // kWarps
};

struct CandidateBuffer {
  uint32_t* keys = nullptr;
  int32_t* index = nullptr;
  int capacity = 0;
};

enum class PassOutcome { kDone, kCollected, kReread };

__device__ __forceinline__ uint32_t OrderKey(float value) {
  uint32_t bits = __float_as_uint(value);
  if (value != value) bits = 0xff800000u;  // NaN -> -inf
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The scores [begin, end) of one row; visit(key, index, valid) is called by every thread of the
// block the same number of times (invalid lanes pass valid = false), so visitors may use full-warp
// intrinsics. Loads are 16-byte vectors once the address is aligned (rows start anywhere when
// stride % 4 != 0: a scalar head of up to 3 scores comes first, then a scalar tail).
struct RowSource {
  const float* row;
  int begin, end;

  template <typename Visit>
  __device__ void ForEach(Visit&& visit) const {
    const int tid = static_cast<int>(threadIdx.x);
    const int len = end - begin;
    if (len <= 0) return;
    const float* base = row + begin;
    const int misaligned_floats = static_cast<int>((reinterpret_cast<uintptr_t>(base) & 15u) >> 2);
    const int head = min(len, (4 - misaligned_floats) & 3);
    if (head > 0) {
      const bool valid = tid < head;
      visit(valid ? OrderKey(__ldg(base + tid)) : 0u, begin + tid, valid);
    }
    const int vectors = (len - head) >> 2;
    const float4* vec = reinterpret_cast<const float4*>(base + head);
    for (int first = 0; first < vectors; first += kThreads) {
      const int v = first + tid;
      const bool valid = v < vectors;
      float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (valid) x = __ldg(vec + v);
      const int index = begin + head + 4 * v;
      visit(OrderKey(x.x), index, valid);
      visit(OrderKey(x.y), index + 1, valid);
      visit(OrderKey(x.z), index + 2, valid);
      visit(OrderKey(x.w), index + 3, valid);
    }
    const int tail_begin = head + 4 * vectors;
    if (tail_begin < len) {
      const bool valid = tid < len - tail_begin;
      visit(valid ? OrderKey(__ldg(base + tail_begin + tid)) : 0u, begin + tail_begin + tid, valid);
    }
  }
};

// A candidate list of (key, index) pairs in shared memory, or in global memory written by other
// blocks of the same kernel (read through L2 with __ldcg: L1 is not coherent across SMs).
template <bool kGlobal>
struct ListSource {
  const uint32_t* keys;
  const int32_t* index;
  int count;

  template <typename Visit>
  __device__ void ForEach(Visit&& visit) const {
    const int tid = static_cast<int>(threadIdx.x);
    for (int first = 0; first < count; first += kThreads) {
      const int j = first + tid;
      const bool valid = j < count;
      uint32_t key = 0;
      int32_t position = 0;
      if (valid) {
        if constexpr (kGlobal) {
          key = __ldcg(keys + j);
          position = __ldcg(index + j);
        } else {
          key = keys[j];
          position = index[j];
        }
      }
      visit(key, position, valid);
    }
  }
};

// Warp-aggregated claim of consecutive slots from *counter: one atomicAdd per warp. Returns this
// lane's slot, or -1 when it does not claim. All 32 lanes must call it together.
__device__ __forceinline__ int ClaimSlot(bool claim, int* counter) {
  const unsigned claimers = __ballot_sync(kFullMask, claim);
  if (claimers == 0) return -1;
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int leader = __ffs(static_cast<int>(claimers)) - 1;
  int base = 0;
  if (lane == leader) base = atomicAdd(counter, __popc(claimers));
  base = __shfl_sync(kFullMask, base, leader);
  return claim ? base + __popc(claimers & ((1u << lane) - 1u)) : -1;
}

// Inclusive prefix sum over the block's threads in threadIdx order (blockDim == kThreads).
__device__ int BlockInclusiveSum(int value, int* warp_sums) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int lower = __shfl_up_sync(kFullMask, value, offset);
    if (lane >= offset) value += lower;
  }
  if (lane == 31) warp_sums[warp] = value;
  __syncthreads();
  if (warp == 0) {
    int total = warp_sums[lane];  // kWarps == 32: one warp total per lane
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int lower = __shfl_up_sync(kFullMask, total, offset);
      if (lane >= offset) total += lower;
    }
    warp_sums[lane] = total;
  }
  __syncthreads();
  if (warp > 0) value += warp_sums[warp - 1];
  return value;
}

// Finds the pivot bin of histogram[0, bins): the bin p with count(bins > p) < need <= count(bins
// >= p). Requires 1 <= need <= the histogram's total. Thread t owns the bins_per_thread bins just
// below bins - t * bins_per_thread, so the scan in thread order accumulates from the top bin down
// and exactly one thread's range holds the pivot. Writes state->pivot / above / pivot_count; ends
// with a barrier.
__device__ void FindPivot(const uint32_t* histogram, int bins, int need, const BlockShared& shared) {
  const int bins_per_thread = bins / kThreads;
  const int top = bins - static_cast<int>(threadIdx.x) * bins_per_thread;  // owns [top - per, top)
  int owned = 0;
  for (int i = 1; i <= bins_per_thread; ++i) owned += static_cast<int>(histogram[top - i]);
  const int through_mine = BlockInclusiveSum(owned, shared.warp_sums);
  const int above_mine = through_mine - owned;
  if (above_mine < need && through_mine >= need) {
    int above = above_mine;
    for (int bin = top - 1;; --bin) {
      const int count = static_cast<int>(histogram[bin]);
      if (above + count >= need) {
        shared.state->pivot = bin;
        shared.state->above = above;
        shared.state->pivot_count = count;
        break;
      }
      above += count;
    }
  }
  __syncthreads();
}

// One radix pass (see the file comment) over the keys of `source` that match state->prefix, with
// the digit (key >> shift) & (2^bits - 1). Called by the whole block; the outcome is uniform.
// kCollected: the next pass's keys are collect[0, state->pivot_count). kReread: they did not fit;
// the next pass reads `source` again (state->prefix now selects them).
template <typename Source>
__device__ PassOutcome RadixPass(const Source& source, int shift, int bits, bool last, CandidateBuffer collect,
                                 int32_t* out, int k, const BlockShared& shared) {
  PassState& state = *shared.state;
  uint32_t* histogram = shared.histogram;
  const int bins = 1 << bits;
  const uint32_t digit_mask = static_cast<uint32_t>(bins - 1);
  for (int bin = static_cast<int>(threadIdx.x); bin < bins; bin += kThreads) histogram[bin] = 0;
  if (threadIdx.x == 0) {
    state.ties = 0;
    state.collected = 0;
  }
  __syncthreads();
  const uint32_t prefix = state.prefix;
  const uint32_t prefix_mask = state.prefix_mask;
  const int need = state.need;

  source.ForEach([&](uint32_t key, int32_t, bool valid) {
    if (valid && (key & prefix_mask) == prefix) atomicAdd(&histogram[(key >> shift) & digit_mask], 1u);
  });
  __syncthreads();
  FindPivot(histogram, bins, need, shared);

  const uint32_t pivot = static_cast<uint32_t>(state.pivot);
  const int remaining = need - state.above;  // >= 1: the pivot bin holds the need-th largest key
  const int pivot_count = state.pivot_count;
  const bool take_pivot = last || pivot_count == remaining;
  const bool collecting = !take_pivot && pivot_count <= collect.capacity;
  const int tie_base = k - remaining;
  source.ForEach([&](uint32_t key, int32_t index, bool valid) {
    const bool match = valid && (key & prefix_mask) == prefix;
    const uint32_t digit = (key >> shift) & digit_mask;
    const bool winner = match && digit > pivot;
    const bool at_pivot = match && digit == pivot;
    if (!__any_sync(kFullMask, winner || at_pivot)) return;
    const int slot = ClaimSlot(winner, &state.written);
    if (winner && slot < k) out[slot] = index;
    if (take_pivot) {
      const int rank = ClaimSlot(at_pivot, &state.ties);
      if (at_pivot && rank < remaining) out[tie_base + rank] = index;
    } else if (collecting) {
      const int at = ClaimSlot(at_pivot, &state.collected);
      if (at_pivot && at < collect.capacity) {
        collect.keys[at] = key;
        collect.index[at] = index;
      }
    }
  });
  __syncthreads();
  if (threadIdx.x == 0) {
    state.need = remaining;
    state.prefix = prefix | (pivot << shift);
    state.prefix_mask = prefix_mask | (digit_mask << shift);
  }
  __syncthreads();
  if (take_pivot) return PassOutcome::kDone;
  return collecting ? PassOutcome::kCollected : PassOutcome::kReread;
}

// Passes 2 and 3, given the source whose prefix-matching keys hold the rest of the selection.
template <typename Source>
__device__ void RefineLowDigits(const Source& source, CandidateBuffer refine, int32_t* out, int k,
                                const BlockShared& shared) {
  const PassOutcome outcome = RadixPass(source, kSecondShift, kRefineBits, /*last=*/false, refine, out, k, shared);
  if (outcome == PassOutcome::kDone) return;
  if (outcome == PassOutcome::kCollected) {
    const ListSource<false> collected{refine.keys, refine.index, shared.state->pivot_count};
    RadixPass(collected, kThirdShift, kRefineBits, /*last=*/true, CandidateBuffer{}, out, k, shared);
  } else {
    RadixPass(source, kThirdShift, kRefineBits, /*last=*/true, CandidateBuffer{}, out, k, shared);
  }
}

__device__ int RowLength(const TopKParams& p, int64_t row) {
  if (p.row_len == nullptr) return p.n;
  const int len = p.row_len[row];
  return len < 0 ? 0 : (len > p.n ? p.n : len);
}

// The row_len <= k case: 0..len-1, then -1.
__device__ void WriteAllThenPadding(int32_t* out, int len, int k) {
  for (int i = static_cast<int>(threadIdx.x); i < k; i += kThreads) out[i] = i < len ? i : -1;
}

__device__ CandidateBuffer SharedCandidateBuffer(uint32_t* shared_words, int which) {
  // which 0: the refine buffer right after the histogram; 1: the first buffer after it.
  uint32_t* keys = shared_words + kFirstBins + which * 2 * kSharedCandidates;
  return CandidateBuffer{keys, reinterpret_cast<int32_t*>(keys + kSharedCandidates), kSharedCandidates};
}

__global__ void __launch_bounds__(kThreads) topk_row_kernel(TopKParams p) {
  ENVFORGE_DYNAMIC_SHARED(uint4, dynamic_shared);
  __shared__ PassState state;
  __shared__ int warp_sums[kWarps];
  const int64_t row = blockIdx.x;
  int32_t* out = p.out + row * p.k;
  const int len = RowLength(p, row);
  if (len <= p.k) {
    WriteAllThenPadding(out, len, p.k);
    return;
  }
  uint32_t* shared_words = reinterpret_cast<uint32_t*>(dynamic_shared);
  const BlockShared shared{shared_words, &state, warp_sums};
  if (threadIdx.x == 0) state = PassState{0u, 0u, p.k, 0, 0, 0, 0, 0, 0, 0};  // published by RadixPass's barrier
  const RowSource source{p.scores + row * p.stride, 0, len};
  const CandidateBuffer first = SharedCandidateBuffer(shared_words, 1);
  const PassOutcome outcome = RadixPass(source, kFirstShift, kFirstBits, /*last=*/false, first, out, p.k, shared);
  if (outcome == PassOutcome::kDone) return;
  const CandidateBuffer refine = SharedCandidateBuffer(shared_words, 0);
  if (outcome == PassOutcome::kCollected) {
    RefineLowDigits(ListSource<false>{first.keys, first.index, state.pivot_count}, refine, out, p.k, shared);
  } else {
    RefineLowDigits(source, refine, out, p.k, shared);
  }
}

__global__ void __launch_bounds__(kThreads) topk_slice_histogram_kernel(TopKParams p, SliceParams s) {
  __shared__ uint32_t histogram[kFirstBins];
  const int64_t row = blockIdx.x / s.blocks_per_row;
  const int slice = static_cast<int>(blockIdx.x % s.blocks_per_row);
  const int len = RowLength(p, row);
  const int64_t begin = static_cast<int64_t>(slice) * s.slice_len;
  const int64_t end = begin + s.slice_len < len ? begin + s.slice_len : len;
  if (len <= p.k || begin >= end) return;
  for (int bin = static_cast<int>(threadIdx.x); bin < kFirstBins; bin += kThreads) histogram[bin] = 0;
  __syncthreads();
  const RowSource source{p.scores + row * p.stride, static_cast<int>(begin), static_cast<int>(end)};
  source.ForEach([&](uint32_t key, int32_t, bool valid) {
    if (valid) atomicAdd(&histogram[key >> kFirstShift], 1u);
  });
  __syncthreads();
  uint32_t* merged = s.histograms + row * kFirstBins;
  for (int bin = static_cast<int>(threadIdx.x); bin < kFirstBins; bin += kThreads) {
    if (histogram[bin] != 0) atomicAdd(merged + bin, histogram[bin]);
  }
}

__global__ void __launch_bounds__(kThreads) topk_slice_select_kernel(TopKParams p, SliceParams s) {
  ENVFORGE_DYNAMIC_SHARED(uint4, dynamic_shared);
  __shared__ PassState state;
  __shared__ int warp_sums[kWarps];
  const int64_t row = blockIdx.x / s.blocks_per_row;
  const int slice = static_cast<int>(blockIdx.x % s.blocks_per_row);
  int32_t* out = p.out + row * p.k;
  const int len = RowLength(p, row);
  if (len <= p.k) {
    if (slice == 0) WriteAllThenPadding(out, len, p.k);
    return;
  }
  uint32_t* shared_words = reinterpret_cast<uint32_t*>(dynamic_shared);
  const BlockShared shared{shared_words, &state, warp_sums};
  const uint32_t* merged = s.histograms + row * kFirstBins;
  for (int bin = static_cast<int>(threadIdx.x); bin < kFirstBins; bin += kThreads) shared_words[bin] = merged[bin];
  __syncthreads();
  FindPivot(shared_words, kFirstBins, p.k, shared);
  const uint32_t pivot = static_cast<uint32_t>(state.pivot);
  const int remaining = p.k - state.above;
  const int pivot_count = state.pivot_count;
  const bool take_pivot = pivot_count == remaining;  // the whole pivot bin completes the row
  const bool collecting = !take_pivot && pivot_count <= s.capacity;

  RowCounters* counters = s.counters + row;
  uint32_t* candidate_keys = s.candidate_keys + row * s.capacity;
  int32_t* candidate_index = s.candidate_index + row * s.capacity;
  const int64_t begin = static_cast<int64_t>(slice) * s.slice_len;
  const int64_t end = begin + s.slice_len < len ? begin + s.slice_len : len;
  const RowSource slice_source{p.scores + row * p.stride, static_cast<int>(begin < len ? begin : len),
                               static_cast<int>(end)};
  slice_source.ForEach([&](uint32_t key, int32_t index, bool valid) {
    const uint32_t digit = key >> kFirstShift;
    const bool winner = valid && (digit > pivot || (take_pivot && digit == pivot));
    const bool candidate = valid && collecting && digit == pivot;
    if (!__any_sync(kFullMask, winner || candidate)) return;
    const int slot = ClaimSlot(winner, &counters->written);
    if (winner && slot < p.k) out[slot] = index;
    if (collecting) {
      const int at = ClaimSlot(candidate, &counters->collected);
      if (candidate && at < s.capacity) {
        candidate_keys[at] = key;
        candidate_index[at] = index;
      }
    }
  });
  if (take_pivot) return;  // the slices filled every slot

  // Publish this block's writes, then take a ticket; the row's last block finishes the row.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) state.ticket = atomicAdd(&counters->finished, 1);
  __syncthreads();
  if (state.ticket != s.blocks_per_row - 1) return;
  __threadfence();

  if (threadIdx.x == 0) {
    state.prefix = pivot << kFirstShift;
    state.prefix_mask = static_cast<uint32_t>(kFirstBins - 1) << kFirstShift;
    state.need = remaining;
    state.written = p.k - remaining;  // the slices' winners took out[0, k - remaining)
  }
  __syncthreads();
  const CandidateBuffer refine = SharedCandidateBuffer(shared_words, 0);
  if (collecting) {
    RefineLowDigits(ListSource<true>{candidate_keys, candidate_index, pivot_count}, refine, out, p.k, shared);
  } else {
    RefineLowDigits(RowSource{p.scores + row * p.stride, 0, len}, refine, out, p.k, shared);
  }
}

// Byte layout of the multi-block workspace for `rows` rows of at most n scores.
struct WorkspaceLayout {
  int64_t capacity = 0;  // candidate list entries per row
  size_t counters_offset = 0, keys_offset = 0, index_offset = 0;
  size_t zeroed_bytes = 0;  // histograms + counters
  size_t total_bytes = 0;
};

WorkspaceLayout MultiBlockLayout(int64_t rows, int64_t n) {
  WorkspaceLayout layout;
  layout.capacity = std::min(n, kGlobalCandidates);
  const auto row_count = static_cast<size_t>(rows);
  layout.counters_offset = row_count * kHistogramBytes;
  layout.keys_offset = layout.counters_offset + row_count * sizeof(RowCounters);
  layout.zeroed_bytes = layout.keys_offset;
  const size_t list_bytes = row_count * static_cast<size_t>(layout.capacity) * sizeof(uint32_t);
  layout.index_offset = layout.keys_offset + list_bytes;
  layout.total_bytes = layout.index_offset + row_count * static_cast<size_t>(layout.capacity) * sizeof(int32_t);
  return layout;
}

// The row and select kernels use more than the default 48 KiB of shared memory; opted into once
// per process (ProbeDevice's device 0).
Status ConfigureKernelsOnce() {
  static std::once_flag once;
  static Status* configured = nullptr;
  std::call_once(once, [] {
    const auto configure = []() -> Status {
      ENVFORGE_RETURN_IF_ERROR(
          CheckCuda(cudaFuncSetAttribute(topk_row_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kRowKernelSharedBytes)),
                    "TopK: shared memory attribute of topk_row_kernel"));
      return CheckCuda(cudaFuncSetAttribute(topk_slice_select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(kSelectKernelSharedBytes)),
                       "TopK: shared memory attribute of topk_slice_select_kernel");
    };
    configured = new Status(configure());  // never freed: process-wide
  });
  return *configured;
}

std::string Str(int64_t value) { return std::to_string(value); }

Status Validate(const TopKArgs& args, int sm_count) {
  if (args.k < 1 || args.k > kMaxK) {
    return InvalidArgumentError("TopK: k must be in [1, " + Str(kMaxK) + "], got " + Str(args.k));
  }
  if (args.rows < 0 || args.rows > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("TopK: rows must be in [0, 2^31), got " + Str(args.rows));
  }
  // Indices are int32.
  if (args.n < 0 || args.n > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("TopK: n must be in [0, 2^31), got " + Str(args.n));
  }
  if (args.stride < args.n) {
    return InvalidArgumentError("TopK: stride " + Str(args.stride) + " is below n " + Str(args.n));
  }
  if (sm_count < 1) return InvalidArgumentError("TopK: sm_count must be >= 1, got " + Str(sm_count));
  if (args.rows == 0) return Status();
  if (args.scores == nullptr && args.n > 0) return InvalidArgumentError("TopK: scores is null");
  if (args.out == nullptr) return InvalidArgumentError("TopK: out is null");
  const auto misaligned = [](const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 4 != 0; };
  if (misaligned(args.scores)) return InvalidArgumentError("TopK: scores is not 4-byte aligned");
  if (misaligned(args.out)) return InvalidArgumentError("TopK: out is not 4-byte aligned");
  if (misaligned(args.row_len)) return InvalidArgumentError("TopK: row_len is not 4-byte aligned");
  return Status();
}

}  // namespace

TopKPlan PlanTopK(int64_t rows, int64_t n, int64_t k, int sm_count) {
  TopKPlan plan;
  plan.threads = kThreads;
  if (rows <= 0 || n <= k || sm_count < 2) return plan;
  const int64_t by_sms = sm_count / rows;         // rows * blocks_per_row <= sm_count
  const int64_t by_length = n / kMinSliceScores;  // slices of >= kMinSliceScores scores
  const int64_t blocks_per_row = std::min(by_sms, by_length);
  if (blocks_per_row >= 2) plan.blocks_per_row = static_cast<int>(blocks_per_row);
  return plan;
}

// Enough for every call with at most `rows` rows of at most `n` scores (so one allocation at the
// largest shape serves all smaller calls): the multi-block path runs only for rows <= sm_count / 2,
// and its layout grows with rows and n. Zero when no such call can take that path.
size_t TopKWorkspaceBytes(int64_t rows, int64_t n, int64_t k, int sm_count) {
  if (rows <= 0 || n <= 0 || k < 1 || sm_count < 1) return 0;
  if (PlanTopK(1, n, k, sm_count).blocks_per_row == 1) return 0;
  const int64_t multi_block_rows = std::min<int64_t>(rows, sm_count / 2);
  if (multi_block_rows < 1) return 0;
  return MultiBlockLayout(multi_block_rows, n).total_bytes;
}

Status TopK(const TopKArgs& args, void* workspace, size_t workspace_bytes, int sm_count, cudaStream_t stream) {
  ENVFORGE_RETURN_IF_ERROR(Validate(args, sm_count));
  if (args.rows == 0) return Status();
  const TopKPlan plan = PlanTopK(args.rows, args.n, args.k, sm_count);
  // The bytes this call touches (the multi-block layout for its own shape); TopKWorkspaceBytes
  // returns exactly this for a multi-block shape and may return more for a single-block one.
  const size_t needed = plan.blocks_per_row > 1 ? MultiBlockLayout(args.rows, args.n).total_bytes : 0;
  if (workspace_bytes < needed) {
    return InvalidArgumentError("TopK: workspace_bytes " + std::to_string(workspace_bytes) + " is below the " +
                                std::to_string(needed) + " bytes this call needs (TopKWorkspaceBytes)");
  }
  if (needed > 0 && workspace == nullptr) return InvalidArgumentError("TopK: workspace is null");
  if (reinterpret_cast<uintptr_t>(workspace) % 16 != 0) {
    return InvalidArgumentError("TopK: workspace is not 16-byte aligned");
  }
  ENVFORGE_RETURN_IF_ERROR(ConfigureKernelsOnce());

  const TopKParams params{args.scores,  args.stride, static_cast<int>(args.n), static_cast<int>(args.k),
                          args.row_len, args.out};
  if (plan.blocks_per_row == 1) {
    ENVFORGE_LAUNCH(static_cast<unsigned>(args.rows), kThreads, kRowKernelSharedBytes, stream, topk_row_kernel)(params);
    return CheckCuda(cudaGetLastError(), "TopK: topk_row_kernel launch");
  }

  const WorkspaceLayout layout = MultiBlockLayout(args.rows, args.n);
  auto* bytes = static_cast<unsigned char*>(workspace);
  const int64_t slice_len = (args.n + plan.blocks_per_row - 1) / plan.blocks_per_row;
  SliceParams slices{};
  slices.blocks_per_row = plan.blocks_per_row;
  slices.slice_len = static_cast<int>((slice_len + 3) / 4 * 4);  // keeps slices 16-byte aligned when rows are
  slices.histograms = reinterpret_cast<uint32_t*>(bytes);
  slices.counters = reinterpret_cast<RowCounters*>(bytes + layout.counters_offset);
  slices.candidate_keys = reinterpret_cast<uint32_t*>(bytes + layout.keys_offset);
  slices.candidate_index = reinterpret_cast<int32_t*>(bytes + layout.index_offset);
  slices.capacity = static_cast<int>(layout.capacity);
  ENVFORGE_RETURN_IF_ERROR(
      CheckCuda(cudaMemsetAsync(workspace, 0, layout.zeroed_bytes, stream), "TopK: zeroing the workspace"));
  const auto blocks = static_cast<unsigned>(args.rows * plan.blocks_per_row);
  ENVFORGE_LAUNCH(blocks, kThreads, 0, stream, topk_slice_histogram_kernel)(params, slices);
  ENVFORGE_RETURN_IF_ERROR(CheckCuda(cudaGetLastError(), "TopK: topk_slice_histogram_kernel launch"));
  ENVFORGE_LAUNCH(blocks, kThreads, kSelectKernelSharedBytes, stream, topk_slice_select_kernel)(params, slices);
  return CheckCuda(cudaGetLastError(), "TopK: topk_slice_select_kernel launch");
}

}  // namespace envforge::kernels::cuda
