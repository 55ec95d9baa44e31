// The cuBLAS and cuBLASLt entry points kernels/cuda/gemm.cc calls, on the CPU, for the emulated
// builds (kernels/cuda/emulation/). Implemented from cuBLAS's documented column-major semantics:
//
//   GemmEx:  C = alpha * op(A) . op(B) + beta * C, op(A) m x k, op(B) k x n, C m x n; element
//            (i, p) of op(A) is A[i + p * lda] for CUBLAS_OP_N and A[p + i * lda] for CUBLAS_OP_T;
//            with beta == 0, C is not read (it may hold NaN). Types: A, B CUDA_R_16BF or CUDA_R_32F,
//            C CUDA_R_16BF or CUDA_R_32F, compute CUBLAS_COMPUTE_32F or _32F_PEDANTIC (both plain
//            fp32 here; alpha, beta: host floats). Other compute types are NOT_SUPPORTED.
//            Each dot product is accumulated in fp32 over k in 8 interleaved partial sums (k mod 8)
//            that are then added in order; the bf16 output is alpha * acc + beta * C rounded to
//            nearest even once, as cuBLAS does with fp32 compute.
//   GemmStridedBatchedEx: the same per batch entry, operands offset by batch * stride (stride 0
//            shares one matrix).
//   Sgeam:   C = alpha * op(A) + beta * op(B) (fp32); beta == 0 does not read B; C may alias A or B.
//
// cuBLASLt: handles, descriptors and preferences are created and accept attributes, but FP8
// block-scaled matmuls are not emulated: the heuristic reports no algorithm
// (CUBLAS_STATUS_NOT_SUPPORTED, zero results) and cublasLtMatmul fails the same way, so
// Fp8BlockGemmSupported is false under emulation and the engine takes its bf16 path.
//
// Everything runs synchronously in the caller, like the emulated kernels.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstring>
#include <vector>

#include "kernels/cuda/emulation/emulator.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

struct cublasLtContext {
  int unused = 0;
};

namespace {

float LoadElement(const void* base, cudaDataType type, int64_t index) {
  if (type == CUDA_R_32F) return static_cast<const float*>(base)[index];
  uint16_t bits;
  std::memcpy(&bits, static_cast<const unsigned char*>(base) + 2 * index, 2);
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

void StoreElement(void* base, cudaDataType type, int64_t index, float value) {
  if (type == CUDA_R_32F) {
    static_cast<float*>(base)[index] = value;
    return;
  }
  const __nv_bfloat16 rounded = __float2bfloat16_rn(value);
  std::memcpy(static_cast<unsigned char*>(base) + 2 * index, &rounded, 2);
}

bool SupportedInput(cudaDataType type) { return type == CUDA_R_16BF || type == CUDA_R_32F; }

// op(X) (rows x cols) gathered row by row into a dense fp32 matrix: out[r * cols + c].
std::vector<float> Gather(const void* x, cudaDataType type, int64_t ld, cublasOperation_t op, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t index = op == CUBLAS_OP_N ? r + c * ld : c + r * ld;
      out[static_cast<size_t>(r * cols + c)] = LoadElement(x, type, index);
    }
  }
  return out;
}

float Dot(const float* a, const float* b, int64_t k) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    for (int j = 0; j < 8; ++j) partial[j] += a[p + j] * b[p + j];
  }
  for (; p < k; ++p) partial[p % 8] += a[p] * b[p];
  float sum = 0;
  for (float value : partial) sum += value;
  return sum;
}

