# Owner: the session manager work. The suites drive the real envforge-worker (built alongside).
envforge_add_test(sandbox_manager_test
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_limits_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_session_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_fault_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_fork_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_frame_channel_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_judge_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_depth_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_wire_abuse_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_interpreter_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_warm_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_gate_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_recycle_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/manager_pidfd_watch_test.cc
  LIBS envforge_sandbox Boost::headers
  LABELS integration
  TIMEOUT 180)
if(TARGET envforge-worker)
  add_dependencies(sandbox_manager_test envforge-worker)
endif()
