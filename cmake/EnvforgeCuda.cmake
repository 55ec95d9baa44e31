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

# ENVFORGE_EMULATOR_ASAN (default ON when the C++ compiler can build and link AddressSanitizer
# with its fiber-switch annotations): the emulated libraries and the executables that run them
# (envforge_cuda_emulated_executable) are built with -fsanitize=address, so a kernel's read or write
# outside its device allocations is reported with its source line (kernels/cuda/emulation/emulator.h,
# "Out-of-bounds reads and writes"). Nothing else changes: the real CUDA build and other targets
# keep their flags. Frame pointers keep ASan's fast unwinder working on the fiber stacks.
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS -fsanitize=address)
set(CMAKE_REQUIRED_LINK_OPTIONS -fsanitize=address)
set(CMAKE_REQUIRED_QUIET ON)
check_cxx_source_compiles([[
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
int main() {
  static char bytes[16];
  ASAN_POISON_MEMORY_REGION(bytes + 8, 8);
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
  return bytes[0];
}]] ENVFORGE_COMPILER_HAS_ASAN)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
unset(CMAKE_REQUIRED_QUIET)
option(ENVFORGE_EMULATOR_ASAN "Build the CUDA emulator's libraries and test executables with AddressSanitizer"
  ${ENVFORGE_COMPILER_HAS_ASAN})
if(ENVFORGE_EMULATOR_ASAN AND NOT ENVFORGE_COMPILER_HAS_ASAN)
  message(FATAL_ERROR "ENVFORGE_EMULATOR_ASAN=ON but ${CMAKE_CXX_COMPILER} cannot build and link -fsanitize=address")
endif()
set(ENVFORGE_EMULATOR_ASAN_FLAGS -fsanitize=address -fno-omit-frame-pointer)

# envforge_cuda_emulated_library(name SOURCES ...): the same CUDA sources built by g++ for the host
# emulator (kernels/cuda/emulation/): every .cu is compiled through a generated one-line .cc that
# includes it, with ENVFORGE_CUDA_EMULATION=1, so the kernels run as fibers on the CPU in the
# *_emulated test suites. Other sources (.cc) are compiled as they are.
function(envforge_cuda_emulated_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  set(_sources)
  foreach(_source IN LISTS ARG_SOURCES)
    get_filename_component(_absolute "${_source}" ABSOLUTE)
    if(_source MATCHES "\\.cu$")
      file(RELATIVE_PATH _relative "${PROJECT_SOURCE_DIR}" "${_absolute}")
      string(REPLACE "/" "_" _flat "${_relative}")
      set(_wrapper "${CMAKE_CURRENT_BINARY_DIR}/emulated/${_flat}.cc")
      file(CONFIGURE OUTPUT "${_wrapper}" CONTENT "#include \"${_relative}\"\n")
      list(APPEND _sources "${_wrapper}")
    else()
      list(APPEND _sources "${_absolute}")
    endif()
  endforeach()
  add_library(${name} STATIC ${_sources})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PUBLIC ENVFORGE_CUDA_EMULATION=1)
  # GPU code under g++: CUDA's host headers annotate with attributes g++ does not know.
  target_compile_options(${name} PRIVATE -Wno-attributes -Wno-unused-parameter)
  # Every typed access at an address its type's alignment does not divide (a float4 load from a
  # float-aligned pointer) is a misaligned-address fault on the GPU: UBSan's alignment check makes
  # it one here too (abort with the source line), including plain vector loads the emulator's own
  # intrinsic checks cannot see.
  target_compile_options(${name} PRIVATE -fsanitize=alignment -fno-sanitize-recover=alignment)
  target_link_options(${name} INTERFACE -fsanitize=alignment)
  # ENVFORGE_EMULATOR_ASAN: out-of-bounds reads and writes (see the option above). The link
  # option travels to whatever executable links the library, which needs ASan's runtime.
  if(ENVFORGE_EMULATOR_ASAN)
    target_compile_options(${name} PRIVATE ${ENVFORGE_EMULATOR_ASAN_FLAGS})
    target_link_options(${name} INTERFACE -fsanitize=address)
  endif()
  target_link_libraries(${name} PUBLIC envforge_base CUDA::toolkit)
endfunction()

# envforge_cuda_emulated_executable(target): `target` runs the kernels in the host emulator (it
# links the emulated libraries through envforge_cuda_backend), and its own sources get the
# emulator's sanitizer flags (ENVFORGE_EMULATOR_ASAN), so test code touching device memory is
# checked too.
function(envforge_cuda_emulated_executable target)
  set_target_properties(${target} PROPERTIES ENVFORGE_CUDA_EMULATION ON)
  if(ENVFORGE_EMULATOR_ASAN)
    target_compile_options(${target} PRIVATE ${ENVFORGE_EMULATOR_ASAN_FLAGS})
    target_link_options(${target} PRIVATE -fsanitize=address)
  endif()
endfunction()

# envforge_cuda_backend(consumer real emulated): consumer links `real`, except in targets with the
# property ENVFORGE_CUDA_EMULATION set, which link `emulated` instead (the genex is evaluated for
# the final binary, so a test opts into the emulator with one property).
function(envforge_cuda_backend consumer real emulated)
  target_link_libraries(${consumer} PUBLIC
    "$<IF:$<BOOL:$<TARGET_PROPERTY:ENVFORGE_CUDA_EMULATION>>,${emulated},${real}>")
endfunction()
