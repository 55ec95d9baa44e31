// MCP mapping of tool specs and typed tool results.
#include "server/internal/mcp_mapping.h"

#include <algorithm>
#include <utility>

namespace envforge::server::internal {

std::string NegotiateProtocolVersion(std::string_view requested) {
  const auto& versions = McpProtocolVersions();
  auto found = std::find(versions.begin(), versions.end(), requested);
  return found != versions.end() ? *found : versions.front();
}

bool IsSupportedProtocolVersion(std::string_view version) {
  const auto& versions = McpProtocolVersions();
  return std::find(versions.begin(), versions.end(), version) != versions.end();
}

std::string SupportedProtocolVersionsText() {
  std::string text;
  for (const auto& version : McpProtocolVersions()) text += (text.empty() ? "" : ", ") + version;
  return text;
}

namespace {
constexpr std::string_view kCursorPrefix = "envforge-offset-";
}  // namespace

McpPage PageOf(size_t total, size_t offset, size_t page_size) {
  McpPage page;
  page.begin = std::min(offset, total);
  page.end = page_size == 0 ? total : std::min(total, page.begin + page_size);
  if (page.end < total) page.next_cursor = std::string(kCursorPrefix) + std::to_string(page.end);
  return page;
}

Result<size_t> CursorOffset(std::string_view cursor, size_t total) {
  std::string_view digits = cursor.substr(std::min(cursor.size(), kCursorPrefix.size()));
  bool well_formed = cursor.rfind(kCursorPrefix, 0) == 0 && !digits.empty() && digits.size() <= 18 &&
                     std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  size_t offset = well_formed ? std::stoull(std::string(digits)) : 0;
  // We only hand out cursors pointing inside the listing, past its first page.
  if (!well_formed || offset == 0 || offset >= total) {
    return InvalidArgumentError("invalid cursor '" + std::string(cursor.substr(0, 100)) +
                                "': pass back a nextCursor of this listing unchanged");
  }
  return offset;
}

Json CreateSessionToolDescriptor() {
  return Json{
      {"name", std::string(kCreateSessionTool)},
      {"description",
       "Start an episode of an environment's task. Returns the session handle (pass it as "
       "arguments.session or _meta[\"envforge/session\"] to the environment's tools), the task "
       "prompt and the tool names."},
      {"inputSchema",
       {{"type", "object"},
        {"properties",
         {{"env", {{"type", "string"}, {"description", "environment id, id prefix or name"}}},
          {"task", {{"type", "string"}, {"description", "task id"}}},
          {"seed", {{"type", "integer"}}}}},
        {"required", Json::array({"env", "task"})}}},
  };
}

Json CloseSessionToolDescriptor() {
  return Json{
      {"name", std::string(kCloseSessionTool)},
      {"description", "End an episode and free its session."},
      {"inputSchema",
       {{"type", "object"},
        {"properties", {{"session", {{"type", "string"}, {"description", "the session handle"}}}}},
        {"required", Json::array({"session"})}}},
  };
}

std::string McpToolPrefix(std::string_view env_name) {
  std::string prefix(env_name);
  for (char& c : prefix) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) c = '_';
  }
  return prefix + "__";
}

Json McpToolDescriptor(const toolsets::ToolSpec& spec) {
  return Json{{"name", spec.name}, {"description", spec.description}, {"inputSchema", spec.input_schema}};
}

Json McpSessionlessToolDescriptor(const toolsets::ToolSpec& spec, std::string_view env_name) {
  Json schema = spec.input_schema.is_object() ? spec.input_schema : Json{{"type", "object"}};
  if (!schema.contains("properties") || !schema["properties"].is_object()) schema["properties"] = Json::object();
  schema["properties"]["session"] = {{"type", "string"},
                                     {"description", "the episode's session handle (envforge_create_session)"}};
  if (!schema.contains("required") || !schema["required"].is_array()) schema["required"] = Json::array();
  schema["required"].push_back("session");
  return Json{{"name", McpToolPrefix(env_name) + spec.name},
              {"description", "[" + std::string(env_name) + "] " + spec.description},
              {"inputSchema", std::move(schema)}};
}

Json McpCallToolResult(const toolsets::ToolResult& result, Json meta) {
  if (!meta.is_object()) meta = Json::object();
  meta["envforge/outcome"] = std::string(toolsets::OutcomeName(result.outcome));
  meta["envforge/session_alive"] = result.session_alive;
  meta["envforge/duration_us"] = result.duration_us;
  if (!result.limit.empty()) meta["envforge/limit"] = result.limit;
  if (result.ok()) {
    std::string text = result.content.is_string() ? result.content.get<std::string>() : DumpJson(result.content);
    Json structured = result.content.is_object() ? result.content : Json(nullptr);
    return McpTextResult(std::move(text), false, std::move(structured), std::move(meta));
  }
  return McpTextResult(result.message, true, nullptr, std::move(meta));
}

Json McpTextResult(std::string text, bool is_error, Json structured, Json meta) {
  Json out = {{"content", Json::array({Json{{"type", "text"}, {"text", std::move(text)}}})}, {"isError", is_error}};
  if (!structured.is_null()) out["structuredContent"] = std::move(structured);
  if (!meta.is_null()) out["_meta"] = std::move(meta);
  return out;
}

}  // namespace envforge::server::internal
