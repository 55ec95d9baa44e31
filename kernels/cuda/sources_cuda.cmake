# kernels/cuda/: one file pair per op (header = contract, .cu = kernels + host launch code).
set(ENVFORGE_KERNELS_CUDA_SOURCES
  cuda/device_runtime.cc
)
