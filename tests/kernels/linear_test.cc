// Linear: the fast path (GEMV for m <= 8, blocked GEMM above) against ref::Linear for every
// weight dtype, odd shapes and partial fp8 blocks, on both the AVX2 and the portable path.
#include <doctest/doctest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/linear.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

// A weight matrix in one dtype plus its storage.
struct TestWeights {
  std::vector<float> f32;
  std::vector<uint16_t> u16;
  std::vector<uint8_t> u8;
  std::vector<float> scales;
  WeightMatrix matrix;
};

TestWeights MakeWeights(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  TestWeights t;
  const std::vector<float> values = testing::RandomFloats(static_cast<size_t>(rows * cols), seed, 0.1f);
  t.matrix.dtype = dtype;
  t.matrix.rows = rows;
  t.matrix.cols = cols;
  switch (dtype) {
    case DType::kF32:
      t.f32 = values;
      t.matrix.data = t.f32.data();
      break;
    case DType::kBF16:
    case DType::kF16:
      for (float v : values) t.u16.push_back(dtype == DType::kBF16 ? FloatToBf16(v) : FloatToHalf(v));
      t.matrix.data = t.u16.data();
      break;
    case DType::kF8E4M3: {
      t.u8 = testing::RandomFp8Codes(values.size(), seed);
      const int64_t scale_rows = (rows + 127) / 128, scale_cols = (cols + 127) / 128;
      t.scales = testing::RandomFloats(static_cast<size_t>(scale_rows * scale_cols), seed + 1, 1.0f);
      for (float& s : t.scales) s = 1e-3f * (1.0f + std::fabs(s));  // distinct per block
      t.matrix.data = t.u8.data();
      t.matrix.block_scale_inv = t.scales.data();
      break;
    }
  }
  return t;
}

void CheckFastMatchesRef(DType dtype, int64_t m, int64_t rows, int64_t cols) {
  CAPTURE(DTypeName(dtype));
  CAPTURE(m);
  CAPTURE(rows);
  CAPTURE(cols);
  TestWeights w = MakeWeights(dtype, rows, cols, static_cast<uint32_t>(rows * 31 + cols));
  const std::vector<float> x = testing::RandomFloats(static_cast<size_t>(m * cols), static_cast<uint32_t>(m + 5));
  std::vector<float> expected(static_cast<size_t>(m * rows)), actual(expected.size(), -1.0f);
  ref::Linear(x.data(), m, w.matrix, expected.data());
  testing::OnEveryPath([&] {
    std::fill(actual.begin(), actual.end(), -1.0f);
    Linear(x.data(), m, w.matrix, actual.data());
    // fp32 accumulation in another order than the double reference: ~sqrt(cols) * 2^-24.
    CHECK(testing::RelativeError(actual, expected) < 2e-6);
  });
}

