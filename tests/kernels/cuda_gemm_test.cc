// kernels/cuda/gemm.h against its CPU twin kernels/cpu/linear.h (ref::Linear): bf16 and FP8
// block-scaled GEMMs on odd shapes (m = 1, 7, 130; n and k off the 128 grid where the mode allows),
// strided leading dimensions, alpha/beta and bf16 outputs; the strided-batched bf16 GEMM against
// a double-precision loop; and the host-side argument checks, which run without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/internal/cublas_library.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels::cuda {
namespace {

using kernels::testing::RandomFloats;
using kernels::testing::RandomFp8Codes;
using kernels::testing::RelativeError;
using testing::FromDevice;
using testing::ToDevice;

// ---- host-side argument checks (no GPU needed)

// Aligned host storage standing in for device pointers: validation never dereferences them.
alignas(256) unsigned char fake_memory[1024];
const void* FakePointer(size_t offset = 0) { return fake_memory + offset; }

GemmArgs ValidBf16Args() {
  GemmArgs args;
  args.kind = GemmKind::kBF16;
  args.m = 7;
  args.n = 200;
  args.k = 300;
  args.a = FakePointer();
  args.w = FakePointer(256);
  args.c = const_cast<void*>(FakePointer(512));
  return args;
}

GemmArgs ValidFp8Args() {
  GemmArgs args = ValidBf16Args();
  args.kind = GemmKind::kFP8Block;
  args.n = 208;
  args.k = 272;
  args.a_scales = static_cast<const float*>(FakePointer(768));
  args.w_scales = static_cast<const float*>(FakePointer(832));
  return args;
}

void CheckInvalid(const Status& status, const char* fragment) {
  CAPTURE(status.ToString());
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK(status.message().find(fragment) != std::string::npos);
}

TEST_SUITE("kernels.cuda.gemm") {
  TEST_CASE("ValidateGemmArgs accepts well-formed bf16 and FP8 arguments") {
    CHECK(ValidateGemmArgs(ValidBf16Args()).ok());
    CHECK(ValidateGemmArgs(ValidFp8Args()).ok());
    GemmArgs strided = ValidFp8Args();
    strided.lda = 288;
    strided.ldw = 304;
    strided.ldc = 212;
    CHECK(ValidateGemmArgs(strided).ok());
  }

  TEST_CASE("ValidateGemmArgs names the bad shape or pointer") {
    GemmArgs args = ValidBf16Args();
    args.n = 0;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.n must be >= 1, got 0");
    args = ValidBf16Args();
    args.k = -3;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.k must be >= 1, got -3");
    args = ValidBf16Args();
    args.m = -1;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.m must be >= 0, got -1");
    args = ValidBf16Args();
    args.lda = 299;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.lda 299 is smaller than k 300");
    args = ValidBf16Args();
    args.ldw = 10;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.ldw 10 is smaller than k 300");
    args = ValidBf16Args();
    args.ldc = 199;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.ldc 199 is smaller than n 200");
    args = ValidBf16Args();
    args.a = nullptr;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.a is null");
    args = ValidBf16Args();
    args.w = nullptr;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.w is null");
    args = ValidBf16Args();
    args.c = nullptr;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.c is null");
    args = ValidBf16Args();
    args.w = FakePointer(8);
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.w must be 16-byte aligned");
    args = ValidBf16Args();
    args.kind = static_cast<GemmKind>(7);
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.kind");
  }

  TEST_CASE("ValidateGemmArgs: kF32 needs only float alignment and has no bf16 output") {
    GemmArgs args = ValidBf16Args();
    args.kind = GemmKind::kF32;
    args.a = FakePointer(4);
    args.w = FakePointer(4);
    CHECK(ValidateGemmArgs(args).ok());
    args.c_bf16 = true;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.c_bf16 is not supported for kF32");
    args.c_bf16 = false;
    args.a = FakePointer(2);
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.a must be 4-byte aligned");
  }

  TEST_CASE("ValidateGemmArgs enforces the FP8 block-scaled constraints") {
    GemmArgs args = ValidFp8Args();
    args.k = 280;  // 16 does not divide it
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.k must be a multiple of 16 for kFP8Block, got 280");
    args = ValidFp8Args();
    args.n = 206;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.n must be a multiple of 4 for kFP8Block, got 206");
    args = ValidFp8Args();
    args.lda = 280;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.lda must be a multiple of 16 for kFP8Block, got 280");
    args = ValidFp8Args();
    args.ldw = 290;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.ldw must be a multiple of 16 for kFP8Block, got 290");
    args = ValidFp8Args();
    args.a_scales = nullptr;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.a_scales is null");
    args = ValidFp8Args();
    args.w_scales = nullptr;
    CheckInvalid(ValidateGemmArgs(args), "GemmArgs.w_scales is null");
    // bf16 has none of these constraints.
    args = ValidBf16Args();
    args.k = 45;
    args.n = 37;
    CHECK(ValidateGemmArgs(args).ok());
  }

  TEST_CASE("ValidateBatchedGemmArgs names the bad argument and allows interleaved strides") {
    BatchedGemmArgs args;
    args.batch = 4;
    args.m = 5;
    args.n = 24;
    args.k = 40;
    args.a = static_cast<const uint16_t*>(FakePointer());
    args.w = static_cast<const uint16_t*>(FakePointer(256));
    args.c = const_cast<void*>(FakePointer(512));
    // Per-head slices of [tokens, heads, dim] tensors: strides far below m * ld.
    args.lda = 4 * 40;
    args.stride_a = 40;
    args.ldc = 4 * 24;
    args.stride_c = 24;
    args.stride_w = 0;  // one matrix shared by every batch entry
    CHECK(ValidateBatchedGemmArgs(args).ok());

    BatchedGemmArgs bad = args;
    bad.batch = -1;
    CheckInvalid(ValidateBatchedGemmArgs(bad), "BatchedGemmArgs.batch must be >= 0, got -1");
    bad = args;
    bad.stride_c = -24;
    CheckInvalid(ValidateBatchedGemmArgs(bad), "strides must be >= 0");
    bad = args;
    bad.w_transposed = true;
    bad.ldw = 23;
    CheckInvalid(ValidateBatchedGemmArgs(bad), "BatchedGemmArgs.ldw 23 is smaller than n 24");
    bad = args;
    bad.ldw = 39;
    CheckInvalid(ValidateBatchedGemmArgs(bad), "BatchedGemmArgs.ldw 39 is smaller than k 40");
    bad = args;
    bad.lda = 30;
    CheckInvalid(ValidateBatchedGemmArgs(bad), "BatchedGemmArgs.lda 30 is smaller than k 40");
    bad = args;
    bad.ldc = 20;
    CheckInvalid(ValidateBatchedGemmArgs(bad), "BatchedGemmArgs.ldc 20 is smaller than n 24");
    bad = args;
    bad.c = nullptr;
    CheckInvalid(ValidateBatchedGemmArgs(bad), "BatchedGemmArgs.c is null");
    bad = args;
    bad.n = 0;
    CheckInvalid(ValidateBatchedGemmArgs(bad), "BatchedGemmArgs.n must be >= 1, got 0");
  }

  TEST_CASE("cuBLAS is opened at run time with every entry point, or its absence is named") {
    // Binaries do not link cuBLAS (internal/cublas_library.h); the table is filled by dlopen (or
    // by the emulator's definitions under emulation).
    Result<const internal::CublasLibrary*> library = internal::Cublas();
    if (!library.ok()) {
      CHECK(library.status().code() == StatusCode::kUnavailable);
      CHECK(library.status().message().find("libcublas") != std::string::npos);
      return;
    }
#define ENVFORGE_CHECK_LOADED(name) CHECK_MESSAGE(((*library)->name != nullptr), #name);
    ENVFORGE_CUBLAS_FUNCTIONS(ENVFORGE_CHECK_LOADED)
    ENVFORGE_CUBLASLT_FUNCTIONS(ENVFORGE_CHECK_LOADED)
#undef ENVFORGE_CHECK_LOADED
    CHECK(std::string((*library)->cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED)) == "CUBLAS_STATUS_NOT_SUPPORTED");
    CHECK(internal::Cublas().value() == *library);  // loaded once
  }

