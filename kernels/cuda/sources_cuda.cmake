# kernels/cuda/: one file pair per op (header = contract, .cu = kernels + host launch code).
set(ENVFORGE_KERNELS_CUDA_SOURCES
  cuda/device_runtime.cc
  # DSA kernels
  cuda/indexer_logits.cu
  cuda/hadamard_quant.cu
  cuda/topk.cu
  cuda/sparse_mla.cu
  cuda/gemm.cc
  cuda/internal/cublas_library.cc
  # engine glue
  cuda/norm.cu
  cuda/rope.cu
  cuda/elementwise.cu
  cuda/moe_routing.cu
  cuda/act_quant.cu
  # GPU engine (inference/cuda_forward): paged caches and row glue
  cuda/page_table.cu
  cuda/engine_rows.cu
  # benchmarks
  cuda/kernel_bench.cu
)
