// RmsNorm / LayerNorm on the GPU (norm.h): one block of kThreads per row, grid-stride over rows.
// The row statistics accumulate in double, as the CPU twin (kernels/cpu/norm.cc) does, and the
// per-element arithmetic is the CPU's expression with explicit round-to-nearest intrinsics so nvcc
// cannot contract it into FMAs the CPU never uses; the only difference left is the summation
// order of the double sums, which moves inv_rms / inv_std by at most one float ulp.
#include "kernels/cuda/internal/cuda_compat.cuh"

#include "kernels/cuda/norm.h"

#include <cuda_runtime_api.h>

#include <string>

namespace envforge::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxBlocks = 65535;

// Sum of `value` over the block, returned to every thread. `scratch` holds kWarps doubles; the
// trailing barrier lets the caller reuse scratch right away.
__device__ double BlockSum(double value, double* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kWarps; ++w) total += scratch[w];  // same order in every thread
  __syncthreads();
  return total;
}

// bf16 bits of f, round to nearest even; NaN becomes a quiet NaN (kernels::FloatToBf16).
__device__ uint16_t ToBf16Bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

struct RowPointers {
  const float* x;
  int64_t rows, dim, x_stride;
  const float* weight;
  const float* bias;
  float eps;
  float* out_f32;
  uint16_t* out_bf16;
  int64_t out_stride;
};

__device__ void StoreResult(const RowPointers& p, int64_t row, int64_t i, float value) {
  if (p.out_f32 != nullptr) p.out_f32[row * p.out_stride + i] = value;
  if (p.out_bf16 != nullptr) p.out_bf16[row * p.out_stride + i] = ToBf16Bits(value);
}

// x is read with plain loads (no __ldg / __restrict__): out_f32 may alias it. Every element is
// read by the thread that later overwrites it, after the block-wide sums, so aliasing is safe.
__global__ void rms_norm_f32_kernel(RowPointers p) {
  __shared__ double scratch[kWarps];
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const float* in = p.x + row * p.x_stride;
    double sum_squares = 0.0;
    for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) sum_squares += static_cast<double>(in[i]) * in[i];
    sum_squares = BlockSum(sum_squares, scratch);
    const float inv_rms = static_cast<float>(1.0 / sqrt(sum_squares / static_cast<double>(p.dim) + p.eps));
    for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) {
      StoreResult(p, row, i, __fmul_rn(__fmul_rn(in[i], inv_rms), p.weight[i]));
    }
  }
}

__global__ void layer_norm_f32_kernel(RowPointers p) {
  __shared__ double scratch[kWarps];
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const float* in = p.x + row * p.x_stride;
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) sum += in[i];
    const double mean = BlockSum(sum, scratch) / static_cast<double>(p.dim);
    double sum_squares = 0.0;
    for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) {
      const double centred = in[i] - mean;
      sum_squares += centred * centred;
    }
    sum_squares = BlockSum(sum_squares, scratch);
    const float inv_std = static_cast<float>(1.0 / sqrt(sum_squares / static_cast<double>(p.dim) + p.eps));
    const float mean_f = static_cast<float>(mean);
    for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) {
      const float scaled = __fmul_rn(__fmul_rn(__fsub_rn(in[i], mean_f), inv_std), p.weight[i]);
      StoreResult(p, row, i, __fadd_rn(scaled, p.bias[i]));
    }
  }
}

Status Validate(const NormArgs& args, bool needs_bias, const char* op) {
  const std::string prefix = std::string(op) + ": ";
  if (args.rows < 0) return InvalidArgumentError(prefix + "rows must be >= 0, got " + std::to_string(args.rows));
  if (args.rows == 0) return Status();
  if (args.dim <= 0) return InvalidArgumentError(prefix + "dim must be > 0, got " + std::to_string(args.dim));
  const int64_t x_stride = args.x_stride == 0 ? args.dim : args.x_stride;
  const int64_t out_stride = args.out_stride == 0 ? args.dim : args.out_stride;
  if (x_stride < args.dim) {
    return InvalidArgumentError(prefix + "x_stride " + std::to_string(args.x_stride) + " is below dim " +
                                std::to_string(args.dim));
  }
  if (out_stride < args.dim) {
    return InvalidArgumentError(prefix + "out_stride " + std::to_string(args.out_stride) + " is below dim " +
                                std::to_string(args.dim));
  }
  if (args.x == nullptr) return InvalidArgumentError(prefix + "x is null");
  if (args.weight == nullptr) return InvalidArgumentError(prefix + "weight is null");
  if (needs_bias && args.bias == nullptr) return InvalidArgumentError(prefix + "bias is null");
  if (args.out_f32 == nullptr && args.out_bf16 == nullptr) {
    return InvalidArgumentError(prefix + "out_f32 and out_bf16 are both null");
  }
  // In place only row onto the same row: another stride would overwrite rows other blocks still read.
  if (args.out_f32 == args.x && out_stride != x_stride) {
    return InvalidArgumentError(prefix + "out_f32 aliases x with out_stride " + std::to_string(out_stride) +
                                " != x_stride " + std::to_string(x_stride));
  }
  return Status();
}

RowPointers ToRowPointers(const NormArgs& args) {
  return RowPointers{
      args.x,   args.rows,    args.dim,      args.x_stride == 0 ? args.dim : args.x_stride,    args.weight, args.bias,
      args.eps, args.out_f32, args.out_bf16, args.out_stride == 0 ? args.dim : args.out_stride};
}

}  // namespace

Status RmsNorm(const NormArgs& args, cudaStream_t stream) {
  ENVFORGE_RETURN_IF_ERROR(Validate(args, /*needs_bias=*/false, "RmsNorm"));
  if (args.rows == 0) return Status();
  const auto blocks = static_cast<unsigned>(args.rows < kMaxBlocks ? args.rows : kMaxBlocks);
  ENVFORGE_LAUNCH(blocks, kThreads, 0, stream, rms_norm_f32_kernel)(ToRowPointers(args));
  return CheckCuda(cudaGetLastError(), "RmsNorm: rms_norm_f32_kernel launch");
}

Status LayerNorm(const NormArgs& args, cudaStream_t stream) {
  ENVFORGE_RETURN_IF_ERROR(Validate(args, /*needs_bias=*/true, "LayerNorm"));
  if (args.rows == 0) return Status();
  const auto blocks = static_cast<unsigned>(args.rows < kMaxBlocks ? args.rows : kMaxBlocks);
  ENVFORGE_LAUNCH(blocks, kThreads, 0, stream, layer_norm_f32_kernel)(ToRowPointers(args));
  return CheckCuda(cudaGetLastError(), "LayerNorm: layer_norm_f32_kernel launch");
}

}  // namespace envforge::kernels::cuda
