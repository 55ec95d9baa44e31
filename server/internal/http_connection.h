// One accepted TCP connection of the HTTP server: HTTP/1.1 keep-alive request handling and, after
// an upgrade on /ws, the WebSocket message loop (server/http_server.h has the routes and rules).
// Only http_server.cc includes this header; it is where Beast's connection code lives.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <memory>

#include "server/internal/http_shared.h"

namespace envforge::server::internal {

// Takes over `socket` (whose executor must be a strand of the server's io_context), registers
// the connection in `shared` and starts reading. Never throws.
void StartHttpConnection(std::shared_ptr<TransportShared> shared, boost::asio::ip::tcp::socket socket);

}  // namespace envforge::server::internal
