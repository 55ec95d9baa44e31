// Dense GEMMs of the engine on the GPU through cuBLAS / cuBLASLt, in the linear-layer convention
// of kernels/cpu/linear.h: C[m, n] = alpha * A[m, k] . W[n, k]^T (+ beta * C), all row-major.
//   * kBF16: A and W bf16, fp32 accumulation (cublasGemmEx / cublasLtMatmul, CUBLAS_COMPUTE_32F).
//   * kFP8Block: A and W e4m3 with DeepSeek's block scales — a_scales [m, ceil(k/128)] (1x128
//     activation groups, ActQuantFp8's layout) and w_scales [ceil(n/128), ceil(k/128)] (128x128
//     weight blocks, the checkpoint's weight_scale_inv) — through cuBLASLt's VEC128_32F /
//     BLK128x128_32F scale modes (cuBLAS >= 12.9 on sm_90). FailedPrecondition ("unimplemented:
//     ...") when this cuBLASLt cannot do it, so callers may fall back to dequantized bf16 weights.
//     FP8 also needs n % 4 == 0 and lda, ldw multiples of 16.
//   * kF32: A, W and C fp32 with plain fp32 products (CUBLAS_COMPUTE_32F_PEDANTIC: never TF32),
//     for the small projections kept in fp32 (MoE router, indexer head weights); pointers need
//     only 4-byte alignment.
// C is fp32 or bf16 (c_bf16; kF32: fp32 only). A GemmStridedBatched variant serves the per-head products of MLA
// (W_UK absorption, W_UV projection): batch independent GEMMs at fixed strides.
//
// A BlasHandle owns the cuBLAS and cuBLASLt handles and a workspace; one per stream user, not
// thread-safe. InvalidArgument names bad shapes (k must be a multiple of 16 for FP8, pointers
// 16-byte aligned); cuBLAS errors come back as Internal naming the call and its status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/status.h"
#include "kernels/cpu/float_formats.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

class BlasHandle {
 public:
  static Result<std::unique_ptr<BlasHandle>> Create(cudaStream_t stream);
  ~BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;

  cudaStream_t stream() const { return stream_; }
  void* blas() const { return blas_; }        // cublasHandle_t
  void* blas_lt() const { return blas_lt_; }  // cublasLtHandle_t
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  BlasHandle() = default;
  cudaStream_t stream_ = nullptr;
  void* blas_ = nullptr;
  void* blas_lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

enum class GemmKind : unsigned char { kBF16, kFP8Block, kF32 };

struct GemmArgs {
  GemmKind kind = GemmKind::kBF16;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;            // [m, lda] bf16, e4m3 or fp32 (kind)
  const void* w = nullptr;            // [n, ldw] bf16, e4m3 or fp32 (kind)
  int64_t lda = 0, ldw = 0, ldc = 0;  // 0: k, k, n
  const float* a_scales = nullptr;    // kFP8Block: [m, ceil(k / 128)]
  const float* w_scales = nullptr;    // kFP8Block: [ceil(n / 128), ceil(k / 128)]
  void* c = nullptr;                  // [m, ldc] fp32 or bf16
  bool c_bf16 = false;
  float alpha = 1.0f, beta = 0.0f;
};
Status Gemm(BlasHandle& handle, const GemmArgs& args);

// bf16 only: for b in [0, batch): C_b = alpha * A_b . W_b^T (+ beta * C_b) with
// A_b = a + b * stride_a (elements), etc.; w_transposed false: W_b is [n, k] (row-major, ldw);
// true: W_b is [k, n] (row-major, ldw) and C_b = A_b . W_b.
struct BatchedGemmArgs {
  int64_t batch = 0, m = 0, n = 0, k = 0;
  const uint16_t* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const uint16_t* w = nullptr;
  int64_t ldw = 0, stride_w = 0;
  bool w_transposed = false;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  bool c_bf16 = false;
  float alpha = 1.0f, beta = 0.0f;
};
Status GemmStridedBatched(BlasHandle& handle, const BatchedGemmArgs& args);

// The host-side checks Gemm and GemmStridedBatched run before any CUDA call, exposed so they are
// testable without a GPU: OK, or InvalidArgument naming the first bad argument and its value.
Status ValidateGemmArgs(const GemmArgs& args);
Status ValidateBatchedGemmArgs(const BatchedGemmArgs& args);

// Whether this cuBLASLt build supports kFP8Block on the current device (probed with a tiny
// matmul heuristic query, cached).
bool Fp8BlockGemmSupported(BlasHandle& handle);

}  // namespace envforge::kernels::cuda
