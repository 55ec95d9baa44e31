// The Model Context Protocol face of the service (server/rpc_service.h, "MCP dialect"): protocol
// version negotiation, the tool descriptors MCP clients see, and the mapping of a typed
// toolsets::ToolResult onto an MCP CallToolResult. Pure functions over JSON; the service owns
// sessions and calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "toolsets/tool_protocol.h"

namespace envforge::server::internal {

// Newest first; kMcpProtocolVersions[0] is what an unknown (e.g. newer) client version gets.
inline const std::vector<std::string>& McpProtocolVersions() {
  static const std::vector<std::string> versions = {"2025-06-18", "2025-03-26", "2024-11-05"};
  return versions;
}
// The client's version when supported, else our latest.
std::string NegotiateProtocolVersion(std::string_view requested);

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
