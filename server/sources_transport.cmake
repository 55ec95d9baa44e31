# server/ sources of the transport area (Beast HTTP/WebSocket server, client).
list(APPEND ENVFORGE_SERVER_SOURCES)
