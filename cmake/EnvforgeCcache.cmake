# Use ccache for C, C++ and CUDA when it is installed: rebuilds on the 2-core machines are the norm.
# CCACHE_BASEDIR + NOHASHDIR make the cache independent of where the checkout lives, so a fresh
# clone (CI, a second worktree) reuses the objects of another one.
find_program(ENVFORGE_CCACHE ccache)
if(ENVFORGE_CCACHE)
  set(ENVFORGE_CCACHE_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1
      ${ENVFORGE_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${ENVFORGE_CCACHE_LAUNCHER})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${ENVFORGE_CCACHE_LAUNCHER})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${ENVFORGE_CCACHE_LAUNCHER})
endif()
