// Engine row kernels: grid-stride loops, one thread per output element (or 4-byte word).
#include "kernels/cuda/internal/cuda_compat.cuh"

#include "kernels/cuda/engine_rows.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

namespace envforge::kernels::cuda {
namespace {

constexpr int kThreads = 256;

int GridFor(int64_t work) { return static_cast<int>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, 8192)); }

bool Aligned4(const void* p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; }

__global__ void CopyColumnsToBf16Kernel(const float* x, int64_t x_stride, int64_t rows, int64_t cols, uint16_t* out,
                                        int64_t out_stride) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    // __float2bfloat16_rn rounds to nearest even, as kernels::FloatToBf16.
    __nv_bfloat16 v = __float2bfloat16_rn(x[r * x_stride + c]);
    out[r * out_stride + c] = *reinterpret_cast<const uint16_t*>(&v);
  }
}

__global__ void CopyRowsKernel(const uint32_t* src, const int32_t* ids, int64_t count, int64_t words, uint32_t* out) {
  const int64_t total = count * words;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / words, w = i % words;
    out[i] = src[int64_t{ids[r]} * words + w];
  }
}

__global__ void ScaleByProductKernel(float* y, const float* s, float c, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float factor = c * s[i];
    y[i] = y[i] * factor;
  }
}

__global__ void CombineExpertsKernel(CombineExpertsArgs a) {
  const int64_t total = a.tokens * a.dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / a.dim, d = i % a.dim;
    float acc = a.shared != nullptr ? a.shared[i] : 0.0f;
    for (int64_t k = 0; k < a.top_k; ++k) {
      const int32_t row = a.row[t * a.top_k + k];
      if (row < 0) continue;
      acc += a.weight[t * a.top_k + k] * a.ys[int64_t{row} * a.dim + d];
    }
    a.x[i] += acc;
  }
}

}  // namespace

Status CopyColumnsToBf16(const float* x, int64_t x_stride, int64_t rows, int64_t cols, uint16_t* out,
                         int64_t out_stride, cudaStream_t stream) {
  if (rows < 0 || cols < 0) return InvalidArgumentError("CopyColumnsToBf16: rows and cols must be >= 0");
  if (rows == 0 || cols == 0) return Status::Ok();
  if (x == nullptr || out == nullptr) return InvalidArgumentError("CopyColumnsToBf16: x and out must be non-null");
  if (x_stride < cols || out_stride < cols) {
    return InvalidArgumentError("CopyColumnsToBf16: strides (" + std::to_string(x_stride) + ", " +
                                std::to_string(out_stride) + ") must be >= cols " + std::to_string(cols));
  }
  ENVFORGE_LAUNCH(GridFor(rows * cols), kThreads, 0, stream, CopyColumnsToBf16Kernel)
  (x, x_stride, rows, cols, out, out_stride);
  return CheckCuda(cudaGetLastError(), "CopyColumnsToBf16 launch");
}

Status CopyRows(const void* src, const int32_t* ids, int64_t count, int64_t row_bytes, void* out, cudaStream_t stream) {
  if (count < 0) return InvalidArgumentError("CopyRows: count must be >= 0, got " + std::to_string(count));
  if (row_bytes <= 0 || row_bytes % 4 != 0) {
    return InvalidArgumentError("CopyRows: row_bytes must be a positive multiple of 4, got " +
                                std::to_string(row_bytes));
  }
  if (count == 0) return Status::Ok();
  if (src == nullptr || ids == nullptr || out == nullptr)
    return InvalidArgumentError("CopyRows: src, ids and out must be non-null");
  if (!Aligned4(src) || !Aligned4(out)) return InvalidArgumentError("CopyRows: src and out must be 4-byte aligned");
  const int64_t words = row_bytes / 4;
  ENVFORGE_LAUNCH(GridFor(count * words), kThreads, 0, stream, CopyRowsKernel)
  (static_cast<const uint32_t*>(src), ids, count, words, static_cast<uint32_t*>(out));
  return CheckCuda(cudaGetLastError(), "CopyRows launch");
}

Status ScaleByProduct(float* y, const float* s, float c, int64_t n, cudaStream_t stream) {
  if (n < 0) return InvalidArgumentError("ScaleByProduct: n must be >= 0, got " + std::to_string(n));
  if (n == 0) return Status::Ok();
  if (y == nullptr || s == nullptr) return InvalidArgumentError("ScaleByProduct: y and s must be non-null");
  ENVFORGE_LAUNCH(GridFor(n), kThreads, 0, stream, ScaleByProductKernel)(y, s, c, n);
  return CheckCuda(cudaGetLastError(), "ScaleByProduct launch");
}

Status CombineExperts(const CombineExpertsArgs& args, cudaStream_t stream) {
  if (args.tokens < 0 || args.dim < 0 || args.top_k < 0) {
    return InvalidArgumentError("CombineExperts: tokens, dim and top_k must be >= 0");
  }
  if (args.tokens == 0 || args.dim == 0) return Status::Ok();
  if (args.x == nullptr) return InvalidArgumentError("CombineExperts: x is null");
  if (args.top_k > 0 && (args.ys == nullptr || args.row == nullptr || args.weight == nullptr)) {
    return InvalidArgumentError("CombineExperts: ys, row and weight must be non-null when top_k > 0");
  }
  ENVFORGE_LAUNCH(GridFor(args.tokens * args.dim), kThreads, 0, stream, CombineExpertsKernel)(args);
  return CheckCuda(cudaGetLastError(), "CombineExperts launch");
}

}  // namespace envforge::kernels::cuda
