// Helpers shared by the kernel tests: seeded random data, error measures, and running a check
// on both the AVX2 path and the portable path of the fast ops.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/sparse_attention.h"
#include "kernels/cpu/internal/cpu_features.h"

namespace envforge::kernels::testing {

inline std::vector<float> RandomFloats(size_t count, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

// Random finite fp8 e4m3 codes (the NaN codes 0x7f / 0xff never occur in weights or caches).
inline std::vector<uint8_t> RandomFp8Codes(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(0, 255);
  std::vector<uint8_t> codes(count);
  for (uint8_t& c : codes) {
    do {
      c = static_cast<uint8_t>(code(rng));
    } while ((c & 0x7f) == 0x7f);
  }
  return codes;
}

// ||a - b|| / ||b|| (2-norm); 0 when both are zero.
inline double RelativeError(const float* a, const float* b, size_t count) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < count; ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  if (norm == 0.0) return std::sqrt(diff);
  return std::sqrt(diff / norm);
}
inline double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  return RelativeError(a.data(), b.data(), a.size());
}

// Runs check() on the AVX512_BF16 and AVX-512 paths of the ops that have them (when the CPU has
// them), on the AVX2 path (when the CPU has it) and on the portable path.
template <typename Check>
void OnEveryPath(const Check& check) {
  if (internal::CpuHasAvx512Bf16()) {
    INFO("AVX512_BF16 path");
    internal::TEST_ForcePortable(false);
    check();
  }
  if (internal::CpuHasAvx512F()) {
    INFO("AVX-512 path");
    internal::TEST_ForcePortable(false);
    internal::TEST_ForceNoBf16(true);
    check();
    internal::TEST_ForceNoBf16(false);
  }
  if (internal::CpuHasAvx2Fma()) {
    INFO("AVX2 path");
    internal::TEST_ForcePortable(false);
    internal::TEST_ForceAvx2(true);
    check();
    internal::TEST_ForceAvx2(false);
  }
  {
    INFO("portable path");
    internal::TEST_ForcePortable(true);
    check();
    internal::TEST_ForcePortable(false);
  }
}

// A latent cache filled from random fp32 rows through the real quantizer (as the cache writer
// does): nope part act-quantized in groups of 128 with pow2 scales, rope part in bf16. view points
// into the vectors (keep the struct alive and unmoved-from while using it).
struct TestLatentCache {
  std::vector<uint8_t> nope;
  std::vector<float> scales;
  std::vector<uint16_t> rope;
  LatentCacheView view;
};

inline TestLatentCache MakeTestLatentCache(int64_t rows, int64_t kv_rank, int64_t rope_dim, uint32_t seed) {
  TestLatentCache c;
  const std::vector<float> latent = RandomFloats(static_cast<size_t>(rows * kv_rank), seed);
  c.nope.resize(latent.size());
  c.scales.resize(static_cast<size_t>(rows * (kv_rank / 128)));
  if (rows > 0) ActQuantFp8(latent.data(), rows, kv_rank, 128, true, c.nope.data(), c.scales.data());
  for (float v : RandomFloats(static_cast<size_t>(rows * rope_dim), seed + 1)) c.rope.push_back(FloatToBf16(v));
  c.view.nope = c.nope.data();
  c.view.scales = c.scales.data();
  c.view.rope = c.rope.data();
  c.view.rows = rows;
  c.view.kv_rank = kv_rank;
  c.view.rope_dim = rope_dim;
  return c;
}

}  // namespace envforge::kernels::testing
