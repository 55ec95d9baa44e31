# Use ccache for C, C++ and CUDA when it is installed: rebuilds on the 2-core machines are the norm.
find_program(ENVFORGE_CCACHE ccache)
if(ENVFORGE_CCACHE)
  set(CMAKE_C_COMPILER_LAUNCHER "${ENVFORGE_CCACHE}")
  set(CMAKE_CXX_COMPILER_LAUNCHER "${ENVFORGE_CCACHE}")
  set(CMAKE_CUDA_COMPILER_LAUNCHER "${ENVFORGE_CCACHE}")
endif()
