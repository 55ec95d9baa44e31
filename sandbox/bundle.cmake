# Owner: the bundle work (env_bundle.*, env_pack.*). worker_locator is here because packing runs
# `envforge-worker analyze`.
add_library(envforge_sandbox_bundle STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/env_bundle.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/env_pack.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/worker_locator.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/search_bundle.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/search_synth_bundle.cc
)
target_compile_definitions(envforge_sandbox_bundle PRIVATE ENVFORGE_BUILD_BIN_DIR="${PROJECT_BINARY_DIR}/bin")
target_link_libraries(envforge_sandbox_bundle PUBLIC envforge_base envforge_toolsets envforge_search)
envforge_target_warnings(envforge_sandbox_bundle)
