// Fused Hadamard + FP8 quantization on the GPU (kernels/cuda/hadamard_quant.h) against its CPU
// twin: kernels/cpu HadamardTransform followed by ActQuantFp8 with one group per vector.
//
// Tolerance: the kernel repeats the CPU's butterfly in the same stage order with the same fp32
// operations, so y, amax and the scales are expected bit-equal; scales are asserted equal, or
// within 1 ulp for plain (non power-of-two) scales. Codes are asserted equal except where the
// CPU's y / s lies within 1e-6 (relative) of a midpoint between two e4m3 values, where a one-ulp
// difference in y could flip the rounding; such cases are counted, reported and allowed (the
// construction predicts zero of them).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/hadamard.h"
#include "kernels/cuda/hadamard_quant.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels::cuda {
namespace {

struct Quantized {
  std::vector<uint8_t> q;
  std::vector<float> scales;
  std::vector<float> y;  // the CPU's rotated vectors (for the midpoint test); empty for the GPU
};

Quantized OnCpu(const std::vector<float>& x, int64_t rows, int64_t dim, float scale, bool pow2) {
  Quantized out;
  out.y = x;
  HadamardTransform(out.y.data(), rows, dim, scale);
  out.q.resize(x.size());
  out.scales.resize(static_cast<size_t>(rows));
  ActQuantFp8(out.y.data(), rows, dim, dim, pow2, out.q.data(), out.scales.data());
  return out;
}

Quantized OnGpu(const std::vector<float>& x, int64_t rows, int64_t dim, float scale, bool pow2) {
  DeviceBuffer device_x = testing::ToDevice(x);
  DeviceBuffer device_q = testing::DeviceZeros<uint8_t>(x.size());
  DeviceBuffer device_scales = testing::DeviceZeros<float>(static_cast<size_t>(rows));
  Result<Stream> stream = Stream::Create();
  REQUIRE(stream.ok());
  HadamardQuantArgs args;
  args.x = device_x.as<float>();
  args.rows = rows;
  args.dim = dim;
  args.scale = scale;
  args.pow2_scales = pow2;
  args.q = device_q.as<uint8_t>();
  args.scales = device_scales.as<float>();
  Status launched = HadamardQuantFp8(args, stream->get());
  REQUIRE_MESSAGE(launched.ok(), launched.message());
  Status synced = stream->Synchronize();
  REQUIRE_MESSAGE(synced.ok(), synced.message());
  Quantized out;
  out.q = testing::FromDevice<uint8_t>(device_q, x.size());
  out.scales = testing::FromDevice<float>(device_scales, static_cast<size_t>(rows));
  return out;
}

// True when |v| is within 1e-6 (relative) of the midpoint between the two e4m3 values around it.
bool NearFp8Midpoint(float v) {
  const float a = std::fabs(v);
  const float* table = Fp8E4M3Table();
  for (int code = 0; code < 0x7e; ++code) {
    const float lo = table[code], hi = table[code + 1];
    if (a >= lo && a <= hi) {
      const float mid = (lo + hi) / 2;
      return std::fabs(a - mid) <= 1e-6f * mid;
    }
  }
  return false;
}

// Compares GPU and CPU results of one input as the file comment states.
void CheckMatchesCpu(const std::vector<float>& x, int64_t rows, int64_t dim, float scale, bool pow2) {
  CAPTURE(rows);
  CAPTURE(dim);
  CAPTURE(scale);
  CAPTURE(pow2);
  const Quantized cpu = OnCpu(x, rows, dim, scale, pow2);
  const Quantized gpu = OnGpu(x, rows, dim, scale, pow2);
  int scale_mismatches = 0, code_mismatches = 0, midpoint_flips = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float expected = cpu.scales[static_cast<size_t>(r)], actual = gpu.scales[static_cast<size_t>(r)];
    const bool close = pow2 ? actual == expected
                            : (actual == expected || actual == std::nextafter(expected, 0.0f) ||
                               actual == std::nextafter(expected, std::numeric_limits<float>::infinity()));
    if (!close && ++scale_mismatches <= 5) MESSAGE("row " << r << ": scale " << actual << " vs CPU " << expected);
    for (int64_t i = 0; i < dim; ++i) {
      const size_t at = static_cast<size_t>(r * dim + i);
      if (gpu.q[at] == cpu.q[at]) continue;
      if (NearFp8Midpoint(cpu.y[at] / expected)) {
        ++midpoint_flips;
      } else if (++code_mismatches <= 5) {
        MESSAGE("row " << r << " element " << i << ": code 0x" << std::hex << int(gpu.q[at]) << " vs CPU 0x"
                       << int(cpu.q[at]) << std::dec << " (y / s = " << cpu.y[at] / expected << ")");
      }
    }
  }
  if (midpoint_flips > 0) MESSAGE(midpoint_flips << " codes differ at an e4m3 rounding midpoint (allowed)");
  CHECK(scale_mismatches == 0);
  CHECK(code_mismatches == 0);
}

std::vector<float> RandomRows(int64_t rows, int64_t dim, uint32_t seed, float stddev) {
  return kernels::testing::RandomFloats(static_cast<size_t>(rows * dim), seed, stddev);
}

