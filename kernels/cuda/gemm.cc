// The engine's dense GEMMs through cuBLAS (bf16, strided batches) and cuBLASLt (FP8 with
// DeepSeek's block scales); see gemm.h for the contract.
//
// Row-major to column-major: C[m, n] = A[m, k] . W[n, k]^T, all row-major, is in cuBLAS's
// column-major terms C^T (n x m, ld ldc) = op(W) . A^T with W seen as a k x n column-major matrix
// (ld ldw) taken transposed and A as a k x m column-major matrix (ld lda) taken as is: the "TN"
// form, which is also the only one cuBLASLt's FP8 kernels accept. So cuBLAS's "A" is our weight,
// cuBLAS's "B" our activations, and cuBLAS's (m, n) our (n, m).
//
// FP8 block scales (cuBLAS docs 3.1.4.5.1, "Scaling factors layouts"; both scale arrays must
// start 16-byte aligned, and cuBLAS's M and N, here n and the token count, must be multiples of 4):
//   * weights (cuBLAS A, BLK128x128_32F): one fp32 per 128x128 block, "K-major" with the stride
//     between block-rows a multiple of 4: scale(nb, kb) at nb * round_up(ceil(k/128), 4) + kb.
//     DeepSeek's weight_scale_inv [ceil(n/128), ceil(k/128)] is exactly that when ceil(k/128) % 4
//     == 0 (every V3.2 linear: k is a multiple of 512) and the pointer is 16-byte aligned, so it is
//     passed through; otherwise its rows are re-pitched into scratch memory (one 2-D copy).
//   * activations (cuBLAS B, VEC128_32F): one fp32 per row and 128-column group, "N-major":
//     scale(row, kb) at kb * rows + row, i.e. the transpose of ActQuantFp8's [m, ceil(k/128)]. It
//     is transposed into scratch memory with cublasSgeam. The rows of m below a multiple of 4 run
//     in place; the last m % 4 rows run through a 4-row zero-padded copy in scratch memory
//     (decode's m = 1 takes only this path).
// Scratch memory lives right after cuBLAS's workspace in the handle's one allocation; all work is
// ordered on the handle's stream, so successive calls reuse it safely. Very large m is processed
// in chunks of rows so the transposed scales always fit.
#include "kernels/cuda/gemm.h"
#include "base/int_math.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kernels/cuda/internal/cublas_library.h"

namespace envforge::kernels::cuda {
namespace {

// cuBLAS recommends 32 MiB of workspace on Hopper; the scratch area holds transposed activation
// scales (a chunk of rows), re-pitched weight scales and the padded tail rows.
constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;
constexpr size_t kScratchBytes = size_t{32} << 20;
constexpr int64_t kScaleBlock = 128;
constexpr int64_t kRowQuantum = 4;  // cuBLAS's token count for FP8 is kept a multiple of this

size_t AlignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The loaded cuBLAS entry points. Only called once a BlasHandle exists, whose Create loaded them.
const internal::CublasLibrary& Blas() { return *internal::Cublas().value(); }

Status CheckBlas(cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status();
  return InternalError(std::string(what) + ": " + Blas().cublasGetStatusName(status) + ": " +
                       Blas().cublasGetStatusString(status));
}

bool Aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The largest power of two (<= 256) dividing the address: what cuBLASLt may assume of it.
uint32_t AlignmentOf(const void* p) {
  uint32_t alignment = 256;
  while (alignment > 1 && !Aligned(p, alignment)) alignment /= 2;
  return alignment;
}

std::string Str(int64_t v) { return std::to_string(v); }

Status CheckPointer(const void* p, const char* name, size_t alignment) {
  if (p == nullptr) return InvalidArgumentError(std::string(name) + " is null");
  if (!Aligned(p, alignment)) {
    return InvalidArgumentError(std::string(name) + " must be " + std::to_string(alignment) + "-byte aligned");
  }
  return Status();
}

// ---- cuBLASLt FP8 matmul: descriptors, heuristic cache

template <typename T, auto internal::CublasLibrary::*Destroy>
struct LtObject {
  T value = nullptr;
  LtObject() = default;
  LtObject(const LtObject&) = delete;
  LtObject& operator=(const LtObject&) = delete;
  ~LtObject() {
    if (value != nullptr) (Blas().*Destroy)(value);
  }
};
using MatmulDesc = LtObject<cublasLtMatmulDesc_t, &internal::CublasLibrary::cublasLtMatmulDescDestroy>;
using MatrixLayout = LtObject<cublasLtMatrixLayout_t, &internal::CublasLibrary::cublasLtMatrixLayoutDestroy>;
using MatmulPreference =
    LtObject<cublasLtMatmulPreference_t, &internal::CublasLibrary::cublasLtMatmulPreferenceDestroy>;

// One FP8 block-scaled product in cuBLAS's terms: D (rows x cols, ld ldd) = A^T . B with A
// k x rows (ld lda), B k x cols (ld ldb).
struct Fp8Problem {
  int64_t rows = 0, cols = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  bool d_bf16 = false;
  bool beta_nonzero = false;
  uint32_t align_a = 256, align_b = 256, align_d = 256;

