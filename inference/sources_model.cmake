# inference/ sources of the model area (relative to inference/).
list(APPEND ENVFORGE_INFERENCE_SOURCES
  kv_cache.cc
  model.cc
  sampler.cc
  generator.cc
)

# The GPU engine (CudaForward and its device page pool), built with the CUDA kernels as its own
# library (and again for the host emulator); see inference/CMakeLists.txt.
set(ENVFORGE_INFERENCE_CUDA_SOURCES
  cuda_forward.cu
  device_page_pool.cu
)