TEST_SUITE("kernels.cuda.hadamard_quant") {
  TEST_CASE("HadamardQuantFp8 rejects bad arguments before any CUDA call") {
    std::vector<float> x(128);
    std::vector<uint8_t> q(128);
    std::vector<float> scales(1);
    HadamardQuantArgs args;
    args.x = x.data();
    args.rows = 1;
    args.dim = 128;
    args.scale = 1.0f;
    args.q = q.data();
    args.scales = scales.data();

    SUBCASE("dim not 32, 64 or 128") {
      args.dim = 48;
      Status status = HadamardQuantFp8(args, nullptr);
      CHECK(status.code() == StatusCode::kInvalidArgument);
      CHECK(status.message().find("dim") != std::string::npos);
      CHECK(status.message().find("48") != std::string::npos);
    }
    SUBCASE("negative rows") {
      args.rows = -1;
      Status status = HadamardQuantFp8(args, nullptr);
      CHECK(status.code() == StatusCode::kInvalidArgument);
      CHECK(status.message().find("rows") != std::string::npos);
    }
    SUBCASE("null pointers name the argument") {
      args.x = nullptr;
      CHECK(HadamardQuantFp8(args, nullptr).message().find("x is null") != std::string::npos);
      args.x = x.data();
      args.q = nullptr;
      CHECK(HadamardQuantFp8(args, nullptr).message().find("q is null") != std::string::npos);
      args.q = q.data();
      args.scales = nullptr;
      CHECK(HadamardQuantFp8(args, nullptr).message().find("scales is null") != std::string::npos);
    }
    SUBCASE("misaligned x") {
      args.x = reinterpret_cast<const float*>(reinterpret_cast<const char*>(x.data()) + 2);
      Status status = HadamardQuantFp8(args, nullptr);
      CHECK(status.code() == StatusCode::kInvalidArgument);
      CHECK(status.message().find("x is not") != std::string::npos);
    }
    SUBCASE("zero rows is a no-op, whatever the pointers") {
      args.rows = 0;
      args.x = nullptr;
      args.q = nullptr;
      args.scales = nullptr;
      CHECK(HadamardQuantFp8(args, nullptr).ok());
    }
  }

  TEST_CASE("the CPU twin's midpoint test finds midpoints and only them") {
    CHECK(NearFp8Midpoint(1.0625f));  // between 1 and 1.125
    CHECK(NearFp8Midpoint(-1.0625f));
    CHECK_FALSE(NearFp8Midpoint(1.0f));
    CHECK_FALSE(NearFp8Midpoint(1.1f));
    CHECK(NearFp8Midpoint(0x1p-10f));  // between 0 and the smallest subnormal 2^-9
  }

  TEST_CASE("GPU Hadamard + FP8 quantization equals the CPU on random vectors") {
    ENVFORGE_REQUIRE_GPU();
    for (int64_t dim : {32, 64, 128}) {
      const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
      for (bool pow2 : {true, false}) {
        // 1 row (a block with one live warp), 13 (not a multiple of the 8 warps of a block), 1000.
        for (int64_t rows : {1, 13, 1000}) {
          CheckMatchesCpu(RandomRows(rows, dim, static_cast<uint32_t>(dim + rows), 2.0f), rows, dim, scale, pow2);
        }
      }
    }
  }

  TEST_CASE("GPU Hadamard + FP8 quantization equals the CPU on adversarial vectors") {
    ENVFORGE_REQUIRE_GPU();
    for (int64_t dim : {32, 64, 128}) {
      CAPTURE(dim);
      const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
      const int64_t rows = 12;
      std::vector<float> x(static_cast<size_t>(rows * dim), 0.0f);
      auto row = [&](int64_t r) { return x.begin() + r * dim; };
      // 0: all zero (amax clamps to 1e-4, codes 0).
      // 1: constant: the rotation puts everything into element 0.
      std::fill(row(1), row(2), 3.0f);
      // 2: one-hot: every rotated element has the same magnitude (amax ties everywhere, codes +-448).
      row(2)[5] = -7.0f;
      // 3: huge values (pow2 scale far above 1).
      for (int64_t i = 0; i < dim; ++i) row(3)[i] = (i % 3 == 0 ? -1e30f : 2e29f) * static_cast<float>(i + 1);
      // 4: tiny values (amax below 1e-4: fp8 subnormals and zeros).
      for (int64_t i = 0; i < dim; ++i) row(4)[i] = 1e-7f * static_cast<float>(i - dim / 2);
      // 5: magnitudes spanning 2^-20 .. 2^10, so the codes cover the subnormal and normal ranges.
      for (int64_t i = 0; i < dim; ++i) row(5)[i] = std::ldexp(i % 2 ? -1.0f : 1.0f, static_cast<int>(i % 31) - 20);
      // 6: all negative.
      for (int64_t i = 0; i < dim; ++i) row(6)[i] = -1.0f - 0.01f * static_cast<float>(i);
      // 7: +a and -a in the input (and ties after rotation).
      row(7)[0] = 4.0f;
      row(7)[1] = -4.0f;
      // 8: exactly representable values whose rotation lands on e4m3 values.
      for (int64_t i = 0; i < dim; ++i) row(8)[i] = static_cast<float>((i * 7) % 5) - 2.0f;
      // 9-11: random with very different scales.
      std::vector<float> random = RandomRows(3, dim, 99, 1.0f);
      for (int64_t i = 0; i < dim; ++i) {
        row(9)[i] = random[static_cast<size_t>(i)] * 1e-3f;
        row(10)[i] = random[static_cast<size_t>(dim + i)] * 1e3f;
        row(11)[i] = random[static_cast<size_t>(2 * dim + i)];
      }
      for (bool pow2 : {true, false}) {
        CheckMatchesCpu(x, rows, dim, scale, pow2);
        CheckMatchesCpu(x, rows, dim, 1.0f, pow2);  // an unnormalised rotation
      }
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels::cuda
