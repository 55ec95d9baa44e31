# tests of the inference model area: KV cache, sampler, the model forward against the numpy
# reference (tests/inference/reference_model.py), the generator; and `envforge generate` run as a
# user runs it (the real binary).
envforge_add_test(inference_model_test
  SOURCES model_kv_cache_test.cc model_sampler_test.cc model_forward_test.cc model_generator_test.cc
  LIBS envforge_inference
  LABELS unit python
  TIMEOUT 300)

envforge_add_test(inference_generate_cli_test
  SOURCES generate_cli_test.cc
  LIBS envforge_base envforge_kernels
  LABELS integration python
  TIMEOUT 300)
add_dependencies(inference_generate_cli_test envforge)

# The engine on the GPU against the CPU engine (GPU cases skip with a message without a device),
# plus device selection / CPU fallback and length-only caches, which run everywhere.
envforge_add_test(inference_cuda_engine_test
  SOURCES cuda_engine_test.cc
  LIBS envforge_inference
  LABELS unit python
  TIMEOUT 300)
# The same cases with the GPU engine and its kernels running in the host emulator (see
# tests/kernels/CMakeLists.txt): CudaForward against the CPU forward on the tiny models, in CI.
if(ENVFORGE_HAVE_CUDA)
  envforge_add_test(inference_cuda_engine_emulated_test
    SOURCES cuda_engine_test.cc
    LIBS envforge_inference
    LABELS unit python
    TIMEOUT 600)
  envforge_cuda_emulated_executable(inference_cuda_engine_emulated_test)
else()
  envforge_add_skipped_test(inference_cuda_engine_emulated_test "${ENVFORGE_NO_CUDA_REASON}")
endif()

# The Backend seam: scripted scripts, and the embedded backend's batching, prompt sharing,
# multi-turn cache reuse, stop strings and streaming on the tiny model; the batch engine's
# bookkeeping of followed prefills under churn.
envforge_add_test(inference_backend_test
  SOURCES backend_test.cc batch_engine_test.cc constrained_decoding_test.cc
  LIBS envforge_inference
  LABELS unit python
  TIMEOUT 300)
