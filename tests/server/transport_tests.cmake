# tests of the server transport area: HttpServer (HTTP + WebSocket + MCP route), RpcClient, and the
# serve / bench serve commands, over real sockets on 127.0.0.1 and real worker sessions.
envforge_add_test(server_transport_test
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_http_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_ws_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_cli_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_depth_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_admission_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_interpreter_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_ui_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_ui_runs_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_ui_replay_test.cc
  LIBS envforge_server envforge_agents
  LABELS integration
  TIMEOUT 300)
add_dependencies(server_transport_test envforge envforge-worker)
