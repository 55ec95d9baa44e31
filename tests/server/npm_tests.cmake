# tests of the server with the official npm clients (tests/server/node_clients.h): the MCP
# TypeScript SDK and the MCP Inspector on /mcp, the openai package on /v1, each against the real
# `envforge serve` binary. They use what scripts/setup.sh installed into .cache/node-clients and
# skip, saying why, without it.
envforge_add_test(server_npm_test
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_mcp_npm_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_v1_npm_test.cc
  LIBS envforge_server envforge_agents
  LABELS integration
  TIMEOUT 600)
add_dependencies(server_npm_test envforge envforge-worker)
