# ENVFORGE_CUDA: AUTO turns CUDA on when nvcc is found; ON requires it; OFF never builds CUDA code.
# The kernels target Hopper: ENVFORGE_CUDA_ARCHITECTURES defaults to "90", which CMake turns into
# sm_90 machine code plus compute_90 PTX (the fallback a newer GPU's driver JIT-compiles). It is
# set before enable_language so the compiler's own default (e.g. sm_75) never wins.
set(ENVFORGE_HAVE_CUDA OFF)
set(ENVFORGE_CUDA_ARCHITECTURES "90" CACHE STRING "CUDA architectures of the kernels (CMake syntax)")
if(NOT ENVFORGE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(_envforge_nvcc nvcc PATHS /usr/local/cuda/bin /usr/lib/cuda/bin NO_CACHE)
    if(_envforge_nvcc)
      set(CMAKE_CUDA_COMPILER "${_envforge_nvcc}")
    endif()
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES "${ENVFORGE_CUDA_ARCHITECTURES}")
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CUDA targets inherit CXX_STANDARD 20; CMake 3.25 does not know nvcc 13's flag for it.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(ENVFORGE_HAVE_CUDA ON)
  elseif(ENVFORGE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ENVFORGE_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
message(STATUS "envforge: CUDA kernels ${ENVFORGE_HAVE_CUDA} (architectures ${ENVFORGE_CUDA_ARCHITECTURES})")

# envforge_cuda_target(target): the nvcc flags every CUDA translation unit of the project uses.
function(envforge_cuda_target target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo -Xcompiler=-Wall>)
endfunction()
