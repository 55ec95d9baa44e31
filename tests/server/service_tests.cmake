# tests of the server service area: RpcService (native + MCP dialects) over real worker sessions,
# metrics, and the stdio transport.
envforge_add_test(server_service_test
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/service_metrics_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/service_jsonrpc_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/service_native_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/service_mcp_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/service_concurrency_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/stdio_server_test.cc
  LIBS envforge_server
  LABELS integration
  TIMEOUT 180)
if(TARGET envforge-worker)
  add_dependencies(server_service_test envforge-worker)
endif()
# The load generator's answer reader (no server, no workers).
envforge_add_test(server_answer_head_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/answer_head_test.cc LIBS envforge_server)
