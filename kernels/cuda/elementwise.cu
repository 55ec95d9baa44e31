// Element-wise glue of the GPU engine (elementwise.h). Every kernel is a plain grid-stride loop
// (2-D ones: rows over gridDim.y, columns over gridDim.x * blockDim.x), fp32 math written with
// explicit round-to-nearest intrinsics so nvcc cannot contract a*b+c into an FMA: the results are
// the CPU forward's scalar expressions bit for bit, except SiluMul's exp (see silu_mul_kernel).
// Format conversions are the bit recipes of kernels/cpu/float_formats.cc, so NaN handling matches
// too.
#include "kernels/cuda/internal/cuda_compat.cuh"

#include "kernels/cuda/elementwise.h"

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <string>

namespace envforge::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocksX = 4096;
constexpr int64_t kMaxBlocksY = 65535;
constexpr int64_t kFp8Block = 128;  // the 128x128 weight scale blocks of dsa-engine.md 2.2

__device__ uint16_t ToBf16Bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

__device__ float Bf16BitsToFloat(uint16_t v) { return __uint_as_float(static_cast<uint32_t>(v) << 16); }

// e4m3fn decode as kernels::Fp8E4M3ToFloat: exponent 0 is the subnormal grid m * 2^-9, 0x7f/0xff
// are NaN (signed, as the CPU's -nanf for 0xff), otherwise (1 + m/8) * 2^(e-7).
__device__ float Fp8E4M3BitsToFloat(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exponent = (v >> 3) & 0xfu, mantissa = v & 0x7u;
  if (exponent == 0xf && mantissa == 0x7) return __uint_as_float(sign | 0x7fc00000u);
  if (exponent == 0) return __uint_as_float(sign | __float_as_uint(static_cast<float>(mantissa) * 0x1p-9f));
  return __uint_as_float(sign | (exponent - 7 + 127) << 23 | mantissa << 20);
}

unsigned BlocksFor(int64_t work, int64_t cap) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks < cap ? blocks : cap));
}

unsigned RowBlocks(int64_t rows) { return static_cast<unsigned>(rows < kMaxBlocksY ? rows : kMaxBlocksY); }

std::string Str(int64_t v) { return std::to_string(v); }

// ---- SiluMul

struct SiluMulParams {
  const float* gate;
  const float* up;
  int64_t rows, cols, in_stride;
  float* out_f32;
  uint16_t* out_bf16;
  int64_t out_stride;
};

// The CPU computes g / (1 + expf(-g)) * up with glibc's expf (under 0.502 ulp); exp in double
// rounded to float is the correctly rounded expf, so the two differ by at most one ulp of the
// exponential, i.e. a relative 1.2e-7 in the result (tolerance 1e-6 in the tests). The output may
// alias gate or up: each element is read and written by one thread.
__global__ void silu_mul_kernel(SiluMulParams p) {
  for (int64_t row = blockIdx.y; row < p.rows; row += gridDim.y) {
    const float* gate = p.gate + row * p.in_stride;
    const float* up = p.up + row * p.in_stride;
    for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < p.cols;
         col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const float g = gate[col];
      const float e = static_cast<float>(exp(-static_cast<double>(g)));
      const float value = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, e)), up[col]);
      if (p.out_f32 != nullptr) {
        p.out_f32[row * p.out_stride + col] = value;
      } else {
        p.out_bf16[row * p.out_stride + col] = ToBf16Bits(value);
      }
    }
  }
}

// ---- AddInPlace, ScaleRowsAdd, conversions

__global__ void add_in_place_kernel(float* y, const float* x, int64_t n, float alpha) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i]));
  }
}

// atomicAdd, so rows of `row_of` may repeat (several experts of one token in one call); a row
// that appears once gets exactly y + x * s. Negative row_of entries are padding and skipped.
__global__ void scale_rows_add_kernel(float* y, const float* x, const float* row_scale, const int32_t* row_of,
                                      int64_t rows, int64_t cols) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const int32_t target = row_of[row];
    if (target < 0) continue;
    const float scale = row_scale[row];
    for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < cols;
         col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      atomicAdd(y + target * cols + col, __fmul_rn(x[row * cols + col], scale));
    }
  }
}

__global__ void to_bf16_kernel(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = ToBf16Bits(x[i]);
  }
}

__global__ void bf16_to_f32_kernel(const uint16_t* x, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = Bf16BitsToFloat(x[i]);
  }
}

// ---- GatherRows

