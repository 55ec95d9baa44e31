// Top-k selection (topk.h).
//
// Fast path: radix select on order-preserving 32-bit keys. A float's bits map to a uint32 that
// sorts like the float (flip all bits of negatives, set the sign bit of positives); NaN maps to
// the key of -inf. Pass 1 histograms the top 12 bits of every key and finds the bucket holding
// the k-th largest key; keys in higher buckets are selected at once, keys in that bucket become
// the candidates of the next pass (10 bits, then the last 10). After the last pass the remaining
// candidates all equal the k-th key and the first ones fill the remaining slots.
#include "kernels/cpu/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace envforge::kernels {
namespace {

// The order-preserving keys of scores[0, n) (file comment), without branches so the loop
// vectorizes: ~bits is bits ^ 0xffffffff and bits | 0x80000000 (sign clear) is bits ^ 0x80000000.
void OrderKeys(const float* scores, int64_t n, uint32_t* keys) {
  constexpr uint32_t kNanKey = 0x007fffffu;  // OrderKey(-inf)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &scores[i], 4);
    const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | 0x80000000u;
    const uint32_t key = bits ^ flip;
    keys[i] = scores[i] != scores[i] ? kNanKey : key;
  }
}

struct Candidate {
  uint32_t key;
  int32_t index;
};

// Writes 0..n-1 then -1 padding (the n <= k case).
void AllThenPadding(int64_t n, int64_t k, int32_t* out) {
  for (int64_t i = 0; i < k; ++i) out[i] = i < n ? static_cast<int32_t>(i) : -1;
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

}  // namespace

void TopK(const float* scores, int64_t n, int64_t k, int32_t* out) {
  if (k <= 0) return;
  if (n <= k) {
    AllThenPadding(n, k, out);
    return;
  }
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
  if (k <= 0) return;
  if (n <= k) {
    AllThenPadding(n, k, out);
    return;
  }
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
