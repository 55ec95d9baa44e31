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

# The aiohttp peer (bench/peers/aiohttp_env_server.py) under `envforge bench serve`, and
# `bench serve --compare` against it and a real `envforge serve`; skipped, saying why, when
# /usr/bin/python3 has no aiohttp.
envforge_add_test(server_peer_compare_test
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_peer_compare_test.cc
  LIBS envforge_server envforge_agents
  LABELS integration
  TIMEOUT 300)
add_dependencies(server_peer_compare_test envforge envforge-worker)

# A fleet behind HAProxy (scripts/fleet/haproxy.cfg.in): its own binary, so that the rest of the
# transport suite runs without haproxy's minute of load.
envforge_add_test(server_fleet_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/transport_fleet_test.cc
  LIBS envforge_server envforge_agents
  LABELS integration
  TIMEOUT 300)
add_dependencies(server_fleet_test envforge envforge-worker)

# The rollout loop on a server's sessions (server/remote_session_host.h): scripted and shipped-policy
# episodes over HTTP and WebSocket compared with local ones; expired sessions and a stopped server.
envforge_add_test(server_remote_rollout_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/transport_remote_rollout_test.cc
  LIBS envforge_server envforge_agents
  LABELS integration
  TIMEOUT 600)
add_dependencies(server_remote_rollout_test envforge-worker)
