// Top-k selection over a row of scores (dsa-engine.md 4.6): writes the indices of the k largest
// finite-or-not scores among scores[0, n) to out[0, k), unsorted; when n <= k it writes 0..n-1
// then pads with -1. -inf entries are never selected when a larger entry remains; entries equal
// to the k-th largest are taken in an unspecified order (ties are arbitrary). NaN is treated as
// -inf.
//
// TopK (fast) is a radix select on order-preserving 32-bit keys (O(n)), or for small k a
// threshold scan (below) that writes the same array; ref::TopK sorts
// (O(n log n)). Their index sets are equal when the k-th value has no ties.
#pragma once

#include <cstdint>

namespace envforge::kernels {

void TopK(const float* scores, int64_t n, int64_t k, int32_t* out);
// rows independent rows of length n, row stride `stride`; out is [rows, k]. Threads over rows.
void TopKRows(const float* scores, int64_t rows, int64_t n, int64_t stride, const int64_t* row_len, int64_t k,
              int32_t* out);  // row_len[r] (may be nullptr = n) limits row r

namespace internal {
// TopK's two routes, both exposed for the tests: the radix select, and (TopK's choice for
// k <= 16) a scan that keeps the k best in a heap. They write the same
// array: the radix select's order (the pass that took an entry, then its index) and its ties
// (the lowest indices).
void TopKRadix(const float* scores, int64_t n, int64_t k, int32_t* out);
void TopKByThreshold(const float* scores, int64_t n, int64_t k, int32_t* out);
}  // namespace internal

namespace ref {
void TopK(const float* scores, int64_t n, int64_t k, int32_t* out);
}  // namespace ref

}  // namespace envforge::kernels