struct GatherParams {
  const void* table;
  const float* block_scales;
  int64_t table_rows, cols;
  const int32_t* ids;
  int64_t count;
  float* out;
};

// One instantiation per dtype. An id outside [0, table_rows) gives a row of zeros rather than an
// out-of-bounds read (the host cannot check device ids).
template <DType kType>
__global__ void gather_rows_kernel(GatherParams p) {
  const int64_t scale_cols = (p.cols + kFp8Block - 1) / kFp8Block;
  for (int64_t r = blockIdx.y; r < p.count; r += gridDim.y) {
    const int64_t id = p.ids[r];
    const bool valid = id >= 0 && id < p.table_rows;
    float* out = p.out + r * p.cols;
    for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < p.cols;
         col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      float value = 0.0f;
      if (valid) {
        const int64_t index = id * p.cols + col;
        if constexpr (kType == DType::kF32) {
          value = static_cast<const float*>(p.table)[index];
        } else if constexpr (kType == DType::kBF16) {
          value = Bf16BitsToFloat(static_cast<const uint16_t*>(p.table)[index]);
        } else if constexpr (kType == DType::kF16) {
          value = __half2float(static_cast<const __half*>(p.table)[index]);
        } else {
          const float scale = p.block_scales[(id / kFp8Block) * scale_cols + col / kFp8Block];
          value = __fmul_rn(Fp8E4M3BitsToFloat(static_cast<const uint8_t*>(p.table)[index]), scale);
        }
      }
      out[col] = value;
    }
  }
}

}  // namespace

Status SiluMul(const SiluMulArgs& args, cudaStream_t stream) {
  auto invalid = [](const std::string& what) { return InvalidArgumentError("SiluMul: " + what); };
  if (args.rows < 0) return invalid("rows must be >= 0, got " + Str(args.rows));
  if (args.cols < 0) return invalid("cols must be >= 0, got " + Str(args.cols));
  const int64_t in_stride = args.in_stride == 0 ? args.cols : args.in_stride;
  const int64_t out_stride = args.out_stride == 0 ? args.cols : args.out_stride;
  if (in_stride < args.cols) return invalid("in_stride " + Str(args.in_stride) + " is below cols " + Str(args.cols));
  if (out_stride < args.cols) return invalid("out_stride " + Str(args.out_stride) + " is below cols " + Str(args.cols));
  if ((args.out_f32 == nullptr) == (args.out_bf16 == nullptr)) {
    return invalid("exactly one of out_f32 and out_bf16 must be set");
  }
  if (args.rows == 0 || args.cols == 0) return Status();
  if (args.gate == nullptr) return invalid("gate is null");
  if (args.up == nullptr) return invalid("up is null");
  SiluMulParams params{args.gate, args.up, args.rows, args.cols, in_stride, args.out_f32, args.out_bf16, out_stride};
  const dim3 grid(BlocksFor(args.cols, kMaxBlocksX), RowBlocks(args.rows));
  ENVFORGE_LAUNCH(grid, kThreads, 0, stream, silu_mul_kernel)(params);
  return CheckCuda(cudaGetLastError(), "SiluMul: silu_mul_kernel launch");
}

Status AddInPlace(float* y, const float* x, int64_t n, float alpha, cudaStream_t stream) {
  if (n < 0) return InvalidArgumentError("AddInPlace: n must be >= 0, got " + Str(n));
  if (n == 0) return Status();
  if (y == nullptr) return InvalidArgumentError("AddInPlace: y is null");
  if (x == nullptr) return InvalidArgumentError("AddInPlace: x is null");
  ENVFORGE_LAUNCH(BlocksFor(n, kMaxBlocksX), kThreads, 0, stream, add_in_place_kernel)(y, x, n, alpha);
  return CheckCuda(cudaGetLastError(), "AddInPlace: add_in_place_kernel launch");
}

Status ScaleRowsAdd(float* y, const float* x, const float* row_scale, const int32_t* row_of, int64_t rows, int64_t cols,
                    cudaStream_t stream) {
  if (rows < 0) return InvalidArgumentError("ScaleRowsAdd: rows must be >= 0, got " + Str(rows));
  if (cols < 0) return InvalidArgumentError("ScaleRowsAdd: cols must be >= 0, got " + Str(cols));
  if (rows == 0 || cols == 0) return Status();
  if (y == nullptr) return InvalidArgumentError("ScaleRowsAdd: y is null");
  if (x == nullptr) return InvalidArgumentError("ScaleRowsAdd: x is null");
  if (row_scale == nullptr) return InvalidArgumentError("ScaleRowsAdd: row_scale is null");
  if (row_of == nullptr) return InvalidArgumentError("ScaleRowsAdd: row_of is null");
  const dim3 grid(BlocksFor(cols, kMaxBlocksX), RowBlocks(rows));
  ENVFORGE_LAUNCH(grid, kThreads, 0, stream, scale_rows_add_kernel)(y, x, row_scale, row_of, rows, cols);
  return CheckCuda(cudaGetLastError(), "ScaleRowsAdd: scale_rows_add_kernel launch");
}

