// Top-k selection (topk.h).
//
// Fast path: radix select on order-preserving 32-bit keys. A float's bits map to a uint32 that
// sorts like the float (flip all bits of negatives, set the sign bit of positives); NaN maps to
// the key of -inf. Pass 1 histograms the top 12 bits of every key and finds the bucket holding
// the k-th largest key; keys in higher buckets are selected at once, keys in that bucket become
// the candidates of the next pass (10 bits, then the last 10). After the last pass the remaining
// candidates all equal the k-th key and the first ones fill the remaining slots.
//
// Small k (k <= 16, the tiny model's indexer top-k against thousands of keys): one scan
// keeps the k best (key, index) entries so far in a heap whose root is the entry to evict next;
// a key enters only when it beats the root, which after the first few blocks almost none do, so
// the scan is a compare per key (16 at a time with AVX-512). The entries are then written in the
// radix select's order (its pass, then index), so both routes give the same array.
#include "kernels/cpu/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu/internal/cpu_features.h"
#include "kernels/cpu/parallel.h"

#if ENVFORGE_KERNELS_X86
#include <immintrin.h>
#endif

namespace envforge::kernels {
namespace {

constexpr uint32_t kNanKey = 0x007fffffu;  // OrderKey(-inf)

// The order-preserving key of one score (file comment), without branches so loops vectorize:
// ~bits is bits ^ 0xffffffff and bits | 0x80000000 (sign clear) is bits ^ 0x80000000.
inline uint32_t OrderKey(float score) {
  uint32_t bits;
  std::memcpy(&bits, &score, 4);
  const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | 0x80000000u;
  return score != score ? kNanKey : bits ^ flip;
}

void OrderKeys(const float* scores, int64_t n, uint32_t* keys) {
  for (int64_t i = 0; i < n; ++i) keys[i] = OrderKey(scores[i]);
}

struct Candidate {
  uint32_t key;
  int32_t index;
};

// The cases every route answers alike: k <= 0 writes nothing, n <= k writes 0..n-1 then -1
// padding. Returns whether (n, k) was one of them.
bool AnsweredTrivially(int64_t n, int64_t k, int32_t* out) {
  if (k <= 0) return true;
  if (n > k) return false;
  for (int64_t i = 0; i < k; ++i) out[i] = i < n ? static_cast<int32_t>(i) : -1;
  return true;
}

// One radix pass over candidates: selects every candidate whose digit is above the k-th one
// (appending to out), keeps those equal to it, and returns how many slots remain.
int64_t RadixPass(std::vector<Candidate>& candidates, int shift, int bits, int64_t remaining, int32_t* out,
                  int64_t& written) {
  const uint32_t mask = (1u << bits) - 1u;
  thread_local std::vector<int64_t> histogram;
  histogram.assign(static_cast<size_t>(mask) + 1, 0);
  for (const Candidate& c : candidates) ++histogram[(c.key >> shift) & mask];
  uint32_t pivot = mask;
  int64_t above = 0;
  for (;; --pivot) {
    if (above + histogram[pivot] >= remaining) break;
    above += histogram[pivot];
  }
  size_t kept = 0;
  for (const Candidate& c : candidates) {
    const uint32_t digit = (c.key >> shift) & mask;
    if (digit > pivot) {
      out[written++] = c.index;
    } else if (digit == pivot) {
      candidates[kept++] = c;
    }
  }
  candidates.resize(kept);
  return remaining - above;
}

// The radix select proper (n > k > 0).
void RadixSelect(const float* scores, int64_t n, int64_t k, int32_t* out) {
  // Pass 1 runs on the scores directly, so only the pivot bucket is ever copied.
  // Keys computed once, buffers kept per thread: selection runs per decode row on every step.
  constexpr int kFirstBits = 12;
  constexpr int kFirstShift = 32 - kFirstBits;
  thread_local std::vector<uint32_t> keys;
  thread_local std::vector<int64_t> histogram;
  thread_local std::vector<Candidate> candidates;
  keys.resize(static_cast<size_t>(n));
  OrderKeys(scores, n, keys.data());
  histogram.assign(1u << kFirstBits, 0);
  for (int64_t i = 0; i < n; ++i) ++histogram[keys[static_cast<size_t>(i)] >> kFirstShift];
  uint32_t pivot = (1u << kFirstBits) - 1;
  int64_t above = 0;
  for (;; --pivot) {
    if (above + histogram[pivot] >= k) break;
    above += histogram[pivot];
  }
  int64_t written = 0;
  candidates.clear();
  candidates.reserve(static_cast<size_t>(histogram[pivot]));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t key = keys[static_cast<size_t>(i)];
    const uint32_t digit = key >> kFirstShift;
    if (digit > pivot) {
      out[written++] = static_cast<int32_t>(i);
    } else if (digit == pivot) {
      candidates.push_back({key, static_cast<int32_t>(i)});
    }
  }
  int64_t remaining = k - above;
  remaining = RadixPass(candidates, 10, 10, remaining, out, written);
  remaining = RadixPass(candidates, 0, 10, remaining, out, written);
  // Every candidate now holds the k-th largest key: ties, taken in index order.
  for (int64_t i = 0; i < remaining; ++i) out[written++] = candidates[static_cast<size_t>(i)].index;
}

// The entries of the threshold route's heap. The heap's root is the entry to evict next: the
// smallest key, and of equal keys the largest index, so ties keep their lowest indices (as the
// radix select takes them).
struct Entry {
  uint32_t key;
  int32_t index;
};
bool Better(const Entry& a, const Entry& b) { return a.key > b.key || (a.key == b.key && a.index < b.index); }

// Which pass of the radix select takes an entry, given the k-th largest key: 0 (top 12 bits
// above its), 1 (top 22 bits), 2 (all 32 bits), 3 (equal to it: a tie).
int RadixPassOf(uint32_t key, uint32_t kth) {
  if ((key >> 20) != (kth >> 20)) return 0;
  if ((key >> 10) != (kth >> 10)) return 1;
  return key != kth ? 2 : 3;
}

// Offers entry (key, i) to the heap of the k best so far; returns the key a later entry must beat.
inline uint32_t Offer(std::vector<Entry>& heap, uint32_t key, int64_t i) {
  std::pop_heap(heap.begin(), heap.end(), Better);
  heap.back() = {key, static_cast<int32_t>(i)};
  std::push_heap(heap.begin(), heap.end(), Better);
  return heap.front().key;
}

#if ENVFORGE_KERNELS_X86
// Scans scores [begin, n) 16 at a time: keys as OrderKey computes them, and only lanes above the
// threshold offered (in index order). Returns where the scalar tail starts.
ENVFORGE_TARGET_AVX512 int64_t ScanAvx512(const float* scores, int64_t begin, int64_t n, std::vector<Entry>& heap,
                                          uint32_t& threshold) {
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i nan_key = _mm512_set1_epi32(static_cast<int>(kNanKey));
  alignas(64) uint32_t keys[16];
  int64_t i = begin;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(scores + i);
    const __m512i bits = _mm512_castps_si512(v);
    // (maskz with all lanes: GCC 12's plain srai reads an "undefined" vector, -Wmaybe-uninitialized)
    const __m512i flip = _mm512_or_si512(_mm512_maskz_srai_epi32(static_cast<__mmask16>(0xffff), bits, 31), sign);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i key = _mm512_mask_mov_epi32(_mm512_xor_si512(bits, flip), nan, nan_key);
    auto above = static_cast<uint32_t>(_mm512_cmpgt_epu32_mask(key, _mm512_set1_epi32(static_cast<int>(threshold))));
    if (above == 0) continue;
    _mm512_store_si512(keys, key);
    for (; above != 0; above &= above - 1) {
      const int lane = __builtin_ctz(above);
      if (keys[lane] > threshold) threshold = Offer(heap, keys[lane], i + lane);
    }
  }
  return i;
}
#endif

