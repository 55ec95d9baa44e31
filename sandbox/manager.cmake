add_library(envforge_sandbox STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/wire.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/worker_locator.cc
)
target_compile_definitions(envforge_sandbox PRIVATE ENVFORGE_BUILD_BIN_DIR="${PROJECT_BINARY_DIR}/bin")
target_link_libraries(envforge_sandbox PUBLIC envforge_base envforge_toolsets envforge_sandbox_bundle)
envforge_target_warnings(envforge_sandbox)
