# server/ sources of the service area (rpc_service, metrics, mcp, stdio).
list(APPEND ENVFORGE_SERVER_SOURCES metrics.cc)
