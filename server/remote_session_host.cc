// RemoteSessionHost: the loop's sessions over JSON-RPC (contract in server/remote_session_host.h).
#include "server/remote_session_host.h"

#include <mutex>
#include <utility>
#include <vector>

#include "base/error_table.h"
#include "sandbox/sandbox_limits.h"

namespace envforge::server {

using toolsets::Outcome;
using toolsets::ToolResult;

namespace internal {

// Idle clients to the server, shared by the host and its sessions.
class RpcClientPool {
 public:
  RpcClientPool(std::string url, RemoteSessionHostOptions options)
      : url_(std::move(url)), options_(std::move(options)) {}

  // An idle client, or a new connection.
  Result<std::unique_ptr<RpcClient>> Take() {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        std::unique_ptr<RpcClient> client = std::move(idle_.back());
        idle_.pop_back();
        return client;
      }
    }
    // Connecting outside the lock: it may take up to the timeout.
    return RpcClient::Connect(url_, options_.client);
  }

  // A client whose last call failed reconnects on its next one (RpcClient), so every client is
  // worth keeping.
  void Give(std::unique_ptr<RpcClient> client) {
    if (client != nullptr) client->PinSession("");  // its next session may live on any server
    std::lock_guard lock(mutex_);
    if (client != nullptr && idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(client));
  }

  const std::string& url() const { return url_; }

 private:
  const std::string url_;
  const RemoteSessionHostOptions options_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<RpcClient>> idle_;  // guarded by mutex_
};

}  // namespace internal

using internal::RpcClientPool;

namespace {

// A failed call as a Status naming the server and the method; the JSON-RPC error's code maps as
// base/error_table.h says (-32002 NotFound, -32003 ResourceExhausted, ...).
Status CallStatus(const RpcReply& reply, const std::string& url, const std::string& method) {
  if (!reply.transport.ok()) {
    return Status(reply.transport.code(),
                  "no answer from envforge serve at " + url + " to " + method + ": " + reply.transport.message());
  }
  return Status(StatusCodeForRpcError(reply.error->code), "envforge serve at " + url + " answered " + method +
                                                              " with error " + std::to_string(reply.error->code) +
                                                              ": " + reply.error->message);
}

// One call on a client borrowed from the pool for it.
Result<Json> PooledCall(RpcClientPool& pool, const std::string& method, Json params) {
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<RpcClient> client, pool.Take());
  RpcReply reply = client->CallDetailed(method, std::move(params));
  pool.Give(std::move(client));
  if (!reply.ok()) return CallStatus(reply, pool.url(), method);
  return std::move(reply.result);
}

Result<std::string> StringMember(const Json& object, const char* key, const std::string& what) {
  if (!object.is_object()) return FailedPreconditionError(what + " is not an object");
  auto it = object.find(key);
  if (it == object.end() || !it->is_string())
    return FailedPreconditionError(what + " has no string \"" + std::string(key) + "\"");
  return it->get<std::string>();
}

Result<agents::HostedTask> TaskFromJson(const Json& json, const std::string& what) {
  if (!json.is_object()) return FailedPreconditionError(what + " is not an object");
  agents::HostedTask task;
  ENVFORGE_ASSIGN_OR_RETURN(task.id, StringMember(json, "id", what));
  const std::string where = what + " '" + task.id + "'";
  ENVFORGE_ASSIGN_OR_RETURN(task.prompt, StringMember(json, "prompt", where));
  ENVFORGE_ASSIGN_OR_RETURN(task.verifier_version, StringMember(json, "version", where));
  auto version = StringMember(json, "task_version", where);
  if (!version.ok()) {
    return FailedPreconditionError(version.status().message() +
                                   ": the server predates remote rollouts (envs/get tasks[].task_version); upgrade it");
  }
  task.version = *std::move(version);
  if (auto schema = json.find("answer_schema"); schema != json.end() && schema->is_object())
    task.answer_schema = *schema;
  return task;
}

// envs/get's answer as the loop's description.
Result<agents::HostedEnv> EnvFromJson(const Json& json, const std::string& url) {
  const std::string what = "envs/get's answer from " + url;
  if (!json.is_object()) return FailedPreconditionError(what + " is not an object");
  agents::HostedEnv env;
  ENVFORGE_ASSIGN_OR_RETURN(env.id, StringMember(json, "id", what));
  ENVFORGE_ASSIGN_OR_RETURN(env.name, StringMember(json, "name", what));
  auto tools = json.find("tools");
  auto tasks = json.find("tasks");
  if (tools == json.end() || !tools->is_array()) return FailedPreconditionError(what + " has no \"tools\" array");
  if (tasks == json.end() || !tasks->is_array()) return FailedPreconditionError(what + " has no \"tasks\" array");
  env.tools = *tools;
  for (const Json& task : *tasks) {
    ENVFORGE_ASSIGN_OR_RETURN(agents::HostedTask hosted, TaskFromJson(task, "a task of " + what));
    env.tasks.push_back(std::move(hosted));
  }
  return env;
}

// OK when session/create's "versions" are the description's.
Status CheckVersions(const Json& created, const agents::HostedEnv& env, const agents::HostedTask& task) {
  const Json versions = created.value("versions", Json::object());
  const Json expected = {{"env", env.id}, {"task", task.version}, {"verifier", task.verifier_version}};
  for (const auto& [key, value] : expected.items()) {
    if (versions.value(key, Json()) != value) {
      return FailedPreconditionError("the server's " + key + " version of task '" + task.id + "' is " +
                                     versions.value(key, Json()).dump() + ", not " + value.dump() +
                                     " as described: the environment changed on the server");
    }
  }
  return Status::Ok();
}

