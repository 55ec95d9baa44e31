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
// cuBLASLt: the FP8 matmul with Hopper's 128-element 1D / 128x128 2D block scaling, and nothing
// else (any other configuration is NOT_SUPPORTED: the heuristic returns no algorithm). Written from
// NVIDIA's cuBLAS documentation (cuBLAS 12.9+/13.x, "Using the cuBLASLt API"), section by section:
//   * Definition (3.1.4.4 and 3.1.4.5): with L = ceil(K/128) blocks along K,
//       D[i,j] = alpha * sum_b scale_A(i,b) * scale_B(j,b) * sum_{l in block b} op(A)[i,l] * op(B)[l,j]
//                + beta * C[i,j],
//     scale_A(i,b) the 1x128 block's factor (VEC128_32F) or that of the 128x128 block holding row i
//     (BLK128x128_32F); likewise for B with column j. fp32 factors are applied as they are (sign
//     included). Here each block's products (exact in fp32 for e4m3 x e4m3) are summed in fp32 in k
//     order and promoted once: acc += (scale_A * scale_B) * block_sum, DeepSeek's per-128 "2xAcc"
//     (what kernels/cpu linear's W8A8 computes, in double there); then D = alpha * acc + beta * C in
//     fp32, rounded once to D's type. C is not read when beta == 0; C == D (in place) needs ldc ==
//     ldd.
//   * Scale modes (3.1.4.5, its table): A/B = VEC128/VEC128, VEC128/BLK128x128 or BLK128x128/VEC128;
//     BLK128x128/BLK128x128 is not supported, nor is mixing them with any other mode; "all the other
//     scaling modes must not be modified" (C, D, EPILOGUE_AUX, D_OUT stay SCALAR_32F). D is
//     CUDA_R_16F, 16BF or 32F (16F not emulated); C has D's type (cublasLtMatmul's FP8 type table).
//     A D scale, D amax or D_OUT scale pointer on a non-narrow D is INVALID_VALUE (cublasLt.h: "if
//     set for an unsupported ... combination ... CUBLAS_INVALID_VALUE"); a C scale is not emulated.
//   * Scale layouts (3.1.4.5.1, "Scaling factors layouts"): start addresses 16-byte aligned; M and N
//     (of D) multiples of 4. VEC128_32F: M-major M x L for A (scale_A(i,b) at b * M + i), N-major
//     N x L for B (at b * N + j). BLK128x128_32F: K-major, the stride between consecutive columns a
//     multiple of 4: L4 x ceil(M/128) for A with L4 = L rounded up to a multiple of 4 (scale_A(i,b) at
//     (i / 128) * L4 + b), L4 x ceil(N/128) for B. The scale layouts do not follow transa/transb.
//   * FP8 operands (cublasLtMatmul, FP8 requirements): A and B CUDA_R_8F_E4M3 (E5M2 is documented
//     but not emulated); "A must be transposed and B non-transposed (the TN format)" on Hopper
//     (others NOT_SUPPORTED, as Hopper's heuristic answers); compute type CUBLAS_COMPUTE_32F, scale
//     type CUDA_R_32F; all matrix pointers 16-byte aligned (INVALID_VALUE at the matmul; a
//     preference allowing less than 16-byte alignment finds no algorithm). So with op(A) = A^T:
//     A is K x M (element (l, i) at A[l + i * lda]), B is K x N (B[l + j * ldb]), C and D are M x N
//     column-major. Layouts must be CUBLASLT_ORDER_COL, batch count 1; alpha and beta host floats
//     (POINTER_MODE_HOST); epilogue DEFAULT; FAST_ACCUM (which skips the promotion) not emulated.
//   * Statuses (cublasLt.h): the heuristic answers INVALID_VALUE for requestedAlgoCount <= 0 or
//     inconsistent arguments (layout shapes that do not chain, ld below the row count),
//     NOT_SUPPORTED with no result for any other configuration, else one algorithm (no workspace)
//     tagged as the emulator's; cublasLtMatmul answers the same checks with INVALID_VALUE or
//     NOT_SUPPORTED, and INVALID_VALUE for null or misaligned pointers, missing scale pointers and
//     an algo the heuristic did not produce (a null algo is allowed). Descriptor Set/GetAttribute
//     follow cublasLt.h: INVALID_VALUE for an unknown attribute, a null buffer or a size that is not
//     the attribute's; Get with size 0 returns the needed size.
//
// Everything runs synchronously in the caller, like the emulated kernels.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
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
std::vector<float> Gather(const void* x, cudaDataType type, int64_t ld, cublasOperation_t op, int64_t rows,
                          int64_t cols) {
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

cublasStatus_t CheckGemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
                         int64_t n, int64_t k, const void* alpha, cudaDataType a_type, int64_t lda, cudaDataType b_type,
                         int64_t ldb, const void* beta, cudaDataType c_type, int64_t ldc, cublasComputeType_t compute) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m < 0 || n < 0 || k < 0 || alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max<int64_t>(1, transa == CUBLAS_OP_N ? m : k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldb < std::max<int64_t>(1, transb == CUBLAS_OP_N ? k : n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldc < std::max<int64_t>(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  if ((compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC) || !SupportedInput(a_type) ||
      !SupportedInput(b_type) || !SupportedInput(c_type)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (handle->pointer_mode != CUBLAS_POINTER_MODE_HOST) return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

size_t ElementBytes(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

// ---- cuBLASLt: descriptor state and the FP8 block-scaled matmul (see the file comment)

// Each descriptor keeps its state inside the fixed-size opaque storage cublasLt.h declares for it.
struct MatmulDescState {
  int32_t compute_type = 0;
  int32_t scale_type = 0;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transa = CUBLAS_OP_N;
  int32_t transb = CUBLAS_OP_N;
  int32_t transc = CUBLAS_OP_N;
  int32_t fill_mode = CUBLAS_FILL_MODE_FULL;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int64_t bias_batch_stride = 0;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int64_t aux_batch_stride = 0;
  int64_t alpha_vector_batch_stride = 0;
  int32_t sm_count_target = 0;
  int32_t aux_data_type = -1;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  const void* c_scale = nullptr;
  const void* d_scale = nullptr;
  void* amax_d = nullptr;
  void* aux_scale = nullptr;
  void* aux_amax = nullptr;
  int8_t fast_accum = 0;
  int32_t bias_data_type = -1;
  int32_t a_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  int32_t b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  int32_t c_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  int32_t d_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  int32_t aux_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  int32_t d_out_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  void* d_out_scale = nullptr;
  cublasLtEmulationDesc_t emulation = nullptr;
};

struct LayoutState {
  uint32_t type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows = 0;
  uint64_t cols = 0;
  int64_t ld = 0;
  int32_t batch_count = 1;
  uint32_t batch_mode = CUBLASLT_BATCH_MODE_STRIDED;
  int64_t strided_batch_offset = 0;
  int64_t plane_offset = 0;
};

struct PreferenceState {
  uint32_t search_mode = CUBLASLT_SEARCH_BEST_FIT;
  uint32_t reduction_scheme_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
  uint64_t max_workspace_bytes = 0;
  uint32_t min_alignment_a = 256, min_alignment_b = 256, min_alignment_c = 256, min_alignment_d = 256;
  float max_waves_count = 0.0f;
  uint64_t impl_mask = ~uint64_t{0};
};

template <typename State, typename Opaque>
State* StateOf(Opaque* opaque) {
  static_assert(sizeof(State) <= sizeof(opaque->data) && alignof(State) <= alignof(uint64_t),
                "the emulator's state must fit cublasLt.h's opaque storage");
  return std::launder(reinterpret_cast<State*>(opaque->data));
}

template <typename Opaque, typename State>
Opaque* NewOpaque(const State& state) {
  auto* opaque = new Opaque{};
  new (opaque->data) State(state);
  return opaque;
}

// One attribute's storage; {nullptr, 0} for an attribute the emulator does not know.
struct Field {
  void* address = nullptr;
  size_t size = 0;
};
template <typename T>
Field FieldFor(T& member) {
  return {&member, sizeof member};
}

Field DescField(MatmulDescState& s, cublasLtMatmulDescAttributes_t attribute) {
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return FieldFor(s.compute_type);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return FieldFor(s.scale_type);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return FieldFor(s.pointer_mode);
    case CUBLASLT_MATMUL_DESC_TRANSA: return FieldFor(s.transa);
    case CUBLASLT_MATMUL_DESC_TRANSB: return FieldFor(s.transb);
    case CUBLASLT_MATMUL_DESC_TRANSC: return FieldFor(s.transc);
    case CUBLASLT_MATMUL_DESC_FILL_MODE: return FieldFor(s.fill_mode);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return FieldFor(s.epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return FieldFor(s.bias);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return FieldFor(s.bias_batch_stride);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return FieldFor(s.aux);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return FieldFor(s.aux_ld);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return FieldFor(s.aux_batch_stride);
    case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE: return FieldFor(s.alpha_vector_batch_stride);
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: return FieldFor(s.sm_count_target);
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return FieldFor(s.a_scale);
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return FieldFor(s.b_scale);
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: return FieldFor(s.c_scale);
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: return FieldFor(s.d_scale);
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: return FieldFor(s.amax_d);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return FieldFor(s.aux_data_type);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER: return FieldFor(s.aux_scale);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER: return FieldFor(s.aux_amax);
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return FieldFor(s.fast_accum);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return FieldFor(s.bias_data_type);
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE: return FieldFor(s.a_scale_mode);
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: return FieldFor(s.b_scale_mode);
    case CUBLASLT_MATMUL_DESC_C_SCALE_MODE: return FieldFor(s.c_scale_mode);
    case CUBLASLT_MATMUL_DESC_D_SCALE_MODE: return FieldFor(s.d_scale_mode);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE: return FieldFor(s.aux_scale_mode);
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER: return FieldFor(s.d_out_scale);
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE: return FieldFor(s.d_out_scale_mode);
    case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR: return FieldFor(s.emulation);
    default: return {};
  }
}

Field LayoutField(LayoutState& s, cublasLtMatrixLayoutAttribute_t attribute) {
  switch (attribute) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return FieldFor(s.type);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return FieldFor(s.order);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return FieldFor(s.rows);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return FieldFor(s.cols);
    case CUBLASLT_MATRIX_LAYOUT_LD: return FieldFor(s.ld);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return FieldFor(s.batch_count);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return FieldFor(s.strided_batch_offset);
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: return FieldFor(s.plane_offset);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: return FieldFor(s.batch_mode);
    default: return {};
  }
}

Field PreferenceField(PreferenceState& s, cublasLtMatmulPreferenceAttributes_t attribute) {
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return FieldFor(s.search_mode);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return FieldFor(s.max_workspace_bytes);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return FieldFor(s.reduction_scheme_mask);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return FieldFor(s.min_alignment_a);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return FieldFor(s.min_alignment_b);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return FieldFor(s.min_alignment_c);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return FieldFor(s.min_alignment_d);
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: return FieldFor(s.max_waves_count);
    case CUBLASLT_MATMUL_PREF_IMPL_MASK: return FieldFor(s.impl_mask);
    default: return {};
  }
}

// The Set/GetAttribute contract of cublasLt.h: INVALID_VALUE for a null buffer or a size that is
// not the attribute's; Get with size 0 reports the size needed through size_written.
cublasStatus_t SetField(Field field, const void* buf, size_t bytes) {
  if (field.address == nullptr || buf == nullptr || bytes != field.size) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(field.address, buf, bytes);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t GetField(Field field, void* buf, size_t bytes, size_t* size_written) {
  if (field.address == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (bytes == 0) {
    if (size_written == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *size_written = field.size;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || bytes != field.size) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, field.address, bytes);
  if (size_written != nullptr) *size_written = field.size;
  return CUBLAS_STATUS_SUCCESS;
}

constexpr int64_t kScaleBlock = 128;
// cublasLtMatmulAlgo_t.data[0..1] of the one algorithm the heuristic reports.
constexpr uint64_t kAlgoMagic = 0x656e76666f726765ULL;  // "envforge"
constexpr uint64_t kAlgoFp8BlockScaled = 1;

// A resolved FP8 block-scaled problem in cuBLAS's column-major terms:
// D (m x n, ld ldd) = alpha * {scale_a, op(A) = A^T} x {scale_b, B} + beta * C, A k x m (lda),
// B k x n (ldb), C m x n (ldc).
struct Fp8BlockProblem {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  cudaDataType d_type = CUDA_R_32F;
  int32_t a_mode = 0, b_mode = 0;
};

bool BlockScaleMode(int32_t mode) {
  return mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F || mode == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
}

cublasStatus_t CheckLayout(const LayoutState& layout) {
  if (layout.batch_count < 1) return CUBLAS_STATUS_INVALID_VALUE;
  if (layout.order != CUBLASLT_ORDER_COL || layout.batch_count != 1 || layout.plane_offset != 0 ||
      layout.batch_mode != CUBLASLT_BATCH_MODE_STRIDED) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (layout.ld < std::max<int64_t>(1, static_cast<int64_t>(layout.rows))) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

// The descriptor checks shared by the heuristic and the matmul (see the file comment for the
// rules and their sources): SUCCESS with `out` filled, INVALID_VALUE for inconsistent arguments,
// NOT_SUPPORTED for a configuration that is not the emulated one.
cublasStatus_t ResolveFp8Block(const MatmulDescState& desc, cublasLtMatrixLayout_t a_layout,
                               cublasLtMatrixLayout_t b_layout, cublasLtMatrixLayout_t c_layout,
                               cublasLtMatrixLayout_t d_layout, Fp8BlockProblem& out) {
  if (a_layout == nullptr || b_layout == nullptr || c_layout == nullptr || d_layout == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  const LayoutState& a = *StateOf<LayoutState>(a_layout);
  const LayoutState& b = *StateOf<LayoutState>(b_layout);
  const LayoutState& c = *StateOf<LayoutState>(c_layout);
  const LayoutState& d = *StateOf<LayoutState>(d_layout);
  for (const LayoutState* layout : {&a, &b, &c, &d}) {
    const cublasStatus_t status = CheckLayout(*layout);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
  }
  if (desc.compute_type != CUBLAS_COMPUTE_32F || desc.scale_type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (a.type != CUDA_R_8F_E4M3 || b.type != CUDA_R_8F_E4M3) return CUBLAS_STATUS_NOT_SUPPORTED;
  if ((d.type != CUDA_R_16BF && d.type != CUDA_R_32F) || c.type != d.type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc.transa != CUBLAS_OP_T || desc.transb != CUBLAS_OP_N || desc.transc != CUBLAS_OP_N)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!BlockScaleMode(desc.a_scale_mode) || !BlockScaleMode(desc.b_scale_mode) ||
      (desc.a_scale_mode == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F &&
       desc.b_scale_mode == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (desc.c_scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F ||
      desc.d_scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F ||
      desc.aux_scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F ||
      desc.d_out_scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (desc.epilogue != CUBLASLT_EPILOGUE_DEFAULT || desc.pointer_mode != CUBLASLT_POINTER_MODE_HOST ||
      desc.fast_accum != 0 || desc.c_scale != nullptr) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  // D is bf16 or fp32, not a narrow type: a D scale or amax is an error, not an unsupported option.
  if (desc.d_scale != nullptr || desc.amax_d != nullptr || desc.d_out_scale != nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  const auto m = static_cast<int64_t>(a.cols), k = static_cast<int64_t>(a.rows), n = static_cast<int64_t>(b.cols);
  if (static_cast<int64_t>(b.rows) != k || static_cast<int64_t>(d.rows) != m || static_cast<int64_t>(d.cols) != n ||
      c.rows != d.rows || c.cols != d.cols) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m % 4 != 0 || n % 4 != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  out.m = m;
  out.n = n;
  out.k = k;
  out.lda = a.ld;
  out.ldb = b.ld;
  out.ldc = c.ld;
  out.ldd = d.ld;
  out.d_type = static_cast<cudaDataType>(d.type);
  out.a_mode = desc.a_scale_mode;
  out.b_mode = desc.b_scale_mode;
  return CUBLAS_STATUS_SUCCESS;
}

// e4m3 (OCP FP8: 1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no infinities, S.1111.111
// is NaN) to fp32, exactly.
float E4m3ToFloat(uint8_t bits) {
  const int exponent = (bits >> 3) & 15, mantissa = bits & 7;
  float magnitude;
  if (exponent == 15 && mantissa == 7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: (m / 8) * 2^-6
  } else {
    magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);  // (1 + m / 8) * 2^(e - 7)
  }
  return (bits & 0x80) != 0 ? -magnitude : magnitude;
}

const float* E4m3Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> values{};
    for (int bits = 0; bits < 256; ++bits) values[static_cast<size_t>(bits)] = E4m3ToFloat(static_cast<uint8_t>(bits));
    return values;
  }();
  return table.data();
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The scale of row `outer` (of op(A), or column of B) and k block `block`, by the layouts of
// cuBLAS 3.1.4.5.1: VEC128_32F is outer-major ([blocks][outer], ld = outer count), BLK128x128_32F
// is K-major with the stride between 128-row blocks rounded up to a multiple of 4.
float BlockScale(const float* scales, int32_t mode, int64_t outer, int64_t outer_count, int64_t block,
                 int64_t blocks4) {
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F) return scales[block * outer_count + outer];
  return scales[(outer / kScaleBlock) * blocks4 + block];
}

void RunFp8Block(const Fp8BlockProblem& p, float alpha, const uint8_t* a, const float* a_scales, const uint8_t* b,
                 const float* b_scales, float beta, const void* c, void* d) {
  const float* decode = E4m3Table();
  const int64_t blocks = (p.k + kScaleBlock - 1) / kScaleBlock;
  const int64_t blocks4 = (blocks + 3) / 4 * 4;
  // Rows of op(A) = A^T and columns of B, both k-contiguous: element (p, i) of A is a[p + i * lda].
  std::vector<float> a_rows(static_cast<size_t>(p.m * p.k)), b_cols(static_cast<size_t>(p.n * p.k));
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t q = 0; q < p.k; ++q) a_rows[static_cast<size_t>(i * p.k + q)] = decode[a[q + i * p.lda]];
  }
  for (int64_t j = 0; j < p.n; ++j) {
    for (int64_t q = 0; q < p.k; ++q) b_cols[static_cast<size_t>(j * p.k + q)] = decode[b[q + j * p.ldb]];
  }
  for (int64_t j = 0; j < p.n; ++j) {
    const float* column = &b_cols[static_cast<size_t>(j * p.k)];
    for (int64_t i = 0; i < p.m; ++i) {
      const float* row = &a_rows[static_cast<size_t>(i * p.k)];
      float acc = 0.0f;
      for (int64_t block = 0; block < blocks; ++block) {
        // The products of two e4m3 values are exact in fp32; a block's sum stays in fp32 and is
        // promoted once, times both block scales (DeepSeek's per-128 "2xAcc" promotion).
        float partial = 0.0f;
        const int64_t end = std::min(p.k, (block + 1) * kScaleBlock);
        for (int64_t q = block * kScaleBlock; q < end; ++q) partial += row[q] * column[q];
        const float scale = BlockScale(a_scales, p.a_mode, i, p.m, block, blocks4) *
                            BlockScale(b_scales, p.b_mode, j, p.n, block, blocks4);
        acc += scale * partial;
      }
      float value = alpha * acc;
      // In place (C == D) is safe: each element is read before it alone is written.
      if (beta != 0.0f) value += beta * LoadElement(c, p.d_type, i + j * p.ldc);
      StoreElement(d, p.d_type, i + j * p.ldd, value);
    }
  }
}

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

cublasStatus_t cublasGemmEx_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
                               int64_t n, int64_t k, const void* alpha, const void* A, cudaDataType Atype, int64_t lda,
                               const void* B, cudaDataType Btype, int64_t ldb, const void* beta, void* C,
                               cudaDataType Ctype, int64_t ldc, cublasComputeType_t computeType,
                               cublasGemmAlgo_t /*algo*/) {
  const cublasStatus_t status =
      CheckGemm(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta, Ctype, ldc, computeType);
  if (status != CUBLAS_STATUS_SUCCESS || m == 0 || n == 0) return status;
  return GemmOne(transa, transb, m, n, k, *static_cast<const float*>(alpha), A, Atype, lda, B, Btype, ldb,
                 *static_cast<const float*>(beta), C, Ctype, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return cublasGemmEx_64(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                         computeType, algo);
}

cublasStatus_t cublasGemmStridedBatchedEx_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                             int64_t m, int64_t n, int64_t k, const void* alpha, const void* A,
                                             cudaDataType Atype, int64_t lda, long long int strideA, const void* B,
                                             cudaDataType Btype, int64_t ldb, long long int strideB, const void* beta,
                                             void* C, cudaDataType Ctype, int64_t ldc, long long int strideC,
                                             int64_t batchCount, cublasComputeType_t computeType,
                                             cublasGemmAlgo_t /*algo*/) {
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

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx_64(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,
                                       strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

cublasStatus_t cublasSgeam_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
                              int64_t n, const float* alpha, const float* A, int64_t lda, const float* beta,
                              const float* B, int64_t ldb, float* C, int64_t ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m < 0 || n < 0 || alpha == nullptr || beta == nullptr || ldc < std::max<int64_t>(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
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
                           const float* alpha, const float* A, int lda, const float* beta, const float* B, int ldb,
                           float* C, int ldc) {
  return cublasSgeam_64(handle, transa, transb, m, n, alpha, A, lda, beta, B, ldb, C, ldc);
}

// ---- cuBLASLt (see the file comment)

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

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  MatmulDescState state;
  state.compute_type = compute;
  state.scale_type = scale;
  *desc = NewOpaque<cublasLtMatmulDescOpaque_t>(state);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return SetField(DescField(*StateOf<MatmulDescState>(desc), attr), buf, bytes);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, void* buf,
                                              size_t bytes, size_t* size_written) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return GetField(DescField(*StateOf<MatmulDescState>(desc), attr), buf, bytes, size_written);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  LayoutState state;
  state.type = static_cast<uint32_t>(type);
  state.rows = rows;
  state.cols = cols;
  state.ld = ld;
  *layout = NewOpaque<cublasLtMatrixLayoutOpaque_t>(state);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return SetField(LayoutField(*StateOf<LayoutState>(layout), attr), buf, bytes);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t bytes, size_t* size_written) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return GetField(LayoutField(*StateOf<LayoutState>(layout), attr), buf, bytes, size_written);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *preference = NewOpaque<cublasLtMatmulPreferenceOpaque_t>(PreferenceState{});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return SetField(PreferenceField(*StateOf<PreferenceState>(preference), attr), buf, bytes);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf, size_t bytes,
                                                    size_t* size_written) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return GetField(PreferenceField(*StateOf<PreferenceState>(preference), attr), buf, bytes, size_written);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requested <= 0 || results == nullptr || returned == nullptr || desc == nullptr || preference == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *returned = 0;
  Fp8BlockProblem problem;
  const cublasStatus_t status = ResolveFp8Block(*StateOf<MatmulDescState>(desc), a, b, c, d, problem);
  if (status == CUBLAS_STATUS_INVALID_VALUE) return status;
  if (status != CUBLAS_STATUS_SUCCESS) return CUBLAS_STATUS_NOT_SUPPORTED;
  // The one algorithm needs no workspace, and the 16-byte aligned operands every FP8 matmul needs.
  const PreferenceState& wanted = *StateOf<PreferenceState>(preference);
  if (std::min({wanted.min_alignment_a, wanted.min_alignment_b, wanted.min_alignment_c, wanted.min_alignment_d}) < 16) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = kAlgoMagic;
  results[0].algo.data[1] = kAlgoFp8BlockScaled;
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void* /*workspace*/, size_t /*workspace_bytes*/,
                              cudaStream_t /*stream*/) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const MatmulDescState& state = *StateOf<MatmulDescState>(desc);
  Fp8BlockProblem problem;
  const cublasStatus_t status = ResolveFp8Block(state, a, b, c, d, problem);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  // A null algo asks cublasLtMatmul to choose; anything else must be the heuristic's answer.
  if (algo != nullptr && (algo->data[0] != kAlgoMagic || algo->data[1] != kAlgoFp8BlockScaled))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const float alpha_value = *static_cast<const float*>(alpha), beta_value = *static_cast<const float*>(beta);
  if (A == nullptr || B == nullptr || D == nullptr || (beta_value != 0.0f && C == nullptr))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!Aligned16(A) || !Aligned16(B) || !Aligned16(D) || (C != nullptr && !Aligned16(C)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (state.a_scale == nullptr || state.b_scale == nullptr || !Aligned16(state.a_scale) || !Aligned16(state.b_scale)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (C == D && problem.ldc != problem.ldd) return CUBLAS_STATUS_INVALID_VALUE;  // in place needs one layout
  if (problem.m == 0 || problem.n == 0) return CUBLAS_STATUS_SUCCESS;
  RunFp8Block(problem, alpha_value, static_cast<const uint8_t*>(A), static_cast<const float*>(state.a_scale),
              static_cast<const uint8_t*>(B), static_cast<const float*>(state.b_scale), beta_value, C, D);
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