TEST_SUITE("kernels.linear") {
  TEST_CASE("fast Linear matches ref for every dtype at decode and prefill sizes with ragged edges") {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
      for (int64_t m : {1, 2, 3, 5, 8, 9, 13, 20}) CheckFastMatchesRef(dtype, m, 37, 45);
      CheckFastMatchesRef(dtype, 1, 200, 300);  // fp8: partial 128 blocks in both directions
      CheckFastMatchesRef(dtype, 7, 200, 300);
      CheckFastMatchesRef(dtype, 19, 200, 300);   // GEMM: 3 full micro-tiles of 6 + 1 row
      CheckFastMatchesRef(dtype, 12, 130, 520);   // k crosses a 256 block, rows a 128 block
      CheckFastMatchesRef(dtype, 4, 1, 7);        // one output, fewer columns than a vector
      CheckFastMatchesRef(dtype, 100, 130, 300);  // token rows split into chunks across threads
    }
  }

  // The AVX-512 GEMM runs the AVX2 GEMM's fp32 chains (per k block, added in the same order), so
  // a machine's choice of ISA never changes a logit; the token-row chunks change nothing either.
  TEST_CASE("the AVX-512 GEMM equals the AVX2 GEMM bitwise") {
    if (!internal::CpuHasAvx512F()) {
      MESSAGE("skipped: this CPU has no AVX-512F");
      return;
    }
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
      for (int64_t m : {9, 31, 100, 257}) {
        for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 45}, {130, 520}, {300, 256}}) {
          CAPTURE(DTypeName(dtype));
          CAPTURE(m);
          CAPTURE(rows);
          CAPTURE(cols);
          TestWeights w = MakeWeights(dtype, rows, cols, static_cast<uint32_t>(rows + cols + m));
          const std::vector<float> x = testing::RandomFloats(static_cast<size_t>(m * cols), static_cast<uint32_t>(m));
          std::vector<float> wide(static_cast<size_t>(m * rows), -1.0f), narrow(wide.size(), -2.0f);
          Linear(x.data(), m, w.matrix, wide.data());
          internal::TEST_ForceAvx2(true);
          Linear(x.data(), m, w.matrix, narrow.data());
          internal::TEST_ForceAvx2(false);
          CHECK(std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)) == 0);
        }
      }
    }
  }

  TEST_CASE("fp8 Linear is W8A8: it equals the fp32 product of fake-quantized x and dequantized W") {
    TestWeights w = MakeWeights(DType::kF8E4M3, 150, 260, 3);
    const int64_t m = 3;
    std::vector<float> x = testing::RandomFloats(static_cast<size_t>(m * 260), 9);
    std::vector<float> y(static_cast<size_t>(m * 150));
    Linear(x.data(), m, w.matrix, y.data());
    std::vector<float> xq = x;
    FakeQuantFp8(xq.data(), m, 260, 128, true);
    std::vector<float> row(260);
    std::vector<float> expected(y.size());
    for (int64_t n = 0; n < 150; ++n) {
      DequantizeRow(w.matrix, n, row.data());
      for (int64_t i = 0; i < m; ++i) {
        double sum = 0.0;
        for (int64_t k = 0; k < 260; ++k)
          sum += static_cast<double>(xq[static_cast<size_t>(i * 260 + k)]) * row[static_cast<size_t>(k)];
        expected[static_cast<size_t>(i * 150 + n)] = static_cast<float>(sum);
      }
    }
    CHECK(testing::RelativeError(y, expected) < 2e-6);
    // And quantizing x matters: the unquantized product differs by far more than rounding.
    std::vector<float> unquantized(y.size());
    for (int64_t n = 0; n < 150; ++n) {
      DequantizeRow(w.matrix, n, row.data());
      for (int64_t i = 0; i < m; ++i) {
        double sum = 0.0;
        for (int64_t k = 0; k < 260; ++k)
          sum += static_cast<double>(x[static_cast<size_t>(i * 260 + k)]) * row[static_cast<size_t>(k)];
        unquantized[static_cast<size_t>(i * 150 + n)] = static_cast<float>(sum);
      }
    }
    CHECK(testing::RelativeError(y, unquantized) > 1e-3);
  }

  TEST_CASE("DequantizeRow applies the fp8 block scale of the row's and column's block") {
    TestWeights w = MakeWeights(DType::kF8E4M3, 200, 300, 5);
    std::vector<float> row(300);
    DequantizeRow(w.matrix, 150, row.data());  // row block 1
    for (int64_t k : {0, 127, 128, 255, 256, 299}) {
      CAPTURE(k);
      CHECK(row[static_cast<size_t>(k)] ==
            Fp8E4M3ToFloat(w.u8[static_cast<size_t>(150 * 300 + k)]) * w.scales[static_cast<size_t>(1 * 3 + k / 128)]);
    }
    TestWeights b = MakeWeights(DType::kBF16, 4, 9, 6);
    std::vector<float> brow(9);
    DequantizeRow(b.matrix, 2, brow.data());
    CHECK(brow[4] == Bf16ToFloat(b.u16[2 * 9 + 4]));
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