Status ToBf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  if (n < 0) return InvalidArgumentError("ToBf16: n must be >= 0, got " + Str(n));
  if (n == 0) return Status();
  if (x == nullptr) return InvalidArgumentError("ToBf16: x is null");
  if (out == nullptr) return InvalidArgumentError("ToBf16: out is null");
  ENVFORGE_LAUNCH(BlocksFor(n, kMaxBlocksX), kThreads, 0, stream, to_bf16_kernel)(x, n, out);
  return CheckCuda(cudaGetLastError(), "ToBf16: to_bf16_kernel launch");
}

Status Bf16ToF32(const uint16_t* x, int64_t n, float* out, cudaStream_t stream) {
  if (n < 0) return InvalidArgumentError("Bf16ToF32: n must be >= 0, got " + Str(n));
  if (n == 0) return Status();
  if (x == nullptr) return InvalidArgumentError("Bf16ToF32: x is null");
  if (out == nullptr) return InvalidArgumentError("Bf16ToF32: out is null");
  ENVFORGE_LAUNCH(BlocksFor(n, kMaxBlocksX), kThreads, 0, stream, bf16_to_f32_kernel)(x, n, out);
  return CheckCuda(cudaGetLastError(), "Bf16ToF32: bf16_to_f32_kernel launch");
}

Status GatherRows(const GatherRowsArgs& args, cudaStream_t stream) {
  auto invalid = [](const std::string& what) { return InvalidArgumentError("GatherRows: " + what); };
  if (args.table_rows < 0) return invalid("table_rows must be >= 0, got " + Str(args.table_rows));
  if (args.cols < 0) return invalid("cols must be >= 0, got " + Str(args.cols));
  if (args.count < 0) return invalid("count must be >= 0, got " + Str(args.count));
  const bool known_dtype = args.dtype == DType::kF32 || args.dtype == DType::kBF16 || args.dtype == DType::kF16 ||
                           args.dtype == DType::kF8E4M3;
  if (!known_dtype) return invalid("unknown dtype " + Str(static_cast<int>(args.dtype)));
  if (args.count == 0 || args.cols == 0) return Status();
  if (args.table_rows == 0) return invalid("table_rows is 0 but count is " + Str(args.count));
  if (args.table == nullptr) return invalid("table is null");
  if (args.ids == nullptr) return invalid("ids is null");
  if (args.out == nullptr) return invalid("out is null");
  if (args.dtype == DType::kF8E4M3 && args.block_scales == nullptr) {
    return invalid("block_scales is null for an F8_E4M3 table");
  }
  if (reinterpret_cast<uintptr_t>(args.table) % static_cast<uintptr_t>(DTypeSize(args.dtype)) != 0) {
    return invalid("table is not aligned to its " + Str(DTypeSize(args.dtype)) + "-byte elements");
  }
  GatherParams params{args.table, args.block_scales, args.table_rows, args.cols, args.ids, args.count, args.out};
  const dim3 grid(BlocksFor(args.cols, kMaxBlocksX), RowBlocks(args.count));
  switch (args.dtype) {
    case DType::kF32: ENVFORGE_LAUNCH(grid, kThreads, 0, stream, gather_rows_kernel<DType::kF32>)(params); break;
    case DType::kBF16: ENVFORGE_LAUNCH(grid, kThreads, 0, stream, gather_rows_kernel<DType::kBF16>)(params); break;
    case DType::kF16: ENVFORGE_LAUNCH(grid, kThreads, 0, stream, gather_rows_kernel<DType::kF16>)(params); break;
    case DType::kF8E4M3: ENVFORGE_LAUNCH(grid, kThreads, 0, stream, gather_rows_kernel<DType::kF8E4M3>)(params); break;
  }
  return CheckCuda(cudaGetLastError(), "GatherRows: gather_rows_kernel launch");
}

}  // namespace envforge::kernels::cuda
