// Fast Walsh-Hadamard transform of vectors of a power-of-two length n (the indexer uses 128):
// x <- scale * H_n x, H_n the Sylvester Hadamard matrix in natural order (H_1 = [1],
// H_2n = [[H_n, H_n], [H_n, -H_n]]). With scale = n^-0.5 it is orthonormal. rows vectors of n
// values, contiguous. InvalidArgument-free: n must be a power of two (asserted).
#pragma once

#include <cstdint>

namespace envforge::kernels {

void HadamardTransform(float* x, int64_t rows, int64_t n, float scale);

namespace ref {
// The O(n^2) matrix product, for tests.
void HadamardTransform(float* x, int64_t rows, int64_t n, float scale);
}  // namespace ref

}  // namespace envforge::kernels