  bool operator==(const Fp8Problem&) const = default;
};

struct Fp8ProblemHash {
  size_t operator()(const Fp8Problem& p) const {
    size_t h = 1469598103934665603ULL;
    for (int64_t v : {p.rows, p.cols, p.k, p.lda, p.ldb, p.ldd, int64_t{p.d_bf16}, int64_t{p.beta_nonzero},
                      int64_t{p.align_a}, int64_t{p.align_b}, int64_t{p.align_d}}) {
      h = (h ^ static_cast<size_t>(v)) * 1099511628211ULL;
    }
    return h;
  }
};

// The heuristic query costs tens of microseconds of host time, far more than a decode-sized
// GEMM; its answer depends only on the problem (not on the handle or the data), so it is cached
// process-wide. Bounded: cleared when it grows past kMaxCachedAlgos distinct problems.
constexpr size_t kMaxCachedAlgos = 4096;
std::mutex algo_cache_mutex;
std::unordered_map<Fp8Problem, cublasLtMatmulAlgo_t, Fp8ProblemHash> algo_cache;

struct Fp8Descriptors {
  MatmulDesc desc;
  MatrixLayout a, b, d;
};

Status BuildFp8Descriptors(const Fp8Problem& p, const float* a_scales, const float* b_scales, Fp8Descriptors& out) {
  ENVFORGE_RETURN_IF_ERROR(CheckBlas(Blas().cublasLtMatmulDescCreate(&out.desc.value, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                                     "cublasLtMatmulDescCreate"));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  const int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  struct Attribute {
    cublasLtMatmulDescAttributes_t name;
    const void* value;
    size_t size;
  };
  const Attribute attributes[] = {
      {CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa},
      {CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb},
      {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode},
      {CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof b_mode},
      {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scales, sizeof a_scales},
      {CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scales, sizeof b_scales},
  };
  for (const Attribute& attribute : attributes) {
    ENVFORGE_RETURN_IF_ERROR(CheckBlas(
        Blas().cublasLtMatmulDescSetAttribute(out.desc.value, attribute.name, attribute.value, attribute.size),
        "cublasLtMatmulDescSetAttribute"));
  }
  const cudaDataType d_type = p.d_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  ENVFORGE_RETURN_IF_ERROR(
      CheckBlas(Blas().cublasLtMatrixLayoutCreate(&out.a.value, CUDA_R_8F_E4M3, static_cast<uint64_t>(p.k),
                                                  static_cast<uint64_t>(p.rows), p.lda),
                "Blas().cublasLtMatrixLayoutCreate(A)"));
  ENVFORGE_RETURN_IF_ERROR(
      CheckBlas(Blas().cublasLtMatrixLayoutCreate(&out.b.value, CUDA_R_8F_E4M3, static_cast<uint64_t>(p.k),
                                                  static_cast<uint64_t>(p.cols), p.ldb),
                "Blas().cublasLtMatrixLayoutCreate(B)"));
  ENVFORGE_RETURN_IF_ERROR(
      CheckBlas(Blas().cublasLtMatrixLayoutCreate(&out.d.value, d_type, static_cast<uint64_t>(p.rows),
                                                  static_cast<uint64_t>(p.cols), p.ldd),
                "Blas().cublasLtMatrixLayoutCreate(D)"));
  return Status();
}

std::string DescribeFp8(const Fp8Problem& p) {
  return "n=" + Str(p.rows) + " m=" + Str(p.cols) + " k=" + Str(p.k) + " ldw=" + Str(p.lda) + " lda=" + Str(p.ldb) +
         " ldc=" + Str(p.ldd) + (p.d_bf16 ? " c=bf16" : " c=fp32");
}

// The best algorithm for p, from the cache or the heuristic; FailedPrecondition when cuBLASLt has
// none (this library or device cannot do FP8 block scaling for the problem).
Result<cublasLtMatmulAlgo_t> FindFp8Algo(cublasLtHandle_t lt, const Fp8Problem& p, const Fp8Descriptors& descriptors) {
  {
    std::lock_guard<std::mutex> lock(algo_cache_mutex);
    auto it = algo_cache.find(p);
    if (it != algo_cache.end()) return it->second;
  }
  MatmulPreference preference;
  ENVFORGE_RETURN_IF_ERROR(
      CheckBlas(Blas().cublasLtMatmulPreferenceCreate(&preference.value), "cublasLtMatmulPreferenceCreate"));
  const uint64_t workspace = kBlasWorkspaceBytes;
  ENVFORGE_RETURN_IF_ERROR(
      CheckBlas(Blas().cublasLtMatmulPreferenceSetAttribute(preference.value, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &workspace, sizeof workspace),
                "cublasLtMatmulPreferenceSetAttribute"));
  // The heuristic assumes 256-byte aligned buffers unless told otherwise; row offsets into a
  // larger buffer are often only 16-byte aligned.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.align_d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.align_d},
  };
  for (const auto& [name, value] : alignments) {
    ENVFORGE_RETURN_IF_ERROR(
        CheckBlas(Blas().cublasLtMatmulPreferenceSetAttribute(preference.value, name, &value, sizeof value),
                  "cublasLtMatmulPreferenceSetAttribute"));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  cublasStatus_t status = Blas().cublasLtMatmulAlgoGetHeuristic(
      lt, descriptors.desc.value, descriptors.a.value, descriptors.b.value, descriptors.d.value, descriptors.d.value,
      preference.value, 1, &result, &returned);
  // Devices without these scale modes (pre-Hopper, or Blackwell, which has MX scaling instead)
  // answer with an error status or no result, depending on the library version.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_ARCH_MISMATCH ||
      status == CUBLAS_STATUS_INVALID_VALUE || (status == CUBLAS_STATUS_SUCCESS && returned == 0)) {
    return FailedPreconditionError("unimplemented: cuBLASLt has no FP8 block-scaled (1x128 x 128x128) GEMM for " +
                                   DescribeFp8(p) + " on this device (" + Blas().cublasGetStatusName(status) +
                                   "); use bf16 weights instead");
  }
  ENVFORGE_RETURN_IF_ERROR(CheckBlas(status, "cublasLtMatmulAlgoGetHeuristic"));
  std::lock_guard<std::mutex> lock(algo_cache_mutex);
  if (algo_cache.size() >= kMaxCachedAlgos) algo_cache.clear();
  algo_cache.emplace(p, result.algo);
  return result.algo;
}

// Runs one FP8 product (see Fp8Problem) on the handle's stream.
Status RunFp8(BlasHandle& handle, const Fp8Problem& p, const void* a, const float* a_scales, const void* b,
              const float* b_scales, void* d, float alpha, float beta) {
  Fp8Descriptors descriptors;
  ENVFORGE_RETURN_IF_ERROR(BuildFp8Descriptors(p, a_scales, b_scales, descriptors));
  auto lt = static_cast<cublasLtHandle_t>(handle.blas_lt());
  ENVFORGE_ASSIGN_OR_RETURN(cublasLtMatmulAlgo_t algo, FindFp8Algo(lt, p, descriptors));
  return CheckBlas(Blas().cublasLtMatmul(lt, descriptors.desc.value, &alpha, a, descriptors.a.value, b,
                                         descriptors.b.value, &beta, d, descriptors.d.value, d, descriptors.d.value,
                                         &algo, handle.workspace(), handle.workspace_bytes(), handle.stream()),
                   "cublasLtMatmul (FP8 block-scaled " + DescribeFp8(p) + ")");
}

// scale_t (rows x kb column-major, ld ld_t: scale_t[kb * ld_t + r]) = the transpose of
// a_scales rows [0, rows) ([rows, kb] row-major, i.e. kb x rows column-major with ld kb, taken
// transposed). geam's second operand gets 0 times the same (finite) scales, so nothing
// uninitialised is ever read.
Status TransposeScales(BlasHandle& handle, const float* a_scales, int64_t rows, int64_t kb, float* scale_t,
                       int64_t ld_t) {
  const float one = 1.0f, zero = 0.0f;
  return CheckBlas(Blas().cublasSgeam_64(static_cast<cublasHandle_t>(handle.blas()), CUBLAS_OP_T, CUBLAS_OP_T, rows, kb,
                                         &one, a_scales, kb, &zero, a_scales, kb, scale_t, ld_t),
                   "cublasSgeam (activation scale transpose)");
}

Status ValidateGemmResolved(const GemmArgs& args, int64_t lda, int64_t ldw, int64_t ldc) {
  if (args.kind != GemmKind::kBF16 && args.kind != GemmKind::kFP8Block && args.kind != GemmKind::kF32) {
    return InvalidArgumentError("GemmArgs.kind is not a GemmKind (" + std::to_string(static_cast<int>(args.kind)) +
                                ")");
  }
  if (args.m < 0) return InvalidArgumentError("GemmArgs.m must be >= 0, got " + Str(args.m));
  if (args.n < 1) return InvalidArgumentError("GemmArgs.n must be >= 1, got " + Str(args.n));
  if (args.k < 1) return InvalidArgumentError("GemmArgs.k must be >= 1, got " + Str(args.k));
  if (lda < args.k) return InvalidArgumentError("GemmArgs.lda " + Str(lda) + " is smaller than k " + Str(args.k));
  if (ldw < args.k) return InvalidArgumentError("GemmArgs.ldw " + Str(ldw) + " is smaller than k " + Str(args.k));
  if (ldc < args.n) return InvalidArgumentError("GemmArgs.ldc " + Str(ldc) + " is smaller than n " + Str(args.n));
  const size_t alignment = args.kind == GemmKind::kF32 ? alignof(float) : 16;
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.a, "GemmArgs.a", alignment));
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.w, "GemmArgs.w", alignment));
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.c, "GemmArgs.c", alignment));
  if (args.kind == GemmKind::kF32 && args.c_bf16)
    return InvalidArgumentError("GemmArgs.c_bf16 is not supported for kF32");
  if (args.kind == GemmKind::kFP8Block) {
    if (args.k % 16 != 0)
      return InvalidArgumentError("GemmArgs.k must be a multiple of 16 for kFP8Block, got " + Str(args.k));
    if (args.n % 4 != 0)
      return InvalidArgumentError("GemmArgs.n must be a multiple of 4 for kFP8Block, got " + Str(args.n));
    if (lda % 16 != 0)
      return InvalidArgumentError("GemmArgs.lda must be a multiple of 16 for kFP8Block, got " + Str(lda));
    if (ldw % 16 != 0)
      return InvalidArgumentError("GemmArgs.ldw must be a multiple of 16 for kFP8Block, got " + Str(ldw));
    ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.a_scales, "GemmArgs.a_scales", alignof(float)));
    ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.w_scales, "GemmArgs.w_scales", alignof(float)));
  }
  return Status();
}

