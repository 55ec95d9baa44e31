// The native dialect's methods (contract in server/internal/native_dialect.h).
#include "server/internal/native_dialect.h"

#include <utility>

namespace envforge::server::internal {

using sandbox::EnvBundle;
using toolsets::Outcome;
using toolsets::ToolResult;

namespace {

// toolsets::ToJson(result) without copying the content (a tool's result may be large).
Json ResultJson(ToolResult result) {
  Json content = std::move(result.content);
  bool has_content = result.ok() || !content.is_null();
  result.content = nullptr;
  Json json = toolsets::ToJson(result);
  if (has_content) {
    json["content"] = std::move(content);
  } else {
    json.erase("content");
  }
  return json;
}

// The bundle's tasks as envs/get and tasks/list answer them: EnvBundle::ToJson's, each with its
// "task_version" beside "version" (the verifier's), so that a remote rollout records the same
// versions as a local one (server/remote_session_host.h).
Json TasksJson(const EnvBundle& bundle) {
  Json tasks = bundle.ToJson()["tasks"];
  for (size_t i = 0; i < bundle.tasks.size(); ++i) {
    tasks[i]["task_version"] = sandbox::TaskVersion(bundle.manifest.content_hash, bundle.tasks[i]);
  }
  return tasks;
}

RpcError UnknownEnv(const Status& status) {
  return MakeError(kRpcUnknownEnv, status.message(), Json{{"field", "params.env"}});
}

// session/submit's answer: the verdict when the verifier ran; otherwise an error that says whose
// fault it was (a dead session, a rejected answer, or the runtime: never a zero reward).
RpcReply VerdictReply(const ToolResult& result) {
  Json detail = {{"outcome", std::string(toolsets::OutcomeName(result.outcome))},
                 {"message", result.message},
                 {"session_alive", result.session_alive}};
  if (!result.limit.empty()) detail["limit"] = result.limit;
  switch (result.outcome) {
    case Outcome::kOk: {
      Json verdict = result.content.is_object() ? result.content : Json::object();
      verdict["outcome"] = "ok";
      return verdict;
    }
    case Outcome::kCrashed:
    case Outcome::kTimeout:
      return MakeError(kRpcSessionDead, "session died during submit: " + result.message, std::move(detail));
    case Outcome::kInvalidCall:
      return MakeError(kRpcInvalidParams, "submit rejected: " + result.message, std::move(detail));
    case Outcome::kToolError:
    case Outcome::kInfraError:
      return MakeError(kRpcInfraError, "the verdict could not be computed: " + result.message, std::move(detail));
  }
  return MakeError(kRpcInternalError, "unexpected submit outcome");
}

}  // namespace

const MethodTable<NativeDialect>& NativeDialect::Methods() {
  static const MethodTable<NativeDialect> methods = {
      {"ping", &NativeDialect::Ping},
      {"envs/list", &NativeDialect::EnvsList},
      {"envs/get", &NativeDialect::EnvsGet},
      {"tasks/list", &NativeDialect::TasksList},
      {"session/create", &NativeDialect::SessionCreate},
      {"tools/list", &NativeDialect::ToolsList},
      {"tools/call", &NativeDialect::ToolsCall},
      {"session/submit", &NativeDialect::SessionSubmit},
      {"session/reset", &NativeDialect::SessionReset},
      {"session/fork", &NativeDialect::SessionFork},
      {"session/close", &NativeDialect::SessionClose},
      {"server/stats", &NativeDialect::ServerStats},
  };
  return methods;
}

std::string NativeDialect::MetricLabel(const RpcRequest& request) const {
  return Methods().Has(request.method) ? request.method : "unknown";
}

void NativeDialect::Dispatch(RpcRequest& request, const RequestContext& context, Reply reply) {
  Methods().Call(*this, request, context, std::move(reply));
}

void NativeDialect::Ping(Json&, const RequestContext&, Reply reply) { reply(Json::object()); }

void NativeDialect::EnvsList(Json&, const RequestContext&, Reply reply) {
  Json envs = Json::array();
  for (const auto& id : sessions_.env_ids()) {
    const EnvBundle* bundle = sessions_.Environment(id);
    envs.push_back(Json{{"id", id},
                        {"name", bundle->manifest.name},
                        {"kind", bundle->manifest.kind},
                        {"category", bundle->manifest.category},
                        {"description", bundle->manifest.description},
                        {"tasks", bundle->tasks.size()},
                        {"version", bundle->manifest.content_hash}});
  }
  reply(Json{{"envs", std::move(envs)}});
}

void NativeDialect::EnvsGet(Json& params, const RequestContext& context, Reply reply) {
  std::string key;
  if (auto error = RequireString(params, "env", &key)) return reply(*error);
  auto bundle = sessions_.ResolveEnv(key);
  if (!bundle.ok()) return reply(UnknownEnv(bundle.status()));
  const auto& manifest = (*bundle)->manifest;
  reply(Json{{"id", manifest.content_hash},
             {"name", manifest.name},
             {"kind", manifest.kind},
             {"category", manifest.category},
             {"description", manifest.description},
             {"provenance", manifest.provenance},
             {"version", manifest.content_hash},
             {"tools", sessions_.ToolSpecsOf(**bundle, context.answer_written_as_text)},
             {"tasks", TasksJson(**bundle)}});
}

void NativeDialect::TasksList(Json& params, const RequestContext&, Reply reply) {
  std::string key;
  if (auto error = RequireString(params, "env", &key)) return reply(*error);
  auto bundle = sessions_.ResolveEnv(key);
  if (!bundle.ok()) return reply(UnknownEnv(bundle.status()));
  reply(Json{{"tasks", TasksJson(**bundle)}});
}

void NativeDialect::SessionCreate(Json& params, const RequestContext& context, Reply reply) {
  CreateRequest request;
  if (auto error = RequireString(params, "env", &request.env)) return reply(*error);
  if (auto error = OptionalString(params, "task", &request.task)) return reply(*error);
  if (auto error = OptionalInteger(params, "seed", &request.seed)) return reply(*error);
  if (auto error = OptionalObject(params, "limits", &request.limits)) return reply(*error);
  if (auto error = OptionalBool(params, "tools", &request.with_tools)) return reply(*error);
  request.answer_written_as_text = context.answer_written_as_text;
  sessions_.Create(std::move(request), context.peer, std::move(reply));
}

void NativeDialect::ToolsList(Json& params, const RequestContext& context, Reply reply) {
  std::string handle;
  std::string env;
  if (auto error = OptionalString(params, "session", &handle)) return reply(*error);
  if (auto error = OptionalString(params, "env", &env)) return reply(*error);
  const EnvBundle* bundle = nullptr;
  if (!handle.empty()) {
    auto lease = sessions_.Acquire(handle);
    if (!lease) return reply(UnknownSessionError(handle));
    bundle = sessions_.Environment(lease->entry()->env_id);
  } else if (!env.empty()) {
    auto resolved = sessions_.ResolveEnv(env);
    if (!resolved.ok()) return reply(MakeError(kRpcUnknownEnv, resolved.status().message()));
    bundle = *resolved;
  } else {
    return reply(InvalidParams("session", "params.session is required (a string; or params.env)"));
  }
  reply(Json{{"tools", sessions_.ToolSpecsOf(*bundle, context.answer_written_as_text)}});
}

void NativeDialect::ToolsCall(Json& params, const RequestContext&, Reply reply) {
  std::string handle;
  toolsets::ToolCall call;
  if (auto error = RequireString(params, "session", &handle)) return reply(*error);
  if (auto error = RequireString(params, "name", &call.name)) return reply(*error);
  if (auto error = TakeOptionalObject(params, "arguments", &call.arguments)) return reply(*error);
  if (auto error = OptionalString(params, "id", &call.id)) return reply(*error);
  if (sessions_.draining()) return reply(ShuttingDownError());
  auto lease = sessions_.Acquire(handle);
  if (!lease) return reply(UnknownSessionError(handle));
  // A crashed session answers its typed death here (the manager keeps it until it is closed);
  // trainers read the outcome, so even infra_error is a result, not an RPC error.
  sessions_.CallTool(std::move(lease), std::move(call),
                     Guard(reply, [reply](ToolResult result, int64_t) { reply(ResultJson(std::move(result))); }));
}

void NativeDialect::SessionSubmit(Json& params, const RequestContext&, Reply reply) {
  std::string handle;
  if (auto error = RequireString(params, "session", &handle)) return reply(*error);
  auto answer = params.find("answer");
  if (answer == params.end()) return reply(InvalidParams("answer", "params.answer is required (the answer text)"));
  std::string answer_text = answer->is_string() ? answer->get<std::string>() : DumpJson(*answer);
  // Submitting stays allowed while draining: it finishes an episode instead of starting work.
  auto lease = sessions_.Acquire(handle);
  if (!lease) return reply(UnknownSessionError(handle));
  toolsets::ToolCall call;
  call.id = "submit";
  call.name = std::string(toolsets::kSubmitResultTool);
  call.arguments = Json{{"answer_text", std::move(answer_text)}};
  sessions_.CallTool(std::move(lease), std::move(call),
                     Guard(reply, [reply](const ToolResult& result, int64_t) { reply(VerdictReply(result)); }));
}

void NativeDialect::SessionReset(Json& params, const RequestContext& context, Reply reply) {
  std::string handle;
  if (auto error = RequireString(params, "session", &handle)) return reply(*error);
  sessions_.Reset(handle, context.peer, context.answer_written_as_text, std::move(reply));
}

void NativeDialect::SessionFork(Json& params, const RequestContext& context, Reply reply) {
  std::string handle;
  if (auto error = RequireString(params, "session", &handle)) return reply(*error);
  sessions_.Fork(handle, context.peer, std::move(reply));
}

void NativeDialect::SessionClose(Json& params, const RequestContext&, Reply reply) {
  std::string handle;
  if (auto error = RequireString(params, "session", &handle)) return reply(*error);
  sessions_.Close(handle, std::move(reply));
}

void NativeDialect::ServerStats(Json&, const RequestContext&, Reply reply) {
  Json stats = sessions_.StatsJson();
  stats["envs"] = sessions_.env_ids().size();
  stats["in_flight"] = figures_.in_flight();
  stats["draining"] = sessions_.draining();
  stats["uptime_s"] = figures_.uptime_s();
  reply(std::move(stats));
}

}  // namespace envforge::server::internal
