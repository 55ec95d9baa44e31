// The header checks of the HTTP server that keep web pages out (server/http_server.h, "Origin"):
// which Origin values are allowed and which Content-Type a JSON-RPC POST must carry.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace envforge::server::internal {

// An allow-list entry as the server compares it: "scheme://host[:port]" lower-cased, without a
// trailing '/'. InvalidArgument (naming the value) for anything else: a path, a query, a missing
// scheme or host, "null", "*".
Result<std::string> NormalizeAllowedOrigin(std::string_view origin);

// True for a loopback origin (http or https; localhost, 127.0.0.1 or [::1]; any port) and for
// an origin equal (case-insensitively) to an entry of `allowed` (entries normalised as above).
bool IsAllowedOrigin(std::string_view origin, const std::vector<std::string>& allowed);

// True when the media type is application/json, whatever its parameters ("; charset=utf-8").
bool IsJsonContentType(std::string_view content_type);

}  // namespace envforge::server::internal
