# server/ sources of the transport area (Beast HTTP/WebSocket server, client).
list(APPEND ENVFORGE_SERVER_SOURCES
  http_server.cc
  internal/http_connection.cc
  internal/http_shared.cc
  internal/request_policy.cc
  rpc_client.cc
  remote_session_host.cc  # the rollout loop's sessions on a server (agents/session_host.h)
)