Status GemmBf16(BlasHandle& handle, const GemmArgs& args, int64_t lda, int64_t ldw, int64_t ldc) {
  return CheckBlas(Blas().cublasGemmEx_64(static_cast<cublasHandle_t>(handle.blas()), CUBLAS_OP_T, CUBLAS_OP_N, args.n,
                                          args.m, args.k, &args.alpha, args.w, CUDA_R_16BF, ldw, args.a, CUDA_R_16BF,
                                          lda, &args.beta, args.c, args.c_bf16 ? CUDA_R_16BF : CUDA_R_32F, ldc,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx (bf16 n=" + Str(args.n) + " m=" + Str(args.m) + " k=" + Str(args.k) + ")");
}

Status GemmF32(BlasHandle& handle, const GemmArgs& args, int64_t lda, int64_t ldw, int64_t ldc) {
  return CheckBlas(
      Blas().cublasGemmEx_64(static_cast<cublasHandle_t>(handle.blas()), CUBLAS_OP_T, CUBLAS_OP_N, args.n, args.m,
                             args.k, &args.alpha, args.w, CUDA_R_32F, ldw, args.a, CUDA_R_32F, lda, &args.beta, args.c,
                             CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx (fp32 n=" + Str(args.n) + " m=" + Str(args.m) + " k=" + Str(args.k) + ")");
}

Status GemmFp8Block(BlasHandle& handle, const GemmArgs& args, int64_t lda, int64_t ldw, int64_t ldc) {
  const int64_t kb = CeilDiv(args.k, kScaleBlock), nb = CeilDiv(args.n, kScaleBlock);
  const int64_t kb_padded = RoundUp(kb, 4);
  const size_t c_elem = args.c_bf16 ? 2 : 4;
  cudaStream_t stream = handle.stream();

  // Scratch layout: [weight scales re-pitched (only when needed, see the file comment)] [tail rows of A: 4 x k]
  // [tail rows of C: 4 x n] [transposed activation scales: kb x chunk rows].
  char* scratch = static_cast<char*>(handle.workspace()) + handle.workspace_bytes();
  size_t used = 0;
  const float* w_scales = args.w_scales;
  if (kb != kb_padded || !Aligned(args.w_scales, 16)) {
    auto* repitched = reinterpret_cast<float*>(scratch + used);
    used += AlignUp(static_cast<size_t>(nb * kb_padded) * sizeof(float));
    if (used > kScratchBytes) {
      return ResourceExhaustedError("GEMM scratch of " + std::to_string(kScratchBytes) + " bytes cannot hold the " +
                                    Str(nb) + " x " + Str(kb_padded) + " re-pitched weight scales");
    }
    // Padding entries are never read for data (they sit past the last k block) but must be
    // finite: zero them first.
    ENVFORGE_RETURN_IF_ERROR(CheckCuda(
        cudaMemsetAsync(repitched, 0, static_cast<size_t>(nb * kb_padded) * sizeof(float), stream), "cudaMemsetAsync"));
    ENVFORGE_RETURN_IF_ERROR(
        CheckCuda(cudaMemcpy2DAsync(repitched, static_cast<size_t>(kb_padded) * sizeof(float), args.w_scales,
                                    static_cast<size_t>(kb) * sizeof(float), static_cast<size_t>(kb) * sizeof(float),
                                    static_cast<size_t>(nb), cudaMemcpyDeviceToDevice, stream),
                  "cudaMemcpy2DAsync (weight scales)"));
    w_scales = repitched;
  }
  const int64_t tail = args.m % kRowQuantum;
  const int64_t tail_ldc = RoundUp(args.n, 8);  // 16-byte aligned rows for fp32 and bf16
  char* tail_a = scratch + used;
  char* tail_c = nullptr;
  if (tail > 0) {
    used += AlignUp(static_cast<size_t>(kRowQuantum * args.k));
    tail_c = scratch + used;
    used += AlignUp(static_cast<size_t>(kRowQuantum * tail_ldc) * c_elem);
  }
  auto* scale_t = reinterpret_cast<float*>(scratch + used);
  const size_t scale_bytes_left = used < kScratchBytes ? kScratchBytes - used : 0;
  // Rows per chunk: as many as the transposed scales allow, a multiple of kRowQuantum.
  const int64_t chunk_rows =
      static_cast<int64_t>(scale_bytes_left / (static_cast<size_t>(kb) * sizeof(float))) / kRowQuantum * kRowQuantum;
  if (chunk_rows < kRowQuantum) {
    return ResourceExhaustedError("GEMM scratch of " + std::to_string(kScratchBytes) +
                                  " bytes is too small for n=" + Str(args.n) + " k=" + Str(args.k));
  }

  Fp8Problem problem;
  problem.rows = args.n;
  problem.k = args.k;
  problem.lda = ldw;
  problem.d_bf16 = args.c_bf16;
  problem.beta_nonzero = args.beta != 0.0f;
  problem.align_a = AlignmentOf(args.w);

  const auto* a_bytes = static_cast<const uint8_t*>(args.a);
  auto* c_bytes = static_cast<char*>(args.c);
  const int64_t body = args.m - tail;
  for (int64_t row0 = 0; row0 < body; row0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, body - row0);  // a multiple of kRowQuantum
    ENVFORGE_RETURN_IF_ERROR(TransposeScales(handle, args.a_scales + row0 * kb, rows, kb, scale_t, rows));
    problem.cols = rows;
    problem.ldb = lda;
    problem.ldd = ldc;
    const uint8_t* b = a_bytes + row0 * lda;
    char* d = c_bytes + static_cast<size_t>(row0 * ldc) * c_elem;
    problem.align_b = AlignmentOf(b);
    problem.align_d = AlignmentOf(d);
    ENVFORGE_RETURN_IF_ERROR(RunFp8(handle, problem, args.w, w_scales, b, scale_t, d, args.alpha, args.beta));
  }
  if (tail > 0) {
    // The last m % 4 rows, through 4-row zero-padded copies: padded rows have zero codes and zero
    // scales, and their results are dropped.
    // One memset zeroes the padded A rows, the C rows (never read when beta == 0, but defined) and
    // the tail's transposed scales, which lie in that order in the scratch area.
    const auto* tail_end = reinterpret_cast<const char*>(scale_t + kb * kRowQuantum);
    ENVFORGE_RETURN_IF_ERROR(
        CheckCuda(cudaMemsetAsync(tail_a, 0, static_cast<size_t>(tail_end - tail_a), stream), "cudaMemsetAsync"));
    ENVFORGE_RETURN_IF_ERROR(CheckCuda(
        cudaMemcpy2DAsync(tail_a, static_cast<size_t>(args.k), a_bytes + body * lda, static_cast<size_t>(lda),
                          static_cast<size_t>(args.k), static_cast<size_t>(tail), cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpy2DAsync (tail rows of A)"));
    ENVFORGE_RETURN_IF_ERROR(TransposeScales(handle, args.a_scales + body * kb, tail, kb, scale_t, kRowQuantum));
    const size_t c_row_bytes = static_cast<size_t>(args.n) * c_elem;
    char* c_tail_rows = c_bytes + static_cast<size_t>(body * ldc) * c_elem;
    if (problem.beta_nonzero) {
      ENVFORGE_RETURN_IF_ERROR(CheckCuda(cudaMemcpy2DAsync(tail_c, static_cast<size_t>(tail_ldc) * c_elem, c_tail_rows,
                                                           static_cast<size_t>(ldc) * c_elem, c_row_bytes,
                                                           static_cast<size_t>(tail), cudaMemcpyDeviceToDevice, stream),
                                         "cudaMemcpy2DAsync (tail rows of C)"));
    }
    problem.cols = kRowQuantum;
    problem.ldb = args.k;
    problem.ldd = tail_ldc;
    problem.align_b = AlignmentOf(tail_a);
    problem.align_d = AlignmentOf(tail_c);
    ENVFORGE_RETURN_IF_ERROR(RunFp8(handle, problem, args.w, w_scales, tail_a, scale_t, tail_c, args.alpha, args.beta));
    ENVFORGE_RETURN_IF_ERROR(CheckCuda(cudaMemcpy2DAsync(c_tail_rows, static_cast<size_t>(ldc) * c_elem, tail_c,
                                                         static_cast<size_t>(tail_ldc) * c_elem, c_row_bytes,
                                                         static_cast<size_t>(tail), cudaMemcpyDeviceToDevice, stream),
                                       "cudaMemcpy2DAsync (tail rows back to C)"));
  }
  return Status();
}

}  // namespace

// ---- BlasHandle

Result<std::unique_ptr<BlasHandle>> BlasHandle::Create(cudaStream_t stream) {
  ENVFORGE_ASSIGN_OR_RETURN(DeviceInfo device, ProbeDevice());
  (void)device;
  ENVFORGE_RETURN_IF_ERROR(internal::Cublas().status());  // the library, before any Blas() call
  std::unique_ptr<BlasHandle> handle(new BlasHandle());
  handle->stream_ = stream;
  cublasHandle_t blas = nullptr;
  ENVFORGE_RETURN_IF_ERROR(CheckBlas(Blas().cublasCreate(&blas), "cublasCreate"));
  handle->blas_ = blas;
  ENVFORGE_RETURN_IF_ERROR(CheckBlas(Blas().cublasSetStream(blas, stream), "cublasSetStream"));
  // Split-K partial sums of a bf16 output stay in fp32 (no reduced-precision reduction).
  ENVFORGE_RETURN_IF_ERROR(CheckBlas(
      Blas().cublasSetMathMode(
          blas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
      "cublasSetMathMode"));
  cublasLtHandle_t lt = nullptr;
  ENVFORGE_RETURN_IF_ERROR(CheckBlas(Blas().cublasLtCreate(&lt), "cublasLtCreate"));
  handle->blas_lt_ = lt;
  void* memory = nullptr;
  cudaError_t error = cudaMalloc(&memory, kBlasWorkspaceBytes + kScratchBytes);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return ResourceExhaustedError("cudaMalloc of the " + std::to_string(kBlasWorkspaceBytes + kScratchBytes) +
                                  "-byte GEMM workspace: " + cudaGetErrorString(error));
  }
  handle->workspace_ = memory;
  handle->workspace_bytes_ = kBlasWorkspaceBytes;  // the scratch area follows it
  ENVFORGE_RETURN_IF_ERROR(
      CheckBlas(Blas().cublasSetWorkspace(blas, memory, kBlasWorkspaceBytes), "cublasSetWorkspace"));
  return handle;
}

BlasHandle::~BlasHandle() {
  if (blas_lt_ != nullptr) Blas().cublasLtDestroy(static_cast<cublasLtHandle_t>(blas_lt_));
  if (blas_ != nullptr) Blas().cublasDestroy(static_cast<cublasHandle_t>(blas_));
  if (workspace_ != nullptr) cudaFree(workspace_);
}

// ---- Gemm

Status ValidateGemmArgs(const GemmArgs& args) {
  return ValidateGemmResolved(args, args.lda != 0 ? args.lda : args.k, args.ldw != 0 ? args.ldw : args.k,
                              args.ldc != 0 ? args.ldc : args.n);
}

Status Gemm(BlasHandle& handle, const GemmArgs& args) {
  if (args.m == 0 && args.n >= 1 && args.k >= 1) return Status();  // nothing to compute (an expert with no tokens)
  ENVFORGE_RETURN_IF_ERROR(ValidateGemmArgs(args));
  const int64_t lda = args.lda != 0 ? args.lda : args.k;
  const int64_t ldw = args.ldw != 0 ? args.ldw : args.k;
  const int64_t ldc = args.ldc != 0 ? args.ldc : args.n;
  if (args.kind == GemmKind::kBF16) return GemmBf16(handle, args, lda, ldw, ldc);
  if (args.kind == GemmKind::kF32) return GemmF32(handle, args, lda, ldw, ldc);
  return GemmFp8Block(handle, args, lda, ldw, ldc);
}

Status ValidateBatchedGemmArgs(const BatchedGemmArgs& args) {
  if (args.batch < 0) return InvalidArgumentError("BatchedGemmArgs.batch must be >= 0, got " + Str(args.batch));
  if (args.m < 0) return InvalidArgumentError("BatchedGemmArgs.m must be >= 0, got " + Str(args.m));
  if (args.n < 1) return InvalidArgumentError("BatchedGemmArgs.n must be >= 1, got " + Str(args.n));
  if (args.k < 1) return InvalidArgumentError("BatchedGemmArgs.k must be >= 1, got " + Str(args.k));
  const int64_t lda = args.lda != 0 ? args.lda : args.k;
  const int64_t ldw = args.ldw != 0 ? args.ldw : (args.w_transposed ? args.n : args.k);
  const int64_t ldc = args.ldc != 0 ? args.ldc : args.n;
  if (lda < args.k)
    return InvalidArgumentError("BatchedGemmArgs.lda " + Str(lda) + " is smaller than k " + Str(args.k));
  const int64_t w_row = args.w_transposed ? args.n : args.k;
  if (ldw < w_row) {
    return InvalidArgumentError("BatchedGemmArgs.ldw " + Str(ldw) + " is smaller than " +
                                (args.w_transposed ? "n " : "k ") + Str(w_row));
  }
  if (ldc < args.n)
    return InvalidArgumentError("BatchedGemmArgs.ldc " + Str(ldc) + " is smaller than n " + Str(args.n));
  // Strides may be small (per-head slices of an interleaved [tokens, heads, dim] tensor) or 0
  // (one matrix shared by every batch entry); only negative ones are wrong.
  if (args.stride_a < 0 || args.stride_w < 0 || args.stride_c < 0) {
    return InvalidArgumentError("BatchedGemmArgs strides must be >= 0 (got stride_a " + Str(args.stride_a) +
                                ", stride_w " + Str(args.stride_w) + ", stride_c " + Str(args.stride_c) + ")");
  }
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.a, "BatchedGemmArgs.a", 16));
  ENVFORGE_RETURN_IF_ERROR(CheckPointer(args.w, "BatchedGemmArgs.w", 16));
  return CheckPointer(args.c, "BatchedGemmArgs.c", 16);
}

Status GemmStridedBatched(BlasHandle& handle, const BatchedGemmArgs& args) {
  if ((args.batch == 0 || args.m == 0) && args.batch >= 0 && args.m >= 0 && args.n >= 1 && args.k >= 1) return Status();
  ENVFORGE_RETURN_IF_ERROR(ValidateBatchedGemmArgs(args));
  const int64_t lda = args.lda != 0 ? args.lda : args.k;
  const int64_t ldw = args.ldw != 0 ? args.ldw : (args.w_transposed ? args.n : args.k);
  const int64_t ldc = args.ldc != 0 ? args.ldc : args.n;
  // Column-major: C_b^T (n x m) = op(W_b) . A_b^T; W_b [n, k] row-major is k x n column-major
  // (taken transposed), W_b [k, n] row-major is n x k column-major (taken as is).
  const cublasOperation_t op_w = args.w_transposed ? CUBLAS_OP_N : CUBLAS_OP_T;
  return CheckBlas(Blas().cublasGemmStridedBatchedEx_64(
                       static_cast<cublasHandle_t>(handle.blas()), op_w, CUBLAS_OP_N, args.n, args.m, args.k,
                       &args.alpha, args.w, CUDA_R_16BF, ldw, args.stride_w, args.a, CUDA_R_16BF, lda, args.stride_a,
                       &args.beta, args.c, args.c_bf16 ? CUDA_R_16BF : CUDA_R_32F, ldc, args.stride_c, args.batch,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx (batch=" + Str(args.batch) + " n=" + Str(args.n) + " m=" + Str(args.m) +
                       " k=" + Str(args.k) + ")");
}

bool Fp8BlockGemmSupported(BlasHandle& handle) {
  static std::once_flag once;
  static bool supported = false;
  std::call_once(once, [&handle] {
    // A small problem of the shape class the engine uses (n, k multiples of 128, 4 token rows,
    // fp32 output); the scale pointers are never dereferenced by the heuristic.
    Fp8Problem probe;
    probe.rows = 256;
    probe.cols = kRowQuantum;
    probe.k = 256;
    probe.lda = probe.ldb = 256;
    probe.ldd = 256;
    Fp8Descriptors descriptors;
    const float* placeholder = static_cast<const float*>(handle.workspace());
    if (!BuildFp8Descriptors(probe, placeholder, placeholder, descriptors).ok()) return;
    supported = FindFp8Algo(static_cast<cublasLtHandle_t>(handle.blas_lt()), probe, descriptors).ok();
  });
  return supported;
}

}  // namespace envforge::kernels::cuda
