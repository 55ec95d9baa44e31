// kernels/cuda/device_runtime.h, and the number formats the CUDA kernels share with the CPU ones:
// CUDA's own fp8 e4m3 / bf16 conversions (cuda_fp8.h, cuda_bf16.h, usable on the host) must agree
// with kernels/cpu/float_formats.h bit for bit, or a GPU cache written by one backend would decode
// differently on the other. Those cases and the argument checks run everywhere; the memory and
// stream cases need a GPU.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cuda/device_runtime.h"
#include "tests/kernels/cuda_test_util.h"

namespace envforge::kernels::cuda {
namespace {

uint8_t CudaFp8(float f) { return static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3)); }

float CudaFp8ToFloat(uint8_t code) {
  __half_raw raw = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  uint16_t bits = raw.x;
  return HalfToFloat(bits);
}

TEST_CASE("fp8 e4m3: CUDA's decoding of every code equals the CPU table") {
  for (int code = 0; code < 256; ++code) {
    float cpu = Fp8E4M3ToFloat(static_cast<uint8_t>(code));
    float gpu = CudaFp8ToFloat(static_cast<uint8_t>(code));
    if (std::isnan(cpu)) {
      CHECK_MESSAGE(std::isnan(gpu), "code " << code);
    } else {
      CHECK_MESSAGE(gpu == cpu, "code " << code);
    }
  }
}

TEST_CASE("fp8 e4m3: CUDA's saturating round-to-nearest-even equals the CPU encoder") {
  std::mt19937 rng(7);
  std::vector<float> values;
  // Every midpoint between adjacent codes (where ties-to-even decides), the codes themselves, the
  // range ends, values past 448 (saturate) and random magnitudes over the whole exponent range.
  for (int code = 0; code < 126; ++code) {
    float a = Fp8E4M3ToFloat(static_cast<uint8_t>(code));
    float b = Fp8E4M3ToFloat(static_cast<uint8_t>(code + 1));
    values.insert(values.end(), {a, (a + b) / 2, std::nextafter((a + b) / 2, 0.0f), std::nextafter((a + b) / 2, 1e9f)});
  }
  values.insert(values.end(), {448.0f, 449.0f, 464.0f, 465.0f, 1e6f, std::numeric_limits<float>::max(), 1e-9f, 0.0f});
  std::uniform_real_distribution<float> exponent(-12.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) values.push_back(std::exp2(exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f));
  size_t count = values.size();
  for (size_t i = 0; i < count; ++i) values.push_back(-values[i]);
  int mismatches = 0;
  for (float v : values) {
    if (CudaFp8(v) != FloatToFp8E4M3(v) && ++mismatches <= 5) {
      MESSAGE("value " << v << ": cuda 0x" << std::hex << int(CudaFp8(v)) << " cpu 0x" << int(FloatToFp8E4M3(v)));
    }
  }
  CHECK(mismatches == 0);
  CHECK((CudaFp8(std::nanf("")) & 0x7f) == 0x7f);
  CHECK((FloatToFp8E4M3(std::nanf("")) & 0x7f) == 0x7f);
}

TEST_CASE("bf16: CUDA's round-to-nearest-even equals the CPU encoder") {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  int mismatches = 0;
  for (int i = 0; i < 100000; ++i) {
    uint32_t b = bits(rng);
    float f;
    std::memcpy(&f, &b, 4);
    if (std::isnan(f)) continue;
    __nv_bfloat16 g = __float2bfloat16_rn(f);
    uint16_t gpu;
    std::memcpy(&gpu, &g, 2);
    if (gpu != FloatToBf16(f)) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("CheckCuda names the call and the runtime's error") {
  CHECK(CheckCuda(cudaSuccess, "x").ok());
  Status status = CheckCuda(cudaErrorMemoryAllocation, "cudaMalloc of the cache");
  CHECK(status.code() == StatusCode::kInternal);
  CHECK(status.message().find("cudaMalloc of the cache") == 0);
  CHECK(status.message().find("cudaErrorMemoryAllocation") != std::string::npos);
}

TEST_CASE("DeviceBuffer: empty buffers and out-of-range copies are refused before any CUDA call") {
  Result<DeviceBuffer> empty = DeviceBuffer::Allocate(0);
  REQUIRE(empty.ok());
  CHECK(empty->data() == nullptr);
  CHECK(empty->bytes() == 0);
  char byte = 0;
  Status status = empty->Upload(&byte, 1);
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK(status.message().find("exceeds the buffer") != std::string::npos);
  CHECK(empty->Download(&byte, 1, 0).code() == StatusCode::kInvalidArgument);
  CHECK(empty->Upload(&byte, 0).ok());
}

TEST_CASE("ProbeDevice: a device is Hopper or newer, or the reason it is unusable is given") {
  Result<DeviceInfo> info = ProbeDevice();
  if (!info.ok()) {
    CHECK(info.status().code() == StatusCode::kUnavailable);
    CHECK_FALSE(info.status().message().empty());
    return;
  }
  CHECK(info->sm_major >= 9);
  CHECK(info->sm_count > 0);
  CHECK(info->memory_bytes > 0);
  CHECK(info->theoretical_bandwidth_gbs() > 100.0);
}

TEST_CASE("DeviceBuffer and Stream on the GPU: round trip, fill, event timing") {
  ENVFORGE_REQUIRE_GPU();
  std::vector<int32_t> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<int32_t>(i * 7 - 300);
  DeviceBuffer buffer = testing::ToDevice(host);
  CHECK(testing::FromDevice<int32_t>(buffer, host.size()) == host);
  std::vector<int32_t> part(10);
  REQUIRE(buffer.Download(part.data(), 40, 400).ok());
  CHECK(part[0] == host[100]);
  REQUIRE(buffer.Fill(0xff).ok());
  CHECK(testing::FromDevice<int32_t>(buffer, 3) == std::vector<int32_t>{-1, -1, -1});
  CHECK(buffer.Upload(host.data(), 4, 3997).code() == StatusCode::kInvalidArgument);

  DeviceBuffer moved = std::move(buffer);
  CHECK(buffer.data() == nullptr);
  CHECK(moved.bytes() == 4000);

  Result<Stream> stream = Stream::Create();
  REQUIRE(stream.ok());
  int calls = 0;
  Result<double> ms = TimeOnStream(stream->get(), 5, [&]() -> Status {
    ++calls;
    return CheckCuda(cudaMemsetAsync(moved.data(), 0, moved.bytes(), stream->get()), "cudaMemsetAsync");
  });
  REQUIRE(ms.ok());
  CHECK(calls == 6);  // one warm-up plus five timed
  CHECK(*ms >= 0.0);
  CHECK(stream->Synchronize().ok());
}

}  // namespace
}  // namespace envforge::kernels::cuda