  TEST_CASE("BlasHandle::Create reports a missing device as Unavailable") {
    Result<DeviceInfo> device = ProbeDevice();
    auto handle = BlasHandle::Create(nullptr);
    if (device.ok()) {
      REQUIRE_MESSAGE(handle.ok(), handle.status().message());
      CHECK((*handle)->blas() != nullptr);
      CHECK((*handle)->blas_lt() != nullptr);
      CHECK((*handle)->workspace_bytes() > 0);
    } else {
      REQUIRE_FALSE(handle.ok());
      CHECK(handle.status().code() == StatusCode::kUnavailable);
    }
  }

  // ---- GPU consistency cases

  struct GpuContext {
    Stream stream;
    std::unique_ptr<BlasHandle> handle;
  };

  GpuContext MakeContext() {
    GpuContext context;
    auto stream = Stream::Create();
    REQUIRE_MESSAGE(stream.ok(), stream.status().message());
    context.stream = std::move(stream).value();
    auto handle = BlasHandle::Create(context.stream.get());
    REQUIRE_MESSAGE(handle.ok(), handle.status().message());
    context.handle = std::move(handle).value();
    return context;
  }

  // Row-major [rows, cols] values copied into [rows, ld] with `pad` in the columns past cols.
  template <typename T>
  std::vector<T> Pitched(const std::vector<T>& values, int64_t rows, int64_t cols, int64_t ld, T pad) {
    std::vector<T> out(static_cast<size_t>(rows * ld), pad);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c)
        out[static_cast<size_t>(r * ld + c)] = values[static_cast<size_t>(r * cols + c)];
    }
    return out;
  }

  std::vector<uint16_t> ToBf16(const std::vector<float>& values) {
    std::vector<uint16_t> out(values.size());
    for (size_t i = 0; i < values.size(); ++i) out[i] = FloatToBf16(values[i]);
    return out;
  }

  std::vector<float> Bf16ToFloats(const std::vector<uint16_t>& values) {
    std::vector<float> out(values.size());
    for (size_t i = 0; i < values.size(); ++i) out[i] = Bf16ToFloat(values[i]);
    return out;
  }

  // Rows [0, rows) x cols [0, cols) of a [rows, ld] host matrix.
  std::vector<float> Unpitch(const std::vector<float>& pitched, int64_t rows, int64_t cols, int64_t ld) {
    std::vector<float> out(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c)
        out[static_cast<size_t>(r * cols + c)] = pitched[static_cast<size_t>(r * ld + c)];
    }
    return out;
  }

  struct Layout {
    int64_t lda_pad = 0, ldw_pad = 0, ldc_pad = 0;
    bool c_bf16 = false;
    float alpha = 1.0f, beta = 0.0f;
  };

  // bf16: the GPU result against ref::Linear on the same bf16 values. ref::Linear sums the exact
  // products in double, cuBLAS in fp32 in its own order: relative L2 within 1e-5 for k <= 512
  // (~sqrt(k) * 2^-24 expected). A bf16 output adds its rounding (2^-9 relative per element).
  void CheckBf16Gemm(GpuContext & gpu, int64_t m, int64_t n, int64_t k, const Layout& layout) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(layout.c_bf16);
    CAPTURE(layout.beta);
    const int64_t lda = k + layout.lda_pad, ldw = k + layout.ldw_pad, ldc = n + layout.ldc_pad;
    const std::vector<uint16_t> x = ToBf16(RandomFloats(static_cast<size_t>(m * k), static_cast<uint32_t>(m * 7 + k)));
    const std::vector<uint16_t> w =
        ToBf16(RandomFloats(static_cast<size_t>(n * k), static_cast<uint32_t>(n * 13 + k), 0.1f));
    const std::vector<float> c0 = RandomFloats(static_cast<size_t>(m * n), 99);

    // Expected: alpha * x . W^T + beta * c0 with c0 as the GPU sees it (bf16-rounded for a bf16 C).
    std::vector<float> product(static_cast<size_t>(m * n));
    WeightMatrix matrix;
    matrix.dtype = DType::kBF16;
    matrix.data = w.data();
    matrix.rows = n;
    matrix.cols = k;
    ref::Linear(Bf16ToFloats(x).data(), m, matrix, product.data());
    std::vector<float> expected(product.size());
    for (size_t i = 0; i < product.size(); ++i) {
      const float c_in = layout.c_bf16 ? RoundToBf16(c0[i]) : c0[i];
      expected[i] =
          static_cast<float>(static_cast<double>(layout.alpha) * product[i] + static_cast<double>(layout.beta) * c_in);
    }

    // Padding columns of A and W hold NaN: reading them would poison the result.
    const uint16_t nan_bf16 = 0x7fc0;
    DeviceBuffer a_device = ToDevice(Pitched(x, m, k, lda, nan_bf16));
    DeviceBuffer w_device = ToDevice(Pitched(w, n, k, ldw, nan_bf16));
    const float sentinel = -12288.0f;  // exact in bf16 too
    DeviceBuffer c_device = layout.c_bf16 ? ToDevice(Pitched(ToBf16(c0), m, n, ldc, FloatToBf16(sentinel)))
                                          : ToDevice(Pitched(c0, m, n, ldc, sentinel));
    GemmArgs args;
    args.kind = GemmKind::kBF16;
    args.m = m;
    args.n = n;
    args.k = k;
    args.a = a_device.data();
    args.w = w_device.data();
    args.lda = layout.lda_pad != 0 ? lda : 0;
    args.ldw = layout.ldw_pad != 0 ? ldw : 0;
    args.ldc = layout.ldc_pad != 0 ? ldc : 0;
    args.c = c_device.data();
    args.c_bf16 = layout.c_bf16;
    args.alpha = layout.alpha;
    args.beta = layout.beta;
    Status status = Gemm(*gpu.handle, args);
    REQUIRE_MESSAGE(status.ok(), status.message());
    status = gpu.stream.Synchronize();
    REQUIRE_MESSAGE(status.ok(), status.message());

    std::vector<float> pitched = layout.c_bf16
                                     ? Bf16ToFloats(FromDevice<uint16_t>(c_device, static_cast<size_t>(m * ldc)))
                                     : FromDevice<float>(c_device, static_cast<size_t>(m * ldc));
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t col = n; col < ldc; ++col) REQUIRE(pitched[static_cast<size_t>(r * ldc + col)] == sentinel);
    }
    const double error = RelativeError(Unpitch(pitched, m, n, ldc), expected);
    CHECK(error < (layout.c_bf16 ? 4e-3 : 1e-5));
  }

  // W8A8: x quantized by ActQuantFp8 (1x128 groups, UE8M0 scales) exactly as ref::Linear does it,
  // weights random e4m3 codes with a distinct scale per 128x128 block. Row and group magnitudes of x
  // vary by powers of two so every activation scale differs from its neighbours (a transposed or
  // misplaced scale would show). Hopper's FP8 MMAs add products within a k-block with limited
  // alignment precision (~14 bits, DeepSeek-V3 report 3.3.2) before each block's fp32 promotion,
  // so the tolerance is relative L2 1e-3 (5e-3 with a bf16 output), far below what a wrong scale
  // (a factor >= 2 on a block) produces.
  void CheckFp8Gemm(GpuContext & gpu, int64_t m, int64_t n, int64_t k, const Layout& layout) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(layout.c_bf16);
    CAPTURE(layout.beta);
    const int64_t lda = k + layout.lda_pad, ldw = k + layout.ldw_pad, ldc = n + layout.ldc_pad;
    const int64_t kb = (k + 127) / 128, nb = (n + 127) / 128;
    std::vector<float> x = RandomFloats(static_cast<size_t>(m * k), static_cast<uint32_t>(m * 31 + k));
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t col = 0; col < k; ++col) {
        x[static_cast<size_t>(r * k + col)] *= std::ldexp(1.0f, static_cast<int>((r * 3 + col / 128 * 5) % 7) - 3);
      }
    }
    std::vector<uint8_t> x_codes(static_cast<size_t>(m * k));
    std::vector<float> x_scales(static_cast<size_t>(m * kb));
    ActQuantFp8(x.data(), m, k, 128, true, x_codes.data(), x_scales.data());
    const std::vector<uint8_t> w_codes = RandomFp8Codes(static_cast<size_t>(n * k), static_cast<uint32_t>(n + k));
    std::vector<float> w_scales = RandomFloats(static_cast<size_t>(nb * kb), static_cast<uint32_t>(n * 3 + 1));
    for (float& s : w_scales) s = 1e-3f * (1.0f + 2.0f * std::fabs(s));

    WeightMatrix matrix;
    matrix.dtype = DType::kF8E4M3;
    matrix.data = w_codes.data();
    matrix.rows = n;
    matrix.cols = k;
    matrix.block_scale_inv = w_scales.data();
    matrix.pow2_activation_scales = true;
    std::vector<float> product(static_cast<size_t>(m * n));
    ref::Linear(x.data(), m, matrix, product.data());
    const std::vector<float> c0 = RandomFloats(static_cast<size_t>(m * n), 7);
    std::vector<float> expected(product.size());
    for (size_t i = 0; i < product.size(); ++i) {
      const float c_in = layout.c_bf16 ? RoundToBf16(c0[i]) : c0[i];
      expected[i] =
          static_cast<float>(static_cast<double>(layout.alpha) * product[i] + static_cast<double>(layout.beta) * c_in);
    }

    // Padding columns hold the e4m3 NaN code.
    DeviceBuffer a_device = ToDevice(Pitched(x_codes, m, k, lda, uint8_t{0x7f}));
    DeviceBuffer w_device = ToDevice(Pitched(w_codes, n, k, ldw, uint8_t{0x7f}));
    DeviceBuffer a_scales_device = ToDevice(x_scales);
    DeviceBuffer w_scales_device = ToDevice(w_scales);
    const float sentinel = -12288.0f;  // exact in bf16 too
    DeviceBuffer c_device = layout.c_bf16 ? ToDevice(Pitched(ToBf16(c0), m, n, ldc, FloatToBf16(sentinel)))
                                          : ToDevice(Pitched(c0, m, n, ldc, sentinel));
    GemmArgs args;
    args.kind = GemmKind::kFP8Block;
    args.m = m;
    args.n = n;
    args.k = k;
    args.a = a_device.data();
    args.w = w_device.data();
    args.lda = lda;
    args.ldw = ldw;
    args.ldc = ldc;
    args.a_scales = a_scales_device.as<float>();
    args.w_scales = w_scales_device.as<float>();
    args.c = c_device.data();
    args.c_bf16 = layout.c_bf16;
    args.alpha = layout.alpha;
    args.beta = layout.beta;
    Status status = Gemm(*gpu.handle, args);
    REQUIRE_MESSAGE(status.ok(), status.message());
    status = gpu.stream.Synchronize();
    REQUIRE_MESSAGE(status.ok(), status.message());

    std::vector<float> pitched = layout.c_bf16
                                     ? Bf16ToFloats(FromDevice<uint16_t>(c_device, static_cast<size_t>(m * ldc)))
                                     : FromDevice<float>(c_device, static_cast<size_t>(m * ldc));
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t col = n; col < ldc; ++col) REQUIRE(pitched[static_cast<size_t>(r * ldc + col)] == sentinel);
    }
    const std::vector<float> actual = Unpitch(pitched, m, n, ldc);
    for (float v : actual) REQUIRE(std::isfinite(v));
    const double error = RelativeError(actual, expected);
    CHECK(error < (layout.c_bf16 ? 5e-3 : 1e-3));
  }

  TEST_CASE("bf16 Gemm matches ref::Linear on odd shapes, strided layouts, alpha/beta and bf16 output") {
    ENVFORGE_REQUIRE_GPU();
    GpuContext gpu = MakeContext();
    for (int64_t m : {1, 7, 130}) {
      CheckBf16Gemm(gpu, m, 200, 300, {});
      CheckBf16Gemm(gpu, m, 37, 45, {});  // nothing aligned to a tile
      CheckBf16Gemm(gpu, m, 256, 512, {});
    }
    CheckBf16Gemm(gpu, 7, 200, 300, {.lda_pad = 8, .ldw_pad = 24, .ldc_pad = 4});
    CheckBf16Gemm(gpu, 130, 200, 300, {.alpha = 0.5f, .beta = 2.0f});
    CheckBf16Gemm(gpu, 130, 200, 304, {.ldc_pad = 8, .c_bf16 = true});
    CheckBf16Gemm(gpu, 1, 64, 128, {.c_bf16 = true, .alpha = -1.0f, .beta = 1.0f});
  }

  TEST_CASE("FP8 block-scaled Gemm matches ref::Linear's W8A8 path on odd shapes and partial blocks") {
    ENVFORGE_REQUIRE_GPU();
    GpuContext gpu = MakeContext();
    // Hopper with this toolkit's cuBLAS (>= 12.9) must have it (the host emulator implements it
    // from the cuBLASLt documentation); elsewhere the fallback is checked.
    if (testing::GpuOrNull()->sm_major == 9) REQUIRE(Fp8BlockGemmSupported(*gpu.handle));
    if (!Fp8BlockGemmSupported(*gpu.handle)) {
      // The documented fallback signal: callers switch to dequantized bf16 weights.
      std::vector<float> scales(64, 1.0f);
      DeviceBuffer a = testing::DeviceZeros<uint8_t>(4 * 256), w = testing::DeviceZeros<uint8_t>(256 * 256);
      DeviceBuffer s = ToDevice(scales), c = testing::DeviceZeros<float>(4 * 256);
      GemmArgs args;
      args.kind = GemmKind::kFP8Block;
      args.m = 4;
      args.n = 256;
      args.k = 256;
      args.a = a.data();
      args.w = w.data();
      args.a_scales = s.as<float>();
      args.w_scales = s.as<float>();
      args.c = c.data();
      CHECK(Gemm(*gpu.handle, args).code() == StatusCode::kFailedPrecondition);
      MESSAGE("skipped: this cuBLASLt has no FP8 block-scaled GEMM on this device");
      return;
    }
    for (int64_t m : {1, 4, 7, 130}) {
      CheckFp8Gemm(gpu, m, 208, 272, {});   // partial blocks in n and k; 3 k-blocks (re-pitched scales)
      CheckFp8Gemm(gpu, m, 256, 512, {});   // the checkpoint's scale layout passed through
      CheckFp8Gemm(gpu, m, 576, 1024, {});  // kv_a_proj-like: a 64-row partial weight block
    }
    CheckFp8Gemm(gpu, 7, 208, 272, {.lda_pad = 16, .ldw_pad = 48, .ldc_pad = 4});
    CheckFp8Gemm(gpu, 130, 256, 512, {.alpha = 0.5f, .beta = 2.0f});  // beta through the tail rows too
    CheckFp8Gemm(gpu, 7, 256, 512, {.ldc_pad = 8, .c_bf16 = true});
    CheckFp8Gemm(gpu, 1, 208, 272, {.c_bf16 = true, .beta = 1.0f});
  }

  // kF32: fp32 in and out with fp32 products (the engine's router and indexer head weights), on
  // a row stride that is not a multiple of 4 floats (only 4-byte alignment is required). The
  // reference is a double loop; fp32 accumulation in another order: relative L2 1e-5.
  TEST_CASE("fp32 Gemm matches a double loop, with strided rows and beta") {
    ENVFORGE_REQUIRE_GPU();
    GpuContext gpu = MakeContext();
    const int64_t m = 7, n = 33, k = 45, lda = 47, ldc = 35;
    const std::vector<float> a = kernels::testing::RandomFloats(static_cast<size_t>(m * lda), 21);
    const std::vector<float> w = kernels::testing::RandomFloats(static_cast<size_t>(n * k), 22);
    const std::vector<float> c0 = kernels::testing::RandomFloats(static_cast<size_t>(m * ldc), 23);
    std::vector<float> expected = c0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t t = 0; t < k; ++t) sum += double(a[size_t(i * lda + t)]) * double(w[size_t(j * k + t)]);
        expected[size_t(i * ldc + j)] = static_cast<float>(0.5 * sum + 2.0 * c0[size_t(i * ldc + j)]);
      }
    }
    DeviceBuffer a_dev = ToDevice(a), w_dev = ToDevice(w), c_dev = ToDevice(c0);
    GemmArgs args;
    args.kind = GemmKind::kF32;
    args.m = m;
    args.n = n;
    args.k = k;
    args.a = a_dev.data();
    args.lda = lda;
    args.w = w_dev.data();
    args.c = c_dev.data();
    args.ldc = ldc;
    args.alpha = 0.5f;
    args.beta = 2.0f;
    Status status = Gemm(*gpu.handle, args);
    REQUIRE_MESSAGE(status.ok(), status.message());
    REQUIRE(gpu.stream.Synchronize().ok());
    const std::vector<float> got = FromDevice<float>(c_dev, expected.size());
    CHECK(kernels::testing::RelativeError(got.data(), expected.data(), expected.size()) < 1e-5);
    for (int64_t i = 0; i < m; ++i) {  // the padding columns of C are untouched
      for (int64_t j = n; j < ldc; ++j) CHECK(got[size_t(i * ldc + j)] == c0[size_t(i * ldc + j)]);
    }
  }

  TEST_CASE("Gemm with m = 0 is a no-op") {
    ENVFORGE_REQUIRE_GPU();
    GpuContext gpu = MakeContext();
    DeviceBuffer c = ToDevice(std::vector<float>(16, 3.0f));
    GemmArgs args;
    args.m = 0;
    args.n = 16;
    args.k = 16;
    args.c = c.data();
    Status status = Gemm(*gpu.handle, args);
    REQUIRE_MESSAGE(status.ok(), status.message());
    REQUIRE(gpu.stream.Synchronize().ok());
    for (float v : FromDevice<float>(c, 16)) CHECK(v == 3.0f);
  }

  // Strided batches: both weight orientations, interleaved per-head layouts (MLA's
  // [tokens, heads, dim] tensors) and a weight shared by every batch entry (stride 0). The
  // reference is a double loop over the same bf16 values; fp32 accumulation: relative L2 1e-5.
  void CheckBatched(GpuContext & gpu, bool w_transposed, bool interleaved, bool shared_weight) {
    CAPTURE(w_transposed);
    CAPTURE(interleaved);
    CAPTURE(shared_weight);
    const int64_t batch = 3, m = 5, n = 24, k = 40;
    const int64_t lda = interleaved ? batch * k : k, stride_a = interleaved ? k : m * k;
    const int64_t ldc = interleaved ? batch * n : n, stride_c = interleaved ? n : m * n;
    const int64_t w_rows = w_transposed ? k : n, w_cols = w_transposed ? n : k;
    const int64_t ldw = w_cols, stride_w = shared_weight ? 0 : w_rows * w_cols;
    const std::vector<uint16_t> a = ToBf16(RandomFloats(static_cast<size_t>(batch * m * k), 5));
    const std::vector<uint16_t> w = ToBf16(RandomFloats(static_cast<size_t>(batch * w_rows * w_cols), 6, 0.2f));
    std::vector<float> expected(static_cast<size_t>(batch * m * n));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0.0;
          for (int64_t l = 0; l < k; ++l) {
            const double av = Bf16ToFloat(a[static_cast<size_t>(b * stride_a + i * lda + l)]);
            const size_t w_index = static_cast<size_t>(b * stride_w + (w_transposed ? l * ldw + j : j * ldw + l));
            sum += av * Bf16ToFloat(w[w_index]);
          }
          expected[static_cast<size_t>(b * m * n + i * n + j)] = static_cast<float>(sum);
        }
      }
    }
    DeviceBuffer a_device = ToDevice(a), w_device = ToDevice(w);
    DeviceBuffer c_device = testing::DeviceZeros<float>(static_cast<size_t>(batch * m * n));
    BatchedGemmArgs args;
    args.batch = batch;
    args.m = m;
    args.n = n;
    args.k = k;
    args.a = a_device.as<uint16_t>();
    args.lda = lda;
    args.stride_a = stride_a;
    args.w = w_device.as<uint16_t>();
    args.ldw = ldw;
    args.stride_w = stride_w;
    args.w_transposed = w_transposed;
    args.c = c_device.data();
    args.ldc = ldc;
    args.stride_c = stride_c;
    Status status = GemmStridedBatched(*gpu.handle, args);
    REQUIRE_MESSAGE(status.ok(), status.message());
    REQUIRE(gpu.stream.Synchronize().ok());
    const std::vector<float> raw = FromDevice<float>(c_device, static_cast<size_t>(batch * m * n));
    std::vector<float> actual(expected.size());
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          actual[static_cast<size_t>(b * m * n + i * n + j)] = raw[static_cast<size_t>(b * stride_c + i * ldc + j)];
        }
      }
    }
    CHECK(RelativeError(actual, expected) < 1e-5);
  }

  TEST_CASE("GemmStridedBatched matches a double loop for both weight orientations and interleaved heads") {
    ENVFORGE_REQUIRE_GPU();
    GpuContext gpu = MakeContext();
    for (bool w_transposed : {false, true}) {
      for (bool interleaved : {false, true}) CheckBatched(gpu, w_transposed, interleaved, false);
      CheckBatched(gpu, w_transposed, true, true);
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels::cuda
