// Walsh-Hadamard transform (hadamard.h): the in-place butterfly, O(n log n) per vector.
#include "kernels/cpu/hadamard.h"

#include <algorithm>
#include <cassert>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace envforge::kernels {

void HadamardTransform(float* x, int64_t rows, int64_t n, float scale) {
  assert(n > 0 && (n & (n - 1)) == 0);
  ParallelFor(rows, std::max<int64_t>(1, 8192 / n), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      float* v = x + row * n;
      for (int64_t half = 1; half < n; half *= 2) {
        for (int64_t block = 0; block < n; block += 2 * half) {
          for (int64_t i = block; i < block + half; ++i) {
            const float a = v[i], b = v[i + half];
            v[i] = a + b;
            v[i + half] = a - b;
          }
        }
      }
      for (int64_t i = 0; i < n; ++i) v[i] *= scale;
    }
  });
}

namespace ref {

void HadamardTransform(float* x, int64_t rows, int64_t n, float scale) {
  assert(n > 0 && (n & (n - 1)) == 0);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t row = 0; row < rows; ++row) {
    float* v = x + row * n;
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0.0;
      // Sylvester order: H[i][j] = (-1)^popcount(i & j).
      for (int64_t j = 0; j < n; ++j) sum += (__builtin_popcountll(static_cast<uint64_t>(i & j)) & 1) ? -v[j] : v[j];
      out[static_cast<size_t>(i)] = static_cast<float>(sum * scale);
    }
    std::copy(out.begin(), out.end(), v);
  }
}

}  // namespace ref
}  // namespace envforge::kernels
