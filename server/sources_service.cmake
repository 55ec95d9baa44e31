# server/ sources of the service area (rpc_service: dispatch; the native and MCP dialects; the
# session table), metrics, stdio.
list(APPEND ENVFORGE_SERVER_SOURCES
  metrics.cc
  rpc_service.cc
  stdio_server.cc
  internal/mcp_dialect.cc
  internal/mcp_mapping.cc
  internal/native_dialect.cc
  internal/rpc_dialect.cc
  internal/rpc_metrics.cc
  internal/rpc_protocol.cc
  internal/session_registry.cc
  internal/session_table.cc
)