// A JSON-RPC error answered to tools/call, as the loop's typed result (the header's table).
ToolResult ErrorResult(const RpcError& error, const std::string& handle, const std::string& call_id) {
  const std::string what = "tools/call on session " + handle + ": rpc error " + std::to_string(error.code) + ": ";
  if (error.code == kRpcSessionDead) return ToolResult::Error(Outcome::kCrashed, what + error.message, call_id);
  ToolResult result = ToolResult::Error(Outcome::kInfraError, what + error.message, call_id);
  // An unknown session is gone from the server (closed, expired): there is no process left.
  result.session_alive = error.code != kRpcUnknownSession;
  return result;
}

class RemoteSession final : public agents::HostedSession {
 public:
  RemoteSession(std::shared_ptr<RpcClientPool> pool, std::unique_ptr<RpcClient> client, std::string handle)
      : pool_(std::move(pool)), client_(std::move(client)), handle_(std::move(handle)) {}
  ~RemoteSession() override { (void)Close(); }

  ToolResult CallTool(toolsets::ToolCall call) override {
    if (client_ == nullptr) return ToolResult::Error(Outcome::kInfraError, "the session is closed", call.id);
    Json params = {{"session", handle_}, {"name", call.name}, {"arguments", std::move(call.arguments)}};
    if (!call.id.empty()) params["id"] = call.id;
    RpcReply reply = client_->CallDetailed("tools/call", std::move(params));
    if (!reply.transport.ok()) {
      return ToolResult::Error(Outcome::kInfraError, CallStatus(reply, pool_->url(), "tools/call").message(), call.id);
    }
    if (reply.error) return ErrorResult(*reply.error, handle_, call.id);
    auto result = toolsets::ToolResultFromJson(reply.result);
    if (!result.ok()) {
      return ToolResult::Error(Outcome::kInfraError,
                               "envforge serve at " + pool_->url() +
                                   " answered tools/call with no tool result: " + result.status().message(),
                               call.id);
    }
    return *std::move(result);
  }

  Status Close() override {
    if (client_ == nullptr) return Status::Ok();
    RpcReply reply = client_->CallDetailed("session/close", Json{{"session", handle_}});
    pool_->Give(std::move(client_));
    // Unknown session: the server closed it already (expired, shut down); it is gone either way.
    if (reply.ok() || (reply.error && reply.error->code == kRpcUnknownSession)) return Status::Ok();
    return CallStatus(reply, pool_->url(), "session/close");
  }

 private:
  std::shared_ptr<RpcClientPool> pool_;
  std::unique_ptr<RpcClient> client_;  // null once closed
  const std::string handle_;
};

}  // namespace

RemoteSessionHost::RemoteSessionHost(std::shared_ptr<RpcClientPool> pool) : pool_(std::move(pool)) {}
RemoteSessionHost::~RemoteSessionHost() = default;

Result<std::unique_ptr<RemoteSessionHost>> RemoteSessionHost::Connect(const std::string& url,
                                                                      RemoteSessionHostOptions options) {
  auto pool = std::make_shared<RpcClientPool>(url, std::move(options));
  // The first client proves the server is reachable, speaks JSON-RPC and takes the token.
  ENVFORGE_RETURN_IF_ERROR(PooledCall(*pool, "ping", Json::object()).status());
  return std::unique_ptr<RemoteSessionHost>(new RemoteSessionHost(std::move(pool)));
}

const std::string& RemoteSessionHost::url() const { return pool_->url(); }

Result<agents::HostedEnv> RemoteSessionHost::DescribeEnvironment(const std::string& env) {
  ENVFORGE_ASSIGN_OR_RETURN(Json described, PooledCall(*pool_, "envs/get", Json{{"env", env}}));
  return EnvFromJson(described, pool_->url());
}

Result<std::unique_ptr<agents::HostedSession>> RemoteSessionHost::CreateSession(
    const agents::HostedEnv& env, const agents::HostedTask& task, const agents::HostedSessionOptions& options) {
  // The tools came with envs/get (DescribeEnvironment): no need for them on every create.
  Json params = {{"env", env.id}, {"task", task.id}, {"tools", false}};
  if (options.limits) params["limits"] = sandbox::ToJson(*options.limits);
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<RpcClient> client, pool_->Take());
  RpcReply reply = client->CallDetailed("session/create", std::move(params));
  if (!reply.ok()) {
    pool_->Give(std::move(client));
    return CallStatus(reply, pool_->url(), "session/create");
  }
  const Json& created = reply.result;
  auto handle = StringMember(created, "session", "session/create's answer from " + pool_->url());
  if (!handle.ok()) {
    pool_->Give(std::move(client));
    return handle.status();
  }
  // Behind a balancer a reconnect (after the client's idle limit, say, while the model thinks)
  // must reach the server that owns the session.
  client->PinSession(*handle);
  auto session = std::make_unique<RemoteSession>(pool_, std::move(client), *handle);
  Status versions = CheckVersions(created, env, task);
  if (!versions.ok()) return versions;  // the session's destructor closes it
  return std::unique_ptr<agents::HostedSession>(std::move(session));
}

}  // namespace envforge::server
