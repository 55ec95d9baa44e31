// The MCP dialect's methods (contract in server/internal/mcp_dialect.h).
#include "server/internal/mcp_dialect.h"

#include <optional>
#include <utility>

#include "server/internal/mcp_mapping.h"

namespace envforge::server::internal {

using sandbox::EnvBundle;
using toolsets::Outcome;
using toolsets::ToolResult;

namespace {

constexpr const char* kServerVersion = "0.1.0";

bool IsNotification(const std::string& method) { return method.rfind("notifications/", 0) == 0; }

// MCP's "unknown tool" protocol error; the same whether or not a session is named.
RpcError UnknownTool(const std::string& name) {
  return InvalidParams("name", "unknown tool '" + name + "' (tools/list names every tool)");
}

// The episode an MCP request names: params._meta["envforge/session"], else params.session.
std::optional<RpcError> SessionFromMeta(const Json& params, std::string* handle) {
  auto meta = params.find("_meta");
  if (meta != params.end() && !meta->is_null()) {
    if (!meta->is_object()) return InvalidParams("_meta", "params._meta must be an object");
    auto session = meta->find(kSessionMetaKey);
    if (session != meta->end() && !session->is_null()) {
      if (!session->is_string()) {
        return InvalidParams("_meta.envforge/session", "params._meta[\"envforge/session\"] must be a string");
      }
      *handle = session->get<std::string>();
      return std::nullopt;
    }
  }
  return OptionalString(params, "session", handle);
}

// The episode of a tools/call: _meta or params.session, else arguments.session.
std::optional<RpcError> SessionOfCall(const Json& params, const Json& arguments, std::string* handle) {
  if (auto error = SessionFromMeta(params, handle)) return error;
  if (!handle->empty() || !arguments.contains("session")) return std::nullopt;
  if (!arguments["session"].is_string()) {
    return InvalidParams("arguments.session", "params.arguments.session must be a string");
  }
  *handle = arguments["session"].get<std::string>();
  return std::nullopt;
}

// A CallToolResult of an environment's tool, or the retryable error of an infra_error: not the
// agent's fault, so never a tool result a trainer could score.
RpcReply ToolReply(const ToolResult& result, int64_t step, const std::string& handle, const std::string& episode) {
  if (result.outcome == Outcome::kInfraError) {
    return MakeError(kRpcInfraError, "infrastructure error: " + result.message,
                     Json{{"outcome", "infra_error"}, {"session", handle}, {"session_alive", result.session_alive}});
  }
  Json meta = {{"envforge/session", handle}, {"envforge/step", step}};
  if (!episode.empty()) meta["envforge/trajectory"] = episode;
  return McpCallToolResult(result, std::move(meta));
}

// One page of a tools/list answer, from the start or from `cursor` (-32602 when it is not one we
// handed out for this listing).
RpcReply ToolsPage(Json tools, const std::string* cursor, size_t page_size) {
  size_t offset = 0;
  if (cursor != nullptr) {
    auto parsed = CursorOffset(*cursor, tools.size());
    if (!parsed.ok()) return InvalidParams("cursor", parsed.status().message());
    offset = *parsed;
  }
  McpPage page = PageOf(tools.size(), offset, page_size);
  Json listed = Json::array();
  for (size_t index = page.begin; index < page.end; ++index) listed.push_back(std::move(tools[index]));
  Json result = {{"tools", std::move(listed)}};
  if (page.next_cursor) result["nextCursor"] = *page.next_cursor;
  return result;
}

}  // namespace

const MethodTable<McpDialect>& McpDialect::Methods() {
  static const MethodTable<McpDialect> methods = {
      {"initialize", &McpDialect::Initialize},
      {"ping", &McpDialect::Ping},
      {"tools/list", &McpDialect::ToolsList},
      {"tools/call", &McpDialect::ToolsCall},
  };
  return methods;
}

std::string McpDialect::MetricLabel(const RpcRequest& request) const {
  if (Methods().Has(request.method)) return request.method;
  return IsNotification(request.method) ? "notifications" : "unknown";
}

void McpDialect::Dispatch(RpcRequest& request, const RequestContext& context, Reply reply) {
  if (!Methods().Has(request.method) && IsNotification(request.method)) {
    if (request.notification) return reply(Json::object());
    return reply(MakeError(kRpcMethodNotFound,
                           "method not found: '" + request.method + "' is a notification; send it without an id"));
  }
  Methods().Call(*this, request, context, std::move(reply));
}

void McpDialect::Initialize(Json& params, const RequestContext&, Reply reply) {
  std::string requested;
  if (auto error = OptionalString(params, "protocolVersion", &requested)) return reply(*error);
  std::string version = NegotiateProtocolVersion(requested);
  Json server_info = {{"name", "envforge"}, {"version", kServerVersion}};
  // Implementation.description exists from 2025-11-25 on; older clients get what they know.
  if (version == kMcpLatestVersion) {
    server_info["description"] = "Agentic RL environments: start an episode, call its tools, submit an answer.";
  }
  reply(Json{
      {"protocolVersion", std::move(version)},
      {"capabilities", {{"tools", {{"listChanged", false}}}}},
      {"serverInfo", std::move(server_info)},
      {"instructions",
       "Call envforge_create_session {env, task} to start an episode; pass the returned session "
       "handle as _meta[\"envforge/session\"] or arguments.session to the environment's tools; "
       "submit with submit_result {answer_text}."},
  });
}

void McpDialect::Ping(Json&, const RequestContext&, Reply reply) { reply(Json::object()); }

void McpDialect::ToolsList(Json& params, const RequestContext&, Reply reply) {
  std::string handle;
  std::string cursor;
  if (auto error = SessionFromMeta(params, &handle)) return reply(*error);
  if (auto error = OptionalString(params, "cursor", &cursor)) return reply(*error);
  bool has_cursor = params.contains("cursor") && !params["cursor"].is_null();
  Json tools = Json::array();
  if (handle.empty()) {
    for (const auto& id : sessions_.env_ids()) {
      const EnvBundle* bundle = sessions_.Environment(id);
      for (const auto& tool : bundle->tools)
        tools.push_back(McpSessionlessToolDescriptor(tool.spec, bundle->manifest.name));
    }
  } else {
    auto lease = sessions_.Acquire(handle);
    if (!lease) return reply(UnknownSessionError(handle));
    for (const auto& tool : sessions_.Environment(lease->entry()->env_id)->tools) {
      tools.push_back(McpToolDescriptor(tool.spec));
    }
  }
  tools.push_back(CreateSessionToolDescriptor());
  tools.push_back(CloseSessionToolDescriptor());
  reply(ToolsPage(std::move(tools), has_cursor ? &cursor : nullptr, page_size_));
}

void McpDialect::ToolsCall(Json& params, const RequestContext& context, Reply reply) {
  std::string name;
  Json arguments = Json::object();
  if (auto error = RequireString(params, "name", &name)) return reply(*error);
  if (auto error = OptionalObject(params, "arguments", &arguments)) return reply(*error);
  if (name == kCreateSessionTool) return CreateSessionTool(arguments, context, std::move(reply));

  std::string handle;
  if (auto error = SessionOfCall(params, arguments, &handle)) return reply(*error);
  // The handle is the service's, never the tool's.
  arguments.erase("session");
  if (name == kCloseSessionTool) return CloseSessionTool(handle, std::move(reply));
  if (handle.empty()) {
    if (!ToolExists(name, nullptr)) return reply(UnknownTool(name));
    return reply(InvalidParams("_meta.envforge/session",
                               "no session: pass params._meta[\"envforge/session\"] or arguments.session "
                               "(create one with envforge_create_session)"));
  }
  EnvironmentTool(std::move(name), std::move(arguments), handle, std::move(reply));
}

void McpDialect::CreateSessionTool(const Json& arguments, const RequestContext& context, Reply reply) {
  CreateRequest request;
  // Argument problems go back to the model as a tool error it can correct.
  std::optional<RpcError> error = RequireString(arguments, "env", &request.env);
  if (!error) error = RequireString(arguments, "task", &request.task);
  if (!error) error = OptionalInteger(arguments, "seed", &request.seed);
  if (!error) error = OptionalObject(arguments, "limits", &request.limits);
  if (error) return reply(McpTextResult("arguments: " + error->message, true));
  sessions_.Create(std::move(request), context.peer, [reply](RpcReply created) {
    if (auto* failure = std::get_if<RpcError>(&created)) {
      if (failure->code == kRpcInvalidParams || failure->code == kRpcUnknownEnv) {
        return reply(McpTextResult(failure->message, true));
      }
      return reply(std::move(*failure));
    }
    Json session = std::get<Json>(std::move(created));
    Json meta = {{"envforge/session", session["session"]}, {"envforge/trajectory", session["trajectory"]}};
    reply(McpTextResult(DumpJson(session), false, session, std::move(meta)));
  });
}

void McpDialect::CloseSessionTool(const std::string& handle, Reply reply) {
  if (handle.empty()) return reply(McpTextResult("arguments.session is required", true));
  sessions_.Close(handle, [reply, handle](RpcReply closed) {
    if (auto* failure = std::get_if<RpcError>(&closed)) return reply(std::move(*failure));
    reply(McpTextResult("closed " + handle, false, nullptr, Json{{"envforge/session", handle}}));
  });
}

void McpDialect::EnvironmentTool(std::string name, Json arguments, const std::string& handle, Reply reply) {
  if (sessions_.draining()) return reply(ShuttingDownError());
  auto lease = sessions_.Acquire(handle);
  if (!lease) return reply(UnknownSessionError(handle));
  const EnvBundle* bundle = sessions_.Environment(lease->entry()->env_id);
  // Unknown names are the same protocol error as without a session: the call never reaches the
  // episode (and is not one of its steps).
  if (!ToolExists(name, bundle)) return reply(UnknownTool(name));
  std::string prefix = McpToolPrefix(bundle->manifest.name);
  if (name.rfind(prefix, 0) == 0) name.erase(0, prefix.size());
  toolsets::ToolCall call;
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  std::string episode = lease->entry()->episode_id;
  sessions_.CallTool(std::move(lease), std::move(call),
                     Guard(reply, [reply, handle, episode](const ToolResult& result, int64_t step) {
                       reply(ToolReply(result, step, handle, episode));
                     }));
}

bool McpDialect::ToolExists(const std::string& name, const EnvBundle* bundle) const {
  if (name == kCreateSessionTool || name == kCloseSessionTool) return true;
  auto listed_in = [&name](const EnvBundle& env) {
    if (env.FindTool(name) != nullptr) return true;
    std::string prefix = McpToolPrefix(env.manifest.name);
    return name.rfind(prefix, 0) == 0 && env.FindTool(name.substr(prefix.size())) != nullptr;
  };
  if (bundle != nullptr) return listed_in(*bundle);
  for (const auto& id : sessions_.env_ids()) {
    if (listed_in(*sessions_.Environment(id))) return true;
  }
  return false;
}

}  // namespace envforge::server::internal
