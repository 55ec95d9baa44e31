# Owner: the session manager work. Asio stays inside the .cc files (the public headers
# session_manager.h and sandbox_limits.h do not include it), so dependents compile fast. Zygotes
# are launched with base/subprocess.h's SpawnProcess (no Boost.Process).
add_library(envforge_sandbox STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/sandbox_limits.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/session_manager.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/frame_channel.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/kernel_runner.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/code_runner.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/search_environment.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/search_runner.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/pidfd.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/session_channel.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/stderr_capture.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/wire.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/zygote_process.cc
)
target_link_libraries(envforge_sandbox
  PUBLIC envforge_base envforge_toolsets envforge_sandbox_bundle envforge_search
  PRIVATE envforge_sandbox_jupyter envforge_sandbox_code Boost::headers Threads::Threads)
envforge_target_warnings(envforge_sandbox)
