// The MCP dialect of the service: the methods an MCP client calls over POST /mcp or stdio
// (server/rpc_service.h, "MCP dialect"). Shapes come from server/internal/mcp_mapping.h; the
// episodes live in the SessionTable. A tool's own failures (tool_error, invalid_call, timeout,
// crashed) are CallToolResults with isError for the model to read; only infra_error, which is
// never the agent's fault, is a JSON-RPC error.
#pragma once

#include <string>

#include "server/internal/rpc_dialect.h"
#include "server/internal/session_table.h"

namespace envforge::server::internal {

class McpDialect : public RpcDialect {
 public:
  // tools/list answers at most `page_size` tools per page (0: all at once).
  McpDialect(SessionTable& sessions, size_t page_size) : sessions_(sessions), page_size_(page_size) {}

  // Notifications ("notifications/...") are pooled under "notifications", anything else unknown
  // under "unknown".
  std::string MetricLabel(const RpcRequest& request) const override;
  // Notifications are accepted and ignored (answered with an empty result, which a notification
  // never sends). A request (with an id) whose method starts with "notifications/" is -32601:
  // those names are notifications only.
  void Dispatch(RpcRequest& request, const RequestContext& context, Reply reply) override;

 private:
  void Initialize(Json& params, const RequestContext& context, Reply reply);
  void Ping(Json& params, const RequestContext& context, Reply reply);
  void ToolsList(Json& params, const RequestContext& context, Reply reply);
  void ToolsCall(Json& params, const RequestContext& context, Reply reply);
  // The service's own tools.
  void CreateSessionTool(const Json& arguments, const RequestContext& context, Reply reply);
  void CloseSessionTool(const std::string& handle, Reply reply);
  // A tool of the session's environment (`name` with or without the listing's prefix).
  void EnvironmentTool(std::string name, Json arguments, const std::string& handle, Reply reply);
  // Whether a tools/call name exists: one of the service's tools, or a tool of `bundle` (the
  // session's environment; nullptr without a session: of any environment), plain or under its
  // sessionless listing name "<env>__<tool>". Without a session a plain name is known too: what
  // such a call lacks is the session, and its error says so.
  bool ToolExists(const std::string& name, const sandbox::EnvBundle* bundle) const;

  static const MethodTable<McpDialect>& Methods();

  SessionTable& sessions_;
  const size_t page_size_;
};

}  // namespace envforge::server::internal
