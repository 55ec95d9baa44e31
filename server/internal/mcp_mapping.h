// The Model Context Protocol shapes of the service (server/rpc_service.h, "MCP dialect"): protocol
// version negotiation, the tool descriptors MCP clients see, and the mapping of a typed
// toolsets::ToolResult onto an MCP CallToolResult. Pure functions over JSON; the MCP dialect
// (server/internal/mcp_dialect.h) uses them, the session table owns sessions and calls.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "toolsets/tool_protocol.h"

namespace envforge::server::internal {

// Newest first; McpProtocolVersions()[0] is what an unknown (e.g. newer) client version gets.
// What the server does differs little between them, since it offers tools only, over plain JSON
// responses (no SSE stream, no server-to-client requests): 2025-06-18 added structuredContent
// and the MCP-Protocol-Version header (server/http_server.h), 2025-11-25 the optional
// Implementation.description (sent only to clients that negotiated it) and asks that argument
// validation failures be tool results with isError, which the typed invalid_call outcome already
// is. Batches (removed in 2025-06-18) are still answered, for older clients.
inline const std::vector<std::string>& McpProtocolVersions() {
  static const std::vector<std::string> versions = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
  return versions;
}
inline constexpr std::string_view kMcpLatestVersion = "2025-11-25";
// The client's version when supported, else our latest.
std::string NegotiateProtocolVersion(std::string_view requested);
bool IsSupportedProtocolVersion(std::string_view version);
// "2025-11-25, 2025-06-18, ..." (for error messages).
std::string SupportedProtocolVersionsText();

// tools/list pagination. A cursor is opaque to clients; ours names the offset of the next page.
// A listing of `total` items from `offset`: at most page_size of them (0: no limit), and the
// cursor of the rest when there is a rest.
struct McpPage {
  size_t begin = 0;
  size_t end = 0;
  std::optional<std::string> next_cursor;
};
McpPage PageOf(size_t total, size_t offset, size_t page_size);
// The offset a cursor of ours names; InvalidArgument for anything we did not hand out for a
// listing of `total` items (garbage, or an offset past its end).
Result<size_t> CursorOffset(std::string_view cursor, size_t total);

// The two tools only the MCP dialect has.
inline constexpr std::string_view kCreateSessionTool = "envforge_create_session";
inline constexpr std::string_view kCloseSessionTool = "envforge_close_session";
// The key of params._meta naming the episode.
inline constexpr std::string_view kSessionMetaKey = "envforge/session";
Json CreateSessionToolDescriptor();
Json CloseSessionToolDescriptor();

// "<env name>__": env names reduced to MCP's tool-name alphabet ([A-Za-z0-9_.-]).
std::string McpToolPrefix(std::string_view env_name);
// {name, description, inputSchema}.
Json McpToolDescriptor(const toolsets::ToolSpec& spec);
// The spec for a listing without a session: prefixed name, and a required "session" string added
// to the schema (the handle an MCP client passes in arguments.session).
Json McpSessionlessToolDescriptor(const toolsets::ToolSpec& spec, std::string_view env_name);

// A CallToolResult for every outcome but infra_error (which is a JSON-RPC error): ok -> the
// content as text (a string as itself, anything else as JSON text) plus structuredContent when
// the content is an object; tool_error / invalid_call / timeout / crashed -> isError with the
// message. `meta` becomes _meta, with envforge/outcome, envforge/session_alive,
// envforge/duration_us and envforge/limit (when set) added.
Json McpCallToolResult(const toolsets::ToolResult& result, Json meta);
// A CallToolResult of the service's own tools: text, optional structuredContent, isError.
Json McpTextResult(std::string text, bool is_error, Json structured = nullptr, Json meta = nullptr);

}  // namespace envforge::server::internal
