# server/ sources of the service area (rpc_service, metrics, mcp, stdio).
list(APPEND ENVFORGE_SERVER_SOURCES
  metrics.cc
  rpc_service.cc
  stdio_server.cc
  internal/mcp_dialect.cc
  internal/rpc_protocol.cc
  internal/session_registry.cc
)
