// SessionHost over a SessionManager in this process (contract in agents/session_host.h).
#include "agents/session_host.h"

#include <utility>

namespace envforge::agents {
namespace {

class LocalSession final : public HostedSession {
 public:
  LocalSession(sandbox::SessionManager& manager, sandbox::SessionManager::SessionId id) : manager_(manager), id_(id) {}
  ~LocalSession() override { (void)Close(); }

  toolsets::ToolResult CallTool(toolsets::ToolCall call) override {
    if (id_ == 0) return toolsets::ToolResult::Error(toolsets::Outcome::kInfraError, "the session is closed", call.id);
    return manager_.CallTool(id_, std::move(call));
  }

  Status Close() override {
    if (id_ == 0) return Status::Ok();
    const sandbox::SessionManager::SessionId id = std::exchange(id_, 0);
    Status closed = manager_.CloseSession(id);
    // NotFound: the manager forgot it already; the session is gone either way.
    return closed.code() == StatusCode::kNotFound ? Status::Ok() : closed;
  }

 private:
  sandbox::SessionManager& manager_;
  sandbox::SessionManager::SessionId id_;  // 0 once closed (the manager never hands out 0)
};

}  // namespace

const HostedTask* HostedEnv::FindTask(const std::string& id) const {
  for (const HostedTask& task : tasks) {
    if (task.id == id) return &task;
  }
  return nullptr;
}

HostedEnv DescribeBundle(const sandbox::EnvBundle& bundle) {
  HostedEnv env;
  env.id = bundle.manifest.content_hash;
  env.name = bundle.manifest.name;
  for (const sandbox::ToolRecord& tool : bundle.tools) env.tools.push_back(toolsets::ToJson(tool.spec));
  env.tasks.reserve(bundle.tasks.size());
  for (const sandbox::TaskRecord& task : bundle.tasks) {
    env.tasks.push_back({task.id, task.prompt, sandbox::TaskVersion(bundle.manifest.content_hash, task), task.version,
                         task.answer_schema});
  }
  return env;
}

Result<HostedEnv> LocalSessionHost::DescribeEnvironment(const std::string& env) {
  const sandbox::EnvBundle* bundle = manager_.FindEnvironment(env);
  if (bundle == nullptr) return NotFoundError("unknown environment '" + env + "'");
  return DescribeBundle(*bundle);
}

Result<std::unique_ptr<HostedSession>> LocalSessionHost::CreateSession(const HostedEnv& env, const HostedTask& task,
                                                                       const HostedSessionOptions& options) {
  sandbox::SessionOptions session_options;
  session_options.task_id = task.id;
  session_options.limits = options.limits;
  ENVFORGE_ASSIGN_OR_RETURN(sandbox::SessionManager::SessionId id,
                            manager_.CreateSession(env.id, std::move(session_options)));
  return std::unique_ptr<HostedSession>(std::make_unique<LocalSession>(manager_, id));
}

}  // namespace envforge::agents