void SelectByThreshold(const float* scores, int64_t n, int64_t k, int32_t* out) {
  thread_local std::vector<Entry> heap;
  heap.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) heap[static_cast<size_t>(i)] = {OrderKey(scores[i]), static_cast<int32_t>(i)};
  std::make_heap(heap.begin(), heap.end(), Better);
  uint32_t threshold = heap.front().key;
  int64_t i = k;
#if ENVFORGE_KERNELS_X86
  if (internal::UseAvx512()) i = ScanAvx512(scores, i, n, heap, threshold);
#endif
  for (; i < n; ++i) {
    const uint32_t key = OrderKey(scores[i]);
    if (key > threshold) threshold = Offer(heap, key, i);
  }
  const uint32_t kth = heap.front().key;
  std::sort(heap.begin(), heap.end(), [kth](const Entry& a, const Entry& b) {
    const int pass_a = RadixPassOf(a.key, kth), pass_b = RadixPassOf(b.key, kth);
    return pass_a != pass_b ? pass_a < pass_b : a.index < b.index;
  });
  for (int64_t j = 0; j < k; ++j) out[j] = heap[static_cast<size_t>(j)].index;
}

// The threshold route pays a heap update per entry that enters, some k ln(n / k) of them for
// scores in no particular order, and a sort of k at the end; the radix select about four cheap
// passes over n. Measured per row on this project's 2-core machine (normal scores): k = 16 the
// threshold route wins at every n tried (n 100: 0.5 vs 1.3 us, 1,000: 1.3 vs 3.0, 5,000: 3.8 vs
// 9.9); k = 24 only up to n ~ 300; k = 64 and 128 it loses 2-7x.
constexpr int64_t kThresholdMaxK = 16;

}  // namespace

namespace internal {

void TopKRadix(const float* scores, int64_t n, int64_t k, int32_t* out) {
  if (AnsweredTrivially(n, k, out)) return;
  RadixSelect(scores, n, k, out);
}

void TopKByThreshold(const float* scores, int64_t n, int64_t k, int32_t* out) {
  if (AnsweredTrivially(n, k, out)) return;
  SelectByThreshold(scores, n, k, out);
}

}  // namespace internal

void TopK(const float* scores, int64_t n, int64_t k, int32_t* out) {
  if (k <= kThresholdMaxK) {
    internal::TopKByThreshold(scores, n, k, out);
  } else {
    internal::TopKRadix(scores, n, k, out);
  }
}

void TopKRows(const float* scores, int64_t rows, int64_t n, int64_t stride, const int64_t* row_len, int64_t k,
              int32_t* out) {
  ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t len = row_len != nullptr ? std::min(row_len[row], n) : n;
      TopK(scores + row * stride, std::max<int64_t>(len, 0), k, out + row * k);
    }
  });
}

namespace ref {

void TopK(const float* scores, int64_t n, int64_t k, int32_t* out) {
  if (AnsweredTrivially(n, k, out)) return;
  auto value = [&](int64_t i) {
    const float v = scores[i];
    return v != v ? -std::numeric_limits<float>::infinity() : v;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return value(a) > value(b); });
  for (int64_t i = 0; i < k; ++i) out[i] = static_cast<int32_t>(order[static_cast<size_t>(i)]);
}

}  // namespace ref
}  // namespace envforge::kernels
