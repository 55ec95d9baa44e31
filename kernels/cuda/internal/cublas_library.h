// cuBLAS and cuBLASLt loaded at run time (dlopen), not linked: envforge binaries built with the
// CUDA kernels must still start, and serve, on machines without the CUDA libraries (or without a
// GPU), and libcublasLt (half a gigabyte) should cost nothing to processes that never touch the
// GPU. Cublas() opens libcublas.so.<major> and libcublasLt.so.<major> of the toolkit the build
// used, first through the loader's search path, then from the toolkit's library directory, and
// resolves the entry points gemm.cc calls, once per process (thread-safe).
//
// Under ENVFORGE_CUDA_EMULATION the table points at the host emulator's definitions
// (kernels/cuda/emulation/cublas_emulation.cc) instead.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include "base/status.h"

namespace envforge::kernels::cuda::internal {

// X(name): every cuBLAS / cuBLASLt function envforge calls. cublas_v2.h maps some names to their
// _v2 symbols by macro; the table member and the looked-up symbol follow that mapping.
// The tables stay as written: clang-format 14 reflows X-macro lists differently on each pass.
// clang-format off
#define ENVFORGE_CUBLAS_FUNCTIONS(X)                                                                    \
  X(cublasCreate)                                                                                       \
  X(cublasDestroy) X(cublasSetStream) X(cublasSetMathMode) X(cublasSetWorkspace) X(cublasGetStatusName) \
      X(cublasGetStatusString) X(cublasGemmEx_64) X(cublasGemmStridedBatchedEx_64) X(cublasSgeam_64)
#define ENVFORGE_CUBLASLT_FUNCTIONS(X)                                                                             \
  X(cublasLtCreate)                                                                                                \
  X(cublasLtDestroy) X(cublasLtMatmul) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulDescCreate)               \
      X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatmulPreferenceCreate)             \
          X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatrixLayoutCreate) \
              X(cublasLtMatrixLayoutDestroy)
// clang-format on

struct CublasLibrary {
#define ENVFORGE_CUBLAS_MEMBER(name) decltype(&::name) name = nullptr;
  ENVFORGE_CUBLAS_FUNCTIONS(ENVFORGE_CUBLAS_MEMBER)
  ENVFORGE_CUBLASLT_FUNCTIONS(ENVFORGE_CUBLAS_MEMBER)
#undef ENVFORGE_CUBLAS_MEMBER
};

// The loaded table, or Unavailable naming the library that could not be opened or the symbol that
// is missing (with dlerror's text).
Result<const CublasLibrary*> Cublas();

}  // namespace envforge::kernels::cuda::internal
