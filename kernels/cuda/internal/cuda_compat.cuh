// The two spellings every kernels/cuda (and inference GPU) translation unit uses, so the same
// source builds for the GPU (nvcc) and for the host emulator (kernels/cuda/emulation/, g++ with
// ENVFORGE_CUDA_EMULATION=1, where kernels run as fibers on the CPU in the *_emulated test suites):
//
//   ENVFORGE_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...);
//       kernel<<<grid, block, shared_bytes, stream>>>(args...) on nvcc; `kernel` may be a template
//       instance with commas (it is the variadic last argument).
//   ENVFORGE_DYNAMIC_SHARED(type, name);
//       extern __shared__ __align__(16) type name[]; (the launch's dynamic shared memory).
//
// Warp-collective PTX (mma.sync, ldmatrix), cp.async and named barriers are wrapped once in
// kernels/cuda/internal/ptx.cuh, each wrapper with an `#if ENVFORGE_CUDA_EMULATION` branch calling
// the emulator's equivalent (kernels/cuda/emulation/emulator.h). Include this header first in
// every .cu.
#pragma once

#if ENVFORGE_CUDA_EMULATION
#include "kernels/cuda/emulation/emulator.h"
#else
#include <cuda_runtime.h>
#define ENVFORGE_LAUNCH(grid, block, shared_bytes, stream, ...) __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#define ENVFORGE_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]
#endif
