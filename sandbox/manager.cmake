# Owner: the session manager work.
add_library(envforge_sandbox STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/wire.cc
)
target_link_libraries(envforge_sandbox PUBLIC envforge_base envforge_toolsets envforge_sandbox_bundle)
envforge_target_warnings(envforge_sandbox)