cublasStatus_t GemmOne(cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k, float alpha,
                       const void* a, cudaDataType a_type, int64_t lda, const void* b, cudaDataType b_type, int64_t ldb,
                       float beta, void* c, cudaDataType c_type, int64_t ldc) {
  // opA rows (m x k) and op(B) columns (n x k: op(B)^T), both k-contiguous for the dot products.
  const std::vector<float> a_rows = Gather(a, a_type, lda, transa, m, k);
  const cublasOperation_t transb_t = transb == CUBLAS_OP_N ? CUBLAS_OP_T : CUBLAS_OP_N;
  const std::vector<float> b_cols = Gather(b, b_type, ldb, transb_t, n, k);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      float value = alpha * Dot(&a_rows[static_cast<size_t>(i * k)], &b_cols[static_cast<size_t>(j * k)], k);
      if (beta != 0.0f) value += beta * LoadElement(c, c_type, i + j * ldc);
      StoreElement(c, c_type, i + j * ldc, value);
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CheckGemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n,
                         int64_t k, const void* alpha, cudaDataType a_type, int64_t lda, cudaDataType b_type, int64_t ldb,
                         const void* beta, cudaDataType c_type, int64_t ldc, cublasComputeType_t compute) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m < 0 || n < 0 || k < 0 || alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max<int64_t>(1, transa == CUBLAS_OP_N ? m : k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldb < std::max<int64_t>(1, transb == CUBLAS_OP_N ? k : n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldc < std::max<int64_t>(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  if ((compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC) || !SupportedInput(a_type) || !SupportedInput(b_type) || !SupportedInput(c_type)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (handle->pointer_mode != CUBLAS_POINTER_MODE_HOST) return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

size_t ElementBytes(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

}  // namespace

extern "C" {

// ---- cuBLAS handle

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported (envforge CUDA emulator)";
    default: return "unknown error";
  }
}

// ---- GEMMs

cublasStatus_t cublasGemmEx_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n,
                               int64_t k, const void* alpha, const void* A, cudaDataType Atype, int64_t lda, const void* B,
                               cudaDataType Btype, int64_t ldb, const void* beta, void* C, cudaDataType Ctype, int64_t ldc,
                               cublasComputeType_t computeType, cublasGemmAlgo_t /*algo*/) {
  const cublasStatus_t status =
      CheckGemm(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta, Ctype, ldc, computeType);
  if (status != CUBLAS_STATUS_SUCCESS || m == 0 || n == 0) return status;
  return GemmOne(transa, transb, m, n, k, *static_cast<const float*>(alpha), A, Atype, lda, B, Btype, ldb,
                 *static_cast<const float*>(beta), C, Ctype, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype,
                            int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  return cublasGemmEx_64(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType,
                         algo);
}

cublasStatus_t cublasGemmStridedBatchedEx_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                             int64_t m, int64_t n, int64_t k, const void* alpha, const void* A,
                                             cudaDataType Atype, int64_t lda, long long int strideA, const void* B,
                                             cudaDataType Btype, int64_t ldb, long long int strideB, const void* beta, void* C,
                                             cudaDataType Ctype, int64_t ldc, long long int strideC, int64_t batchCount,
                                             cublasComputeType_t computeType, cublasGemmAlgo_t /*algo*/) {
  const cublasStatus_t status =
      CheckGemm(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta, Ctype, ldc, computeType);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (batchCount < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  for (int64_t batch = 0; batch < batchCount; ++batch) {
    const auto* a = static_cast<const unsigned char*>(A) + batch * strideA * static_cast<int64_t>(ElementBytes(Atype));
    const auto* b = static_cast<const unsigned char*>(B) + batch * strideB * static_cast<int64_t>(ElementBytes(Btype));
    auto* c = static_cast<unsigned char*>(C) + batch * strideC * static_cast<int64_t>(ElementBytes(Ctype));
    GemmOne(transa, transb, m, n, k, *static_cast<const float*>(alpha), a, Atype, lda, b, Btype, ldb,
            *static_cast<const float*>(beta), c, Ctype, ldc);
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                          int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                                          long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx_64(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB,
                                       beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

cublasStatus_t cublasSgeam_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n,
                              const float* alpha, const float* A, int64_t lda, const float* beta, const float* B, int64_t ldb,
                              float* C, int64_t ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m < 0 || n < 0 || alpha == nullptr || beta == nullptr || ldc < std::max<int64_t>(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max<int64_t>(1, transa == CUBLAS_OP_N ? m : n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldb < std::max<int64_t>(1, transb == CUBLAS_OP_N ? m : n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  // Computed into a temporary first: C may alias A or B.
  std::vector<float> out(static_cast<size_t>(m * n));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      float value = *alpha * A[transa == CUBLAS_OP_N ? i + j * lda : j + i * lda];
      if (*beta != 0.0f) value += *beta * B[transb == CUBLAS_OP_N ? i + j * ldb : j + i * ldb];
      out[static_cast<size_t>(i + j * m)] = value;
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) C[i + j * ldc] = out[static_cast<size_t>(i + j * m)];
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgeam(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           const float* alpha, const float* A, int lda, const float* beta, const float* B, int ldb, float* C,
                           int ldc) {
  return cublasSgeam_64(handle, transa, transb, m, n, alpha, A, lda, beta, B, ldb, C, ldc);
}

// ---- cuBLASLt: objects only; FP8 block-scaled matmuls are not emulated (see the file comment)

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t /*compute*/, cudaDataType_t /*scale*/) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t /*attr*/,
                                              const void* buf, size_t /*bytes*/) {
  return desc == nullptr || buf == nullptr ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType /*type*/, uint64_t /*rows*/,
                                          uint64_t /*cols*/, int64_t /*ld*/) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *preference = new cublasLtMatmulPreferenceOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t /*attr*/, const void* buf,
                                                    size_t /*bytes*/) {
  return preference == nullptr || buf == nullptr ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t /*desc*/,
                                              cublasLtMatrixLayout_t /*a*/, cublasLtMatrixLayout_t /*b*/,
                                              cublasLtMatrixLayout_t /*c*/, cublasLtMatrixLayout_t /*d*/,
                                              cublasLtMatmulPreference_t /*preference*/, int /*requested*/,
                                              cublasLtMatmulHeuristicResult_t /*results*/[], int* returned) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (returned != nullptr) *returned = 0;
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t /*desc*/, const void* /*alpha*/, const void* /*A*/,
                              cublasLtMatrixLayout_t /*a*/, const void* /*B*/, cublasLtMatrixLayout_t /*b*/,
                              const void* /*beta*/, const void* /*C*/, cublasLtMatrixLayout_t /*c*/, void* /*D*/,
                              cublasLtMatrixLayout_t /*d*/, const cublasLtMatmulAlgo_t* /*algo*/, void* /*workspace*/,
                              size_t /*workspace_bytes*/, cudaStream_t /*stream*/) {
  return handle == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_NOT_SUPPORTED;
}

}  // extern "C"
